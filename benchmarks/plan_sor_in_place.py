"""Benchmark: the one-rank SOR multigrid (the yardsticks' SIMP systems) with its finest level assembled in
place and the coarse operators from ElementGalerkin, against the plan's other stored path (K an AIJ on
the DMDA in 2x2 element blocks, the coarse operators from GridGalerkin), interleaved in one process.

    .venv/bin/python benchmarks/plan_sor_in_place.py [--size 256x128] [--rounds 5] [--solves 20]

Each round, for each path in turn (the order swapped every round): a SIMP system as the yardsticks make
it (``sizing.simp_system_arguments``), ``--solves`` solves of a sequence of random designs (densities 0.3-1; assembly,
set-up and solve timed together), and its compliances.  Results: ``benchmarks/results/plan/sor_in_place_<size>.md``.
"""

import argparse
import dataclasses
import os
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results", "plan")


def stored(plan_module, make_plan):
    """``make_plan`` with the in-place finest level replaced by the DMDA's AIJ and GridGalerkin."""
    def made(*args, **kwargs):
        plan = make_plan(*args, **kwargs)
        if plan.coarse_operators != "element":
            return plan
        finest = dataclasses.replace(plan.levels[0], storage=plan_module.AIJ)
        return dataclasses.replace(plan, levels=(finest, *plan.levels[1:]), coarse_operators="grid")
    return made


def run(lc, designs, prefix):
    from sphyr_hpc.solvers import sizing
    from sphyr_hpc.solvers.elasticity import elasticity_system

    with elasticity_system(lc, prefix=prefix, **sizing.simp_system_arguments()) as system:
        start = time.perf_counter()
        out = [system.solve(system.slab_of(m)) for m in designs]
        seconds = time.perf_counter() - start
        return seconds, out, system.method.plan.finest.storage, system.method.plan.coarse_operators


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="256x128")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--solves", type=int, default=20)
    args = p.parse_args(argv)
    from sphyr_hpc.core import discretisation as fe
    from sphyr_hpc.optimiser import problems
    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.solvers import plan as mgplan

    petsc()
    nelx, nely = (int(v) for v in args.size.split("x"))
    lc = problems.preset("mbb", nelx, nely).loadcase()
    rng = np.random.default_rng(1)
    designs = []
    for _ in range(args.solves):
        designs.append(fe.simp_modulus(rng.uniform(0.3, 1.0, lc.shape)))
    original = mgplan.make_plan
    times = {"in place": [], "dmda": []}
    compliances = {}
    kinds = {}
    for r in range(args.rounds):
        order = ["in place", "dmda"] if r % 2 == 0 else ["dmda", "in place"]
        for name in order:
            mgplan.make_plan = original if name == "in place" else stored(mgplan, original)
            try:
                seconds, out, storage, coarse = run(lc, designs, f"bench_{name.replace(' ', '_')}_{r}_")
            finally:
                mgplan.make_plan = original
            times[name].append(seconds / args.solves)
            compliances[name] = out
            kinds[name] = f"{storage}, {coarse} Galerkin"
    worst = max(abs(a - b) / abs(a) for a, b in zip(compliances["in place"], compliances["dmda"]))
    load = os.getloadavg()
    lines = [f"# One-rank SOR multigrid: K in place + ElementGalerkin against DMDA AIJ + GridGalerkin", "",
             f"`.venv/bin/python benchmarks/plan_sor_in_place.py {' '.join(argv or sys.argv[1:])}`; MBB {args.size}, "
             f"{args.solves} solves of random designs a round, {args.rounds} rounds interleaved; load average at "
             f"the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 cores).", "",
             "| path | storage | ms a solve (median) | rounds |", "|---|---|---|---|"]
    for name in ("in place", "dmda"):
        lines.append(f"| {name} | {kinds[name]} | {1e3 * statistics.median(times[name]):.1f} | "
                     + ", ".join(f"{1e3 * t:.1f}" for t in times[name]) + " |")
    lines += ["", f"Largest relative compliance difference between the paths: {worst:.2e}; dmda / in place "
                  f"(median): {statistics.median(times['dmda']) / statistics.median(times['in place']):.2f}."]
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"sor_in_place_{args.size}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
