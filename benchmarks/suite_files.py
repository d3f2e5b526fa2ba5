"""Test files timed before and after a change to them, interleaved: what a change to the suite saves.

    /usr/bin/python3 benchmarks/suite_files.py --name NAME --before COMMIT [--rounds N] -- TEST FILES...

The "before" side is COMMIT's tests/ and bin/ folders in a scratch checkout whose every other entry (the
package, its .venv and kernels, examples/, docs/) links to this checkout's: the same package code, the
tests and launch scripts as they were.  Each round runs ``.venv/bin/python -m pytest -q -p no:cacheprovider FILES`` once on each side
(before first in odd rounds, after first in even ones), timing the whole process.  Writes
benchmarks/results/suite/NAME.md: each run's wall time and load average, the medians and their ratio.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, commit_of, machine, machine_line

from sphyr_hpc.io.atomic import write_text_atomic

OUT = ROOT / "benchmarks" / "results" / "suite"


def before_checkout(commit, scratch):
    """A folder whose tests/ and bin/ are ``commit``'s and whose other entries link to this checkout's."""
    folder = Path(scratch) / "before"
    folder.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("tests", "bin", ".git"):
            (folder / entry.name).symlink_to(entry)
    archive = subprocess.run(["git", "archive", commit, "tests", "bin"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def timed(checkout, files):
    """(seconds, pytest's last line with the tests that failed, load average before) of one pytest run of
    ``files`` in ``checkout``."""
    load = os.getloadavg()[0]
    started = time.perf_counter()
    run = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-rf", *files], cwd=checkout, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    last = (run.stdout.strip().splitlines() or ["?"])[-1].strip("= ")
    failed = [line.split()[1] for line in run.stdout.splitlines() if line.startswith("FAILED ")]
    return seconds, last + "".join(f"; failed: `{name}`" for name in failed), load


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    files = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="stem of the result file in benchmarks/results/suite")
    parser.add_argument("--before", required=True, help="the commit whose tests/ is the before side")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side (default: 2)")
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if not files:
        parser.error("name the test files after --")
    load_before = os.getloadavg()
    runs = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="suite-files-") as scratch:
        sides = {"before": before_checkout(args.before, scratch), "after": ROOT}
        for round_ in range(args.rounds):
            for side in (("before", "after") if round_ % 2 == 0 else ("after", "before")):
                seconds, last, load = timed(sides[side], files)
                runs[side].append((seconds, last, load))
                print(f"round {round_ + 1} {side}: {seconds:.1f} s (load {load:.2f}): {last}", flush=True)
        shutil.rmtree(sides["before"], ignore_errors=True)
    median = {side: statistics.median(s for s, _, _ in runs[side]) for side in runs}
    lines = [f"# Test files before and after: {args.name}", "",
             f"`/usr/bin/python3 benchmarks/suite_files.py --name {args.name} --before {args.before} "
             f"--rounds {args.rounds} -- {' '.join(files)}` (after: commit {commit_of()})", "",
             machine_line(machine(load_before)), "",
             "| round | side | seconds | load (1 min) before the run | pytest |", "|---:|---|---:|---:|---|"]
    for side in ("before", "after"):
        lines += [f"| {i + 1} | {side} | {s:.1f} | {load:.2f} | {last} |" for i, (s, last, load) in enumerate(runs[side])]
    lines += ["", f"Medians: before {median['before']:.1f} s, after {median['after']:.1f} s: after/before = "
                  f"{median['after'] / median['before']:.2f}."]
    OUT.mkdir(parents=True, exist_ok=True)
    write_text_atomic(OUT / f"{args.name}.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
