"""The MBB 300x100 preset on multigrid, this tree against an older checkout: final compliance and design.

    /usr/bin/python3 benchmarks/mbb_300x100_side_by_side.py --old DIR [--ranks 2] [--iterations 400]
        [--out benchmarks/results/mbb_300x100_side_by_side]

Runs ``python -m sphyr_hpc.optimize --preset mbb --size 300x100 --radius 4 --solver mg`` in each
tree (its own ``bin/mpirun`` and ``.venv``), one after the other, and compares the final
compliances, the designs cell by cell and the compliance histories.  A correctness run: timings
are not compared.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results")


def run(tree, ranks, iterations, workdir, label):
    stem = os.path.join(workdir, label)
    command = [os.path.join(tree, "bin", "mpirun"), "-n", str(ranks), os.path.join(tree, ".venv", "bin", "python"),
               "-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", "300x100", "--iterations", str(iterations),
               "--radius", "4", "--solver", "mg", "--json", stem + ".json", "--save-density", stem + ".npy",
               "--quiet"]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, cwd=tree, check=True)
    with open(stem + ".json") as f:
        out = json.load(f)
    shown = ["bin/mpirun", "-n", str(ranks), ".venv/bin/python"] + command[4:]
    return out, np.load(stem + ".npy"), " ".join(shown).replace(stem, "...")


def compare(old, new):
    (o, od, _), (n, nd, _) = old, new
    co, cn = o["history"], n["history"]
    steps = min(len(co), len(cn))
    history = max(abs(a["compliance"] - b["compliance"]) / abs(a["compliance"]) for a, b in zip(co[:steps], cn[:steps]))
    diff = np.abs(nd - od)
    return {"compliance_old": o["compliance"], "compliance_new": n["compliance"],
            "relative_difference": (n["compliance"] - o["compliance"]) / o["compliance"],
            "iterations_old": len(co), "iterations_new": len(cn),
            "ksp_iterations_old": sum(h["ksp_iterations"] for h in co),
            "ksp_iterations_new": sum(h["ksp_iterations"] for h in cn),
            "design_max_difference": float(diff.max()), "design_mean_difference": float(diff.mean()),
            "cells_over_1e-6": int((diff > 1e-6).sum()), "history_max_relative_difference": history}


def markdown(result, old_tree, command):
    r = result
    return "\n".join([
        f"# MBB 300x100 preset: this tree against {old_tree} ({r['ranks']} ranks)", "",
        f"Command (each tree with its own .venv): `{command}`", "",
        "| | old | new |", "|---|---|---|",
        f"| final compliance | {r['compliance_old']!r} | {r['compliance_new']!r} |",
        f"| SIMP iterations | {r['iterations_old']} | {r['iterations_new']} |",
        f"| MG-CG iterations, all solves | {r['ksp_iterations_old']} | {r['ksp_iterations_new']} |", "",
        f"Final compliance: relative difference {r['relative_difference']:.2e}.  Design: largest |difference| "
        f"of a cell {r['design_max_difference']:.2e} (mean {r['design_mean_difference']:.1e}; "
        f"{r['cells_over_1e-6']} cells differ by more than 1e-6); compliance history: largest relative "
        f"difference {r['history_max_relative_difference']:.1e} over the iterations.", ""])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="the older checkout (with bin/mpirun and .venv)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--iterations", type=int, default=400)
    p.add_argument("--out", default=os.path.join(RESULTS, "mbb_300x100_side_by_side"))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sphyr_mbb_") as workdir:
        old = run(os.path.abspath(args.old), args.ranks, args.iterations, workdir, "old")
        new = run(REPO, args.ranks, args.iterations, workdir, "new")
    result = {**compare(old, new), "ranks": args.ranks, "old": os.path.abspath(args.old)}
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    text = markdown(result, os.path.basename(os.path.abspath(args.old)), new[2])
    with open(args.out + ".md", "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
