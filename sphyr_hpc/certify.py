"""``python -m sphyr_hpc.certify``: how far the yardstick is from the best binary design, proven.

Usage::

    mpirun -n N python -m sphyr_hpc.certify --dataset D.jsonl [D2.jsonl ...] [--samples N]
                                            [--node-budget K] [--time-budget S] --out DIR

For every dataset record (ground truth, masked cells, the "Yardstick" rules' budget) the
yardstick is computed as ``score`` computes it, then
:func:`~sphyr_hpc.optimiser.exact.branch_and_bound` searches the binary
designs of the masked cells with at most ``budget_cells`` solid ones
(``floor`` of the free budget), starting from the yardstick's design: the
exact optimum where the search closes (``status`` ``optimal``), otherwise the
best design found and a certified lower bound (``gap``).

Outputs in ``--out``: ``certify.jsonl`` (one object per record, sorted by
subject and index: ``subject``, ``index``, ``sample`` (an id of ground truth,
mask and gravity, which ``score --certified`` matches), ``free_cells``,
``budget_cells``, ``yardstick_compliance``, ``best_compliance``,
``lower_bound``, ``status``, ``nodes``, ``seconds`` and ``cpu_seconds``
(this process's CPU time: the cost on a shared machine), ``yardstick_gap`` =
yardstick / lower_bound - 1 (the most the yardstick can be above the binary
optimum; exact when optimal; negative when the yardstick's grey design is
stiffer than every binary design at the budget), ``ground_truth_compliance``,
or ``error`` for a record that cannot be certified); ``summary.json`` (per
subject: samples, share certified optimal, median and worst yardstick gap,
samples where the search beat the yardstick or the dataset answer beat the
certified optimum, seconds per sample) and ``certify.png``.  Every file is
written atomically by rank 0; the table is printed.

Records are dealt over the ranks like ``score``'s samples (largest masks
first, to whichever rank asks: :func:`~sphyr_hpc.runtime.tasks.run_dynamic`), each
on ``COMM_SELF``.  With the default (no time budget) the records do not
depend on the number of ranks, except the seconds.  PETSc options
(``-sphyr_...``) may be given anywhere.  Exit status: 0, 1 when some record
could not be certified, 2 on a usage error (before any work: also an output
folder that cannot be written), 3 when an unexpected error on one rank
aborted every rank, 130/143 when interrupted by SIGINT/SIGTERM.
"""

import argparse
import sys
from pathlib import Path

from . import cli
from .cli import Output, Parser, UsageError, positive_int
from .runtime.messages import no_such


def _positive_float(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def build_parser():
    from .io import yardstick_store
    from .optimiser.exact import NODE_BUDGET

    parser = Parser(prog="python -m sphyr_hpc.certify", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", required=True, metavar="D.jsonl",
                        help="dataset JSONL files (index, input_grid, ground_truth)")
    parser.add_argument("--samples", type=positive_int, default=None, metavar="N",
                        help="the first N records of each dataset (default: all)")
    parser.add_argument("--node-budget", type=positive_int, default=NODE_BUDGET, metavar="K",
                        help="nodes a sample's search may evaluate before it reports a gap")
    parser.add_argument("--time-budget", type=_positive_float, default=None, metavar="S",
                        help="seconds a sample's search may take (results then depend on the machine)")
    parser.add_argument("--out", default="certify", help="output folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no table")
    yardstick_store.add_arguments(parser)
    return parser


def _check(args):
    missing = [p for p in args.dataset if not Path(p).is_file()]
    if missing:
        raise UsageError(no_such(missing))


def _run(args, context):
    from .jobs.certify import run_certify

    return run_certify(args, context.comm)


COMMAND = cli.Command(prog="python -m sphyr_hpc.certify", build_parser=build_parser, run=_run, check=_check,
                      outputs=lambda args: [Output(args.out, folder=True)])


def main(argv=None):
    return cli.main(COMMAND, argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
