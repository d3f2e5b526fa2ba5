"""Evidence that the metric ranks what it should (docs/scoring.md, "Validate").

For the first N records of a dataset JSONL file (lines of
``{"index", "input_grid", "ground_truth"}``) every record yields five probe
completions whose relative quality is known in advance, built by
:func:`~sphyr_hpc.scoring.probes.build_probes` in this order:

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

Each probe is scored by one shared :class:`~sphyr_hpc.scoring.scorer.Scorer` against
the record's ground truth and input grid (so all five probes of a record share
one cached yardstick), and the table prints, per probe, the mean
topology_score, structural_efficiency, material_efficiency,
compliance_efficiency_vs_ground_truth, volume_ratio and load_carrying
(``None`` counts as 0), under the column names of ``score``'s leaderboard.  A metric worth trusting ranks the dataset answer
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

``--dataset`` may be a folder of dataset files (every subject in it) and may be
given again: each subject's table is printed in turn, the first N records of
each.  A progress bar (samples) runs on rank 0's stderr unless ``--quiet``.

Example::

    python3 -m sphyr_hpc.validate --dataset data/sphyr/v1/full_easy.jsonl --samples 20
    python3 -m sphyr_hpc.validate --dataset data/sphyr/v1 --samples 5   # every subject
"""

import sys

from . import cli
from .cli import Parser, UsageError, positive_int

PROG = "python -m sphyr_hpc.validate"


def build_parser(prog=PROG):
    from .io import yardstick_store

    parser = Parser(
        prog=prog,
        description=__doc__.splitlines()[0] + "\n\nScores five probes of each of the first N records "
        "(the dataset answer, 2 and 10 cells flipped,\nfilled solid, left empty) and prints their mean "
        "metrics.",
        epilog="PETSc options (single dash, prefix -sphyr_) may follow, e.g. -sphyr_ksp_type cg.",
    )
    parser.add_argument("--dataset", required=True, action="append", metavar="PATH",
                        help="dataset JSONL file, or a folder of them (every subject in it); may be given again")
    parser.add_argument("--samples", type=positive_int, default=20, metavar="N",
                        help="score the first N records")
    from .scoring.probes import HARD_VALUES

    level = parser.add_mutually_exclusive_group()
    level.add_argument("--hard", dest="hard", action="store_true", default=None,
                       help=f"hard probes (a flipped cell takes one of {', '.join(f'{v:.1f}' for v in HARD_VALUES)}) whatever "
                            f"the file name (default: hard when the file name without .jsonl ends with 'hard', "
                            f"else easy)")
    level.add_argument("--easy", dest="hard", action="store_false", help="easy probes (0/1) whatever the file name")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    yardstick_store.add_arguments(parser)
    return parser


def _check(args):
    from .jobs.prompts import dataset_files

    args.dataset_files = [str(p) for p in dataset_files(args.dataset, distinct=False)]  # UsageError: missing, none


def _run(args, context):
    from .io.yardstick_store import store_of_arguments
    from .jobs.validate import run_validate

    scored = 0
    for dataset in args.dataset_files:
        result = run_validate(dataset, args.samples, hard=args.hard, comm=context.comm,
                              store=store_of_arguments(args), quiet=args.quiet)
        scored += result["samples"]
    return 0 if scored else 1


def command(prog=PROG):
    return cli.Command(prog=prog, build_parser=lambda: build_parser(prog), run=_run, check=_check)


def main(argv=None, prog=PROG):
    """Command line entry point; returns the exit status (1 if nothing was scored)."""
    return cli.main(command(prog), argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
