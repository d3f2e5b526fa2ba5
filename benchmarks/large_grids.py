"""Benchmark: SIMP with CG + multigrid on large grids, 1 and 2 ranks (the scaling study).

Runs, in one go (from the repository root, serially: it starts mpirun itself)::

    /usr/bin/python3 benchmarks/large_grids.py [--iterations 10] [--sizes ...] [--quick]

1. The scaling study (``python -m sphyr_hpc.scaling``): the MBB preset at
   128x64 ... 2048x1024 elements (and 320x160, the size the published scorer
   was timed at: 2.04 s per SIMP iteration on this machine), on 1 and 2
   ranks, N SIMP iterations each, every run warm-started from a 100-iteration
   design at 128x64 so the timed iterations solve 0/1 designs with voids.
   Each run also measures a 400 MB numpy copy per rank (all ranks at once)
   and the fraction of that bandwidth the MG-CG solve moved, and prints per
   phase (assembly, PC set-up, MG-CG solve, update) the bytes it must move in
   the storage the run used, the bound at the copy bandwidth and measured /
   bound (``sphyr_hpc/optimiser/measure.py``).
2. The multigrid hierarchy PCMG builds on the non-power-of-two grids 300x100
   and 1000x500 (2 ranks): levels, unknowns, nonzeros, operator complexity.
3. MatMult with and without PETSc's inode kernels (the reason the multigrid
   operators use the plain CSR kernel, ``multigrid.USE_INODES``).

Results: ``benchmarks/results/large_grids.json`` (everything),
``benchmarks/results/large_grids.md`` (tables and the must-show checks),
``benchmarks/results/large_grids_scaling.{json,md}`` (the scaling command's
own output) and the plots ``docs/scaling_{time,ksp,speedup}.png``.  The load
average is recorded at the start and end of every run; rerun when it was high.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

RESULTS = os.path.join(REPO, "benchmarks", "results")
DOCS = os.path.join(REPO, "docs")
SIZES = "128x64,256x128,320x160,512x256,1024x512,2048x1024"
PUBLISHED_SECONDS_PER_ITERATION_320x160 = 2.04  # the published scorer's direct-solver SIMP, this machine
TARGET = {"seconds_per_iteration_1024x512_2_ranks": 3.0, "gb_per_million_dofs": 1.5, "efficiency": 0.8,
          "ksp_iterations": 20, "ksp_growth_per_doubling": 2}


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def run_scaling(args):
    from sphyr_hpc import scaling

    out = os.path.join(RESULTS, "large_grids_scaling.json")
    argv = ["--sizes", args.sizes, "--ranks", args.ranks, "--iterations", str(args.iterations),
            "--design-iterations", str(args.design_iterations), "--json", out,
            "--plots", os.path.join(DOCS, "scaling")]
    status = scaling.main(argv)
    with open(out) as fh:
        return status, json.load(fh)


def hierarchy_check(sizes=("300x100", "1000x500"), ranks=2):
    """PCMG's levels on non-power-of-two grids, from a 2-iteration optimize run on ``ranks`` ranks."""
    out = []
    mpirun = [os.path.join(REPO, "bin", "mpirun")]
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "run.json")
            cmd = mpirun + ["-n", str(ranks), sys.executable, "-m", "sphyr_hpc.optimize", "--preset", "mbb",
                            "--size", size, "--iterations", "2", "--solver", "mg", "--quiet", "--json", path]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
            if proc.returncode != 0:
                out.append({"size": size, "error": proc.stdout[-2000:] + proc.stderr[-2000:]})
                continue
            with open(path) as fh:
                data = json.load(fh)
        out.append({"size": size, "ranks": ranks, "hierarchy": data["hierarchy"],
                    "log": [line for line in proc.stdout.splitlines() if "level" in line]})
    return out


def dmda_coarsening_check(sizes=((300, 100), (1000, 500), (1024, 512))):
    """How far PETSc's own DMDA coarsening (DMCoarsen + Q1 DMCreateInterpolation) gets, per size.

    For comparison with sphyr_hpc's hierarchy (hierarchy.hierarchy) and with the
    exact-coarsening level count the package used before (halving while both
    element counts stay even).
    """
    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.solvers import hierarchy

    PETSc = petsc()
    rows = []
    for nelx, nely in sizes:
        da = PETSc.DMDA().create(dim=2, dof=2, sizes=(nelx + 1, nely + 1), stencil_width=1,
                                 stencil_type=PETSc.DMDA.StencilType.BOX, comm=PETSc.COMM_SELF)
        chain, current, error = [(nelx, nely)], da, None
        while len(chain) < hierarchy.MAX_LEVELS:
            try:
                coarse = current.coarsen()
                interp, _ = coarse.createInterpolation(current)
                interp.destroy()
            except PETSc.Error as err:
                error = f"PETSc error {err.ierr} coarsening {chain[-1][0]}x{chain[-1][1]} elements"
                break
            mx, my = coarse.getSizes()[:2]
            chain.append((mx - 1, my - 1))
            current = coarse
            if 2 * mx * my <= hierarchy.COARSE_MAX_DOFS:
                break
        # The level rule sphyr_hpc had before (git 01f32b4, multigrid.mg_levels): the largest
        # count <= 8 with both element counts divisible by 2^(levels-1) and >= 2 on the coarsest.
        levels = 1
        while levels < 8:
            factor = 2**levels
            if nelx % factor or nely % factor or nelx // factor < 2 or nely // factor < 2:
                break
            levels += 1
        exact = [(nelx // 2**i, nely // 2**i) for i in range(levels)]
        ours = hierarchy.hierarchy((nely, nelx))
        rows.append({"size": f"{nelx}x{nely}", "dmda_levels": [f"{a}x{b}" for a, b in chain], "dmda_error": error,
                     "dmda_coarse_dofs": 2 * (chain[-1][0] + 1) * (chain[-1][1] + 1),
                     "even_halving_levels": [f"{a}x{b}" for a, b in exact],
                     "even_halving_coarse_dofs": 2 * (exact[-1][0] + 1) * (exact[-1][1] + 1),
                     "sphyr_levels": [f"{lv.nelx}x{lv.nely}" for lv in ours], "sphyr_coarse_dofs": ours[-1].n_dofs})
    return rows


def inode_check():
    """MatMult of the stiffness matrix with and without PETSc's inode kernels (1 rank)."""
    import numpy as np

    from sphyr_hpc.optimiser import problems
    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.solvers.elasticity import elasticity_system

    PETSc = petsc()
    rows = []
    for nelx, nely in ((256, 128), (1024, 512)):
        lc = problems.preset("mbb", nelx, nely).loadcase()
        # K stored as AIJ (the multigrid default applies the finest level from the moduli: no entries).
        PETSc.Options("bench_inode_").setValue("mat_type", "aij")
        with elasticity_system(lc, comm=PETSc.COMM_SELF, prefix="bench_inode_", solver="mg") as system:
            system.assemble(np.ones(lc.n_elements))
            K = system.K
            x, y = K.createVecRight(), K.createVecLeft()
            x.set(1.0)
            result = {"nelx": nelx, "nely": nely, "rows": K.getSize()[0], "nonzeros": int(K.getInfo()["nz_used"])}
            for use in (True, False):
                K.setOption(PETSc.Mat.Option.USE_INODES, use)
                K.assemble()
                K.mult(x, y)
                reps = max(5, int(2e7 / K.getSize()[0]))
                t0 = time.perf_counter()
                for _ in range(reps):
                    K.mult(x, y)
                result["inode_ms" if use else "plain_ms"] = 1e3 * (time.perf_counter() - t0) / reps
            result["speedup_plain"] = result["inode_ms"] / result["plain_ms"]
            rows.append(result)
    return rows


def checks(entries):
    """The must-show numbers from the scaling entries."""
    ok = {(e["nelx"], e["nely"], e["ranks"]): e for e in entries if "error" not in e}
    out = {}
    e2 = ok.get((1024, 512, 2))
    e1 = ok.get((1024, 512, 1))
    if e2:
        out["seconds_per_iteration_1024x512_2_ranks"] = e2["seconds_per_iteration"]
        out["gb_per_million_dofs_1024x512_2_ranks_all_ranks"] = e2["memory_gb_per_million_dofs"]
        out["gb_per_million_dofs_1024x512_2_ranks_per_rank_max"] = (e2["peak_memory_mb"] / 1024.0
                                                                     / (e2["dofs"] / 1e6))
        if e2.get("bandwidth_fraction") is not None:
            out["bandwidth_fraction_1024x512_2_ranks"] = e2["bandwidth_fraction"]
    if e1 and e2:
        out["efficiency_1024x512_1_to_2_ranks"] = e1["seconds_per_iteration"] / (2 * e2["seconds_per_iteration"])
    big = ok.get((2048, 1024, 2))
    if big:
        out["seconds_per_iteration_2048x1024_2_ranks"] = big["seconds_per_iteration"]
        out["gb_per_million_dofs_2048x1024_2_ranks_all_ranks"] = big["memory_gb_per_million_dofs"]
        if big.get("phases"):
            out["measured_over_bound_2048x1024_2_ranks"] = {k: v["measured_over_bound"]
                                                            for k, v in big["phases"].items()}
    e320 = ok.get((320, 160, 1))
    if e320:
        out["speedup_vs_published_320x160_1_rank"] = (PUBLISHED_SECONDS_PER_ITERATION_320x160
                                                      / e320["seconds_per_iteration"])
    e320b = ok.get((320, 160, 2))
    if e320b:
        out["speedup_vs_published_320x160_2_ranks"] = (PUBLISHED_SECONDS_PER_ITERATION_320x160
                                                       / e320b["seconds_per_iteration"])
    for ranks in (1, 2):
        chain = sorted((e["nelx"], e) for (nx, ny, r), e in ok.items() if r == ranks and nx == 2 * ny
                       and nx in (128, 256, 512, 1024, 2048))
        its = [(nx, e["ksp_iterations"], e["ksp_iterations_max"]) for nx, e in chain]
        out[f"ksp_iterations_by_size_{ranks}_ranks"] = its
        # The first solve of a run starts from zero displacement on the warm-start design.
        out[f"ksp_iterations_cold_by_size_{ranks}_ranks"] = [(nx, e["ksp_iterations_per_solve"][0]) for nx, e in chain]
        if len(its) > 1:
            out[f"ksp_max_growth_per_doubling_{ranks}_ranks"] = max(b[1] - a[1] for a, b in zip(its, its[1:]))
            out[f"ksp_mean_max_{ranks}_ranks"] = max(i[1] for i in its)
    return out


def markdown(report):
    lines = ["# Large grids: SIMP with CG + multigrid, 1 and 2 ranks", "",
             f"Machine: {report['machine']}.  Run: {report['date']}; load average (1, 5, 15 min) at start "
             f"{report['load_average_start']}, at end {report['load_average_end']} (per run in the table).", "",
             "Command: `/usr/bin/python3 benchmarks/large_grids.py " + " ".join(report["argv"]) + "`", ""]
    with open(os.path.join(RESULTS, "large_grids_scaling.md")) as fh:
        table = fh.read().split("\n", 2)[2]
    lines += ["## Scaling (MBB preset, warm-started from a converged 128x64 design)", "", table, ""]
    c = report["checks"]
    lines += ["## Must-show checks", "", "| check | target | measured |", "|---|---|---|"]

    def row(name, target, value, fmt):
        lines.append(f"| {name} | {target} | {fmt.format(value) if value is not None else 'not measured'} |")

    row("s per SIMP iteration, 1024x512, 2 ranks", "<= 3", c.get("seconds_per_iteration_1024x512_2_ranks"), "{:.3f}")
    row("GB per 1M DOFs, 1024x512, 2 ranks (sum of both ranks' peaks)", "<= 1.5",
        c.get("gb_per_million_dofs_1024x512_2_ranks_all_ranks"), "{:.3f}")
    row("GB per 1M DOFs, 1024x512, 2 ranks (largest rank)", "<= 1.5",
        c.get("gb_per_million_dofs_1024x512_2_ranks_per_rank_max"), "{:.3f}")
    row("parallel efficiency 1 -> 2 ranks, 1024x512", ">= 0.80", c.get("efficiency_1024x512_1_to_2_ranks"), "{:.3f}")
    row("s per SIMP iteration, 2048x1024, 2 ranks", "(issue 26: 2.5x faster than 78a41a3)",
        c.get("seconds_per_iteration_2048x1024_2_ranks"), "{:.3f}")
    row("GB per 1M DOFs, 2048x1024, 2 ranks (sum of both ranks' peaks)", "<= 0.6",
        c.get("gb_per_million_dofs_2048x1024_2_ranks_all_ranks"), "{:.3f}")
    ratios = c.get("measured_over_bound_2048x1024_2_ranks")
    row("measured / bound per phase, 2048x1024, 2 ranks", "<= 2 (issue 26)",
        ", ".join(f"{k} {v:.1f}" for k, v in ratios.items() if v) if ratios else None, "{}")
    for ranks in (1, 2):
        its = c.get(f"ksp_iterations_by_size_{ranks}_ranks", [])
        row(f"MG-CG iterations per solve (mean), {ranks} rank(s), 128x64 .. 2048x1024", "<= 20",
            " / ".join(f"{nx}: {m:.1f} (max {mx})" for nx, m, mx in its) or None, "{}")
        row(f"growth per doubling, {ranks} rank(s)", "<= 2",
            c.get(f"ksp_max_growth_per_doubling_{ranks}_ranks"), "{:+.2f}")
        cold = c.get(f"ksp_iterations_cold_by_size_{ranks}_ranks", [])
        row(f"first solve of each run (cold start, u = 0), {ranks} rank(s)", "(reported)",
            " / ".join(f"{nx}: {n}" for nx, n in cold) or None, "{}")
    row("MG-CG MatMult bytes/s over numpy copy bytes/s, 1024x512, 2 ranks", "(reported)",
        c.get("bandwidth_fraction_1024x512_2_ranks"), "{:.0%}")
    row("speed-up over the published scorer at 320x160 (2.04 s/iteration), 1 rank", "(reported)",
        c.get("speedup_vs_published_320x160_1_rank"), "{:.1f}x")
    row("speed-up over the published scorer at 320x160, 2 ranks", "(reported)",
        c.get("speedup_vs_published_320x160_2_ranks"), "{:.1f}x")
    lines += ["", "## Multigrid hierarchy on non-power-of-two grids (2 ranks)", ""]
    for h in report["hierarchy_check"]:
        if "error" in h:
            lines.append(f"- {h['size']}: failed: {h['error'][:200]}")
            continue
        lines.append(f"- {h['size']}: operator complexity {h['hierarchy']['operator_complexity']:.3f}")
        for lv in h["hierarchy"]["levels"]:
            lines.append(f"  - level {lv['level']}: {lv['rows']:,} unknowns, {lv['nonzeros']:,} nonzeros")
    lines += ["", "## Why the hierarchy is built by sphyr_hpc: PETSc's DMDA coarsening on these sizes", "",
              "| grid | DMCoarsen + Q1 interpolation | the previous level rule (halving while even) | sphyr_hpc now |",
              "|---|---|---|---|"]
    for r in report["dmda_coarsening_check"]:
        dmda = " > ".join(r["dmda_levels"]) + (f", then {r['dmda_error']}" if r["dmda_error"] else "")
        lines.append(f"| {r['size']} | {dmda} | {' > '.join(r['even_halving_levels'])} "
                     f"(coarse LU {r['even_halving_coarse_dofs']:,} DOFs) | {' > '.join(r['sphyr_levels'])} "
                     f"(coarse LU {r['sphyr_coarse_dofs']:,} DOFs) |")
    lines += ["", "## PETSc inode kernels vs plain CSR (MatMult of K, 1 rank)", "",
              "| grid | rows | nonzeros | inode ms | plain ms | plain speed-up |", "|---|---|---|---|---|---|"]
    for r in report["inode_check"]:
        lines.append(f"| {r['nelx']}x{r['nely']} | {r['rows']:,} | {r['nonzeros']:,} | {r['inode_ms']:.2f} | "
                     f"{r['plain_ms']:.2f} | {r['speedup_plain']:.2f}x |")
    lines += ["", "Notes: seconds per iteration and the event columns are means over the iterations after the "
              "first (which also builds the symbolic Galerkin products), max over ranks; memory is the peak RSS "
              "(ru_maxrss) of each rank, measured before the bandwidth test; the bandwidth fraction counts the "
              "bytes of the MatMults of one MG-CG iteration (matrix + x + y; W-cycle visits; vector updates and "
              "coarse solves not counted, so it is a lower bound) times the iterations, over the solve time, "
              "divided by the aggregate numpy copy bandwidth (read + write) of all ranks copying 400 MB at once."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default=SIZES)
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--design-iterations", type=int, default=100)
    p.add_argument("--quick", action="store_true", help="small sizes only (a smoke test)")
    p.add_argument("--scaling-json", help="the scaling study's JSON of an earlier run of this benchmark "
                                          "(benchmarks/results/large_grids_scaling.json): the checks and the "
                                          "report without running the study again")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.iterations, args.design_iterations = "128x64,256x128", 3, 20
    os.makedirs(RESULTS, exist_ok=True)
    os.makedirs(DOCS, exist_ok=True)
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
                         f"Python {platform.python_version()}",
              "argv": argv, "load_average_start": [round(v, 2) for v in os.getloadavg()]}
    if args.scaling_json:
        with open(args.scaling_json) as fh:
            status, entries = 0, json.load(fh)
    else:
        status, entries = run_scaling(args)
    report["scaling"] = entries
    report["hierarchy_check"] = hierarchy_check()
    report["dmda_coarsening_check"] = dmda_coarsening_check()
    report["inode_check"] = inode_check()
    report["checks"] = checks(entries)
    report["targets"] = TARGET
    report["load_average_end"] = [round(v, 2) for v in os.getloadavg()]
    _write(os.path.join(RESULTS, "large_grids.json"), json.dumps(report, indent=1) + "\n")
    text = markdown(report)
    _write(os.path.join(RESULTS, "large_grids.md"), text)
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
