"""This machine's Debian stack beside another release's (``bin/test-stack RELEASE``), the same commit.

Two questions, answered on one machine in interleaved runs (the order swapped every round):

1. Parity (SPEC 11): ``score --no-store`` of the bundled examples and of the v2_20 result folders
   ``score_throughput.py`` builds from ``examples/data/v2_20`` (a ground-truth and a random model),
   on 1 and 2 ranks, here and in the RELEASE root; every record of the other stack is checked
   against this one's with :func:`sphyr_hpc.parity.differences` (the parity rules), and counted
   byte-identical or not.
2. Speed: the wall time of those scoring runs, and seconds per SIMP iteration of a large grid
   (``optimize --preset mbb --size SIZE --solver mg`` on 2 ranks, warm-started from one
   100-iteration 128x64 design made here), as ratios other stack / this stack.

The RELEASE side runs the committed HEAD in the root's clone (``bin/test-stack RELEASE -- CMD``);
this side runs the working tree's ``.venv`` (commit it first for a same-commit comparison).
Needs root, as ``bin/test-stack`` does.

    /usr/bin/python3 benchmarks/stacks_side_by_side.py [--release trixie] [--rounds 3] [--ranks 1,2]
        [--sets bundled,v2_20] [--size 1024x512] [--iterations 6]

Results: ``benchmarks/results/stacks_side_by_side.{json,md}``.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, commit_of, machine, machine_line, now, write_results
from score_throughput import build_results

from sphyr_hpc.io.jsonl import read_rows
from sphyr_hpc.io.results_log import row_key
from sphyr_hpc.parity import differences

STACK_WORK = "/tmp/sphyr_stacks"  # inside the other root


def _stack(release, command):
    """Run ``command`` (a shell line) in the RELEASE root's clone; (seconds, completed process)."""
    started = time.perf_counter()
    done = subprocess.run([str(ROOT / "bin" / "test-stack"), release, "--", command], cwd=ROOT,
                          capture_output=True, text=True)
    return time.perf_counter() - started, done


def _here(argv):
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - started, done


def _versions_here():
    code = ("import sys, numpy, mpi4py, threadpoolctl; from sphyr_hpc.runtime.petsc import petsc; "
            "b = [i for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas'];"
            "print(sys.version.split()[0], numpy.__version__, '.'.join(map(str, petsc().Sys.getVersion())), "
            "mpi4py.MPI.Get_library_version().split(',')[0], b[0].get('internal_api') + ' ' + "
            "str(b[0].get('version')) + ' ' + str(b[0].get('architecture')) if b else 'none')")
    return code


def _score_command(prefix, ranks, inputs, out):
    return [*prefix, "bin/mpirun", "-n", str(ranks), ".venv/bin/python", "-m", "sphyr_hpc.score", *inputs,
            "--no-store", "--quiet", "--overwrite", "--out", out]


def _compare(here_log, there_log):
    mine, _ = read_rows(here_log)
    theirs, _ = read_rows(there_log)
    mine = {row_key(r): r for r in mine}
    theirs = {row_key(r): r for r in theirs}
    outside = {}
    for key, row in mine.items():
        if key not in theirs:
            outside[str(key)] = ["missing on the other stack"]
            continue
        why = differences(theirs[key], row)
        if why:
            outside[str(key)] = why
    identical = sum(1 for k, r in mine.items() if k in theirs and json.dumps(theirs[k], sort_keys=True)
                    == json.dumps(r, sort_keys=True))
    return {"records": len(mine), "other_records": len(theirs), "outside_spec_11": len(outside),
            "identical_rows": identical, "examples_outside": dict(list(outside.items())[:5])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", default="trixie")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--sets", default="bundled,v2_20")
    parser.add_argument("--size", default="1024x512")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "stacks_side_by_side"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    root = Path(subprocess.run([str(ROOT / "bin" / "test-stack"), args.release, "--root"], check=True,
                               capture_output=True, text=True).stdout.strip())
    there = root / STACK_WORK.lstrip("/")
    shutil.rmtree(there, ignore_errors=True)
    there.mkdir(parents=True)
    here = Path(STACK_WORK + "-here")
    shutil.rmtree(here, ignore_errors=True)
    here.mkdir(parents=True)
    # The clone in the root set up (once), and both stacks' versions.
    _, done = _stack(args.release, "true")
    if done.returncode:
        raise SystemExit(f"bin/test-stack {args.release} failed:\n{done.stderr[-3000:]}")
    probe = _versions_here()
    versions = {"here": _here([".venv/bin/python", "-c", probe])[1].stdout.strip(),
                "there": _stack(args.release, f'.venv/bin/python -c "{probe}"')[1].stdout.strip()}
    print(versions, flush=True)
    inputs = {"bundled": ([], [])}
    if "v2_20" in args.sets.split(","):
        build_results(ROOT / "examples" / "data" / "v2_20", here / "v2_20")
        shutil.copytree(here / "v2_20", there / "v2_20")
        inputs["v2_20"] = ([str(here / "v2_20")], [f"{STACK_WORK}/v2_20"])
    parity, scoring = [], []
    for name in args.sets.split(","):
        for ranks in (int(r) for r in args.ranks.split(",")):
            times = {"here": [], "there": []}
            for r in range(args.rounds):
                tag = f"{name}-{ranks}"
                runs = [("here", lambda: _here(_score_command([], ranks, inputs[name][0], str(here / tag)))),
                        ("there", lambda: _stack(args.release, " ".join(
                            _score_command([], ranks, inputs[name][1], f"{STACK_WORK}/{tag}"))))]
                for label, run in (runs if r % 2 == 0 else runs[::-1]):
                    seconds, done = run()
                    if done.returncode not in (0, 1):
                        raise SystemExit(f"{label} {tag} exited {done.returncode}:\n{done.stderr[-3000:]}")
                    times[label].append(seconds)
            row = {"set": name, "ranks": ranks, **_compare(here / tag / "results.jsonl", there / tag / "results.jsonl")}
            parity.append(row)
            scoring.append({"set": name, "ranks": ranks, "here_seconds": times["here"], "there_seconds": times["there"],
                            "there_over_here": statistics.median(t / h for t, h in zip(times["there"], times["here"]))})
            print(row, scoring[-1], flush=True)
    # A large grid: one design made here, the same file given to both.
    design = here / "design.npy"
    _, done = _here([".venv/bin/python", "-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", "128x64",
                     "--iterations", "100", "--quiet", "--save-density", str(design)])
    large = []
    if done.returncode or not design.exists():
        print(f"no design for the large grid ({done.stderr[-500:]}); large grids skipped", flush=True)
    else:
        shutil.copy(design, there / "design.npy")
        for r in range(args.rounds):
            def opt(prefix, folder, label):
                cmd = ["bin/mpirun", "-n", "2", ".venv/bin/python", "-m", "sphyr_hpc.optimize", "--preset", "mbb",
                       "--size", args.size, "--iterations", str(args.iterations), "--tolerance", "0",
                       "--continuation", "none", "--solver", "mg", "--initial", f"{folder}/design.npy", "--quiet",
                       "--json", f"{folder}/large-{label}-{r}.json"]
                return cmd
            runs = [("here", lambda: _here(opt([], str(here), "here"))),
                    ("there", lambda: _stack(args.release, " ".join(opt([], STACK_WORK, "there"))))]
            entry = {"round": r}
            for label, run in (runs if r % 2 == 0 else runs[::-1]):
                _, done = run()
                path = (here if label == "here" else there) / f"large-{label}-{r}.json"
                if done.returncode or not path.exists():
                    entry[label] = {"error": (done.stdout + done.stderr)[-1500:]}
                    continue
                s = json.loads(path.read_text())["summary"]
                entry[label] = {"seconds_per_iteration": s["seconds"], "ksp_iterations": s["ksp_iterations_mean"],
                                "phase_seconds": {k: s[f"sphyr_{k}_seconds"] for k in ("assembly", "setup", "solve",
                                                                                       "update")}}
            if "error" not in entry.get("here", {}) and "error" not in entry.get("there", {}):
                entry["there_over_here"] = entry["there"]["seconds_per_iteration"] / entry["here"]["seconds_per_iteration"]
            large.append(entry)
            print(entry, flush=True)
    report = {"benchmark": "stacks_side_by_side", "date": now(), "machine": machine(load_before),
              "commit_here": commit_of(ROOT), "release": args.release, "versions": versions, "argv": sys.argv[1:],
              "parity": parity, "scoring": scoring, "large": large}
    write_results(args.out + ".json", report, markdown(report))
    print(markdown(report))
    return 0 if all(p["outside_spec_11"] == 0 for p in parity) else 1


def markdown(report):
    lines = [f"# This machine's stack beside Debian's {report['release']}, the same commit", "",
             f"Run {report['date']}, commit {report['commit_here']}; `/usr/bin/python3 benchmarks/stacks_side_by_side.py "
             + " ".join(report["argv"]) + "`. " + machine_line(report["machine"]), "",
             f"- this stack: {report['versions']['here']}",
             f"- {report['release']}: {report['versions']['there']}", "",
             "(Python, NumPy, PETSc, MPI, BLAS as the process loaded it.)", "",
             "## Parity (SPEC 11): every record of the other stack against this one's", "",
             "| set | ranks | records | outside SPEC 11 | rows byte-identical |", "|---|---|---|---|---|"]
    for p in report["parity"]:
        lines.append(f"| {p['set']} | {p['ranks']} | {p['records']} | {p['outside_spec_11']} | {p['identical_rows']} |")
    lines += ["", "## Scoring, whole commands (`score --no-store`), interleaved", "",
              "| set | ranks | this stack s | other stack s | other / this (median of the rounds) |", "|---|---|---|---|---|"]
    for s in report["scoring"]:
        lines.append(f"| {s['set']} | {s['ranks']} | {' '.join(f'{t:.1f}' for t in s['here_seconds'])} | "
                     f"{' '.join(f'{t:.1f}' for t in s['there_seconds'])} | {s['there_over_here']:.2f} |")
    if report["large"]:
        lines += ["", "## A large grid on 2 ranks: seconds per SIMP iteration (after the first)", "",
                  "| round | this stack s/it | other stack s/it | other / this | KSP its this / other |",
                  "|---|---|---|---|---|"]
        for e in report["large"]:
            h, t = e.get("here", {}), e.get("there", {})
            if "error" in h or "error" in t:
                lines.append(f"| {e['round']} | {'failed' if 'error' in h else h['seconds_per_iteration']} | "
                             f"{'failed' if 'error' in t else t['seconds_per_iteration']} | - | - |")
                continue
            lines.append(f"| {e['round']} | {h['seconds_per_iteration']:.3f} | {t['seconds_per_iteration']:.3f} | "
                         f"{e['there_over_here']:.2f} | {h['ksp_iterations']:.1f} / {t['ksp_iterations']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
