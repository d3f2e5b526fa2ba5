"""``python -m sphyr_hpc.report OUT_DIR``: report.html, its per-model pages and pictures from OUT_DIR/results.jsonl.

What the pages hold is :mod:`sphyr_hpc.reporting.html`'s; ``score`` writes
the same report at the end of a run unless ``--no-report``.  A line of
results.jsonl that is not a results row (the truncated last line of a killed
run) is named on stderr and left out.  ``--compare OUT_B`` writes
``OUT_DIR/compare.html`` instead: OUT_B's run minus OUT_DIR's, per model and
subject with paired intervals, and the records whose category changed.
Exit status: 0, 2 on a usage error (no results.jsonl; an output that cannot
be written), 130/143 when interrupted.
"""

import sys
import time
from pathlib import Path

from . import cli
from .cli import Output, Parser, UsageError


def build_parser():
    parser = Parser(prog="python -m sphyr_hpc.report", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", metavar="OUT_DIR", help="a score output folder holding results.jsonl")
    parser.add_argument("--title", help="the page title (default: from the run: its models, dataset or folders)")
    parser.add_argument("--compare", metavar="OUT_B",
                        help="another score output folder: write OUT_DIR/compare.html (OUT_B minus OUT_DIR) "
                             "instead of the report")
    return parser


def _check(args):
    for folder in [args.out_dir] + ([args.compare] if args.compare else []):
        if not (Path(folder) / "results.jsonl").is_file():
            raise UsageError(f"no results.jsonl in {folder}")


def _outputs(args):
    from .jobs.report import COMPARE_NAME
    from .reporting.html import PICTURES, REPORT_NAME

    if args.compare:
        return [Output(Path(args.out_dir) / COMPARE_NAME)]
    return [Output(Path(args.out_dir) / REPORT_NAME), Output(Path(args.out_dir) / PICTURES, folder=True)]


def _say_dropped(path, dropped):
    for number, why in dropped:
        print(f"warning: {path}:{number}: line left out of the report ({why})", file=sys.stderr)


def _run(args, context):
    from .jobs.report import write_comparison, write_report
    from .reporting.html import PICTURES, plural

    started = time.perf_counter()
    if args.compare:
        path, dropped_a, dropped_b = write_comparison(args.out_dir, args.compare)
        _say_dropped(Path(args.out_dir) / "results.jsonl", dropped_a)
        _say_dropped(Path(args.compare) / "results.jsonl", dropped_b)
        print(f"{path} in {time.perf_counter() - started:.2f} s")
        return 0
    written = write_report(args.out_dir, args.title)
    _say_dropped(Path(args.out_dir) / "results.jsonl", written.dropped)
    page, others = written.paths[0], written.paths[1:]
    pages = sum(Path(p).suffix == ".html" for p in others)
    print(f"{page} ({plural(pages, 'model page')} and {plural(len(others) - pages, 'picture')} in "
          f"{page.parent / PICTURES}) in {time.perf_counter() - started:.2f} s")
    return 0


COMMAND = cli.Command(prog="python -m sphyr_hpc.report", build_parser=build_parser, run=_run, check=_check,
                      outputs=_outputs, mpi=False)


def main(argv=None):
    return cli.main(COMMAND, argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
