"""The metric formulas of a completion (docs/scoring.md, "Metrics"), with the published field names.

Pure functions of grids and numbers: the all-zero metrics of a completion
that poses no problem, the clipped ratios, the reconstruction metrics and the
metric-key lists every summary uses.  :class:`sphyr_hpc.scoring.scorer.Scorer`
computes the physical quantities (analyses, yardsticks) and fills them in.
"""

import functools
import math
from decimal import Decimal, DecimalException
from itertools import chain


from . import grid as grids

STRUCTURAL_METRIC_KEYS = (
    "topology_score",
    "structural_efficiency",
    "material_efficiency",
    "compliance_efficiency_vs_ground_truth",
    "load_carrying",
    "volume_ratio",
)
COMPLIANCE_KEYS = ("compliance", "ground_truth_compliance", "optimal_compliance", "own_budget_optimal_compliance")
LSV_PENALTY = 3
# Two ratios (of compliances, volumes) agree when they differ by less than this: rounding, not
# physics (the parity rules, sphyr_hpc/parity.py, and the failure checks, scoring/diagnosis.py).
RATIO_TOLERANCE = 1e-6


def empty_metrics():
    """The all-zero metrics of a completion that cannot be judged."""
    return {
        "physically_valid": False,
        "load_carrying": False,
        "compliance": math.inf,
        "ground_truth_compliance": math.inf,
        "optimal_compliance": math.inf,
        "own_budget_optimal_compliance": None,
        "topology_score": 0.0,
        "structural_efficiency": 0.0,
        "structural_efficiency_raw": 0.0,
        "design_efficiency": None,
        "material_efficiency": 0.0,
        "compliance_efficiency_vs_ground_truth": 0.0,
        "volume_fraction": 0.0,
        "ground_truth_volume_fraction": 0.0,
        "volume_ratio": 0.0,
        "max_displacement": 0.0,
        "unfilled_cells": 0,
        "unparsable_cells": 0,
    }


def clipped_ratio(reference, actual):
    """``reference / actual`` of two compliances clipped to [0, 1]; 0 unless both are finite and
    ``actual`` positive (structural_efficiency, compliance_efficiency_vs_ground_truth)."""
    if not math.isfinite(actual) or actual <= 0.0 or not math.isfinite(reference):
        return 0.0
    return float(min(max(reference / actual, 0.0), 1.0))


def raw_ratio(reference, actual):
    """``reference / actual`` unclipped (above 1: stiffer than the reference), under the same
    conditions as :func:`clipped_ratio`."""
    if not math.isfinite(actual) or actual <= 0.0 or not math.isfinite(reference):
        return 0.0
    return float(reference / actual)


def material_efficiency(reference_volume, volume):
    """``min(1, reference_volume / volume)``: 1 for a design using no more material; 0 for an empty one."""
    return float(min(1.0, reference_volume / volume)) if volume > 0.0 else 0.0


# -- reconstruction metrics ----------------------------------------------------------------------
@functools.lru_cache(maxsize=grids.TOKEN_TABLE_SIZE)  # a benchmark's cells pair a handful of tokens
def _cell_difference(a, b, marker_weight):
    if a == b:
        return 0.0
    if a in grids.MARKERS or b in grids.MARKERS:
        return float(marker_weight)
    try:
        diff = abs(Decimal(a) - Decimal(b))
    except (DecimalException, ValueError):  # not a number, or one like 1e999999999 that overflows
        return 1.0
    return float(diff) if diff.is_finite() else 1.0


def material(grid):
    total = 0.0
    for row in grid:
        for cell in row:
            if cell not in grids.MARKERS:
                value = grids.parse_density(cell)
                total += float(cell) if value is not None else 0.0
    return total


def _ratio(differences, material):
    if differences == 0:
        return 1.0
    if material == 0.0:
        # A ground truth without material: the published records store 1.0 here
        # (results/*/1_random_row_hard.json, sample 2), whatever differs.
        return 1.0
    return 1.0 - differences / material


def reconstruction_metrics(output, truth, truth_material=None):
    """Cell-by-cell agreement with the ground truth (rows and cells paired by zip).

    ``truth_material``: :func:`material` of ``truth`` when the caller has it
    (every completion of a sample shares it).  Only differing cells are weighed.
    """
    differing = [(a, b) for ra, rb in zip(output, truth) if ra != rb for a, b in zip(ra, rb) if a != b]
    mass = material(truth) if truth_material is None else truth_material
    plain = len(differing)
    return {
        "exact_match": plain == 0 and len(output) == len(truth) and all(len(a) == len(b) for a, b in zip(output, truth)),
        "difference_ratio": _ratio(plain, mass),
        "relative_difference_ratio": _ratio(sum(_cell_difference(a, b, 1) for a, b in differing), mass),
        "penalized_difference_ratio": _ratio(sum(_cell_difference(a, b, LSV_PENALTY) for a, b in differing), mass),
    }


def valid_output_grid(output, truth):
    """Same shape as the ground truth and every cell L, S or a density in [0, 1]."""
    # One table lookup a distinct token (a grid holds a handful: "0", "1", "L", ...).
    if not all(map(_VALID_CELL.__getitem__, set(chain.from_iterable(output)))):
        return False
    return len(output) == len(truth) and all(len(a) == len(b) for a, b in zip(output, truth))


def _valid_cell(cell):
    """Whether :func:`valid_output_grid` accepts a cell: ``L``, ``S``, or ``float(cell)`` in [0, 1]."""
    if cell in grids.STRUCTURAL:
        return True
    try:
        value = float(cell)
    except ValueError:
        return False
    return 0.0 <= value <= 1.0


_VALID_CELL = grids.TokenTable(_valid_cell)
