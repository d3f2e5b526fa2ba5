"""The yardstick store (docs/store.md), side by side in one run: cold store against warm store.

Every timed run is the whole command as a user runs it by default (``bin/mpirun -n R python -m
sphyr_hpc.score PATH --out DIR --quiet``: the report phase included, only the progress bar left out),
a cold run on an empty store, a warm run on the store the cold run filled (yardsticks and the scored
completions' tables), then a run on that store with its tables removed (``yardsticks only``: what a
run whose completions are all new gets from the store).  Sets (built by
``score_many.build`` from ``shared/data/sphyr/v1``, seed 17; model-00 answers the ground truth):

* ``v1-one``: one model on all 411 v1 samples, 1 rank; a ``--no-store`` run in the first round too:
  results.jsonl of cold, warm and no store compared byte for byte;
* ``four``: one model on full_easy, full_hard, 3_random_row_easy and 10_random_cell_easy, 1 rank
  (the set benchmarks/published_side_by_side.py times beside the published scorer);
* ``all``: the 24,660-record benchmark (60 models, every v1 subject), 2 ranks.

Rounds interleave the sets and their cold and warm runs (``--repeats``); the summary gives every round,
the minimum and the median.  Then, once: two 2-rank runs of ``v1-one`` writing one empty store at once,
and a run on a store with a truncated entry and a foreign-version entry (records compared with the
no-store run's, exit status, stderr, the bad entries read back).  Last, in this process, reading an
entry against computing its yardstick at 10x10, 20x20, 40x40 and 80x80.

    .venv/bin/python benchmarks/store.py [--repeats 3] [--sets v1-one,four,all]
Results: benchmarks/results/store.{json,md}.
"""

import argparse
import hashlib
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

FOUR = ("full_easy", "full_hard", "3_random_row_easy", "10_random_cell_easy")
ISSUE_PUBLISHED_FOUR_SECONDS = 238.0  # the issue's figure for the published scorer on FOUR, 1 model, not re-measured
SETS = {"v1-one": (1, None, 1), "four": (1, FOUR, 1), "all": (60, None, 2)}  # models, subjects, ranks


def _env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}


def _command(ranks, results, out, store):
    cmd = [str(ROOT / "bin" / "mpirun"), "-n", str(ranks), str(ROOT / ".venv" / "bin" / "python"), "-m",
           "sphyr_hpc.score", str(results), "--out", str(out), "--quiet"]
    return cmd + (["--no-store"] if store is None else ["--store", str(store)])


def score(ranks, results, out, store):
    """One run of the command: wall seconds, run.json, results.jsonl's digest, exit status, stderr."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run(_command(ranks, results, out, store), cwd=ROOT, capture_output=True, text=True,
                          env=_env())
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"score failed:\n{done.stderr[-3000:]}")
    run = json.loads((Path(out) / "run.json").read_text())
    digest = hashlib.sha256((Path(out) / "results.jsonl").read_bytes()).hexdigest()[:16]
    return {"wall_seconds": round(wall, 2), "process_seconds": run["seconds"]["process"],
            "scoring_seconds": run["seconds"]["scoring"], "phases": run["seconds"].get("phases"),
            "yardsticks": run["yardsticks"], "completions": run.get("completions"),
            "records": run["records"], "status": done.returncode, "results_sha256": digest,
            "stderr_lines": [line for line in done.stderr.splitlines() if line.strip()]}


def timed_rounds(tmp, sets, repeats, all_repeats):
    """Cold and warm runs of every set, interleaved over ``repeats`` rounds (``all``: ``all_repeats``);
    byte comparisons."""
    entries = []
    for round_ in range(max(repeats, all_repeats)):
        for name in sets:
            if round_ >= (all_repeats if name == "all" else repeats):
                continue
            _, _, ranks = SETS[name]
            results, store = tmp / "built" / name, tmp / f"store-{name}-{round_}"
            cold = score(ranks, results, tmp / "out-cold", store)
            shutil.copy(tmp / "out-cold" / "results.jsonl", tmp / f"{name}-cold.jsonl")
            warm = score(ranks, results, tmp / "out-warm", store)
            same = (tmp / "out-warm" / "results.jsonl").read_bytes() == (tmp / f"{name}-cold.jsonl").read_bytes()
            shutil.rmtree(store / "scored")  # the completions' tables: the yardsticks alone
            yardsticks = score(ranks, results, tmp / "out-yardsticks", store)
            same = same and ((tmp / "out-yardsticks" / "results.jsonl").read_bytes()
                             == (tmp / f"{name}-cold.jsonl").read_bytes())
            entry = {"set": name, "ranks": ranks, "round": round_, "cold": cold, "warm": warm,
                     "yardsticks_only": yardsticks, "speedup": round(cold["wall_seconds"] / warm["wall_seconds"], 2),
                     "speedup_yardsticks_only": round(cold["wall_seconds"] / yardsticks["wall_seconds"], 2),
                     "cold_warm_identical": same}
            if round_ == 0 and name == "v1-one":  # records with and without the store, byte for byte (cmp)
                plain = score(ranks, results, tmp / "out-plain", None)
                entry["no_store"] = plain
                entry["cmp"] = {which: subprocess.run(["cmp", str(tmp / "out-plain" / "results.jsonl"), str(path)],
                                                      capture_output=True, text=True).returncode == 0
                                for which, path in (("cold", tmp / f"{name}-cold.jsonl"),
                                                    ("warm", tmp / "out-warm" / "results.jsonl"))}
                shutil.copy(tmp / "out-plain" / "results.jsonl", tmp / "v1-one-plain.jsonl")
            shutil.rmtree(store, ignore_errors=True)
            entries.append(entry)
            print(json.dumps({k: v for k, v in entry.items() if k not in ("cold", "warm", "no_store", "yardsticks_only")}
                             | {"cold_s": cold["wall_seconds"], "warm_s": warm["wall_seconds"],
                                "yardsticks_only_s": yardsticks["wall_seconds"]}), flush=True)
    return entries


def concurrency(tmp):
    """Two 2-rank runs writing one empty store at once; a run on a store with a truncated and a
    foreign-version entry."""
    from sphyr_hpc.io.yardstick_store import YardstickStore, decode, encode
    from sphyr_hpc.optimiser.yardstick import YARDSTICK_ALGORITHM_VERSION

    results, reference = tmp / "built" / "v1-one", tmp / "v1-one-plain.jsonl"
    if not reference.exists():
        score(1, results, tmp / "out-plain", None)
        shutil.copy(tmp / "out-plain" / "results.jsonl", reference)
    store = tmp / "store-shared"
    started = time.perf_counter()
    runs = [subprocess.Popen(_command(2, results, tmp / f"out-together-{i}", store), cwd=ROOT, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    outcome = {"together": []}
    for i, run in enumerate(runs, start=1):
        _, err = run.communicate()
        out = tmp / f"out-together-{i}"
        yardsticks = json.loads((out / "run.json").read_text())["yardsticks"]
        outcome["together"].append({"status": run.returncode, "stderr_lines": [x for x in err.splitlines() if x.strip()],
                                    "identical_to_no_store": (out / "results.jsonl").read_bytes() == reference.read_bytes(),
                                    "yardsticks": yardsticks})
    outcome["together_wall_seconds"] = round(time.perf_counter() - started, 2)
    files = YardstickStore(store).files()
    outcome["entries_after"] = sum(1 for f in files if f.digest)
    outcome["temporary_files_after"] = sum(1 for f in files if not f.digest)
    bad = [f.path for f in files if f.digest][:2]
    bad[0].write_bytes(bad[0].read_bytes()[:1000])  # truncated
    header, arrays = decode(bad[1].read_bytes())
    header.pop("arrays")
    header["algorithm"] = YARDSTICK_ALGORITHM_VERSION + 1  # another version wrote it
    bad[1].write_bytes(encode(header, arrays))
    damaged = score(2, results, tmp / "out-damaged", store)
    readable = []
    for path in bad:
        try:
            decode(path.read_bytes(), path.name[:-4], YARDSTICK_ALGORITHM_VERSION)
            readable.append(True)
        except ValueError:
            readable.append(False)
    outcome["damaged"] = dict(damaged, identical_to_no_store=(tmp / "out-damaged" / "results.jsonl").read_bytes()
                              == reference.read_bytes(), bad_entries_replaced=readable)
    print(json.dumps(outcome), flush=True)
    return outcome


def _upscaled(record, factor):
    def grow(rows):
        return [[cell for cell in row for _ in range(factor)] for row in rows for _ in range(factor)]
    return grow(record["ground_truth"]), grow(record["input_grid"])


def read_against_compute(tmp):
    """Per grid size: a yardstick computed (fresh scorer, no store), its entry's size, and reading it
    (StoredYardsticks.get on a fresh in-memory cache: open, read, checksum, decode), median of many."""
    from sphyr_hpc.io.yardstick_store import YardstickStore
    from sphyr_hpc.optimiser.yardstick import YardstickKey
    from sphyr_hpc.scoring.scorer import Scorer
    from sphyr_hpc.scoring.yardstick_store import StoredYardsticks

    first = json.loads((SPHYR_DATA / "v1" / "full_easy.jsonl").read_text().splitlines()[0])
    rows = []
    for factor in (1, 2, 4, 8):
        truth, masked = _upscaled(first, factor)
        store = YardstickStore(tmp / f"store-size-{factor}")
        stored = StoredYardsticks(store)
        scorer = Scorer(store=stored)
        case, _ = scorer.prepare(truth, truth, masked)
        vf = float(case.truth.clip(0, 1).mean())
        started = time.perf_counter()
        computed = scorer.optimum(case.loadcase, case.free, case.truth, vf, (case.truth,))
        compute_seconds = time.perf_counter() - started
        key = YardstickKey.of(case.loadcase, case.free, case.truth, vf, (case.truth,), 3.0, 1.2)
        inputs = (case.loadcase, case.free, case.truth, vf, (case.truth,), 3.0, 1.2)
        reads = []
        for _ in range(200 if factor < 8 else 50):
            started = time.perf_counter()
            got = stored.get(key, inputs, scorer.config.mg_min_dofs, lambda: None)
            reads.append(time.perf_counter() - started)
        assert got.compliance == computed.compliance and (got.densities == computed.densities).all()
        size = sum(f.size for f in store.files())
        scorer.close()
        row = {"grid": f"{case.loadcase.nely}x{case.loadcase.nelx}", "free_cells": int(case.free.sum()),
               "compute_seconds": round(compute_seconds, 4), "read_seconds_median": statistics.median(reads),
               "read_seconds_min": min(reads), "entry_bytes": size,
               "compute_over_read": round(compute_seconds / statistics.median(reads), 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--data", default=str(SPHYR_DATA / "v1"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--all-repeats", type=int, default=2, help="rounds of the 24,660-record set")
    parser.add_argument("--sets", default="v1-one,four,all")
    parser.add_argument("--parts", default="rounds,concurrency,sizes",
                        help="rounds (cold/warm timings), concurrency (two writers, damaged entries), sizes (read/compute)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "store.json"))
    args = parser.parse_args(argv)
    sets = args.sets.split(",")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        tmp = Path(tmp)
        built = {name: build(args.data, tmp / "built" / name, SETS[name][0], SETS[name][1]) for name in SETS
                 if name in sets or name == "v1-one"}
        parts = args.parts.split(",")
        entries = timed_rounds(tmp, sets, args.repeats, args.all_repeats) if "rounds" in parts else []
        together = concurrency(tmp) if "concurrency" in parts else None
        sizes = read_against_compute(tmp) if "sizes" in parts else []
    report = {"benchmark": "store", "date": now(), "commit": commit_of(), "machine": machine(load_before),
              "records": built, "entries": entries, "summary": _summary(entries), "concurrency": together,
              "read_against_compute": sizes, "issue_published_four_seconds": ISSUE_PUBLISHED_FOUR_SECONDS}
    write_results(args.out, report, _markdown(report))
    print(json.dumps(report["summary"], indent=2))


def _finishing(phases):
    """The end of a run (results.jsonl sorted, summary.json, pictures and report) from run.json's phases."""
    if "finishing" in phases:
        return phases["finishing"]
    return round(phases.get("summary", 0.0) + phases.get("pictures_and_report", 0.0), 3)


def _summary(entries):
    out = {}
    for name in dict.fromkeys(e["set"] for e in entries):
        mine = [e for e in entries if e["set"] == name]
        cold = [e["cold"]["wall_seconds"] for e in mine]
        warm = [e["warm"]["wall_seconds"] for e in mine]
        only = [e["yardsticks_only"]["wall_seconds"] for e in mine if "yardsticks_only" in e]
        phase = {which: {"scoring_seconds": [e[which]["scoring_seconds"] for e in mine],
                         "finishing_seconds": [_finishing(e[which]["phases"]) for e in mine],
                         "start_up_and_reading_seconds": [round(e[which]["phases"]["start_up"]
                                                                + e[which]["phases"]["reading"], 3) for e in mine]}
                 for which in ("cold", "warm")}
        out[name] = {"ranks": mine[0]["ranks"], "records": mine[0]["cold"]["records"],
                     "cold_seconds": cold, "warm_seconds": warm,
                     "cold_min": min(cold), "cold_median": round(statistics.median(cold), 2),
                     "warm_min": min(warm), "warm_median": round(statistics.median(warm), 2),
                     "speedup_per_round": [e["speedup"] for e in mine],
                     "speedup_min_over_min": round(min(cold) / min(warm), 2),
                     "speedup_median_over_median": round(statistics.median(cold) / statistics.median(warm), 2),
                     "yardsticks_only_seconds": only,
                     "yardsticks_only_speedup_min_over_min": round(min(cold) / min(only), 2) if only else None,
                     "yardsticks_only_speedup_median_over_median": (round(statistics.median(cold)
                                                                          / statistics.median(only), 2) if only else None),
                     "completions": {w: mine[0][w].get("completions") for w in ("cold", "warm", "yardsticks_only")
                                     if w in mine[0]},
                     "all_cold_warm_identical": all(e["cold_warm_identical"] for e in mine),
                     "phases": phase,
                     "scoring_phase_speedup_median": round(statistics.median(phase["cold"]["scoring_seconds"])
                                                           / statistics.median(phase["warm"]["scoring_seconds"]), 2)}
    return out


def _markdown(report):
    s, c = report["summary"], report["concurrency"]
    if not report["entries"]:  # the concurrency part alone
        return "\n".join([f"# Yardstick store: two writers and damaged entries ({report['date']}, commit "
                          f"{report['commit']})", "", machine_line(report["machine"])] + _concurrency_lines(c)) + "\n"
    lines = [f"# Yardstick store: cold against warm ({report['date']}, commit {report['commit']})", "",
             machine_line(report["machine"]), "",
             "Every run is the whole command as a user runs it by default (`bin/mpirun -n R .venv/bin/python -m "
             "sphyr_hpc.score PATH --out DIR --quiet --store DIR`: report phase included), wall seconds. Cold: an "
             "empty store; warm: the store the cold run filled. Rounds interleave sets and cold/warm runs "
             "(`benchmarks/store.py`).", "",
             "| set | records | ranks | cold s (per round) | warm s (per round) | cold min / median | warm min / median "
             "| warm speed-up (min/min, median/median) | cold = warm records |",
             "|---|---:|---:|---|---|---|---|---|---|"]
    for name, v in s.items():
        lines.append(f"| {name} | {v['records']} | {v['ranks']} | {', '.join(map(str, v['cold_seconds']))} | "
                     f"{', '.join(map(str, v['warm_seconds']))} | {v['cold_min']} / {v['cold_median']} | "
                     f"{v['warm_min']} / {v['warm_median']} | {v['speedup_min_over_min']}x, "
                     f"{v['speedup_median_over_median']}x | {'byte-identical' if v['all_cold_warm_identical'] else 'DIFFER'} |")
    lines += ["", "Yardsticks only: the warm store with its scored completions' tables removed (what a run whose "
                  "completions are all new gets from the store; records compared with the cold run's too).", "",
              "| set | yardsticks only s (per round) | speed-up over cold (min/min, median/median) "
              "| distinct completions computed: cold / warm / yardsticks only |",
              "|---|---|---|---|"]
    for name, v in s.items():
        counts = v.get("completions") or {}
        computed = " / ".join(str((counts.get(w) or {}).get("computed")) for w in ("cold", "warm", "yardsticks_only"))
        lines.append(f"| {name} | {', '.join(map(str, v.get('yardsticks_only_seconds') or []))} | "
                     f"{v.get('yardsticks_only_speedup_min_over_min')}x, "
                     f"{v.get('yardsticks_only_speedup_median_over_median')}x | {computed} |")
    lines += ["", "Where the time goes (run.json, medians, seconds): the scoring phase (every rank at work: yardsticks "
                  "and completions), the finishing phase (results.jsonl sorted, summary.json, leaderboard.png and the "
                  "report), start-up and reading.", "",
              "| set | scoring cold | scoring warm | scoring phase speed-up | finishing cold / warm | start-up + reading cold / warm |",
              "|---|---:|---:|---:|---|---|"]
    med = statistics.median
    for name, v in s.items():
        p = v["phases"]
        lines.append(f"| {name} | {med(p['cold']['scoring_seconds']):.2f} | {med(p['warm']['scoring_seconds']):.2f} | "
                     f"{v['scoring_phase_speedup_median']}x | {med(p['cold']['finishing_seconds']):.2f} / "
                     f"{med(p['warm']['finishing_seconds']):.2f} | {med(p['cold']['start_up_and_reading_seconds']):.2f} / "
                     f"{med(p['warm']['start_up_and_reading_seconds']):.2f} |")
    first = next((e for e in report["entries"] if "cmp" in e), None)
    if first:
        lines += ["", f"v1-one, round 0: `cmp` of results.jsonl without a store ({first['no_store']['wall_seconds']} s, "
                      f"sha256 {first['no_store']['results_sha256']}) against the cold run: "
                      f"{'identical' if first['cmp']['cold'] else 'DIFFERENT'}, against the warm run: "
                      f"{'identical' if first['cmp']['warm'] else 'DIFFERENT'}. Yardsticks: cold "
                      f"{first['cold']['yardsticks']}, warm {first['warm']['yardsticks']}."]
    if "four" in s:
        v = s["four"]
        lines += ["", "The published scorer on the four subjects (full_easy, full_hard, 3_random_row_easy, "
                      "10_random_cell_easy; one model): its code is not on this machine, so it was not run here. "
                      f"The issue's figure from an earlier session on this machine, {report['issue_published_four_seconds']} s, "
                      f"would give {report['issue_published_four_seconds'] / v['cold_median']:.1f}x cold and "
                      f"{report['issue_published_four_seconds'] / v['warm_median']:.1f}x warm (medians): not a "
                      "side-by-side measurement."]
    lines += _concurrency_lines(c) + _sizes_lines(report)
    return "\n".join(lines) + "\n"


def _concurrency_lines(c):
    if c is None:
        return []
    lines = ["", "## Two runs writing one store at once, and damaged entries", "",
             f"Two 2-rank runs of v1-one on one empty store, started together ({c['together_wall_seconds']} s for both):"]
    for i, t in enumerate(c["together"], start=1):
        lines.append(f"- run {i}: exit {t['status']}, records identical to the no-store run: {t['identical_to_no_store']}, "
                     f"yardsticks {t['yardsticks']}, stderr: {t['stderr_lines'] or 'nothing'}")
    d = c["damaged"]
    lines += [f"- store afterwards: {c['entries_after']} entries, {c['temporary_files_after']} temporary files",
              f"- then one entry truncated to 1000 bytes and one rewritten as another algorithm version: a 2-rank run "
              f"exits {d['status']}, records identical to the no-store run: {d['identical_to_no_store']}, yardsticks "
              f"{d['yardsticks']}, stderr: {d['stderr_lines'] or 'nothing'}; the two entries read back as this "
              f"version's: {d['bad_entries_replaced']}"]
    return lines


def _sizes_lines(report):
    if not report["read_against_compute"]:
        return []
    lines = ["", "## Reading an entry against computing the yardstick", "",
              "v1 full_easy[0] upscaled (each cell a k x k block), one rank, in process: the yardstick computed by a "
              "fresh scorer, then read back through the store (open, read, checksum, decode; median of 50-200).", "",
              "| grid | masked cells | compute s | read ms (median / min) | entry bytes | compute / read |",
              "|---|---:|---:|---:|---:|---:|"]
    for r in report["read_against_compute"]:
        lines.append(f"| {r['grid']} | {r['free_cells']} | {r['compute_seconds']} | "
                     f"{1000 * r['read_seconds_median']:.3f} / {1000 * r['read_seconds_min']:.3f} | {r['entry_bytes']} | "
                     f"{r['compute_over_read']}x |")
    return lines


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
