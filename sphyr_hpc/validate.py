"""Evidence that the metric ranks what it should (docs/scoring.md, "Validate").

For the first N records of a dataset JSONL file (lines of
``{"index", "input_grid", "ground_truth"}``) every record yields five probe
completions whose relative quality is known in advance, built by
:func:`build_probes` in this order:

* ``dataset answer``: the ground truth itself;
* ``2 cells flipped`` and ``10 cells flipped``: copies of the ground truth with
  that many non-L/S cells (``rng.sample`` over them in row-major order)
  changed; easy: ``"1"`` becomes ``"0"``, anything else ``"1"``; hard: a value
  drawn by ``rng.choice([0.0, 0.2, 0.5, 0.7, 1.0])``, written with one decimal.
  The 2-cell probe draws from the rng before the 10-cell probe;
* ``filled solid`` and ``left empty``: every non-L/S cell ``1``/``0`` (``1.0``/
  ``0.0`` on hard data).

Seeding: ``rng = random.Random(position)``, the record's 0-based position in
the file (blank lines are not records; an unreadable record keeps its
position, so one corrupted line does not change the probes of the others).
Hardness: the file name without extension ends with ``hard``, unless
``--hard``/``--easy`` says otherwise.

Each probe is scored by one shared :class:`~sphyr_hpc.scorer.Scorer` against
the record's ground truth and input grid (so all five probes of a record share
one cached yardstick), and the table prints, per probe, the mean
topology_score, structural_efficiency, material_efficiency,
compliance_efficiency_vs_ground_truth, volume_fraction and load_carrying
(``None`` counts as 0).  A metric worth trusting ranks the dataset answer
first, the flipped probes below it in order, and both degenerate answers below
the dataset answer.  The last line counts the records whose dataset answer
beats the reference optimiser (``structural_efficiency_raw > 1.0005``): the
yardstick is seeded with that answer, so the count must be 0.

A record that cannot be read (bad JSON, not an object, no usable
``ground_truth``) is reported on stderr as ``path:line: reason`` and skipped;
it is not scored and does not count in the sample total.

Records are spread over the MPI ranks (``mpirun -n N``), each scored on
``COMM_SELF``; rank 0 prints.  PETSc options
(single dash, e.g. ``-sphyr_ksp_type cg``) may follow the arguments.

Example::

    python3 -m sphyr_hpc.validate --dataset data/sphyr/v1/full_easy.jsonl --samples 20
"""

import argparse
import os
import random
import sys
import time
from collections import OrderedDict

from . import grid as grids
from .cli import Parser, UsageError, report_usage_error
from .io.records import read_jsonl

PROBE_NAMES = ("dataset answer", "2 cells flipped", "10 cells flipped", "filled solid", "left empty")
FLIP_COUNTS = (("2 cells flipped", 2), ("10 cells flipped", 10))
HARD_VALUES = (0.0, 0.2, 0.5, 0.7, 1.0)

# (table header, metric key, column width); the published scorer's layout.
COLUMNS = (
    ("topo score", "topology_score", 10),
    ("stiffness", "structural_efficiency", 10),
    ("material", "material_efficiency", 9),
    ("vs GT", "compliance_efficiency_vs_ground_truth", 7),
    ("volume", "volume_fraction", 7),
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


def read_records(path, limit=None, errors=None):
    """(position, record) of the first ``limit`` records of a JSONL file.

    Blank lines are skipped.  Unreadable records are reported on ``errors`` as
    ``path:line: reason`` and left out, but still take their position and count
    towards ``limit``.  The ``ground_truth`` (and ``input_grid``, if present) come
    back as lists of rows of stripped str.  ``errors`` defaults to the current
    ``sys.stderr``.
    """
    errors = sys.stderr if errors is None else errors
    position = 0
    lines, reason = read_jsonl(path)  # each line on its own, within the default input limits
    if reason:
        print(f"{path}: skipped, {reason}", file=errors)
        return
    for line_number, record, problem in lines:
        if limit is not None and position >= limit:
            return
        here, position = position, position + 1
        if problem:
            print(f"{path}:{line_number}: skipped, {problem}", file=errors)
            continue
        if not isinstance(record, dict):
            print(f"{path}:{line_number}: skipped, a record must be a JSON object, "
                  f"not {type(record).__name__}", file=errors)
            continue
        try:
            truth = grids.as_grid(record.get("ground_truth"))
            grids.grid_shape(truth)
        except grids.GridError as err:
            print(f"{path}:{line_number}: skipped, no usable ground_truth: {err}", file=errors)
            continue
        input_grid = record.get("input_grid")
        try:
            input_grid = grids.as_grid(input_grid) if input_grid is not None else None
        except grids.GridError as err:
            # docs/scoring.md, "Metrics": without a usable input grid every non-L/S cell is free.
            print(f"{path}:{line_number}: input_grid ignored: {err}", file=errors)
            input_grid = None
        yield here, dict(record, ground_truth=truth, input_grid=input_grid)


def _mean(values):
    return sum(float(v or 0.0) for v in values) / max(len(values), 1)


def format_table(means):
    """The probe table (header, rule, one row per probe) as a list of lines."""
    header = f"{'completion':{NAME_WIDTH}s} " + " ".join(f"{title:>{width}s}" for title, _, width in COLUMNS)
    lines = [header, "-" * len(header)]
    for name, row in means.items():
        lines.append(f"{name:{NAME_WIDTH}s} " + " ".join(f"{row[key]:{width}.3f}" for _, key, width in COLUMNS))
    return lines


def run_validate(dataset_path, samples, hard=None, scorer=None, out=None, errors=None, comm=None):
    """Score the probes of the first ``samples`` records and print the table.

    Records are spread over the ranks of ``comm`` (default ``MPI.COMM_WORLD``;
    collective), each record's five probes on one rank so they share one
    yardstick; rank 0 reads the file, reports unreadable records and prints.
    ``hard`` None means "from the file name".  A ``scorer`` passed in is used
    and left open; otherwise one is created for the run and closed after it.
    ``out``/``errors`` default to the current ``sys.stdout``/``sys.stderr``
    (looked up at call time, so redirection and pytest capture work).

    Returns, on every rank, a dict: ``dataset``, ``hard``, ``samples`` (records
    scored), ``means`` (probe -> metric -> mean, probes in :data:`PROBE_NAMES`
    order), ``optimiser_losses`` and ``losses`` (positions of the records concerned).
    """
    from mpi4py import MPI

    from .scorer import Scorer
    from .parallel import run_dynamic

    comm = MPI.COMM_WORLD if comm is None else comm
    out = sys.stdout if out is None else out
    if hard is None:
        hard = is_hard_dataset(dataset_path)
    records = list(read_records(dataset_path, samples, errors)) if comm.rank == 0 else None
    records = comm.bcast(records, root=0)
    own_scorer = scorer is None
    if own_scorer:
        scorer = Scorer()
    started = time.time()
    mine = {}

    def run(i, counters):
        position, record = records[i]
        truth = record["ground_truth"]
        mine[position] = OrderedDict(
            (name, scorer.score(completion, truth, record["input_grid"]))
            for name, completion in build_probes(truth, random.Random(position), hard).items()
        )
        counters.add_done(1)

    try:
        run_dynamic(comm, len(records), run)
    finally:
        if own_scorer:
            scorer.close()
    gathered = comm.gather(mine, root=0)
    result = None
    if comm.rank == 0:
        by_position = {}
        for part in gathered:
            by_position.update(part)
        rows = OrderedDict((name, []) for name in PROBE_NAMES)
        losses = []
        for position in sorted(by_position):
            for name, metrics in by_position[position].items():
                rows[name].append(metrics)
            if (by_position[position]["dataset answer"]["structural_efficiency_raw"] or 0.0) > OPTIMISER_LOSS_THRESHOLD:
                losses.append(position)
        scored = len(by_position)
        means = OrderedDict(
            (name, OrderedDict((key, _mean([m.get(key) for m in results])) for _, key, _ in COLUMNS))
            for name, results in rows.items()
        )
        subject = os.path.splitext(os.path.basename(dataset_path))[0]
        print(f"\n{subject}: {scored} samples ({'hard' if hard else 'easy'}), {time.time() - started:.0f}s "
              f"on {comm.size} rank(s)\n", file=out)
        for line in format_table(means):
            print(line, file=out)
        print(
            f"\nReference optimiser beaten by the dataset answer on {len(losses)}/{scored} samples "
            f"(a non-zero count means the yardstick is too weak).",
            file=out,
        )
        result = {
            "dataset": dataset_path,
            "hard": hard,
            "samples": scored,
            "means": means,
            "optimiser_losses": len(losses),
            "losses": losses,
        }
    return comm.bcast(result, root=0)


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv=None):
    """Command line entry point; returns the exit status (1 if nothing was scored)."""
    from ._petsc import OptionsError, check_options, command_options, require, split_petsc_args

    parser = Parser(
        prog="python -m sphyr_hpc.score validate",
        description=__doc__.splitlines()[0] + "\n\nScores five probes of each of the first N records "
        "(the dataset answer, 2 and 10 cells flipped,\nfilled solid, left empty) and prints their mean "
        "metrics.",
        epilog="PETSc options (single dash, prefix -sphyr_) may follow, e.g. -sphyr_ksp_type cg.",
    )
    parser.add_argument("--dataset", required=True, metavar="PATH", help="dataset JSONL file")
    parser.add_argument("--samples", type=_positive_int, default=20, metavar="N",
                        help="score the first N records")
    level = parser.add_mutually_exclusive_group()
    level.add_argument("--hard", dest="hard", action="store_true", default=None,
                       help="hard probes (one-decimal densities) whatever the file name (default: from the "
                            "file name)")
    level.add_argument("--easy", dest="hard", action="store_false", help="easy probes (0/1)")
    ours, petsc_args = split_petsc_args(list(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(ours)
        if not os.path.isfile(args.dataset):
            parser.error(f"dataset file not found: {args.dataset}")
    except UsageError as err:
        return report_usage_error(parser.prog, f"{err} (see --help)")
    require(parser.prog)
    try:
        with command_options(petsc_args):
            check_options()
            result = run_validate(args.dataset, args.samples, hard=args.hard)
    except OptionsError as err:
        return report_usage_error(parser.prog, err)
    return 0 if result["samples"] else 1


if __name__ == "__main__":
    sys.exit(main())
