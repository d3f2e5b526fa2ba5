"""The probes of ``validate``: completions of a dataset record whose relative quality is known.

:func:`build_probes` makes them (the dataset answer, 2 and 10 cells flipped,
filled solid, left empty; the rules are in :mod:`sphyr_hpc.validate`);
:func:`probe_means` averages their metrics and :func:`format_table` prints them.
"""

import os
from collections import OrderedDict

from ..core import grid as grids

PROBE_NAMES = ("dataset answer", "2 cells flipped", "10 cells flipped", "filled solid", "left empty")
FLIP_COUNTS = (("2 cells flipped", 2), ("10 cells flipped", 10))
HARD_VALUES = (0.0, 0.2, 0.5, 0.7, 1.0)

# (table header, metric key, column width): the published scorer's layout, with the column names
# and the volume column of score's leaderboard (scoring/summary.py), so the two tables read alike
# (the published table's "stiffness" is "struct" here, its "volume" fraction "vol ratio" = vf / gt_vf).
COLUMNS = (
    ("topo", "topology_score", 10),
    ("struct", "structural_efficiency", 10),
    ("material", "material_efficiency", 9),
    ("vs GT", "compliance_efficiency_vs_ground_truth", 7),
    ("vol ratio", "volume_ratio", 9),
    ("carrying", "load_carrying", 9),
)
NAME_WIDTH = 18

# structural_efficiency_raw above 1 means the dataset answer is stiffer than the
# yardstick; the slack absorbs solver round-off on an answer the optimiser ties.
OPTIMISER_LOSS_THRESHOLD = 1.0005


def is_hard_dataset(path):
    """True when the file name without extension ends with ``hard``."""
    return os.path.splitext(os.path.basename(path))[0].endswith("hard")


def _design_cells(grid):
    """(row, col) of every non-L/S cell, row-major."""
    return [(r, c) for r, row in enumerate(grid) for c, cell in enumerate(row) if cell not in grids.STRUCTURAL]


def build_probes(ground_truth_rows, rng, hard):
    """The probe completions of one record, an ordered dict name -> grid.

    ``rng`` is consumed by the flipped probes, 2-cell probe first.  The input
    grid is not modified; every probe is a fresh list of rows.
    """
    truth = [list(row) for row in ground_truth_rows]
    cells = _design_cells(truth)

    def flipped(count):
        grid = [row[:] for row in truth]
        for r, c in rng.sample(cells, min(count, len(cells))):
            if hard:
                grid[r][c] = f"{rng.choice(HARD_VALUES):.1f}"
            else:
                grid[r][c] = "0" if grid[r][c] == "1" else "1"
        return grid

    def filled(value):
        return [[cell if cell in grids.STRUCTURAL else value for cell in row] for row in truth]

    probes = OrderedDict()
    probes["dataset answer"] = [row[:] for row in truth]
    for name, count in FLIP_COUNTS:
        probes[name] = flipped(count)
    probes["filled solid"] = filled("1.0" if hard else "1")
    probes["left empty"] = filled("0.0" if hard else "0")
    return probes


def _mean(values):
    return sum(float(v or 0.0) for v in values) / max(len(values), 1)


def format_table(means):
    """The probe table (header, rule, one row per probe) as a list of lines."""
    header = f"{'completion':{NAME_WIDTH}s} " + " ".join(f"{title:>{width}s}" for title, _, width in COLUMNS)
    lines = [header, "-" * len(header)]
    for name, row in means.items():
        lines.append(f"{name:{NAME_WIDTH}s} " + " ".join(f"{row[key]:{width}.3f}" for _, key, width in COLUMNS))
    return lines


def probe_means(by_position):
    """``(means, losses)``: per probe the mean of every :data:`COLUMNS` metric over the records
    (``{position: {probe: metrics}}``), and the positions whose dataset answer beats the yardstick."""
    rows = OrderedDict((name, []) for name in PROBE_NAMES)
    losses = []
    for position in sorted(by_position):
        for name, metrics in by_position[position].items():
            rows[name].append(metrics)
        if (by_position[position]["dataset answer"]["structural_efficiency_raw"] or 0.0) > OPTIMISER_LOSS_THRESHOLD:
            losses.append(position)
    means = OrderedDict(
        (name, OrderedDict((key, _mean([m.get(key) for m in results])) for _, key, _ in COLUMNS))
        for name, results in rows.items()
    )
    return means, losses
