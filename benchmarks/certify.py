"""Benchmark: certify the yardstick on every v1 sample, on 1 and 2 ranks.

Two runs of ``python -m sphyr_hpc.certify`` per rank count, side by side:
every v1 subject with at most 30 masked cells per sample (all samples, the
default node budget: each search closes, or says it did not), and
``full_easy`` (80 masked cells) with ``--node-budget`` ``--full-nodes``: gaps
bounded, not solved.  Reports per subject the share certified optimal, the
yardstick's median and worst gap, who beats whom, and the seconds per sample
on 1 and 2 ranks; checks that the records of both rank counts are equal
(``seconds`` aside).  Writes ``certify.json``/``.md``, the 1-rank records
(``certify_small.jsonl``, ``certify_full_easy.jsonl``) and their pictures to
``benchmarks/results``.

A third run certifies the 20x20 samples (``v2_20``, every subject but full)
with ``--v2-nodes`` nodes a sample.

Usage (from the repository root)::

    .venv/bin/python benchmarks/certify.py [--data DIR] [--full-nodes K] [--v2-nodes K] [--ranks 1,2]
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

from _common import ROOT, SPHYR_DATA, machine, now, write_results

DATA = SPHYR_DATA / "v1"
FULL = ("full_easy", "full_hard")


def run(ranks, datasets, out, node_budget=None):
    command = [str(ROOT / "bin" / "mpirun"), "-n", str(ranks), str(ROOT / ".venv" / "bin" / "python"),
               "-m", "sphyr_hpc.certify", "--quiet", "--out", str(out), "--dataset", *map(str, datasets)]
    if node_budget:
        command += ["--node-budget", str(node_budget)]
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT)
    wall = time.perf_counter() - started
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "certify.jsonl").read_text().splitlines()]
    return wall, summary, rows


def _strip(rows):
    return [{k: v for k, v in r.items() if k not in ("seconds", "cpu_seconds")} for r in rows]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="v1 dataset folder")
    parser.add_argument("--full-nodes", type=int, default=5000, help="node budget per full_easy sample")
    parser.add_argument("--v2-nodes", type=int, default=2000, help="node budget per v2_20 (20x20) sample")
    parser.add_argument("--ranks", default="1,2", help="rank counts, side by side")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "certify.json")
    parser.add_argument("--render", action="store_true", help="only rewrite the Markdown from --out's JSON")
    args = parser.parse_args(argv)
    if args.render:
        report = json.loads(args.out.read_text())
        write_results(args.out, report, markdown(report, [int(r) for r in args.ranks.split(",")]))
        return 0
    small = sorted(p for p in args.data.glob("*.jsonl") if p.stem not in FULL)
    v2 = sorted(p for p in (args.data.parent / "v2_20").glob("*.jsonl") if p.stem not in FULL)
    groups = (("small", small, None), ("full_easy", [args.data / "full_easy.jsonl"], args.full_nodes),
              ("v2_20", v2, args.v2_nodes))
    load = os.getloadavg()
    report = {"date": now(), "runs": {}, "full_node_budget": args.full_nodes, "v2_node_budget": args.v2_nodes,
              "ranks": args.ranks}
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in (int(r) for r in args.ranks.split(",")):
            for name, datasets, budget in groups:
                out = Path(tmp) / f"{name}_{ranks}"
                wall, summary, rows = run(ranks, datasets, out, budget)
                report["runs"][f"{name}/{ranks}"] = {"wall_seconds": round(wall, 2), "summary": summary,
                                                      "rows": rows}
                print(f"{name} on {ranks} rank(s): {wall:.1f} s", flush=True)
                if ranks == 1:
                    results = args.out.parent
                    shutil.copy(out / "certify.jsonl", results / f"certify_{name}.jsonl")
                    shutil.copy(out / "certify.png", results / f"certify_{name}.png")
    report["machine"] = machine(load)
    text = markdown(report, [int(r) for r in args.ranks.split(",")])
    write_results(args.out, report, text)
    print(text)
    return 0


def markdown(report, rank_counts):
    from sphyr_hpc.scoring.certified import format_table  # only now: importing it starts MPI, which would capture mpirun

    full_nodes = report["full_node_budget"]
    lines = [f"# certify: the yardstick against the certified binary optimum ({report['date']})", "",
             f"v1 samples, `python -m sphyr_hpc.certify`, default node budget for the subjects with at most 30",
             f"masked cells, {full_nodes} nodes per full_easy sample; v2_20 (20x20, every subject but full): "
             f"{report['v2_node_budget']} nodes per sample. Gap = yardstick / certified lower "
             f"bound - 1 (exact where optimal; negative: the yardstick's grey design beats every binary design).", ""]
    for name in ("small", "full_easy", "v2_20"):
        base = report["runs"][f"{name}/{rank_counts[0]}"]
        lines += [f"## {name} ({rank_counts[0]} rank)", "", "```"] + format_table(base["summary"]["subjects"]) + ["```", ""]
        lines += ["| ranks | wall s (whole command) | certify phase s | seconds per sample by subject (wall / CPU) |",
                  "|---|---|---|---|"]
        for ranks in rank_counts:
            runinfo = report["runs"][f"{name}/{ranks}"]
            per = ", ".join(f"{s} {v['seconds_per_sample']:.3f} / {v['cpu_seconds_per_sample']:.3f}"
                            for s, v in runinfo["summary"]["subjects"].items())
            lines.append(f"| {ranks} | {runinfo['wall_seconds']} | {runinfo['summary']['seconds']} | {per} |")
        if len(rank_counts) > 1:
            same = all(_strip(report["runs"][f"{name}/{r}"]["rows"]) == _strip(base["rows"]) for r in rank_counts)
            ratio = base["summary"]["seconds"] / report["runs"][f"{name}/{rank_counts[-1]}"]["summary"]["seconds"]
            lines += ["", f"Records equal on {','.join(map(str, rank_counts))} ranks (seconds aside): {same}. "
                      f"Certify phase {rank_counts[0]} -> {rank_counts[-1]} ranks: {ratio:.2f}x.", ""]
    load = report["machine"]
    lines += [f"Load average (1, 5, 15 min) before {tuple(round(v, 1) for v in load['loadavg_before'])}, after "
              f"{tuple(round(v, 1) for v in load['loadavg_after'])} on {load['cpus']} cores: with other jobs "
              f"running, wall seconds on 2 ranks measure the share of the cores the ranks got; CPU seconds "
              f"measure the work.", "", f"Machine: {report['machine']}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
