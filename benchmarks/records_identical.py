"""Two checkouts scoring the same inputs: are the records byte-identical, and how long does each take?

For the bundled examples (``score`` without inputs) and the result folders
``score_throughput.py`` builds from ``examples/data`` (v1: 822 records, v2_20: 82;
a ground-truth and a random model), on each rank count: ``score --no-store`` of
the older checkout and of this one, interleaved (the order swapped every
round), the whole command as users run it (start-up and the report included).
``results.jsonl`` of the two are compared byte for byte (``cmp``).

    /usr/bin/python3 benchmarks/records_identical.py --old DIR [--ranks 1,2] [--sets bundled,v1,v2_20] [--rounds 1]

Results: ``benchmarks/results/records_identical.{json,md}``.
"""

import argparse
import filecmp
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import ROOT, commit_of, machine, now, write_results
from score_throughput import build_results


def _score(tree, ranks, inputs, out):
    cmd = [str(Path(tree) / "bin" / "mpirun"), "-n", str(ranks), str(Path(tree) / ".venv" / "bin" / "python"),
           "-m", "sphyr_hpc.score", *inputs, "--no-store", "--quiet", "--overwrite", "--out", str(out)]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the older checkout (with bin/mpirun and .venv)")
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--sets", default="bundled,v1,v2_20")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "records_identical"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sphyr_identical_") as work:
        work = Path(work)
        inputs = {"bundled": []}
        for version in ("v1", "v2_20"):
            if version in args.sets.split(","):
                build_results(ROOT / "examples" / "data" / version, work / version)
                inputs[version] = [str(work / version)]
        for name in args.sets.split(","):
            for ranks in (int(r) for r in args.ranks.split(",")):
                times = {"old": [], "new": []}
                for r in range(args.rounds):
                    order = [("old", args.old), ("new", str(ROOT))]
                    for label, tree in (order if r % 2 == 0 else order[::-1]):
                        times[label].append(_score(tree, ranks, inputs[name], work / f"{name}-{ranks}-{label}"))
                old_log, new_log = (work / f"{name}-{ranks}-{label}" / "results.jsonl" for label in ("old", "new"))
                row = {"set": name, "ranks": ranks, "records": sum(1 for _ in new_log.open()),
                       "identical": filecmp.cmp(old_log, new_log, shallow=False),
                       "old_seconds": statistics.median(times["old"]), "new_seconds": statistics.median(times["new"])}
                row["new_over_old"] = row["new_seconds"] / row["old_seconds"]
                rows.append(row)
                print(row, flush=True)
    report = {"benchmark": "records_identical", "date": now(), "machine": machine(load_before),
              "old": args.old, "old_commit": commit_of(args.old), "new_commit": commit_of(ROOT), "rows": rows}
    lines = [f"# Records of two checkouts, byte for byte", "",
             f"Run {report['date']}; old {report['old_commit']}, new {report['new_commit']}; "
             f"`/usr/bin/python3 benchmarks/records_identical.py --old DIR --ranks {args.ranks} --sets {args.sets} "
             f"--rounds {args.rounds}`; `score --no-store` as users run it, median of the rounds.", "",
             "| set | ranks | records | results.jsonl identical | old s | new s | new / old |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['set']} | {r['ranks']} | {r['records']} | {'yes' if r['identical'] else 'NO'} | "
                     f"{r['old_seconds']:.2f} | {r['new_seconds']:.2f} | {r['new_over_old']:.3f} |")
    write_results(args.out + ".json", report, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
