"""Throughput of ``python -m sphyr_hpc.score`` on 1 and 2 ranks (a benchmark, not a test).

Builds SPhyR result folders from the dataset samples in ``examples/data``:
for every record of every subject, a ``ground-truth`` model (completion = the
dataset answer) and a ``random`` model (masked cells filled at random, 0/1 on
easy subjects, one-decimal densities on hard ones, seeded by the record's
index, as the published baseline-random does).  Both models complete the same
samples, so each sample's yardstick is computed once and shared, exactly as in
a real benchmark run.  Then, for each dataset version (v1 10x10, v2_20 20x20)
and each rank count, it times the whole command as users run it by default
(``bin/mpirun -n R``, start-up and the report included; ``--no-report`` times
it without report.html and the model pages), checks that the records are identical for every rank count, and
writes ``benchmarks/results/score_throughput.{json,md}``.

Reference: the published scorer's own times, 174.96 s for the 408 v1 samples
(completion = ground truth) and 7.6 s per 20x20 full sample, measured on another
machine (benchmarks/published_side_by_side.py times both on one).

    /usr/bin/python3 benchmarks/score_throughput.py [--ranks 1,2] [--versions v1,v2_20] [--repeats 3] [--no-report]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine, machine_line, now, write_results
PUBLISHED = {"v1_seconds": 174.96, "v1_samples": 408, "v2_20_full_seconds_per_sample": 7.6}
PROMPT = ("Below is the input grid with masked regions:\n\n{grid}\n\n"
          "Please output the completed grid by replacing all 'V' cells.")


def _text(rows):
    return "\n".join(" ".join(row) for row in rows)


def _random_fill(input_grid, hard, rng):
    return [[(f"{rng.randint(0, 10) / 10:.1f}" if hard else str(rng.randint(0, 1))) if cell == "V" else cell
             for cell in row] for row in input_grid]


def build_results(version_dir, out_dir):
    """Result folders for the two models; returns {subject: samples}."""
    counts = {}
    for dataset in sorted(Path(version_dir).glob("*.jsonl")):
        subject = dataset.stem
        hard = subject.endswith("hard")
        records = [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]
        counts[subject] = len(records)
        for model in ("ground-truth", "random"):
            rows = []
            for rec in records:
                if model == "ground-truth":
                    completion = rec["ground_truth"]
                else:
                    completion = _random_fill(rec["input_grid"], hard, random.Random(rec["index"]))
                rows.append({"prompt": PROMPT.format(grid=_text(rec["input_grid"])),
                             "ground_truth": _text(rec["ground_truth"]), "completion": _text(completion)})
            folder = Path(out_dir) / model
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{subject}_results.json").write_text(json.dumps(rows))
    return counts


def run(ranks, results, out, report=True):
    """(wall seconds of the whole command, seconds of its scoring phase, of its report (None without), result rows)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    cmd = [str(ROOT / "bin" / "mpirun"), "-n", str(ranks), sys.executable, "-m", "sphyr_hpc.score",
           str(results), "--out", str(out), "--quiet"] + ([] if report else ["--no-report"])
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"score failed on {ranks} ranks:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (Path(out) / "results.jsonl").read_text().splitlines()]
    times = json.loads((Path(out) / "run.json").read_text())["seconds"]
    return seconds, times["scoring"], times.get("report"), rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=str(ROOT / "examples" / "data"))
    parser.add_argument("--versions", default="v1,v2_20")
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each configuration, interleaved; the fastest counts (this machine is noisy)")
    parser.add_argument("--no-report", dest="report", action="store_false",
                        help="time the command with --no-report (default: as users run it, with the report)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "score_throughput.json"))
    args = parser.parse_args(argv)
    ranks = [int(r) for r in args.ranks.split(",")]
    load_before = os.getloadavg()
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        for version in args.versions.split(","):
            results = Path(tmp) / version / "results"
            counts = build_results(Path(args.data_root) / version, results)
            samples = sum(counts.values())
            baseline_rows = None
            walls = {r: [] for r in ranks}
            scorings = {r: [] for r in ranks}
            reports = {r: [] for r in ranks}
            identical = {r: True for r in ranks}
            for _ in range(args.repeats):  # interleaved, so drifts of the machine hit every rank count
                for r in ranks:
                    seconds, scoring, report_s, rows = run(r, results, Path(tmp) / version / f"out{r}", args.report)
                    key = {(x["model"], x["subject"], x["index"]): x for x in rows}
                    identical[r] &= baseline_rows is None or key == baseline_rows
                    baseline_rows = baseline_rows or key
                    walls[r].append(seconds)
                    scorings[r].append(scoring)
                    reports[r].append(report_s)
            for r in ranks:
                seconds = min(walls[r])
                entry = {"version": version, "ranks": r, "samples": samples, "records": len(rows),
                         "seconds": round(seconds, 2), "seconds_per_sample": round(seconds / samples, 4),
                         "scoring_seconds": round(min(scorings[r]), 2),
                         "report_seconds": None if not args.report else round(min(reports[r]), 2),
                         "all_seconds": [round(x, 2) for x in walls[r]],
                         "identical_to_first_rank_count": identical[r],
                         "errors": sum(1 for x in baseline_rows.values() if "error" in x)}
                entries.append(entry)
                print(json.dumps(entry), flush=True)
    by = {(e["version"], e["ranks"]): e for e in entries}
    summary = {}
    if ("v1", 1) in by:
        per_sample = by[("v1", 1)]["seconds_per_sample"]
        summary["v1_speedup_vs_published_1rank"] = round(PUBLISHED["v1_seconds"] / PUBLISHED["v1_samples"] / per_sample, 2)
    if ("v2_20", 1) in by:
        summary["v2_20_seconds_per_sample_1rank"] = by[("v2_20", 1)]["seconds_per_sample"]
    for version in args.versions.split(","):
        if (version, 1) in by and (version, 2) in by:
            summary[f"{version}_speedup_1_to_2_ranks"] = round(by[(version, 1)]["seconds"] / by[(version, 2)]["seconds"], 2)
            summary[f"{version}_scoring_phase_speedup_1_to_2_ranks"] = round(
                by[(version, 1)]["scoring_seconds"] / by[(version, 2)]["scoring_seconds"], 2)
    report = {
        "benchmark": "score_throughput",
        "date": now(),
        "machine": machine(load_before),
        "published": PUBLISHED,
        "note": ("records per version = 2 x samples (ground-truth and random completions of the same samples); "
                 f"seconds: the fastest of {args.repeats} runs (interleaved over the rank counts) of the whole "
                 "command, MPI start-up, reading, the leaderboard and "
                 + ("the report (report.html, the model pages) included" if args.report else "--no-report")
                 + "; scoring and report: those phases alone, from the command's run.json"),
        "report": args.report,
        "entries": entries,
        "summary": summary,
    }
    write_results(args.out, report, _markdown(report))
    print(json.dumps(summary, indent=2))


def _markdown(report):
    lines = [f"# score_throughput ({report['date']})", "",
             machine_line(report["machine"]), "", report["note"] + ".", "",
             "| version | ranks | samples | records | seconds | s/sample | scoring s | report s | all runs (s) | identical | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    for e in report["entries"]:
        lines.append(f"| {e['version']} | {e['ranks']} | {e['samples']} | {e['records']} | {e['seconds']} | "
                     f"{e['seconds_per_sample']} | {e['scoring_seconds']} | {e.get('report_seconds')} | {', '.join(map(str, e['all_seconds']))} | "
                     f"{e['identical_to_first_rank_count']} | {e['errors']} |")
    lines += ["", "Summary (the published scorer's own times, from another machine: 174.96 s for 408 v1 samples, "
              "7.6 s per 20x20 full sample):", ""]
    lines += [f"- {k}: {v}" for k, v in report["summary"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
