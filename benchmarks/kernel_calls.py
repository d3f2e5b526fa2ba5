"""Benchmark: the cost of calling a C kernel, and of a SIMP iteration, this tree against an older one.

    /usr/bin/python3 benchmarks/kernel_calls.py --old /work/old-kernels [--rounds 3] [--size 1024x512]
        [--iterations 10]

Each tree runs with its own ``.venv`` (its kernels built in its own folder by its ``bin/setup``), old
and new alternating, the order swapped every round.

1. Nanoseconds a call of two small kernels, through the package's own handle on them
   (``sphyr_hpc.solvers.fused.vector_kernels()``, the same function in both trees): ``cg_direction``
   over 8 values (no result) and ``cg_residual`` over 8 values (a double back), with the arrays'
   addresses taken once, and with ``array.ctypes.data`` taken at each call as the solvers' call
   sites do.  The best of 5 repeats of 200000 calls.
2. Seconds per iteration of ``python -m sphyr_hpc.optimize --preset mbb --size SIZE --iterations
   N`` on one rank (the mean after the first iteration, as the command prints it), its KSP
   iterations a solve and its final compliance.

The load average is recorded before and after every run.  Results:
``benchmarks/results/kernel_calls.{json,md}``.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from _common import ROOT, commit_of, machine, machine_line, write_text_atomic

RESULTS = ROOT / "benchmarks" / "results"

CALLS = r"""
import json, timeit
import numpy as np
from sphyr_hpc.solvers.fused import vector_kernels
first, residual, direction = vector_kernels()
r, w, dinv, p = (np.full(8, v) for v in (1.0, 0.5, 0.25, 0.0))
ar, aw, ad, ap = r.ctypes.data, w.ctypes.data, dinv.ctypes.data, p.ctypes.data
cases = {
    "cg_direction, addresses taken once": "direction(8, 0.5, ar, ad, ap)",
    "cg_residual, addresses taken once": "residual(8, 0.0, ar, aw, ad)",
    "cg_direction, array.ctypes.data at each call": "direction(8, 0.5, r.ctypes.data, dinv.ctypes.data, p.ctypes.data)",
}
n = 200000
print(json.dumps({k: min(timeit.repeat(s, number=n, repeat=5, globals=globals())) / n * 1e9 for k, s in cases.items()}))
"""


def calls(tree):
    done = subprocess.run([os.path.join(tree, ".venv", "bin", "python"), "-c", CALLS], cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=900, check=True)
    return json.loads(done.stdout)


def optimize(tree, size, iterations):
    load = os.getloadavg()
    done = subprocess.run([os.path.join(tree, ".venv", "bin", "python"), "-m", "sphyr_hpc.optimize", "--preset", "mbb",
                           "--size", size, "--iterations", str(iterations)],
                          cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=3600, check=True)
    last = re.search(r"stopped after \d+ iterations: compliance (\S+).*?mean (\S+) s/iteration.*?(\S+) KSP "
                     r"iterations/solve", done.stdout)
    return {"compliance": float(last.group(1)), "s_per_iteration": float(last.group(2)),
            "ksp_per_solve": float(last.group(3)), "loadavg_before": load, "loadavg_after": os.getloadavg()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the older checkout, with its own .venv (bin/setup)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="1024x512")
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    trees = {"old": os.path.abspath(args.old), "new": str(ROOT)}
    for label, tree in trees.items():
        if not os.access(os.path.join(tree, ".venv", "bin", "python"), os.X_OK):
            parser.error(f"{tree} has no .venv: run its bin/setup first")
    load = os.getloadavg()
    rounds = []
    for k in range(args.rounds):
        order = ("old", "new") if k % 2 == 0 else ("new", "old")
        this = {label: {"calls_ns": calls(trees[label])} for label in order}
        for label in order:
            this[label]["optimize"] = optimize(trees[label], args.size, args.iterations)
            print(f"round {k + 1} {label}: {json.dumps(this[label])}", file=sys.stderr, flush=True)
        rounds.append(this)
    result = {"old": {"tree": trees["old"], "commit": commit_of(trees["old"])},
              "new": {"tree": trees["new"], "commit": commit_of()},
              "size": args.size, "iterations": args.iterations, "rounds": rounds, "machine": machine(load)}
    cases = list(rounds[0]["old"]["calls_ns"])
    lines = [f"# The cost of a kernel call: ctypes ({result['old']['commit']}) against cffi from kernels.h "
             f"({result['new']['commit']})", "",
             f"`/usr/bin/python3 benchmarks/kernel_calls.py --old {args.old} --rounds {args.rounds} --size {args.size} "
             f"--iterations {args.iterations}`; old and new alternating, {args.rounds} rounds. "
             + machine_line(result["machine"]), "",
             "| ns a call (median of the rounds) | old | new | new / old |", "|---|---|---|---|"]
    for case in cases:
        old, new = (statistics.median(r[side]["calls_ns"][case] for r in rounds) for side in ("old", "new"))
        lines.append(f"| {case} | {old:.0f} | {new:.0f} | {new / old:.2f} |")
    lines += ["", f"`python -m sphyr_hpc.optimize --preset mbb --size {args.size} --iterations {args.iterations}`, "
              "one rank, each round:", "",
              "| round | old s/iteration | new s/iteration | new / old | KSP/solve old, new | compliance old, new "
              "| load before (old, new) |", "|---|---|---|---|---|---|---|"]
    for k, r in enumerate(rounds, 1):
        o, n = r["old"]["optimize"], r["new"]["optimize"]
        lines.append(f"| {k} | {o['s_per_iteration']:.3f} | {n['s_per_iteration']:.3f} | "
                     f"{n['s_per_iteration'] / o['s_per_iteration']:.3f} | {o['ksp_per_solve']}, {n['ksp_per_solve']} "
                     f"| {o['compliance']:.9e}, {n['compliance']:.9e} | {o['loadavg_before'][0]:.1f}, "
                     f"{n['loadavg_before'][0]:.1f} |")
    old, new = (statistics.median(r[side]["optimize"]["s_per_iteration"] for r in rounds) for side in ("old", "new"))
    lines += ["", f"Median s/iteration: old {old:.3f}, new {new:.3f}, new / old {new / old:.3f}.", ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_text_atomic(RESULTS / "kernel_calls.json", json.dumps(result, indent=1) + "\n")
    write_text_atomic(RESULTS / "kernel_calls.md", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
