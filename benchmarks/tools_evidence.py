"""The Inspect task with tools, measured: what issue 51 must show.

1. A scripted mockllm/model (benchmarks/_mock_eval.py, through Inspect's ``eval()``) on all of
   v1/full_easy with ``-T tools=simulate -T max_tool_calls=1``: it calls simulate on its first
   answer (the ground truth, the empty grid or prose, by index), then answers (the ground truth
   where the tool said the load path is severed).  Every tool result against ``score``'s row of the
   same grid (compliance, load_carrying, volume_fraction).
2. The same samples without tools, end to end with this checkout and with the old one (OLD, its
   own .venv): the logs' prompts, and ``score --inspect-log``'s results.jsonl and summary.json,
   compared byte for byte (filecmp, not shallow); the old checkout also scores the new log.
3. Both runs scored together: the printed table, summary.json's ``tools`` and report.html, with a
   headless Chromium screenshot of report.html's "With tools" section.
4. ms per simulate call on every 10x10 (v1) and 20x20 (v2_20) record, called directly on three grids
   of each (split by whether the call's load case is new: its system is built then); and
   the time the calls of run 1 took, as the log holds it (each simulate call timed by the tool) and as
   Inspect's working time (which also holds the time other samples' scoring held the event loop).

    .venv/bin/python benchmarks/tools_evidence.py --old /work/old-tools

Results: ``benchmarks/results/tools/`` (tools_evidence.{json,md}, the logs, the scored folder
``both/`` with report.html, ``report_tools.png``).
"""

import argparse
import filecmp
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, commit_of, machine, machine_line, now, write_results

from inspect_ai.log import read_eval_log

from sphyr_hpc.jobs.simulate import simulate_grid
from sphyr_hpc.reporting.html import screenshot

OUT = ROOT / "benchmarks" / "results" / "tools"
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}


def run(cmd, cwd=ROOT, ok=(0,)):
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=1800)
    if done.returncode not in ok:
        sys.exit(f"{' '.join(map(str, cmd))}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


def mock_eval(checkout, log_dir, *tools):
    python = Path(checkout) / ".venv" / "bin" / "python"
    return Path(run([python, ROOT / "benchmarks" / "_mock_eval.py", checkout, log_dir, *tools]).stdout.split()[-1])


def score(checkout, out, *logs):
    python = Path(checkout) / ".venv" / "bin" / "python"
    return run([python, "-m", "sphyr_hpc.score", "--inspect-log", *logs, "--out", out, "--no-store", "--quiet"],
               cwd=checkout)


def rows_of(folder):
    return [json.loads(line) for line in (Path(folder) / "results.jsonl").read_text().splitlines()]


def tool_results(log):
    """{sample id: [(call arguments, result)]} of a log."""
    found = {}
    for sample in log.samples:
        calls = {c.id: c.arguments for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])}
        found[sample.id] = [(calls[m.tool_call_id], json.loads(m.text)) for m in sample.messages if m.role == "tool"]
    return found


def compare_compliance(tools_log, plain_rows):
    rows = {r["index"]: r for r in plain_rows}
    checked = finite = agree = 0
    worst = 0.0
    for index, results in tool_results(tools_log).items():
        for _, result in results:
            row = rows[index]
            checked += 1
            same = result["load_carrying"] == row["load_carrying"]
            if row["compliance"] is None:
                same &= result["compliance"] is None
            else:
                finite += 1
                rel = abs(result["compliance"] - row["compliance"]) / abs(row["compliance"])
                worst = max(worst, rel)
                same &= rel <= 1e-9 and math.isclose(result["volume_fraction"], row["volume_fraction"], rel_tol=1e-12)
            agree += same
    return {"calls": checked, "finite_compliance": finite, "agree_1e-9": agree, "max_relative_difference": worst}


def working_ms(log):
    """Inspect's mean working time of a log's tool calls, in ms."""
    times = [e.working_time for s in log.samples for e in s.events if e.event == "tool" and e.working_time is not None]
    return 1e3 * statistics.fmean(times) if times else None


def time_calls(folder):
    """ms of simulate calls on every record of ``folder``: its ground truth, its masked cells all 1 and all
    0.  A load case's first call builds its system (the records of a folder share a few load cases)."""
    seen, new, known = set(), [], []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            masked = record["input_grid"]
            grids = ["\n".join(" ".join(row) for row in record["ground_truth"]),
                     "\n".join(" ".join("1" if c == "V" else c for c in row) for row in masked),
                     "\n".join(" ".join("0" if c == "V" else c for c in row) for row in masked)]
            for grid in grids:
                case = tuple((i, j, c) for i, row in enumerate(grid.split("\n")) for j, c in enumerate(row.split())
                             if c in "LS")
                start = time.perf_counter()
                simulate_grid(grid, masked, store=None)
                (known if case in seen else new).append(1e3 * (time.perf_counter() - start))
                seen.add(case)
    return {"records": sum(1 for p in folder.glob("*.jsonl") for _ in p.read_text().splitlines()),
            "load_cases": len(new), **{name: {"calls": len(t), "median": statistics.median(t),
                                               "mean": statistics.fmean(t), "max": max(t)}
                                        for name, t in (("new_load_case_ms", new), ("known_load_case_ms", known))}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True, help="a checkout of the commit before tools, with its own .venv")
    args = parser.parse_args()
    load = os.getloadavg()
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "logs").mkdir(parents=True)
    work = OUT / "work"
    report = {"date": now(), "commit": commit_of(), "old_commit": commit_of(Path(args.old))}

    # 1. with simulate; 2. without, new and old
    tools_log = read_eval_log(str(mock_eval(ROOT, OUT / "logs" / "tools", "simulate", "1")))
    plain_new = mock_eval(ROOT, OUT / "logs" / "plain")
    plain_old = mock_eval(args.old, work / "plain-old")
    score(ROOT, work / "plain-new", plain_new)
    score(args.old, work / "plain-old", plain_old)
    score(args.old, work / "plain-new-by-old", plain_new)
    new_log, old_log = read_eval_log(str(plain_new)), read_eval_log(str(plain_old))
    report["with_simulate"] = {"status": tools_log.status, "samples": len(tools_log.samples),
                               "tools": tools_log.eval.metadata.get("sphyr_hpc_tools"),
                               **compare_compliance(tools_log, rows_of(work / "plain-new"))}
    same = {}
    for name in ("results.jsonl", "summary.json"):
        same[name] = {"new_vs_old": filecmp.cmp(work / "plain-new" / name, work / "plain-old" / name, shallow=False),
                      "new_log_scored_by_old": filecmp.cmp(work / "plain-new" / name, work / "plain-new-by-old" / name,
                                                           shallow=False)}
    same["prompts"] = [s.input for s in new_log.samples] == [s.input for s in old_log.samples]
    same["scores"] = [s.scores["topology_score"].value for s in new_log.samples] == \
        [s.scores["topology_score"].value for s in old_log.samples]
    report["without_tools"] = {"status": new_log.status, "samples": len(new_log.samples),
                               "records": len(rows_of(work / "plain-new")), "identical": same}

    # 3. together
    both = score(ROOT, OUT / "both", tools_log.location, plain_new)
    (OUT / "both" / "score_stdout.txt").write_text(both.stdout)
    (OUT / "both" / ".sphyr_hpc.lock").unlink(missing_ok=True)  # the output folder's lock: not a result
    summary = json.loads((OUT / "both" / "summary.json").read_text())
    report["together"] = summary["tools"]
    screenshot(OUT / "both" / "report.html", OUT / "report_tools.png", height=1500)

    # 4. ms per call
    report["simulate_ms"] = {"10x10": time_calls(ROOT / "examples" / "data" / "v1"),
                             "20x20": time_calls(ROOT / "examples" / "data" / "v2_20"),
                             "inspect_working_time_ms_per_call": working_ms(tools_log)}
    shutil.rmtree(work)
    report["machine"] = machine(load)
    write_results(OUT / "tools_evidence.json", report, markdown(report))
    print(markdown(report))


def markdown(r):
    w, p, t = r["with_simulate"], r["without_tools"], r["together"]["runs"][0]
    ms = r["simulate_ms"]
    lines = [f"# The Inspect task with tools ({r['date']}, commit {r['commit']}, old {r['old_commit']})", "",
             "    .venv/bin/python benchmarks/tools_evidence.py --old OLD_CHECKOUT", "",
             machine_line(r["machine"]), "",
             "## With simulate (scripted mockllm/model, v1/full_easy, max_tool_calls=1)", "",
             f"status {w['status']}, {w['samples']} samples, tools {w['tools']}: {w['calls']} calls; "
             f"{w['agree_1e-9']} results agree with score's row of the same grid (compliance to 1e-9, "
             f"load_carrying, volume_fraction), {w['finite_compliance']} of them with a finite compliance; "
             f"largest relative compliance difference {w['max_relative_difference']:.3g}.", "",
             "## Without tools: this checkout against the old one", "",
             f"status {p['status']}, {p['samples']} samples, {p['records']} records."]
    for name in ("results.jsonl", "summary.json"):
        same = p["identical"][name]
        lines.append(f"- {name}: new run = old run byte for byte: {same['new_vs_old']}; the new log scored by the old "
                     f"checkout = by this one: {same['new_log_scored_by_old']}")
    lines += [f"- prompts equal: {p['identical']['prompts']}; Inspect scores equal: {p['identical']['scores']}", "",
              "## Both scored together (both/score_stdout.txt, both/report.html, report_tools.png)", "",
              f"{t['with_tools']} minus {t['model']}: {t['delta']['difference']:+.4f}, 95 % interval "
              f"[{t['delta']['ci95'][0]:+.4f}, {t['delta']['ci95'][1]:+.4f}] over {t['delta']['samples']} samples; "
              f"calls per sample {t['calls']['mean']:.2f}, share calling {t['calls']['share_calling']:.2f}, "
              f"{t['calls']['ms_per_call']:.2f} ms per call (timed by the tool), "
              f"{r['simulate_ms']['inspect_working_time_ms_per_call']:.2f} ms by Inspect's working time.", "",
              "## ms per simulate call (direct, store none)", "",
              "Each record's ground truth, its masked cells all 1 and all 0 (3 calls a record). A load case's first "
              "call builds its system; later calls on it reuse it.", "",
              "| grid | records | calls on a new load case: n, median ms (mean, max) | calls on a known one: n, median "
              "ms (mean, max) |", "|---|---|---|---|"]
    for size in ("10x10", "20x20"):
        m = ms[size]
        f, k = m["new_load_case_ms"], m["known_load_case_ms"]
        lines.append(f"| {size} | {m['records']} | {f['calls']}, {f['median']:.2f} ({f['mean']:.2f}, {f['max']:.1f}) | "
                     f"{k['calls']}, {k['median']:.2f} ({k['mean']:.2f}, {k['max']:.1f}) |")
    lines += ["", "The first call of the process also starts PETSc (the 10x10 new-load-case max); the 20x20 runs after "
              "it, in the same process."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
