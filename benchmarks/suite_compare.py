"""Two logs of a serial pass run with ``--durations=0``, compared file by file: where a change saved time.

    /usr/bin/python3 benchmarks/suite_compare.py --name NAME BEFORE.log AFTER.log [--note TEXT]

Each log is pytest's output of ``python -m pytest -q -p no:cacheprovider --durations=0`` (every test's
setup, call and teardown seconds).  Writes benchmarks/results/suite/NAME.md: each log's counts, the
seconds of every test file before and after with their ratio, and the 20 slowest tests of each (a test's
name cut at 120 characters: some parameters are megabytes of text).
"""

import argparse
import collections
import re
import sys
from pathlib import Path

from _common import ROOT

from sphyr_hpc.io.atomic import write_text_atomic

OUT = ROOT / "benchmarks" / "results" / "suite"
ROW = re.compile(r"^([0-9.]+)s (call|setup|teardown)\s+(\S+?)::(.*)$")


def read(log):
    """({file: seconds}, [(seconds, phase, test)], pytest's last line) of one log."""
    files, rows, last = collections.Counter(), [], "?"
    with open(log, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            match = ROW.match(line)
            if match:
                seconds, phase, path, test = float(match.group(1)), match.group(2), match.group(3), match.group(4)
                files[path] += seconds
                rows.append((seconds, phase, f"{path}::{test[:120]}"))
            elif " in " in line and ("passed" in line or "failed" in line):
                last = line.strip().strip("= ")
    return files, sorted(rows, reverse=True), last


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="stem of the result file in benchmarks/results/suite")
    parser.add_argument("--note", default="", help="a paragraph put under the title (the machine, the load)")
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    (bf, brows, blast), (af, arows, alast) = read(args.before), read(args.after)
    lines = [f"# The serial pass before and after, file by file: {args.name}", ""]
    if args.note:
        lines += [args.note, ""]
    lines += [f"Before: {blast}.", "", f"After: {alast}.", "",
              f"Sum of the tests' seconds: before {sum(bf.values()):.0f}, after {sum(af.values()):.0f}.", "",
              "| file | before s | after s | after/before |", "|---|---:|---:|---:|"]
    for path in sorted(set(bf) | set(af), key=lambda p: -bf.get(p, 0)):
        b, a = bf.get(path, 0.0), af.get(path, 0.0)
        lines.append(f"| `{path}` | {b:.1f} | {a:.1f} | {a / b:.2f} |" if b else f"| `{path}` | 0 | {a:.1f} | - |")
    for title, rows in (("before", brows), ("after", arows)):
        lines += ["", f"The 20 slowest, {title}:", "", "| seconds | phase | test |", "|---:|---|---|"]
        lines += [f"| {s:.1f} | {phase} | `{test}` |" for s, phase, test in rows[:20]]
    write_text_atomic(OUT / f"{args.name}.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
