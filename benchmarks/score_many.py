"""Benchmark scale: many models completing every sample (a benchmark, not a test).

The published SPhyR results hold dozens of models answering every sample, so a
sample's yardstick is computed once and the per-completion work decides.  This
script builds, from the dataset samples in ``shared/data/sphyr/v1`` and a fixed
seed, ``--models`` model folders (default 60) whose completions are the ground
truth with 0-4 masked cells changed (0/1 flipped on easy subjects, a random
one-decimal density on hard ones), as SPhyR result files.  Nothing it builds is
committed: the same seed builds the same folders.

Runs, each the whole command ``bin/mpirun -n R python -m sphyr_hpc.score``:

* ``subset``: the subjects 1_random_cell_easy, 3_random_row_easy and full_easy,
  with one model (``one``) and with every model (``many``): the difference per
  extra record is the cost of one more completion;
* ``all``: every v1 subject x every model (24,660 records with 60 models).

Every run is the command as users run it by default: with the report
(report.html, the model pages, the pictures); ``--report both`` also times
each configuration with ``--no-report``, ``--report without`` only so.  A
run's entry gives the report's seconds (run.json's ``seconds.report`` where the
checkout records it, else its ``finishing`` phase, which holds it), its share
of the wall time, and report.html's size; ``--report-command`` also times
``python -m sphyr_hpc.report OUT`` alone after each ``all`` run (seconds, peak
memory).

Each on 1 and 2 ranks, with ``--python`` naming other checkouts to time side
by side (``--compare /work/wt/base17-9889ca1``), in ``--repeats`` interleaved rounds (each round
runs every configuration once, a one-model run just before its many-model run).  Recorded per run: wall
seconds, the scoring phase and the process as ``run.json`` reports them, the
serial share (process minus scoring phase), and each rank's peak resident
memory and CPU seconds (``/usr/bin/time -f "%M %U %S"`` around every rank), results.jsonl's digest and the records
that break parity with the set's first run.  The summary gives every round and the median.  Results:
``benchmarks/results/score_many.{json,md}``.

    python3 benchmarks/score_many.py [--models 60] [--ranks 1,2] [--runs subset,all] [--compare DIR ...]
    python3 benchmarks/score_many.py --build-only DIR     # write the result folders and stop
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, SPHYR_DATA, commit_of, machine, machine_line, now, write_results

SUBSET = ("1_random_cell_easy", "3_random_row_easy", "full_easy")
SEED = 17
PUBLISHED_SUBSET_SECONDS = 176.1  # the published scorer on SUBSET x 60 models, the machine
PROMPT = ("Below is the input grid with masked regions:\n\n{grid}\n\n"
          "Please output the completed grid by replacing all 'V' cells.")


def _text(rows):
    return "\n".join(" ".join(row) for row in rows)


def _completion(record, hard, rng):
    """The ground truth with 0-4 of its masked cells changed."""
    rows = [list(row) for row in record["ground_truth"]]
    masked = [(r, c) for r, row in enumerate(record["input_grid"]) for c, cell in enumerate(row) if cell == "V"]
    for r, c in rng.sample(masked, min(len(masked), rng.randint(0, 4))):
        if hard:
            rows[r][c] = f"{rng.randint(0, 10) / 10:.1f}"
        else:
            rows[r][c] = "0" if rows[r][c] == "1" else "1"
    return rows


def build(data, out, models, subjects=None):
    """Result folders ``out/model-NN/<subject>_results.json``; returns the record count."""
    records = 0
    datasets = sorted(Path(data).glob("*.jsonl"))
    if not datasets:
        raise SystemExit(f"no dataset files (*.jsonl) in {data}: pass --data")
    for dataset in datasets:
        subject = dataset.stem
        if subjects is not None and subject not in subjects:
            continue
        samples = [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]
        for m in range(models):
            rng = random.Random(f"{SEED}/{m}/{subject}")
            rows = [{"prompt": PROMPT.format(grid=_text(s["input_grid"])), "ground_truth": _text(s["ground_truth"]),
                     "completion": _text(_completion(s, subject.endswith("hard"), rng) if m else s["ground_truth"])}
                    for s in samples]
            folder = Path(out) / f"model-{m:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{subject}_results.json").write_text(json.dumps(rows))
            records += len(rows)
    return records


def run(checkout, ranks, results, out, report=True):
    """Wall seconds, run.json's seconds, peak RSS per rank (MB) and the rows of one scoring run.

    ``report``: the default command (a checkout that writes a report writes it); False: ``--no-report``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    python = str(Path(checkout) / ".venv" / "bin" / "python")
    cmd = [str(Path(checkout) / "bin" / "mpirun"), "-n", str(ranks), "/usr/bin/time", "-f", "peak_kb %M cpu_s %U %S",
           "-a", "-o", str(out / "peak.txt"), python, "-m", "sphyr_hpc.score", str(results),
           "--out", str(out), "--quiet"]
    if not report and "--report" in (Path(checkout) / "sphyr_hpc" / "score.py").read_text():  # older: no report
        cmd.append("--no-report")
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"score failed in {checkout} on {ranks} ranks:\n{done.stderr[-3000:]}")
    seconds = json.loads((out / "run.json").read_text())["seconds"]
    lines = [line.split() for line in (out / "peak.txt").read_text().splitlines() if line.startswith("peak_kb")]
    peaks = [int(fields[1]) // 1024 for fields in lines]
    seconds["cpu_per_rank"] = [round(float(fields[3]) + float(fields[4]), 2) for fields in lines]  # user + system
    data = (out / "results.jsonl").read_bytes()
    rows = [json.loads(line) for line in data.splitlines()]
    for row in rows:
        row.pop("grids", None)  # what the report draws; compared rows are the metrics
    return wall, seconds, peaks, rows, hashlib.sha256(data).hexdigest()[:16]


def report_sizes(out):
    """report.html's bytes and the bytes of everything the report wrote (report.html and report/)."""
    page = out / "report.html"
    if not page.is_file():
        return None, None
    pictures = out / "report"
    return page.stat().st_size, page.stat().st_size + sum(p.stat().st_size for p in pictures.rglob("*") if p.is_file())


def report_command(checkout, out):
    """Seconds and peak MB of ``python -m sphyr_hpc.report OUT`` alone (the checkout's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    python = str(Path(checkout) / ".venv" / "bin" / "python")
    peak = out / "report_peak.txt"
    started = time.perf_counter()
    subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(peak), python, "-m", "sphyr_hpc.report", str(out)],
                   cwd=checkout, env=env, check=True, capture_output=True)
    return round(time.perf_counter() - started, 2), int(peak.read_text().split()[-1]) // 1024


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--data", default=str(SPHYR_DATA / "v1"))
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--runs", default="subset,all", help="subset (3 subjects, 1 and all models), all (every subject)")
    parser.add_argument("--all-ranks", default="2", help="rank counts of the 'all' run")
    parser.add_argument("--repeats", type=int, default=1,
                        help="rounds of every configuration, interleaved; the summary gives every round and the median")
    parser.add_argument("--compare", nargs="*", default=[], metavar="DIR",
                        help="other checkouts (with their .venv) timed side by side with this one")
    parser.add_argument("--build-only", metavar="DIR", help="write the result folders under DIR and stop")
    parser.add_argument("--report", choices=("with", "without", "both"), default="with",
                        help="time the default command (with the report), with --no-report, or both")
    parser.add_argument("--report-command", action="store_true",
                        help="after each 'all' run, also time python -m sphyr_hpc.report on its folder alone")
    parser.add_argument("--sets", metavar="DIR",
                        help="result folders already built by --build-only DIR (instead of building them again)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "score_many.json"))
    args = parser.parse_args(argv)
    if args.build_only:
        for name, models, subjects in (("subset-one", 1, SUBSET), ("subset-many", args.models, SUBSET),
                                       ("all", args.models, None)):
            print(name, build(args.data, Path(args.build_only) / name, models, subjects))
        return
    ranks = [int(r) for r in args.ranks.split(",")]
    checkouts = [ROOT] + [Path(c).resolve() for c in args.compare]
    load_before = os.getloadavg()
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        sets = []
        if "subset" in args.runs:
            sets += [("subset-one", 1, SUBSET), ("subset-many", args.models, SUBSET)]
        if "all" in args.runs:
            sets.append(("all", args.models, None))
        root = Path(args.sets) if args.sets else Path(tmp)
        built = {name: (models, build(args.data, root / name, models, subjects) if not args.sets
                        else sum(len(json.loads(p.read_text())) for p in (root / name).rglob("*.json")))
                 for name, models, subjects in sets}
        modes = {"with": [True], "without": [False], "both": [True, False]}[args.report]
        # Side by side and interleaved: each round runs every configuration once, the one-model and
        # the many-model subset back to back, so a drift of the machine hits both of a difference.
        runs = [(round_, name, r, checkout, report) for round_ in range(args.repeats)
                for name in built
                for r in (ranks if name != "all" else [int(x) for x in args.all_ranks.split(",")])
                for checkout in checkouts for report in modes]
        runs.sort(key=lambda run_: (run_[0], run_[1] == "all", run_[2], not run_[4], checkouts.index(run_[3]),
                                    run_[1] != "subset-one"))
        first = {}  # set -> (commit, rows) of its first run: every other run's records are compared with them
        for round_, name, r, checkout, report in runs:
            models, records = built[name]
            out = Path(tmp) / "out"
            wall, seconds, peaks, rows, digest = run(checkout, r, root / name, out, report)
            commit = commit_of(checkout)
            reference_commit, reference = first.setdefault(name, (commit, rows))
            report_seconds = seconds.get("report", seconds.get("phases", {}).get("finishing")) if report else None
            html_bytes, report_bytes = report_sizes(out) if report else (None, None)
            entry = {"set": name, "models": models, "records": records, "ranks": r, "round": round_,
                     "checkout": str(checkout), "commit": commit, "report": report, "wall_seconds": round(wall, 2),
                     "report_seconds": report_seconds,
                     "report_share": round(report_seconds / wall, 3) if report_seconds is not None else None,
                     "report_html_bytes": html_bytes, "report_bytes": report_bytes,
                     "process_seconds": seconds["process"], "scoring_seconds": seconds["scoring"],
                     "serial_share": round((seconds["process"] - seconds["scoring"]) / seconds["process"], 3),
                     "phases": seconds.get("phases"), "cpu_seconds_per_rank": seconds["cpu_per_rank"],
                     "peak_mb_per_rank": peaks, "loadavg": os.getloadavg()[0],
                     "errors": sum(1 for x in rows if "error" in x), "results_sha256": digest,
                     "compared_with": reference_commit, "parity_differences": _parity(rows, reference)}
            if args.report_command and name == "all":
                entry["report_command_seconds"], entry["report_command_peak_mb"] = report_command(checkout, out)
            entries.append(entry)
            print(json.dumps(entry), flush=True)
    report = {"benchmark": "score_many", "date": now(), "machine": machine(load_before), "seed": SEED,
              "published_subset_seconds": PUBLISHED_SUBSET_SECONDS, "entries": entries,
              "summary": _summary(entries)}
    write_results(args.out, report, _markdown(report))
    print(json.dumps(report["summary"], indent=2))


def _parity(rows, reference):
    """Records of ``rows`` that break parity (docs/scoring.md, "Parity") with ``reference``'s, or differ in
    a field parity does not cover; -1 when the two runs do not hold the same records."""
    from sphyr_hpc.parity import differences

    key = lambda r: (r["model"], r["subject"], r["index"])
    theirs = {key(r): r for r in reference}
    if len(theirs) != len(rows) or any(key(r) not in theirs for r in rows):
        return -1
    covered = {"compliance", "ground_truth_compliance", "optimal_compliance", "own_budget_optimal_compliance",
               "max_displacement", "topology_score", "structural_efficiency", "structural_efficiency_raw",
               "design_efficiency", "material_efficiency", "compliance_efficiency_vs_ground_truth",
               "volume_fraction", "ground_truth_volume_fraction", "volume_ratio"}
    return sum(1 for r in rows if differences(r, theirs[key(r)])
               or any(r[k] != theirs[key(r)][k] for k in set(r) & set(theirs[key(r)]) if k not in covered))


def _median(values):
    return statistics.median(values) if values else None


def _summary(entries):
    """Per checkout and rank count, every round, the median and the fastest: ms per extra completion (the
    round's many-model minus one-model subset, per extra record), seconds per sample, speed-ups.

    "fastest": the fastest many-model run minus the fastest one-model run.  On a machine shared with
    other tenants a run is only ever slowed down (the same command has taken 1.5-2x longer from one
    minute to the next here), so the fastest of several runs is the least disturbed measurement of the
    same work (timeit's convention); the median keeps the disturbed rounds in."""
    by = {}
    for e in entries:
        mode = "" if e.get("report", False) else "_no_report"
        by.setdefault((e["set"], e["commit"] + mode, e["ranks"]), {})[e.get("round", 0)] = e
    summary = {}
    for (name, commit, ranks), rounds in by.items():
        if name == "all":
            walls = [rounds[k]["wall_seconds"] for k in sorted(rounds)]
            reports = [rounds[k].get("report_seconds") for k in sorted(rounds)]
            summary[f"all_{commit}_{ranks}rank"] = {
                "wall_seconds_per_round": walls, "wall_seconds_min": min(walls), "wall_seconds_median": _median(walls),
                "report_seconds_per_round": reports,
                "report_share_per_round": [rounds[k].get("report_share") for k in sorted(rounds)],
                "report_html_bytes": rounds[min(rounds)].get("report_html_bytes"),
                "report_command_seconds_per_round": [rounds[k].get("report_command_seconds") for k in sorted(rounds)],
                "report_command_peak_mb_per_round": [rounds[k].get("report_command_peak_mb") for k in sorted(rounds)],
                "serial_share_per_round": [rounds[k]["serial_share"] for k in sorted(rounds)],
                "peak_mb_per_rank_per_round": [rounds[k]["peak_mb_per_rank"] for k in sorted(rounds)]}
        if name != "subset-many" or ("subset-one", commit, ranks) not in by:
            continue
        ones = by[("subset-one", commit, ranks)]
        paired = [(ones[k], rounds[k]) for k in sorted(rounds) if k in ones]
        extra = rounds[min(rounds)]["records"] - ones[min(ones)]["records"]
        wall = [round(1000 * (m["wall_seconds"] - o["wall_seconds"]) / extra, 3) for o, m in paired]
        process = [round(1000 * (m["process_seconds"] - o["process_seconds"]) / extra, 3) for o, m in paired]
        # CPU seconds (user + system, summed over ranks): what a machine shared with other jobs changes least
        cpu = [round(1000 * (sum(m["cpu_seconds_per_rank"]) - sum(o["cpu_seconds_per_rank"])) / extra, 3)
               for o, m in paired if "cpu_seconds_per_rank" in m and "cpu_seconds_per_rank" in o]
        subset = [m["wall_seconds"] for _, m in paired]
        fastest = round(1000 * (min(m["wall_seconds"] for _, m in paired)
                                - min(o["wall_seconds"] for o, _ in paired)) / extra, 3)
        summary[f"{commit}_{ranks}rank"] = {
            "ms_per_extra_completion_wall_fastest": fastest,
            "ms_per_extra_completion_wall_per_round": wall,
            "ms_per_extra_completion_wall_median": _median(wall),
            "ms_per_extra_completion_process_per_round": process,
            "ms_per_extra_completion_process_median": _median(process),
            "ms_per_extra_completion_cpu_per_round": cpu,
            "ms_per_extra_completion_cpu_median": _median(cpu),
            "seconds_per_sample_one_model_median": round(_median([o["wall_seconds"] for o, _ in paired]) / ones[min(ones)]["records"], 4),
            "subset_wall_seconds_per_round": subset,
            "subset_wall_seconds_median": _median(subset),
            "speedup_vs_published_subset_median": round(PUBLISHED_SUBSET_SECONDS / _median(subset), 2),
        }
    commits = sorted({e["commit"] for e in entries})
    for ranks in sorted({e["ranks"] for e in entries}):
        for a in commits:
            for b in commits:
                if a != b and ("subset-many", a, ranks) in by and ("subset-many", b, ranks) in by:
                    mine, theirs = by[("subset-many", a, ranks)], by[("subset-many", b, ranks)]
                    rounds = [k for k in sorted(mine) if k in theirs]
                    ratios = [round(theirs[k]["wall_seconds"] / mine[k]["wall_seconds"], 2) for k in rounds]
                    fastest = round(min(theirs[k]["wall_seconds"] for k in rounds)
                                    / min(mine[k]["wall_seconds"] for k in rounds), 2)
                    summary[f"subset_speedup_{a}_over_{b}_{ranks}rank"] = {"per_round": ratios, "median": _median(ratios),
                                                                           "fastest_over_fastest": fastest}
    return summary


def _markdown(report):
    m = report["machine"]
    lines = [f"# score_many ({report['date']})", "",
             machine_line(m), "",
             "Completions: the ground truth with 0-4 masked cells changed (seed "
             f"{report['seed']}); model-00 answers the ground truth itself. Wall: the whole command "
             "(MPI start-up included); process and scoring: run.json; serial share = (process - scoring) / process; "
             "peak: resident set of each rank. Records: results.jsonl's SHA-256 (first 16 hex digits: equal means "
             "byte-identical) and the records that break parity (SPEC 11) with the set's first run (its commit in "
             "brackets), or differ in a field parity does not cover.", "",
             "Report: the default command writes it; report s: run.json's seconds.report (a checkout that does "
             "not record it: its finishing phase, which holds the report); share = report s / wall; "
             "report.html bytes; report command: python -m sphyr_hpc.report OUT alone (seconds, peak MB).", "",
             "| round | set | models | records | ranks | commit | report | wall s | process s | scoring s | report s | report share | report.html bytes | report command s / peak MB | serial share | CPU s/rank | peak MB/rank | load | results sha256 | records differing |",
             "|---:|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|---:|---|---|"]
    for e in report["entries"]:
        command = (f"{e['report_command_seconds']} / {e['report_command_peak_mb']}"
                   if e.get("report_command_seconds") is not None else "")
        lines.append(f"| {e.get('round', 0)} | {e['set']} | {e['models']} | {e['records']} | {e['ranks']} | {e['commit']} | "
                     f"{'yes' if e.get('report') else 'no'} | "
                     f"{e['wall_seconds']} | {e['process_seconds']} | {e['scoring_seconds']} | {e.get('report_seconds')} | "
                     f"{e.get('report_share')} | {e.get('report_html_bytes')} | {command} | {e['serial_share']} | "
                     f"{', '.join(map(str, e.get('cpu_seconds_per_rank', [])))} | "
                     f"{', '.join(map(str, e['peak_mb_per_rank']))} | {e['loadavg']:.2f} | {e.get('results_sha256', '')} | "
                     f"{e.get('parity_differences', '')} ({e.get('compared_with', '')}) |")
    lines += ["", f"Summary (published scorer on the 3-subject x 60-model subset: {report['published_subset_seconds']} s "
              "on the issue's machine):", ""]
    lines += [f"- {k}: {json.dumps(v)}" for k, v in report["summary"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
