"""What one SIMP solve costs at SPhyR's sizes, and how many a yardstick needs (a benchmark, not a test).

A yardstick (docs/scoring.md, "Yardstick") factorises K once per SIMP iteration.  This measures, on
the machine at hand and side by side in one run:

1. the numeric factorisation + triangular solves of a real SIMP stiffness
   matrix (the ground truth of the first full_easy sample, moduli of a random
   design) on 10x10 (242 DOFs) and 20x20 (882 DOFs), for every LU/Cholesky
   PETSc offers here (its own, with four orderings; MUMPS, SuperLU, KLU,
   UMFPACK, CHOLMOD), the symbolic factorisation reused as the scorer does;
2. the dense LAPACK Cholesky of the condensed systems of
   :mod:`sphyr_hpc.solvers.condensed` (k = 44: one row or column of 10x10,
   80: ten scattered cells, 132: three rows);
3. the SIMP iterations a yardstick of each v2_20 full sample really runs
   (``sphyr_hpc.score``'s own optimiser), and so the time its factorisations
   alone need with the fastest factorisation of (1), against the 20x target
   (7.6 s / 20 = 0.38 s per 20x20 full sample).

The upscaled 40x40 and 60x60 samples measure K's Cholesky with nested
dissection alone, for how its cost grows.

    /usr/bin/python3 benchmarks/factorisation.py [--repeats 300]

Results: ``benchmarks/results/factorisation.{json,md}``.
"""

import argparse
import json
import os
import time

from _common import ROOT, machine, machine_line, now, write_results

import numpy as np

from sphyr_hpc.core import discretisation as fe
from sphyr_hpc.core import loadcase as loadcases
from sphyr_hpc.runtime.petsc import petsc

DATA = ROOT / "examples" / "data"  # the SPhyR dataset prefixes the repository ships
TARGET_20X20_FULL = 7.6 / 20
CHOICES = [("petsc", "lu", o) for o in ("nd", "qmd", "natural", "rcm")] + \
          [("petsc", "cholesky", o) for o in ("nd", "qmd")] + \
          [("mumps", "lu", "nd"), ("mumps", "cholesky", "nd"), ("superlu", "lu", "nd"), ("klu", "lu", "nd"),
           ("umfpack", "lu", "nd"), ("cholmod", "cholesky", "nd")]


def stiffness(version, scale=1):
    """The direct system (K, PETSc AIJ on its own CSR arrays; f) of the first full_easy sample of
    ``version``, each cell upscaled to ``scale`` x ``scale`` cells, assembled for a random design."""
    from sphyr_hpc.solvers.elasticity import elasticity_system

    PETSc = petsc()
    record = json.loads((DATA / version / "full_easy.jsonl").read_text().splitlines()[0])
    truth = [[c for c in row for _ in range(scale)] for row in record["ground_truth"] for _ in range(scale)]
    lc = loadcases.from_grid(truth)
    system = elasticity_system(lc, comm=PETSc.COMM_SELF, solver="direct", prefix="factorisation_")
    rho = np.random.default_rng(0).random(lc.shape)
    system.assemble(system.slab_of(fe.simp_modulus(rho)))
    return system


def time_factorisation(system, package, kind, ordering, repeats):
    PETSc = system.PETSc
    K, f = system.K, system.f
    ksp = PETSc.KSP().create(PETSc.COMM_SELF)
    ksp.setOperators(K)
    ksp.setType("preonly")
    pc = ksp.getPC()
    pc.setType(kind)
    if package != "petsc":
        pc.setFactorSolverType(package)
    pc.setFactorOrdering(ordering)
    u = f.duplicate()
    try:
        ksp.setUp()
        ksp.solve(f, u)
    except PETSc.Error:
        ksp.destroy()
        return None
    started = time.perf_counter()
    for _ in range(repeats):
        K.stateIncrease()  # new values: a numeric factorisation, the symbolic one reused
        ksp.setOperators(K)
        ksp.setUp()
    factor = (time.perf_counter() - started) / repeats
    started = time.perf_counter()
    for _ in range(repeats):
        ksp.solve(f, u)
    solve = (time.perf_counter() - started) / repeats
    r = f.duplicate()
    system.K.mult(u, r)
    r.axpy(-1.0, f)
    residual = r.norm() / f.norm()
    ksp.destroy()
    return {"package": package, "matrix": "aij", "kind": kind, "ordering": ordering,
            "factor_us": round(factor * 1e6, 1),
            "solve_us": round(solve * 1e6, 1), "relative_residual": float(f"{residual:.1e}")}


def time_dense_cholesky(k, repeats):
    from scipy.linalg import lapack

    from sphyr_hpc.solvers.condensed import one_blas_thread

    one_blas_thread()
    rng = np.random.default_rng(k)
    A = rng.random((k, k))
    S = A @ A.T + k * np.eye(k)
    g = rng.random(k)
    started = time.perf_counter()
    for _ in range(repeats):
        factor, _ = lapack.dpotrf(S, lower=False, clean=True)
        lapack.dpotrs(factor, g, lower=False)
    return round((time.perf_counter() - started) / repeats * 1e6, 1)


def yardstick_iterations():
    """SIMP iterations of each v2_20 full sample's yardstick (the scorer's optimiser)."""
    from sphyr_hpc.scoring.scorer import Scorer
    from sphyr_hpc.optimiser import simp

    counts = []
    original = simp.run_simp

    def counting(*args, **kwargs):
        result = original(*args, **kwargs)
        counts[-1] += result.iterations + 1  # + the final solve at the run's penalty
        return result

    simp.run_simp = counting
    out = []
    try:
        scorer = Scorer()
        for line in (DATA / "v2_20" / "full_easy.jsonl").read_text().splitlines():
            record = json.loads(line)
            counts.append(0)
            started = time.perf_counter()
            scorer.score(record["ground_truth"], record["ground_truth"], record["input_grid"])
            out.append({"index": record["index"], "simp_solves": counts[-1],
                        "scoring_seconds": round(time.perf_counter() - started, 3)})
        scorer.close()
    finally:
        simp.run_simp = original
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "factorisation.json"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    sizes = {}
    for version, scale, label in (("v1", 1, "10x10"), ("v2_20", 1, "20x20"), ("v1", 4, "40x40"), ("v1", 6, "60x60")):
        system = stiffness(version, scale)
        rows = []
        choices = CHOICES if scale == 1 else [("petsc", "cholesky", "nd")]  # upscaled: the crossover only
        for package, kind, ordering in choices:
            row = time_factorisation(system, package, kind, ordering, max(10, args.repeats // scale ** 2))
            if row is not None:
                rows.append(row)
                print(label, json.dumps(row), flush=True)
        sizes[label] = {"dofs": system.loadcase.n_dofs, "nonzeros": system.K.getInfo()["nz_used"], "solvers": rows}
        system.close()
    dense = {k: time_dense_cholesky(k, args.repeats) for k in (44, 80, 132, 198)}
    iterations = yardstick_iterations()
    fastest = min(sizes["20x20"]["solvers"], key=lambda r: r["factor_us"] + r["solve_us"])
    per_solve = (fastest["factor_us"] + fastest["solve_us"]) * 1e-6
    for row in iterations:
        row["factorisation_floor_seconds"] = round(row["simp_solves"] * per_solve, 3)
    report = {
        "benchmark": "factorisation",
        "date": now(),
        "machine": machine(load_before),
        "sizes": sizes,
        "dense_cholesky_us": dense,
        "v2_20_full_yardsticks": iterations,
        "fastest_20x20": fastest,
        "target_seconds_per_20x20_full_sample": TARGET_20X20_FULL,
    }
    write_results(args.out, report, _markdown(report))
    print(_markdown(report))


def _markdown(report):
    m = report["machine"]
    lines = [f"# factorisation ({report['date']})", "",
             machine_line(m),
             "", "Numeric factorisation (symbolic reused) and triangular solves of one SIMP stiffness matrix, "
             "microseconds, mean of the repeats.", ""]
    for label, size in report["sizes"].items():
        lines += [f"## {label}: {size['dofs']} DOFs, {int(size['nonzeros'])} nonzeros", "",
                  "| package | matrix | factorisation | ordering | factor us | solve us | relative residual |",
                  "|---|---|---|---|---:|---:|---:|"]
        for r in sorted(size["solvers"], key=lambda r: r["factor_us"] + r["solve_us"]):
            lines.append(f"| {r['package']} | {r['matrix']} | {r['kind']} | {r['ordering']} | {r['factor_us']} | {r['solve_us']} | "
                         f"{r['relative_residual']:.0e} |")
        lines.append("")
    lines += ["## Dense Cholesky of a condensed system (LAPACK dpotrf + dpotrs, one thread)", "",
              "| k | us |", "|---:|---:|"]
    lines += [f"| {k} | {us} |" for k, us in report["dense_cholesky_us"].items()]
    f = report["fastest_20x20"]
    lines += ["", "## v2_20 full samples: SIMP solves per yardstick against the 20x target", "",
              f"Fastest 20x20 factorisation + solve above: {f['package']} {f['kind']} ({f['matrix']}, {f['ordering']}), "
              f"{f['factor_us'] + f['solve_us']:.0f} us. Target: {report['target_seconds_per_20x20_full_sample']:.2f} s "
              "per sample (7.6 s / 20).", "",
              "| sample | SIMP solves | their factorisations alone (s) | whole scoring now (s) |",
              "|---:|---:|---:|---:|"]
    for r in report["v2_20_full_yardsticks"]:
        lines.append(f"| {r['index']} | {r['simp_solves']} | {r['factorisation_floor_seconds']} | "
                     f"{r['scoring_seconds']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
