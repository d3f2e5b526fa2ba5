"""Two checkouts of sphyr_hpc scoring the same records, timed side by side in one run.

Speed-ups are only meaningful as ratios measured in one run on one machine (the
machine's speed drifts between sessions), so this script times the scoring
command of an old checkout (``git worktree add ../old COMMIT`` and ``bin/setup``
there) and of this one, interleaved, fastest of ``--repeats`` runs each, on the
result folders ``score_throughput.py`` builds (v1: 822 records, v2_20: 82), and
compares the records of the two by the parity rules of docs/scoring.md
(:func:`sphyr_hpc.parity.differences`, on the published fields; fields the old
checkout does not write are not compared).

    .venv/bin/python benchmarks/side_by_side.py --old ../old [--ranks 1,2] [--versions v1,v2_20]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, commit_of, machine, now, write_results
from score_throughput import build_results

from sphyr_hpc.parity import differences


def score(checkout, ranks, results, out):
    """Wall seconds of the whole command and its rows, keyed by (model, subject, index)."""
    checkout = Path(checkout)
    cmd = [str(checkout / "bin" / "mpirun"), "-n", str(ranks), str(checkout / ".venv" / "bin" / "python"),
           "-m", "sphyr_hpc.score", str(results), "--out", str(out), "--quiet"]
    if "--no-report" in subprocess.run([cmd[3], "-m", "sphyr_hpc.score", "--help"], cwd=checkout,
                                       capture_output=True, text=True).stdout:
        cmd.append("--no-report")  # the report is not scoring: leave it out where it exists
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{checkout}: score failed on {ranks} ranks:\n{done.stderr[-3000:]}")
    rows = {}
    for line in (Path(out) / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[(row["model"], row["subject"], row["index"])] = row
    return seconds, rows


def compare(old_rows, new_rows):
    """Records outside the parity rules, and records bitwise equal on the old fields."""
    outside, identical = [], 0
    for key, old in old_rows.items():
        new = new_rows.get(key)
        if new is None:
            outside.append((key, ["missing"]))
            continue
        why = differences(new, old)
        if why:
            outside.append((key, why))
        if all(new.get(k) == v for k, v in old.items()):
            identical += 1
    return outside, identical


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--old", required=True, help="the old checkout (its bin/setup run)")
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--versions", default="v1,v2_20")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-root", default=str(ROOT / "examples" / "data"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "side_by_side.json"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    old_commit = commit_of(args.old)
    new_commit = commit_of()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for version in args.versions.split(","):
            results = Path(tmp) / version
            build_results(Path(args.data_root) / version, results)
            for ranks in map(int, args.ranks.split(",")):
                times = {"old": [], "new": []}
                records = {}
                for _ in range(args.repeats):
                    for label, checkout in (("old", args.old), ("new", ROOT)):
                        seconds, records[label] = score(checkout, ranks, results, Path(tmp) / f"out_{label}")
                        times[label].append(seconds)
                outside, identical = compare(records["old"], records["new"])
                row = {"version": version, "ranks": ranks, "records": len(records["old"]),
                       "old_seconds": min(times["old"]), "new_seconds": min(times["new"]),
                       "speedup": min(times["old"]) / min(times["new"]), "all_seconds": times,
                       "outside_parity": [[list(k), why] for k, why in outside],
                       "bitwise_identical_records": identical}
                rows.append(row)
                print(f"{version} {ranks} rank(s): old {row['old_seconds']:.2f} s, new {row['new_seconds']:.2f} s, "
                      f"x{row['speedup']:.2f}; {len(outside)} records outside parity, {identical} bitwise "
                      f"identical of {row['records']}", file=sys.stderr, flush=True)
    report = {"date": now(), "machine": machine(load_before), "old": old_commit, "new": new_commit, "rows": rows}
    lines = ["# Side by side: the scoring command of two checkouts", "",
             f"{report['date']}, old {old_commit}, new {new_commit}; load average before "
             f"{', '.join(f'{v:.2f}' for v in load_before)}, after "
             f"{', '.join(f'{v:.2f}' for v in report['machine']['loadavg_after'])}. Fastest of {args.repeats} "
             f"interleaved runs of the whole command (`benchmarks/side_by_side.py`).", "",
             "| set | ranks | records | old s | new s | old / new | outside parity | bitwise identical |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['version']} | {r['ranks']} | {r['records']} | {r['old_seconds']:.2f} | "
                     f"{r['new_seconds']:.2f} | {r['speedup']:.2f} | {len(r['outside_parity'])} | "
                     f"{r['bitwise_identical_records']} |")
    write_results(args.out, report, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
