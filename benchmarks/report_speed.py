"""How long ``python -m sphyr_hpc.report OUT`` takes on an existing results.jsonl (a benchmark, not a test).

Builds the 822-record v1 run of ``score_throughput.py`` (a ``ground-truth``
and a ``random`` model over the 411 v1 samples in ``shared/data/sphyr``),
scores it once (``--no-report``), then times the whole report command
(interpreter start-up, reading results.jsonl, every picture, report.html) a
few times, with the CPU seconds it used, and writes
``benchmarks/results/report_speed.{json,md}`` with the category table and the
exact-match table of that run.

    .venv/bin/python benchmarks/report_speed.py [--data-root ../shared/data/sphyr] [--repeats 3]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, SPHYR_DATA, machine, machine_line, now, write_results
from score_throughput import build_results


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--data-root", default=str(SPHYR_DATA))
    parser.add_argument("--repeats", type=int, default=3, help="report runs timed")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "report_speed.json"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    with tempfile.TemporaryDirectory() as tmp:
        results, out = Path(tmp) / "results", Path(tmp) / "out"
        counts = build_results(Path(args.data_root) / "v1", results)
        subprocess.run([sys.executable, "-m", "sphyr_hpc.score", str(results), "--out", str(out), "--quiet",
                        "--no-report"], cwd=ROOT, env=env, check=True, capture_output=True)
        records = sum(1 for _ in open(out / "results.jsonl"))
        size = (out / "results.jsonl").stat().st_size
        runs = []
        for _ in range(args.repeats):
            cpu, started = _children_cpu(), time.perf_counter()
            subprocess.run([sys.executable, "-m", "sphyr_hpc.report", str(out)], cwd=ROOT, env=env, check=True,
                           capture_output=True)
            runs.append({"seconds": round(time.perf_counter() - started, 3),
                         "cpu_seconds": round(_children_cpu() - cpu, 3)})
        pictures = sorted(p.name for p in (out / "report").iterdir())
        html_bytes = (out / "report.html").stat().st_size
        failures = json.loads((out / "summary.json").read_text())["failures"]
    fastest = min(runs, key=lambda r: r["seconds"])
    report = {"benchmark": "report_speed", "date": now(), "machine": machine(load_before),
              "samples": sum(counts.values()), "records": records, "results_jsonl_bytes": size,
              "runs": runs, "fastest_seconds": fastest["seconds"], "pictures": pictures,
              "report_html_bytes": html_bytes, "failures": failures}
    m = report["machine"]
    lines = [f"# report_speed ({report['date']})", "",
             machine_line(m),
             "", f"`python -m sphyr_hpc.report OUT` on an existing results.jsonl of {records} records "
             f"({size / 1e6:.1f} MB; v1, ground-truth and random completions of {report['samples']} samples): "
             "the whole command, interpreter start-up included.", "",
             "| run | seconds | CPU seconds |", "|---:|---:|---:|"]
    lines += [f"| {i} | {r['seconds']} | {r['cpu_seconds']} |" for i, r in enumerate(runs, start=1)]
    lines += ["", f"Fastest: {fastest['seconds']} s; report.html {html_bytes / 1e6:.2f} MB with "
              f"{len(pictures)} pictures ({', '.join(pictures)}).", "",
              "Failure categories of that run (share of scored completions):", "",
              "| model | records | " + " | ".join(failures["order"]) + " |",
              "|---|---:|" + "---:|" * len(failures["order"])]
    tallies = list(failures["models"].items()) + [("all models", failures["all models"])]
    for name, t in tallies:
        lines.append(f"| {name} | {t['records']} | " + " | ".join(f"{t['shares'][c]:.3f}" for c in failures["order"])
                     + " |")
    lines += ["", "exact_match against load_carrying (completions with a valid grid):", "",
              "| model | valid | exact, carrying | exact, severed | not exact, carrying | not exact, severed "
              "| carrying, not exact |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, t in tallies:
        x = t["exact_match_vs_load_carrying"]
        lines.append(f"| {name} | {x['valid_grids']} | {x['exact_carrying']} | {x['exact_severed']} | "
                     f"{x['inexact_carrying']} | {x['inexact_severed']} | {x['carrying_not_exact']:.3f} |")
    write_results(args.out, report, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
