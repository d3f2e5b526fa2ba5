"""Benchmark: the large-grid SIMP iteration of this tree against an older checkout, interleaved, one run.

    /usr/bin/python3 benchmarks/large_grids_side_by_side.py --old /work/old-large [--size 2048x1024]
        [--ranks 2] [--rounds 2] [--iterations 6] [--big 4096x2048 --big-iterations 5]

1. One design for every run: the MBB preset optimised 100 iterations at 128x64
   (this tree), so the timed iterations solve 0/1 designs with voids (as the
   scaling study does).
2. ``--rounds`` rounds at ``--size`` on ``--ranks`` ranks, old and new
   alternating (the order swapped every round): ``python -m sphyr_hpc.optimize
   --bandwidth --json``, each tree with its own ``.venv``.  Recorded: seconds
   per iteration and per phase (means after the first iteration, max over
   ranks), KSP iterations, peak RSS per rank, GB per 1M DOFs (sum of the
   ranks' peaks), the copy bandwidth, and for the new tree the bytes each
   phase must move and measured / bound (``sphyr_hpc/optimiser/measure.py``).
3. ``--variant LABEL:OPTIONS``: this tree with other options in every round, after that
   round's old and new runs (a lever measured against the run beside it).
4. ``--big``: this tree alone, ``--big-iterations`` iterations, after checking
   that the machine has the memory free (0.75 GB per 1M DOFs a run needs
   here, with room to spare; skipped with a note otherwise).

Results: ``benchmarks/results/large_grids_side_by_side.{json,md}``.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results")


def available_gb():
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable"):
                return int(line.split()[1]) / 2**20
    return 0.0


def run(tree, size, ranks, iterations, design, workdir, label, extra=()):
    out = os.path.join(workdir, f"{label}.json")
    cmd = [os.path.join(tree, "bin", "mpirun"), "-n", str(ranks), os.path.join(tree, ".venv", "bin", "python"),
           "-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", size, "--iterations", str(iterations),
           "--tolerance", "0", "--continuation", "none", "--solver", "mg", "--initial", design, "--bandwidth",
           "--quiet", "--json", out, *extra]
    print("$ " + " ".join(cmd), flush=True)
    load = os.getloadavg()
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    wall = time.perf_counter() - started
    print(proc.stdout[-1500:], flush=True)
    if proc.returncode != 0 or not os.path.exists(out):
        return {"label": label, "error": (proc.stdout + proc.stderr)[-3000:]}
    with open(out) as fh:
        data = json.load(fh)
    s = data["summary"]
    memory = s["peak_memory_mb_per_rank"]
    entry = {"label": label, "tree": tree, "size": size, "ranks": ranks, "dofs": data["dofs"],
             "options": list(extra), "seconds_per_iteration": s["seconds"],
             "phase_seconds": {k: s[f"sphyr_{k}_seconds"] for k in ("assembly", "setup", "solve", "update")},
             "ksp_iterations": s["ksp_iterations_mean"], "bisection_passes": s.get("bisection_passes_mean"),
             "ksp_iterations_per_solve":
                 [h["ksp_iterations"] for h in data["history"]],
             "compliance_history": [h["compliance"] for h in data["history"]],
             "peak_memory_mb_per_rank": memory, "gb_per_million_dofs": sum(memory) / 1024 / (data["dofs"] / 1e6),
             "wall_seconds": wall, "load_average_start": list(load), "load_average_end": list(os.getloadavg())}
    b = data.get("bandwidth") or {}
    entry["copy_gb_per_second"] = (b.get("copy_bytes_per_second") or 0.0) / 1e9
    entry["copy_samples_gb_per_second"] = [r / 1e9 for r in b.get("copy_samples_bytes_per_second") or []]
    if b.get("phases"):
        entry["phases"] = b["phases"]
    return entry


def _copy(entry):
    """The copy bandwidth of a run: the median and range of its samples where the tree takes several."""
    samples = entry.get("copy_samples_gb_per_second") or []
    if len(samples) > 1:
        return f"{entry['copy_gb_per_second']:.1f} ({min(samples):.1f}-{max(samples):.1f})"
    return f"{entry['copy_gb_per_second']:.1f}"


def markdown(report):
    lines = ["# Large grids side by side: this tree against " + report["old"], "",
             f"Run {report['date']}; command `/usr/bin/python3 benchmarks/large_grids_side_by_side.py "
             + " ".join(report["argv"]) + "`.  MBB preset, warm-started from a 100-iteration 128x64 design; means "
             "over the iterations after the first, max over ranks; memory: peak RSS per rank; copy GB/s: all ranks "
             "copying 400 MB at once after the run, the median (range) of 9 measurements where the tree takes "
             "them (the bound divides by it), else one.", "",
             "| run | size | ranks | s/iteration | assembly | setup | solve | update | KSP its | peak MB/rank | "
             "GB per 1M DOFs | copy GB/s | load start/end |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in report["runs"]:
        if "error" in e:
            lines.append(f"| {e['label']} | failed: {e['error'][-200:]!r} |" + " |" * 11)
            continue
        p = e["phase_seconds"]
        lines.append(f"| {e['label']} | {e['size']} | {e['ranks']} | {e['seconds_per_iteration']:.3f} | "
                     f"{p['assembly']:.3f} | {p['setup']:.3f} | {p['solve']:.3f} | {p['update']:.3f} | "
                     f"{e['ksp_iterations']:.2f} | {' / '.join(f'{m:.0f}' for m in e['peak_memory_mb_per_rank'])} | "
                     f"{e['gb_per_million_dofs']:.3f} | {_copy(e)} | "
                     f"{e['load_average_start'][0]:.2f}/{e['load_average_end'][0]:.2f} |")
    lines += ["", "## Bytes each phase must move, the bound at the copy bandwidth, measured / bound", "",
              "| run | phase | GB | bound s | measured s | measured / bound |", "|---|---|---|---|---|---|"]
    for e in report["runs"]:
        for name, p in (e.get("phases") or {}).items():
            ratio = f"{p['measured_over_bound']:.2f}" if p.get("measured_over_bound") else "-"
            lines.append(f"| {e['label']} | {name} | {p['bytes'] / 1e9:.2f} | {p['bound_seconds']:.3f} | "
                         f"{p['seconds']:.3f} | {ratio} |")
    if report.get("speedup"):
        lines += ["", "## Old / new seconds per iteration, round by round", "",
                  " / ".join(f"{v:.2f}x" for v in report["speedup"]) + f" (median {report['speedup_median']:.2f}x)"]
    if report.get("big_note"):
        lines += ["", report["big_note"]]
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", required=True, help="the older checkout (with bin/mpirun and .venv)")
    p.add_argument("--size", default="2048x1024")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--variant", action="append", default=[], metavar="LABEL:OPTIONS",
                   help="a run of this tree with PETSc options in every round, e.g. 'v-cycles:-sphyr_pc_mg_cycle_type v' (repeatable)")
    p.add_argument("--big", help="a size run on this tree alone after the side-by-side (e.g. 4096x2048)")
    p.add_argument("--big-iterations", type=int, default=5)
    p.add_argument("--out", default=os.path.join(RESULTS, "large_grids_side_by_side"))
    args = p.parse_args(argv)
    report = {"old": args.old, "new": REPO, "argv": argv, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
              "runs": []}
    with tempfile.TemporaryDirectory(prefix="sphyr_side_") as workdir:
        design = os.path.join(workdir, "design.npy")
        subprocess.run([os.path.join(REPO, ".venv", "bin", "python"), "-m", "sphyr_hpc.optimize", "--preset", "mbb",
                        "--size", "128x64", "--iterations", "100", "--quiet", "--save-density", design],
                       cwd=REPO, check=True)
        speedup = []
        for r in range(args.rounds):
            order = [("old", args.old), ("new", REPO)]
            if r % 2:
                order.reverse()
            got = {}
            for name, tree in order:
                got[name] = run(tree, args.size, args.ranks, args.iterations, design, workdir, f"{name} round {r + 1}")
                report["runs"].append(got[name])
            if "error" not in got["old"] and "error" not in got["new"]:
                speedup.append(got["old"]["seconds_per_iteration"] / got["new"]["seconds_per_iteration"])
            for variant in args.variant:  # every round, beside the new tree's run of the same round
                label, _, options = variant.partition(":")
                report["runs"].append(run(REPO, args.size, args.ranks, args.iterations, design, workdir,
                                          f"new, {label}, round {r + 1}", options.split()))
        report["speedup"] = speedup
        report["speedup_median"] = statistics.median(speedup) if speedup else None
        if args.big:
            nelx, nely = (int(v) for v in args.big.split("x"))
            need = 0.75 * 2 * (nelx + 1) * (nely + 1) / 1e6
            free = available_gb()
            if free < need + 2.0:
                report["big_note"] = f"{args.big}: not run, {free:.1f} GB available, {need:.1f} GB needed (+2 spare)"
            else:
                report["big_note"] = f"{args.big}: {free:.1f} GB available before the run"
                report["runs"].append(run(REPO, args.big, args.ranks, args.big_iterations, design, workdir,
                                          f"new {args.big}"))
    with open(args.out + ".json", "w") as fh:
        json.dump(report, fh, indent=1)
    with open(args.out + ".md", "w") as fh:
        fh.write(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
