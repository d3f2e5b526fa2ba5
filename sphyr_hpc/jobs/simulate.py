"""What the ``simulate`` tool tells a model about a grid: the scorer's analysis without the answer.

:func:`simulate_grid` reads a grid as ``score`` reads a completion (:func:`~sphyr_hpc.core.grid.as_grid`)
and analyses it as the scorer does (:meth:`~sphyr_hpc.scoring.scorer.Scorer.prepare` and
:meth:`~sphyr_hpc.scoring.scorer.Scorer.analysis`, the scorer and store of
:func:`~sphyr_hpc.jobs.answer.scorer_of`), with the sample's input grid, its masked cells filled
with the grid's, standing in for the ground truth: the loads and supports are the input grid's
visible ``L`` and ``S`` cells and those the grid puts in masked cells (a masked cell may hide one),
and the cells outside the mask are the input grid's, which is all an analysis reads of the ground
truth.  So where the grid's loads and supports are the answer's, ``compliance``, ``load_carrying``
and ``volume_fraction`` are the numbers ``score`` writes for the same grid.  The checks are the
scorer's (:func:`~sphyr_hpc.scoring.diagnosis.diagnose`) up to ``floating_material``, with
``no_load_or_support`` for a grid whose loads or supports are all gone; the last two need the
answer's material (``overspent_material``) or the yardstick (``weaker_than_yardstick``), which the
tool does not tell, so they are ``not told``.
"""

from ..core import grid as grids
from ..io.atomic import json_safe
from ..scoring.diagnosis import CHECKS, FAIL, SOUND, diagnose
from .answer import scorer_of

# The checks that need what the model must not be told: the answer's material, the yardstick.
NOT_TOLD = ("overspent_material", "weaker_than_yardstick")
NOT_TOLD_OUTCOME = "not told"
NO_LOAD_CASE = "no_load_or_support"  # the grid (masked cells filled) has no L or no S cell left


def _no_design(failure, shape, reason):
    """The answer for a grid that poses no problem: nothing to analyse, and why."""
    return {"compliance": None, "load_carrying": False, "volume_fraction": None, "failure": failure,
            "shape": list(shape), "reason": reason}


def simulate_grid(text, input_grid, gravity=(1.0, 0.0), store=True):
    """``{"compliance", "load_carrying", "volume_fraction", "failure", "checks", ...}`` of one grid
    (``text``: the grid as a model would answer it) on the sample whose masked input grid is
    ``input_grid`` (rows or text): JSON-ready (an infinite compliance is None)."""
    sample = grids.as_grid(input_grid)
    shape = grids.grid_shape(sample)
    try:
        completion = grids.as_grid(text) if isinstance(text, str) else []
    except grids.GridError as err:
        return _no_design("no_grid", shape, f"grid: {err}")
    if not completion:
        return _no_design("no_grid", shape, f"no grid found: {grids.READS}")
    if len(completion) != shape[0] or any(len(row) != shape[1] for row in completion):
        widths = "/".join(map(str, sorted({len(row) for row in completion})))
        return _no_design("wrong_shape", shape, f"the grid has {len(completion)} rows of {widths} cells, the input "
                                                f"grid {shape[0]} rows of {shape[1]}")
    # the input grid's visible cells, the grid's in the masked ones: the loads and supports the grid poses
    posed = [[mine if theirs == grids.MASK else theirs for theirs, mine in zip(row, answer)]
             for row, answer in zip(sample, completion)]
    scorer = scorer_of(store)
    case, reason = scorer.prepare(completion, posed, sample, tuple(gravity))
    if case is None:
        return _no_design(NO_LOAD_CASE, shape, reason.replace("ground truth", "the grid (the input's visible cells)"))
    out = scorer.analysis(case.loadcase, case.rho, (case.free, case.truth))
    metrics = dict(case.counts, compliance=out.compliance, load_carrying=bool(out.load_carrying),
                   volume_fraction=out.volume_fraction)
    # the scorer's checks; the two that need the answer or the yardstick are not run (NOT_TOLD)
    told = diagnose(completion, posed, case, dict(metrics, material_efficiency=1.0, structural_efficiency=1.0))
    checks = {name: NOT_TOLD_OUTCOME if name in NOT_TOLD else outcome for name, outcome in told["checks"].items()}
    failure = next((c.category for c in CHECKS if checks.get(c.category) == FAIL), SOUND)
    return json_safe({"compliance": out.compliance, "load_carrying": bool(out.load_carrying),
                      "volume_fraction": out.volume_fraction, "failure": failure, "checks": checks,
                      "floating_clusters": told["floating_clusters"], "unfilled_cells": metrics["unfilled_cells"],
                      "unparsable_cells": metrics["unparsable_cells"], "shape": list(shape)})
