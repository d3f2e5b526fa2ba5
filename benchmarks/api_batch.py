"""The Python API on many records: a get_structural_metrics loop against score_records on 1 and 2 ranks.

Records: every v1 dataset sample of ``shared/data/sphyr`` completed twice, by
its ground truth and by a random fill (score_throughput.py's, seeded by the
record's index), so each yardstick serves two records as in a real benchmark
run.  Each way runs in its own process with a cold cache, timed from the first
score to the last result (start-up and reading excluded), side by side in one
run, ``--repeats`` times interleaved, fastest kept:

* ``loop``: ``get_structural_metrics`` record after record, one process;
* ``batch-1``: ``score_records`` under ``bin/mpirun -n 1``;
* ``batch-2``: ``score_records`` under ``bin/mpirun -n 2`` (rank 0 receives every result).

It checks that the three give the same metrics for every record (``as_dict()``
equal), and writes ``benchmarks/results/api_batch.{json,md}``.

    /usr/bin/python3 benchmarks/api_batch.py [--data-root ../shared/data/sphyr] [--repeats 3]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, SPHYR_DATA, machine, now, write_results
from score_throughput import _random_fill

WAYS = {"loop": [], "batch-1": [str(ROOT / "bin" / "mpirun"), "-n", "1"],
        "batch-2": [str(ROOT / "bin" / "mpirun"), "-n", "2"]}


def build_records(version_dir):
    records = []
    for dataset in sorted(Path(version_dir).glob("*.jsonl")):
        hard = dataset.stem.endswith("hard")
        for line in dataset.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                records.append(dict(rec, completion=rec["ground_truth"]))
                records.append(dict(rec, completion=_random_fill(rec["input_grid"], hard, random.Random(rec["index"]))))
    return records


def worker(way, records_path, out_path):
    """One timed way (run in its own process); rank 0 writes the results and the seconds."""
    sys.path.insert(0, str(ROOT))
    from mpi4py import MPI

    from sphyr_hpc.api import get_structural_metrics, reference_cache_info, score_records

    records = json.loads(Path(records_path).read_text())
    MPI.COMM_WORLD.Barrier()
    started = time.perf_counter()
    if way == "loop":
        results = {i: get_structural_metrics(r["completion"], r["ground_truth"], r["input_grid"]).as_dict()
                   for i, r in enumerate(records)}
    else:
        results = {r.position: r.metrics.as_dict() for r in score_records(records)}
    seconds = time.perf_counter() - started
    if MPI.COMM_WORLD.rank == 0:
        Path(out_path).write_text(json.dumps({"seconds": seconds, "yardsticks": reference_cache_info().misses,
                                              "results": [results[i] for i in range(len(records))]}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--data-root", default=str(SPHYR_DATA))
    parser.add_argument("--version", default="v1", help="dataset folder under --data-root")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "api_batch.json"))
    parser.add_argument("--worker", nargs=3, metavar=("WAY", "RECORDS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return 0
    load_before = os.getloadavg()
    records = build_records(Path(args.data_root) / args.version)
    runs = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as tmp:
        records_path = Path(tmp) / "records.json"
        records_path.write_text(json.dumps(records))
        results = {}
        for repeat in range(args.repeats):
            for way, launcher in WAYS.items():
                out = Path(tmp) / f"{way}.json"
                subprocess.run(launcher + [sys.executable, __file__, "--worker", way, str(records_path), str(out)],
                               check=True, cwd=ROOT)
                got = json.loads(out.read_text())
                runs[way].append({"seconds": round(got["seconds"], 3), "yardsticks_rank0": got["yardsticks"]})
                results.setdefault(way, got["results"])
                print(f"repeat {repeat + 1} {way}: {got['seconds']:.2f} s", flush=True)
    same = all(results[way] == results["loop"] for way in WAYS)
    best = {way: min(r["seconds"] for r in runs[way]) for way in WAYS}
    report = {
        "date": now(), "machine": machine(load_before), "version": args.version, "records": len(records),
        "samples": len(records) // 2, "repeats": args.repeats, "runs": runs, "fastest_seconds": best,
        "identical_metrics": same,
        "ratios": {"loop / batch-1": round(best["loop"] / best["batch-1"], 2),
                   "batch-1 / batch-2": round(best["batch-1"] / best["batch-2"], 2)},
    }
    lines = [f"# score_records vs a get_structural_metrics loop ({args.version}, {len(records)} records)", "",
             f"{report['date']}, {report['machine']['cpus']} CPUs, load {load_before} -> "
             f"{report['machine']['loadavg_after']}; fastest of {args.repeats}, interleaved, timed from the first "
             "score to the last result (start-up and reading excluded), each way a fresh process with a cold cache.",
             "", "| way | seconds | records/s |", "|---|---|---|"]
    lines += [f"| {way} | {best[way]:.2f} | {len(records) / best[way]:.0f} |" for way in WAYS]
    lines += ["", f"loop / batch-1: {report['ratios']['loop / batch-1']}x; "
              f"batch-1 / batch-2 (1 -> 2 ranks): {report['ratios']['batch-1 / batch-2']}x; "
              f"metrics identical for every record: {same}", ""]
    write_results(args.out, report, "\n".join(lines))
    print("\n".join(lines))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
