"""Does pvpython open its first render window every time?  Starts tests/paraview/open_window.py under
xvfb-run many times, a few at once (as a loaded machine does), with Xvfb's default (it resets when its
last client disconnects) and with ``-noreset``, the two interleaved batch by batch.

    /usr/bin/python3 benchmarks/paraview_window.py [--runs 20] [--at-once 4] [--out paraview_window]

pvpython connects to the X server three times before its render window exists (two probes that open and
close the display, then the window's own connection: Xvfb -audit 4 shows it).  Each probe's close leaves
the server without a client, so a default Xvfb resets (closes down its extensions, GLX, and starts them
again); a connection that arrives during the reset fails, VTK prints "bad X server connection" and aborts
(SIGABRT, 134) in vtkXOpenGLRenderWindow::CreateAWindow (ParaView 5.11) or SupportsOpenGL (5.13).  The
busier the machine, the longer the reset, the likelier the miss.  ``-noreset`` keeps the server as it is.

Writes benchmarks/results/<out>.json and .md: per variant the runs, how many opened the window, and
how each failure ended.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import ROOT, machine, machine_line

from sphyr_hpc.io.atomic import write_text_atomic

PROBE = ROOT / "tests" / "paraview" / "open_window.py"
VARIANTS = {"xvfb-run -a (Xvfb resets)": ["xvfb-run", "-a"],
            "xvfb-run -a -s -noreset": ["xvfb-run", "-a", "-s", "-noreset"]}


def _one(command):
    started = time.perf_counter()
    try:
        run = subprocess.run([*command, "pvpython", str(PROBE)], capture_output=True, text=True, timeout=300,
                             start_new_session=True)
        out, status = run.stdout + run.stderr, run.returncode
    except subprocess.TimeoutExpired as timeout:
        out, status = str(timeout.stdout or "") + str(timeout.stderr or ""), "timeout"
    opened = status == 0 and "WINDOW OPEN" in out
    why = next((m for m in ("bad X server connection", "CreateAWindow", "SupportsOpenGL", "Could not find")
                if m in out), "") if not opened else ""
    return {"status": status, "opened": opened, "why": why, "seconds": round(time.perf_counter() - started, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="starts per variant (default 20)")
    parser.add_argument("--at-once", type=int, default=4, help="starts running at the same time (default 4)")
    parser.add_argument("--out", default="paraview_window", help="stem of the result files in benchmarks/results")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.at_once < 1:
        parser.error("--runs and --at-once must be at least 1")
    load_before = os.getloadavg()
    runs = {name: [] for name in VARIANTS}
    with ThreadPoolExecutor(args.at_once) as pool:
        while any(len(r) < args.runs for r in runs.values()):
            for name, command in VARIANTS.items():  # interleaved, one batch of each in turn
                batch = min(args.at_once, args.runs - len(runs[name]))
                runs[name] += list(pool.map(lambda _: _one(command), range(batch)))
                print(f"{name}: {sum(r['opened'] for r in runs[name])} of {len(runs[name])} opened", file=sys.stderr)
    pv = subprocess.run(["pvpython", "--version"], capture_output=True, text=True)
    result = {"paraview": (pv.stdout + pv.stderr).strip(), "at_once": args.at_once,
              "machine": machine(load_before), "variants": runs}
    out = ROOT / "benchmarks" / "results" / args.out
    write_text_atomic(out.with_suffix(".json"), json.dumps(result, indent=1) + "\n")
    lines = [f"# pvpython's first render window ({result['paraview']})", "",
             f"`/usr/bin/python3 benchmarks/paraview_window.py --runs {args.runs} --at-once {args.at_once}`: "
             f"tests/paraview/open_window.py started {args.runs} times per variant, {args.at_once} at once, "
             "the variants interleaved.", "", machine_line(result["machine"]), "",
             "| Xvfb started by | window opened | failures (exit status: message) | seconds per start (median) |",
             "|---|---:|---|---:|"]
    for name, rs in runs.items():
        failed = [f"{r['status']}: {r['why'] or '?'}" for r in rs if not r["opened"]]
        seconds = sorted(r["seconds"] for r in rs)[len(rs) // 2]
        lines.append(f"| `{name}` | {sum(r['opened'] for r in rs)} of {len(rs)} | "
                     f"{', '.join(sorted(set(failed), key=failed.index)) or 'none'} "
                     f"{'(' + str(len(failed)) + ')' if failed else ''} | {seconds} |")
    write_text_atomic(out.with_suffix(".md"), "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
