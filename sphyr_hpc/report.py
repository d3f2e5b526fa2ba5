"""``python -m sphyr_hpc.report OUT_DIR``: report.html, its per-model pages and pictures from OUT_DIR/results.jsonl.

What the pages hold is :mod:`sphyr_hpc.reporting.html`'s; ``score`` writes
the same report at the end of a run unless ``--no-report``.  A line of
results.jsonl that is not a results row (the truncated last line of a killed
run) is named on stderr and left out.  ``--compare OUT_B`` writes
``OUT_DIR/compare.html`` instead: OUT_B's run minus OUT_DIR's, per model and
subject with paired intervals, and the records whose category changed (two
runs of different models: each model of B against each of A on the samples
both answered).  ``report A B C --out DIR`` merges runs into one: DIR/results.jsonl,
summary.json, the leaderboard (printed) and the report, every subject weighing
the same; a record in two runs is named on stderr and kept from the first.
Exit status: 0, 1 when a record is in two of the runs merged, 2 on a usage error (no results.jsonl; an output that cannot
be written; runs with nothing to compare), 130/143 when interrupted.
"""

import sys
import time
from pathlib import Path

from . import cli
from .cli import Output, Parser, UsageError


def build_parser():
    parser = Parser(prog="python -m sphyr_hpc.report", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="+", metavar="OUT_DIR",
                        help="a score output folder holding results.jsonl; several: merged into --out")
    parser.add_argument("--out", metavar="DIR",
                        help="with several OUT_DIR: the folder of the merged run (results.jsonl, summary.json, "
                             "report.html, report/)")
    parser.add_argument("--title", help="the page title (default: from the run: its models, dataset or folders)")
    parser.add_argument("--compare", metavar="OUT_B",
                        help="another score output folder: write OUT_DIR/compare.html (OUT_B minus OUT_DIR) "
                             "instead of the report")
    return parser


def _check(args):
    runs = args.out_dir + ([args.compare] if args.compare else [])
    for folder in runs:
        if Path(folder).is_file():
            raise UsageError(f"{folder} is a file; report takes score output folders (the folder holding "
                             f"results.jsonl: python -m sphyr_hpc.report {Path(folder).parent})")
        if not (Path(folder) / "results.jsonl").is_file():
            raise UsageError(f"no results.jsonl in {folder}")
    if len(args.out_dir) > 1 and args.compare:
        raise UsageError("--compare compares two runs: report A --compare B (merge runs first: report A B --out DIR)")
    if len(args.out_dir) > 1 and not args.out:
        raise UsageError("several runs are merged into one folder: give it with --out DIR")
    if len(args.out_dir) == 1 and args.out:
        raise UsageError("--out names the folder of merged runs; one run's report is written into its own folder")
    if args.out:
        if Path(args.out).is_file():
            raise UsageError(f"--out {args.out} is a file; --out names a folder (give a new or existing folder)")
        inside = [f for f in args.out_dir if Path(f).resolve() == Path(args.out).resolve()]
        if inside:
            raise UsageError(f"--out {args.out} is one of the runs merged: choose another folder")


def _outputs(args):
    from .jobs.report import COMPARE_NAME
    from .reporting.html import PICTURES, REPORT_NAME

    if args.compare:
        return [Output(Path(args.out_dir[0]) / COMPARE_NAME)]
    folder = Path(args.out or args.out_dir[0])
    return [Output(folder / REPORT_NAME), Output(folder / PICTURES, folder=True)]


def _say_dropped(path, dropped):
    for number, why in dropped:
        print(f"warning: {path}:{number}: line left out of the report ({why})", file=sys.stderr)


def _run(args, context):
    from .jobs.report import merge_runs, write_comparison, write_report
    from .reporting.compare import NothingToCompare
    from .reporting.html import PICTURES, plural
    from .scoring.summary import format_leaderboard

    started = time.perf_counter()
    if args.compare:
        try:
            path, dropped_a, dropped_b = write_comparison(args.out_dir[0], args.compare)
        except NothingToCompare as err:
            raise UsageError(str(err)) from None
        _say_dropped(Path(args.out_dir[0]) / "results.jsonl", dropped_a)
        _say_dropped(Path(args.compare) / "results.jsonl", dropped_b)
        print(f"{path} in {time.perf_counter() - started:.2f} s")
        return 0
    if args.out:
        merged = merge_runs(args.out_dir, args.out)
        for key, first, again in merged.twice[:20]:
            print(f"warning: {'/'.join(map(str, key))} is in {first} and in {again}: scored twice; the report "
                  f"keeps {first}'s", file=sys.stderr)
        if len(merged.twice) > 20:
            print(f"warning: {len(merged.twice) - 20} more records scored twice (each kept from its first run)",
                  file=sys.stderr)
        for folder, dropped in merged.dropped.items():
            _say_dropped(Path(folder) / "results.jsonl", dropped)
        print(f"{plural(merged.records, 'record')} of {plural(len(args.out_dir), 'run')} -> "
              f"{Path(args.out) / 'results.jsonl'}\n")
        print("\n".join(format_leaderboard(merged.board)))
    written = write_report(args.out or args.out_dir[0], args.title or (merged.title if args.out else None))
    if not args.out:
        _say_dropped(Path(args.out_dir[0]) / "results.jsonl", written.dropped)
    page, others = written.paths[0], written.paths[1:]
    pages = sum(Path(p).suffix == ".html" for p in others)
    print(f"{page} ({plural(pages, 'model page')} and {plural(len(others) - pages, 'picture')} in "
          f"{page.parent / PICTURES}) in {time.perf_counter() - started:.2f} s")
    return 0 if not args.out or not merged.twice else 1


COMMAND = cli.Command(prog="python -m sphyr_hpc.report", build_parser=build_parser, run=_run, check=_check,
                      outputs=_outputs, mpi=False)


def main(argv=None):
    return cli.main(COMMAND, argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
