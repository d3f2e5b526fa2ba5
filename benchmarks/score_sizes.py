"""Seconds per sample of ``python -m sphyr_hpc.score`` from 20x20 to 160x160, on 1 and 2 ranks, side by
side with another checkout (a benchmark, not a test).

Samples (SPhyR result folders, one sample each, completion = ground truth):
the first v1 full_easy sample upscaled x2, x4, x8, x16 (20x20 to 160x160, every
cell masked) and partly masked ones (the first 3_random_row_easy and
10_random_cell_hard samples upscaled x4 and x8).  Each is scored by the whole
command (``bin/mpirun -n R``, start-up included) on every rank count; with
``--baseline DIR`` (a checkout of another commit with its own ``.venv``, e.g.
``git worktree add ../base-9889ca1 9889ca1 && ../base-9889ca1/bin/setup``) the
same command of that checkout runs right after ours on the same sample, so both
see the same machine.  Per run: wall seconds, CPU seconds of the ranks
(``RUSAGE_CHILDREN``), the scoring phase from ``run.json``; the records of 2
ranks are compared with those of 1 (bit for bit) and ours with the baseline's
(docs/scoring.md, "Parity" through ``sphyr_hpc.parity.differences``).  The exponent of seconds
against cells is fitted over the full-mask samples.

Results: ``benchmarks/results/score_sizes.{json,md,png}``.

    .venv/bin/python benchmarks/score_sizes.py [--baseline ../base-9889ca1] [--ranks 1,2]
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, SPHYR_DATA, commit_of, machine, machine_line, now, write_results

import numpy as np

from sphyr_hpc import parity

DATA = SPHYR_DATA
FULL = ("full_easy", (2, 4, 8, 16))
PARTIAL = (("3_random_row_easy", (4, 8)), ("10_random_cell_hard", (4, 8)))
PROMPT = "Below is the input grid with masked regions:\n\n{grid}\n\nPlease output the completed grid."


def _text(rows):
    return "\n".join(" ".join(row) for row in rows)


def _up(grid, k):
    return [[c for c in row for _ in range(k)] for row in grid for _ in range(k)]


def make_sample(root, subject, k):
    """A result folder with the first sample of ``subject`` upscaled ``k`` times; its folder."""
    record = json.loads((DATA / "v1" / f"{subject}.jsonl").read_text().splitlines()[0])
    truth = _up(record["ground_truth"], k)
    row = {"prompt": PROMPT.format(grid=_text(_up(record["input_grid"], k))), "ground_truth": _text(truth),
           "completion": _text(truth)}
    folder = Path(root) / f"{subject}_x{k}"
    (folder / "ground-truth").mkdir(parents=True, exist_ok=True)
    (folder / "ground-truth" / f"{subject}_results.json").write_text(json.dumps([row]))
    masked = sum(c == "V" for r in _up(record["input_grid"], k) for c in r)
    return folder, len(truth) * len(truth[0]), masked


def run(checkout, ranks, results, out):
    """(wall s, CPU s of the ranks, scoring-phase s, rows) of the score command of ``checkout``."""
    checkout = Path(checkout)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    cmd = [str(checkout / "bin" / "mpirun"), "-n", str(ranks), str(checkout / ".venv" / "bin" / "python"), "-m",
           "sphyr_hpc.score", str(results), "--out", str(out), "--quiet"]
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{checkout} failed on {ranks} ranks:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rows = [json.loads(line) for line in (Path(out) / "results.jsonl").read_text().splitlines()]
    scoring = json.loads((Path(out) / "run.json").read_text())["seconds"]["scoring"]
    return wall, cpu, scoring, rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--baseline", help="a checkout of another commit (with .venv) timed side by side")
    parser.add_argument("--baseline-ranks", default="1", help="rank counts for the baseline")
    parser.add_argument("--baseline-max-cells", type=int, default=6400,
                        help="the baseline is not run on larger samples (its 160x160 takes the better part of an hour)")
    parser.add_argument("--scales", default="2,4,8,16", help="upscale factors of the full-mask sample")
    parser.add_argument("--partial", action=argparse.BooleanOptionalAction, default=True,
                        help="also the partly masked samples")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "score_sizes.json"))
    args = parser.parse_args(argv)
    ranks = [int(r) for r in args.ranks.split(",")]
    base_ranks = [int(r) for r in args.baseline_ranks.split(",")] if args.baseline else []
    base_commit = None
    if args.baseline:
        base_commit = commit_of(args.baseline)
    commit = commit_of()
    load_before = os.getloadavg()
    samples = [(FULL[0], k, True) for k in map(int, args.scales.split(","))]
    if args.partial:
        samples += [(subject, k, False) for subject, scales in PARTIAL for k in scales]
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        for subject, k, full in samples:
            folder, cells, masked = make_sample(tmp, subject, k)
            entry = {"sample": f"{subject}[0] x{k}", "grid": f"{10 * k}x{10 * k}", "cells": cells,
                     "masked_cells": masked, "full_mask": full, "runs": {}}
            first = None
            for r in ranks:
                jobs = [("new", ROOT)] + ([("baseline", args.baseline)] if r in base_ranks
                                          and cells <= args.baseline_max_cells else [])
                for name, checkout in jobs:
                    print(f"{entry['sample']}: {name} on {r} rank(s) ({time.strftime('%H:%M:%S')}, "
                          f"load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
                    load = os.getloadavg()[0]
                    wall, cpu, scoring, rows = run(checkout, r, folder, Path(tmp) / "out")
                    result = {"wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
                              "scoring_seconds": round(scoring, 2), "load_average": round(load, 2)}
                    if name == "new":
                        first = first or rows
                        result["identical_to_first_rank_count"] = rows == first
                    elif first is not None:
                        broken = [why for a, b in zip(first, rows) for why in parity.differences(a, b)]
                        result["new_records_within_spec11_of_these"] = not broken
                        result["new_vs_these"] = broken[:3]
                    entry["runs"][f"{name}_{r}"] = result
            new1 = entry["runs"].get("new_1")
            for key, res in entry["runs"].items():
                if key.startswith("new_") and "baseline_1" in entry["runs"]:
                    base = entry["runs"]["baseline_1"]
                    res["speedup_vs_baseline_1_rank"] = {
                        "wall": round(base["wall_seconds"] / res["wall_seconds"], 2),
                        "cpu_of_one_rank": round(base["cpu_seconds"] / (res["cpu_seconds"] /
                                                                         int(key.split("_")[1])), 2)}
            entry["optimal_compliance"] = first[0].get("optimal_compliance") if first else None
            entries.append(entry)
            print(json.dumps(entry), flush=True)
    full = [e for e in entries if e["full_mask"] and "new_1" in e["runs"]]
    fits = {}
    for r in ranks:
        pts = [(e["cells"], e["runs"][f"new_{r}"]["wall_seconds"]) for e in full if f"new_{r}" in e["runs"]]
        if len(pts) >= 2:
            x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
            fits[f"new_{r}"] = {"exponent": round(float(np.polyfit(x, y, 1)[0]), 3),
                                "exponent_last_step": round(float((y[-1] - y[-2]) / (x[-1] - x[-2])), 3)}
    report = {"benchmark": "score_sizes", "date": now(), "machine": machine(load_before), "commit": commit,
              "baseline_commit": base_commit,
              "note": ("wall: the whole command (bin/mpirun -n R, start-up included); cpu: user + system seconds "
                       "of all its processes; speed-ups against the baseline's 1-rank run of the same sample "
                       "(a single sample keeps one rank of the baseline busy whatever the rank count); "
                       "cpu_of_one_rank divides our CPU seconds by the ranks"),
              "entries": entries, "seconds_against_cells": fits}
    write_results(args.out, report, _markdown(report))
    _plot(report, Path(args.out).with_suffix(".png"))
    print(json.dumps(fits, indent=2))


def _markdown(report):
    m = report["machine"]
    lines = [f"# score_sizes ({report['date']})", "",
             machine_line(m) + f"  Commit {report['commit']}, baseline {report['baseline_commit']}.", "", report["note"] + ".", "",
             "| sample | grid | masked | run | wall s | CPU s | scoring s | load | x baseline (wall) | x baseline (CPU/rank) | same records / parity rules |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for e in report["entries"]:
        for key, r in e["runs"].items():
            speed = r.get("speedup_vs_baseline_1_rank", {})
            same = r.get("identical_to_first_rank_count", r.get("new_records_within_spec11_of_these", ""))
            lines.append(f"| {e['sample']} | {e['grid']} | {e['masked_cells']} | {key} | {r['wall_seconds']} | "
                         f"{r['cpu_seconds']} | {r['scoring_seconds']} | {r['load_average']} | "
                         f"{speed.get('wall', '')} | {speed.get('cpu_of_one_rank', '')} | {same} |")
    lines += ["", "Seconds against cells, full-mask samples (fitted exponent of wall seconds, and of the last step):", ""]
    lines += [f"- {k}: {v}" for k, v in report["seconds_against_cells"].items()]
    return "\n".join(lines) + "\n"


def _plot(report, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    keys = sorted({k for e in report["entries"] for k in e["runs"]})
    for key in keys:
        for full, marker, style in ((True, "o", "-"), (False, "s", "")):
            pts = sorted((e["cells"], e["runs"][key]["wall_seconds"]) for e in report["entries"]
                         if key in e["runs"] and e["full_mask"] == full)
            if pts:
                label = f"{key.replace('_', ', ')} rank(s)" + ("" if full else " (partly masked)")
                ax.plot(*zip(*pts), marker=marker, linestyle=style or "none", label=label)
    cells = np.array([400, 25600])
    ref = [e for e in report["entries"] if e["full_mask"] and "new_1" in e["runs"]]
    if ref:
        c0, s0 = ref[0]["cells"], ref[0]["runs"]["new_1"]["wall_seconds"]
        ax.plot(cells, s0 * (cells / c0) ** 1.5, "k:", label="cells^1.5")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cells")
    ax.set_ylabel("seconds per sample (whole command)")
    ax.set_title("python -m sphyr_hpc.score, one sample")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
