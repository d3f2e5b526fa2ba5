"""One serial pass of the test suite, timed, with pytest's 40 slowest tests: what bin/test's passes cost.

    /usr/bin/python3 benchmarks/suite_durations.py --name NAME [--checkout DIR] [--coretype KERNEL] [-- PYTEST ARGS]

Runs ``DIR/.venv/bin/python -m pytest -q -p no:cacheprovider --durations=40 PYTEST_ARGS`` in DIR (default:
this checkout), under ``OPENBLAS_CORETYPE=KERNEL`` when given (bin/test's second pass: ``--coretype
Prescott -- -m blas``).  Writes benchmarks/results/suite/NAME.log (pytest's output) and NAME.md: the
wall time, pytest's counts, the load average before and after, and the 20 slowest tests.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, commit_of, machine, machine_line

from sphyr_hpc.io.atomic import write_text_atomic

OUT = ROOT / "benchmarks" / "results" / "suite"


def slowest(log, n=20):
    """The ``n`` slowest (seconds, phase, test) lines of pytest's --durations table in ``log``."""
    rows = re.findall(r"^([0-9.]+)s (call|setup|teardown)\s+(\S+)$", log, re.M)
    return sorted(((float(s), phase, test) for s, phase, test in rows), reverse=True)[:n]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="stem of the result files in benchmarks/results/suite")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose suite runs (its .venv)")
    parser.add_argument("--coretype", help="OPENBLAS_CORETYPE for the pass (bin/test's second pass)")
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    python = args.checkout / ".venv" / "bin" / "python"
    if not python.exists():
        parser.error(f"{python} is missing: run bin/setup --test in {args.checkout} first")
    env = dict(os.environ)
    if args.coretype:
        env["OPENBLAS_CORETYPE"] = args.coretype
    command = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=40", *extra]
    load_before = os.getloadavg()
    started = time.perf_counter()
    run = subprocess.run(command, cwd=args.checkout, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    m = machine(load_before)
    OUT.mkdir(parents=True, exist_ok=True)
    write_text_atomic(OUT / f"{args.name}.log", run.stdout + run.stderr)
    counts = next((line.strip("= ") for line in reversed(run.stdout.splitlines()) if " in " in line and
                   ("passed" in line or "failed" in line)), "?")
    lines = [f"# Serial pass {args.name}", "",
             f"`/usr/bin/python3 benchmarks/suite_durations.py --name {args.name} --checkout {args.checkout}"
             f"{' --coretype ' + args.coretype if args.coretype else ''}{' -- ' + ' '.join(extra) if extra else ''}`"
             f" (commit {commit_of(args.checkout)}): exit status {run.returncode}, {wall:.0f} s wall.", "",
             f"pytest: {counts}", "", machine_line(m), "", "| seconds | phase | test |", "|---:|---|---|"]
    lines += [f"| {s:.1f} | {phase} | `{test}` |" for s, phase, test in slowest(run.stdout)]
    write_text_atomic(OUT / f"{args.name}.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
