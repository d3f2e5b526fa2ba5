"""The published SPhyR scorer and sphyr_hpc (cold and warm yardstick store) side by side in one run.

The set is ``four`` of ``benchmarks/store.py``: one model (model-00 answers the ground truth, built by
``score_many.build`` from ``shared/data/sphyr/v1``) on full_easy, full_hard, 3_random_row_easy and
10_random_cell_easy.  Each round runs, one after the other on the same machine:

* the published scorer: its own command line, ``python -m sphyr.evaluate_dynamic rescore
  --results-root COPY --workers 1`` in a fresh process (``--published-python``, Debian's Python by
  default, with ``PYTHONPATH`` the ``--published`` folder), on a copy of the set (it writes its metrics
  back into the result files it reads, and an aggregate file beside each);
* sphyr_hpc's whole command on 1 rank, ``bin/mpirun -n 1 .venv/bin/python -m sphyr_hpc.score SET --out
  DIR --quiet --store STORE``, on an empty store (cold), then again on the store that run filled (warm).

Wall seconds of each whole process; the cold ratio (published / cold) and the warm ratio
(published / warm).  Parity of sphyr_hpc's records with the published scorer's metrics on the same
records: ``topology_score`` within ``--tolerance`` (1e-6), and the parity rules of docs/scoring.md
(:func:`sphyr_hpc.parity.differences`).

The published scorer's code is not part of this repository: clone https://github.com/philippds/SPhyR
and pass its ``src`` folder (the one holding the ``sphyr`` package) as ``--published``.

    .venv/bin/python benchmarks/published_side_by_side.py --published ../SPhyR/src [--rounds 1]
Results: benchmarks/results/published_side_by_side.{json,md}.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, SPHYR_DATA, commit_of, machine, machine_line, now, write_results
from score_many import build
from store import FOUR, score

from sphyr_hpc.parity import differences

RESULTS_SUFFIX = "_results.json"


def published(python, src, results, copy):
    """One run of the published scorer's ``rescore`` command on a copy of ``results``: wall seconds,
    its output and its records keyed by (model, subject, index)."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(results, copy)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    env["PYTHONPATH"] = str(src)
    cmd = [python, "-m", "sphyr.evaluate_dynamic", "rescore", "--results-root", str(copy), "--workers", "1"]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=copy, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the published scorer failed:\n{done.stderr[-3000:]}")
    rows = {}
    for path in sorted(Path(copy).glob(f"*/*{RESULTS_SUFFIX}")):
        if path.name.endswith("_aggregated" + RESULTS_SUFFIX):
            continue
        for index, record in enumerate(json.loads(path.read_text())):
            rows[(path.parent.name, path.name[: -len(RESULTS_SUFFIX)], index)] = record
    return {"wall_seconds": round(wall, 2), "records": len(rows), "command": " ".join(cmd[1:]),
            "stdout_tail": done.stdout.strip().splitlines()[-8:]}, rows


def ours(out):
    return {(r["model"], r["subject"], r["index"]): r
            for r in map(json.loads, (Path(out) / "results.jsonl").read_text().splitlines())}


def parity(mine, theirs, tolerance):
    """topology_score within ``tolerance`` and the parity rules, record by record."""
    within, rules, worst, outside = 0, 0, 0.0, []
    for key, record in theirs.items():
        row = mine.get(key)
        if row is None:
            outside.append([list(key), ["missing from sphyr_hpc's results"]])
            continue
        gap = abs(float(row.get("topology_score") or 0.0) - float(record.get("topology_score") or 0.0))
        worst = max(worst, gap)
        within += gap <= tolerance
        why = differences(row, record)
        rules += not why
        if why or gap > tolerance:
            outside.append([list(key), why or [f"topology_score differs by {gap:.3g}"]])
    return {"records": len(theirs), "topology_score_within_tolerance": within, "tolerance": tolerance,
            "largest_topology_score_difference": worst, "within_parity_rules": rules, "outside": outside}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--published", required=True,
                        help="the folder holding the published scorer's sphyr package (a SPhyR clone's src)")
    parser.add_argument("--published-python", default="/usr/bin/python3",
                        help="the Python that runs the published scorer (numpy and scipy)")
    parser.add_argument("--data", default=str(SPHYR_DATA / "v1"))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tolerance", type=float, default=1e-6, help="topology_score agreement")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "published_side_by_side.json"))
    args = parser.parse_args(argv)
    src = Path(args.published).resolve()
    if not (src / "sphyr" / "metrics" / "structural.py").is_file():
        raise SystemExit(f"{src} holds no sphyr/metrics/structural.py: pass a SPhyR clone's src folder")
    load_before = os.getloadavg()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="published-side-by-side-") as tmp:
        tmp = Path(tmp)
        records = build(args.data, tmp / "four", 1, subjects=FOUR)
        for round_ in range(args.rounds):
            load = os.getloadavg()
            theirs, their_rows = published(args.published_python, src, tmp / "four", tmp / "published")
            print(json.dumps({"round": round_, "published_s": theirs["wall_seconds"]}), flush=True)
            store = tmp / f"store-{round_}"
            cold = score(1, tmp / "four", tmp / "out-cold", store)
            cold_rows = ours(tmp / "out-cold")
            warm = score(1, tmp / "four", tmp / "out-warm", store)
            warm_rows = ours(tmp / "out-warm")
            shutil.rmtree(store, ignore_errors=True)
            entry = {"round": round_, "loadavg_at_start": load, "loadavg_at_end": os.getloadavg(),
                     "published": theirs, "cold": cold, "warm": warm,
                     "cold_ratio": round(theirs["wall_seconds"] / cold["wall_seconds"], 2),
                     "warm_ratio": round(theirs["wall_seconds"] / warm["wall_seconds"], 2),
                     "cold_warm_identical": cold_rows == warm_rows,
                     "parity": parity(cold_rows, their_rows, args.tolerance)}
            rounds.append(entry)
            print(json.dumps({k: entry[k] for k in ("round", "cold_ratio", "warm_ratio", "cold_warm_identical")}
                             | {"cold_s": cold["wall_seconds"], "warm_s": warm["wall_seconds"],
                                "parity": {k: v for k, v in entry["parity"].items() if k != "outside"}}), flush=True)
    report = {"benchmark": "published_side_by_side", "date": now(), "commit": commit_of(),
              "machine": machine(load_before), "subjects": list(FOUR), "records": records,
              "published_python": args.published_python, "published_folder": str(src),
              "rounds": rounds, "summary": _summary(rounds)}
    write_results(args.out, report, _markdown(report))
    print(json.dumps(report["summary"], indent=2))
    return 0


def _summary(rounds):
    med = statistics.median
    theirs = [r["published"]["wall_seconds"] for r in rounds]
    cold = [r["cold"]["wall_seconds"] for r in rounds]
    warm = [r["warm"]["wall_seconds"] for r in rounds]
    return {"published_seconds": theirs, "cold_seconds": cold, "warm_seconds": warm,
            "cold_ratio_median": round(med(theirs) / med(cold), 2), "warm_ratio_median": round(med(theirs) / med(warm), 2),
            "cold_ratio_min_over_min": round(min(theirs) / min(cold), 2),
            "warm_ratio_min_over_min": round(min(theirs) / min(warm), 2),
            "topology_score_agree": [f"{r['parity']['topology_score_within_tolerance']}/{r['parity']['records']}"
                                     for r in rounds],
            "parity_rules_agree": [f"{r['parity']['within_parity_rules']}/{r['parity']['records']}" for r in rounds],
            "all_cold_warm_identical": all(r["cold_warm_identical"] for r in rounds)}


def _markdown(report):
    s = report["summary"]

    def load(values):
        return ", ".join(f"{v:.2f}" for v in values)

    lines = [f"# The published scorer and sphyr_hpc side by side ({report['date']}, commit {report['commit']})", "",
             machine_line(report["machine"]), "",
             f"One model on {', '.join(report['subjects'])} ({report['records']} records, model-00 answering the "
             "ground truth; `benchmarks/store.py`'s `four` set). Each round, one after the other: the published "
             "scorer's own command (`python -m sphyr.evaluate_dynamic rescore --results-root COPY --workers 1`, "
             f"{report['published_python']}, a fresh process), then sphyr_hpc's whole command on 1 rank "
             "(`bin/mpirun -n 1 .venv/bin/python -m sphyr_hpc.score SET --out DIR --quiet --store DIR`, report "
             "included) on an empty store (cold) and on the store that run filled (warm). Wall seconds of each "
             "whole process (`benchmarks/published_side_by_side.py`).", "",
             "| round | published s | sphyr_hpc cold s | sphyr_hpc warm s | cold ratio (published / cold) | "
             "warm ratio (published / warm) | topology_score within tolerance | within the parity rules | "
             "load average at start / end |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in report["rounds"]:
        p = r["parity"]
        lines.append(f"| {r['round']} | {r['published']['wall_seconds']} | {r['cold']['wall_seconds']} | "
                     f"{r['warm']['wall_seconds']} | {r['cold_ratio']}x | {r['warm_ratio']}x | "
                     f"{p['topology_score_within_tolerance']}/{p['records']} | {p['within_parity_rules']}/{p['records']} "
                     f"| {load(r['loadavg_at_start'])} / {load(r['loadavg_at_end'])} |")
    if len(report["rounds"]) > 1:
        lines += ["", f"Medians: cold ratio {s['cold_ratio_median']}x, warm ratio {s['warm_ratio_median']}x; "
                      f"fastest against fastest: {s['cold_ratio_min_over_min']}x cold, "
                      f"{s['warm_ratio_min_over_min']}x warm."]
    first = report["rounds"][0]
    p = first["parity"]
    lines += ["", f"Parity (sphyr_hpc's cold records against the published scorer's metrics on the same records): "
                  f"`topology_score` within {p['tolerance']:g} on {p['topology_score_within_tolerance']} of "
                  f"{p['records']} records (largest difference {p['largest_topology_score_difference']:.3g}); "
                  f"{p['within_parity_rules']} of {p['records']} within the parity rules of docs/scoring.md "
                  "(`sphyr_hpc.parity.differences`). Cold and warm records identical: "
                  f"{s['all_cold_warm_identical']}. Yardsticks: cold {first['cold']['yardsticks']['computed']} "
                  f"computed, warm {first['warm']['yardsticks']['from_store']} read from the store."]
    for r in report["rounds"]:
        for key, why in r["parity"]["outside"]:
            lines.append(f"- round {r['round']}, {'/'.join(map(str, key))}: {'; '.join(why)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
