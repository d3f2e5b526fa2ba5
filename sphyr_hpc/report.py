"""``python -m sphyr_hpc.report OUT_DIR``: report.html and its pictures from OUT_DIR/results.jsonl.

What the page holds is :mod:`sphyr_hpc.reporting.html`'s; ``score`` writes
the same report at the end of a run unless ``--no-report``.  Exit status: 0,
2 on a usage error (no results.jsonl; an output that cannot be written),
130/143 when interrupted.
"""

import sys
import time
from pathlib import Path

from . import cli
from .cli import Output, Parser, UsageError


def build_parser():
    parser = Parser(prog="python -m sphyr_hpc.report", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", metavar="OUT_DIR", help="a score output folder holding results.jsonl")
    parser.add_argument("--title", help="the page title (default: 'SPhyR report: ' and the folder's name)")
    return parser


def _check(args):
    if not (Path(args.out_dir) / "results.jsonl").is_file():
        raise UsageError(f"no results.jsonl in {args.out_dir}")


def _outputs(args):
    from .reporting.html import PICTURES, REPORT_NAME

    return [Output(Path(args.out_dir) / REPORT_NAME), Output(Path(args.out_dir) / PICTURES, folder=True)]


def _run(args, context):
    from .reporting.html import PICTURES, write_report

    started = time.perf_counter()
    paths = write_report(args.out_dir, args.title)
    print(f"{paths[0]} ({len(paths) - 1} pictures in {paths[0].parent / PICTURES}) "
          f"in {time.perf_counter() - started:.2f} s")
    return 0


COMMAND = cli.Command(prog="python -m sphyr_hpc.report", build_parser=build_parser, run=_run, check=_check,
                      outputs=_outputs, mpi=False)


def main(argv=None):
    return cli.main(COMMAND, argv)


if __name__ == "__main__":
    from .runtime.launcher import exit_status  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(exit_status(main()))
