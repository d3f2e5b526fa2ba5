"""Per-solve cost of the direct and the multigrid solver inside SIMP, by size: the crossover
behind ``sphyr_hpc.solvers.sizing.MG_MIN_DOFS`` (a benchmark, not a test).

For the first v1 full_easy sample upscaled to each size (full mask), it records
the element moduli of the first ``--iterations`` iterations of a SIMP run
(p = 3, the scorer's optimiser), then replays that sequence of solves on

* ``direct``: the scorer's exact system (PETSc Cholesky, nested dissection,
  refactorised every solve, K assembled in place);
* ``mg``: the multigrid system ``sizing.simp_system`` makes (CG + geometric
  multigrid, warm-started from the previous solve of the sequence),

interleaved, ``--repeats`` times; the fastest replay counts.  Seconds are CPU
seconds of this process (``time.process_time``: less sensitive than wall time
to other jobs on a shared machine).  Results:
``benchmarks/results/solver_crossover.{json,md}``.

    .venv/bin/python benchmarks/solver_crossover.py [--scales 2,3,4,5,6,8,12,16] [--iterations 30]
"""

import argparse
import json
import os
import time

from _common import ROOT, SPHYR_DATA, machine, machine_line, now, write_results

import numpy as np

from sphyr_hpc.core import discretisation as fe
from sphyr_hpc.core import grid as grids
from sphyr_hpc.core import loadcase as loadcases
from sphyr_hpc.runtime.petsc import petsc
from sphyr_hpc.optimiser import simp
from sphyr_hpc.optimiser.filter import DensityFilter
from sphyr_hpc.solvers import sizing
from sphyr_hpc.solvers.condensed import one_blas_thread
from sphyr_hpc.solvers.elasticity import elasticity_system

DATA = SPHYR_DATA


def upscaled_truth(k):
    record = json.loads((DATA / "v1" / "full_easy.jsonl").read_text().splitlines()[0])
    return [[c for c in row for _ in range(k)] for row in record["ground_truth"] for _ in range(k)]


def moduli_sequence(lc, truth, iterations):
    rho, _ = grids.densities(truth)
    rho[lc.structural_mask()] = 1.0
    free = ~lc.structural_mask()
    seen = []
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system:
        filt = DensityFilter(system)
        simp.run_simp(system, filt, float(rho.mean()), free, rho, simp.SimpSettings(max_iterations=iterations),
                      callback=lambda it, c, physical, change: seen.append(fe.simp_modulus(physical, fe.PENAL)))
        filt.close()
    return seen


def replay(system, sequence):
    system.reset()
    started = time.process_time()
    compliances = [system.solve(m) for m in sequence]
    return (time.process_time() - started) / len(sequence), compliances


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--scales", default="2,3,4,5,6,8,12,16", help="upscale factors of the 10x10 sample")
    parser.add_argument("--iterations", type=int, default=30, help="SIMP iterations replayed per size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "solver_crossover.json"))
    args = parser.parse_args(argv)
    one_blas_thread()
    load_before = os.getloadavg()
    entries = []
    for k in (int(s) for s in args.scales.split(",")):
        truth = upscaled_truth(k)
        lc = loadcases.from_grid(truth)
        sequence = moduli_sequence(lc, truth, args.iterations)
        best = {"direct": np.inf, "mg": np.inf}
        with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as direct, \
                sizing.simp_system(direct) as mg:
            iterations = []
            for _ in range(args.repeats):
                seconds, exact = replay(direct, sequence)
                best["direct"] = min(best["direct"], seconds)
                mg.reset()
                started = time.process_time()
                approx = []
                for m in sequence:
                    approx.append(mg.solve(m))
                    iterations.append(mg.last_iterations)
                best["mg"] = min(best["mg"], (time.process_time() - started) / len(sequence))
            worst = max(abs(a - b) / b for a, b in zip(approx, exact))
            levels = len(getattr(mg.method, "levels", [None]))
        entry = {"grid": f"{lc.nelx}x{lc.nely}", "cells": lc.n_elements, "dofs": lc.n_dofs,
                 "direct_ms": round(1e3 * best["direct"], 2), "mg_ms": round(1e3 * best["mg"], 2),
                 "mg_over_direct": round(best["mg"] / best["direct"], 3), "mg_levels": levels,
                 "mg_cg_iterations_mean": round(float(np.mean(iterations)), 2),
                 "largest_relative_compliance_difference": float(f"{worst:.2g}")}
        entries.append(entry)
        print(json.dumps(entry), flush=True)
    faster = [e for e in entries if e["mg_ms"] < e["direct_ms"]]
    crossover = None
    for i, e in enumerate(entries):  # the first size from which multigrid stays the faster
        if all(x["mg_ms"] < x["direct_ms"] for x in entries[i:]):
            crossover = e
            break
    report = {
        "benchmark": "solver_crossover", "date": now(), "machine": machine(load_before),
        "iterations": args.iterations, "repeats": args.repeats,
        "note": ("per solve inside SIMP (assembly, set-up for the new moduli, solve, residual check), CPU ms, the "
                 "fastest of the interleaved replays; mg is sizing.simp_system's CG + multigrid, rtol "
                 f"{sizing.SIMP_RTOL:g}, warm-started along the sequence"),
        "entries": entries,
        "crossover": crossover and {"grid": crossover["grid"], "dofs": crossover["dofs"]},
        "mg_faster_at": [e["grid"] for e in faster],
        "MG_MIN_DOFS_in_code": sizing.MG_MIN_DOFS,
    }
    write_results(args.out, report, _markdown(report))


def _markdown(report):
    m = report["machine"]
    lines = [f"# solver_crossover ({report['date']})", "",
             machine_line(m), "",
             f"{report['note']}; {report['iterations']} SIMP iterations of the first v1 full_easy sample upscaled, "
             f"{report['repeats']} replays.", "",
             "| grid | cells | DOFs | direct ms | mg ms | mg / direct | mg levels | CG its | max rel. diff. |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for e in report["entries"]:
        lines.append(f"| {e['grid']} | {e['cells']} | {e['dofs']} | {e['direct_ms']} | {e['mg_ms']} | "
                     f"{e['mg_over_direct']} | {e['mg_levels']} | {e['mg_cg_iterations_mean']} | "
                     f"{e['largest_relative_compliance_difference']} |")
    lines += ["", f"Crossover (multigrid faster from here on): {report['crossover']}; "
              f"MG_MIN_DOFS in the code: {report['MG_MIN_DOFS_in_code']}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
