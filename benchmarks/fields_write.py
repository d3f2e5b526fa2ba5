"""Benchmark: what writing an optimisation history costs next to the optimisation itself.

At 512x256 (a cantilever: left edge clamped, load at mid-height of the right
edge, volume fraction 0.4) one SIMP run (:func:`sphyr_hpc.optimiser.simp.run_simp`,
``solver="mg"``: CG + geometric multigrid) is run for a few iterations with a
:class:`sphyr_hpc.io.fields.HistoryWriter` (format ``xdmf``, every iteration)
as its callback.  In the same run, for every iteration after the first (whose
time includes the multigrid set-up):

* iteration seconds = time from the end of the previous callback to the start
  of this one: the solve, the sensitivities, the filter and the OC update;
* write seconds = the ``HistoryWriter.write_step`` inside the callback.

The claim checked: write / iteration < 5 % (median over the iterations).
After the run, one ``write_step`` of the final state in each other format
(``xdmf-quad``, ``vtu``) is timed for information.  Each rank count is a
separate ``bin/mpirun -n R`` job.  The 2 cores are shared with other users, so
``os.getloadavg()`` is recorded at the start and end of every job.

Usage (from the repository root)::

    /usr/bin/python3 benchmarks/fields_write.py [--ranks 1 2] [--nelx 512 --nely 256] [--iterations 6]

Results: ``benchmarks/results/fields_write.json`` and ``.md`` (atomic writes).
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

DEFAULT_OUT = os.path.join(REPO_ROOT, "benchmarks", "results", "fields_write.json")
THRESHOLD = 0.05


def worker(args):
    """One job (any number of ranks): time the iterations and the writes; rank 0 writes JSON."""
    import numpy as np

    from sphyr_hpc.core import loadcase as loadcases
    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.io import fields
    from sphyr_hpc.optimiser import simp
    from sphyr_hpc.optimiser.filter import DensityFilter
    from sphyr_hpc.solvers.elasticity import elasticity_system

    PETSc = petsc()
    comm = PETSc.COMM_WORLD
    mpi = comm.tompi4py()
    load_start = os.getloadavg()
    nely, nelx = args.nely, args.nelx
    lc = loadcases.LoadCase(nely, nelx, ((nely // 2, nelx - 1),), tuple((r, 0) for r in range(nely)))
    free, pinned = simp.design_space(lc, np.ones(lc.shape, dtype=bool), np.zeros(lc.shape))
    folder = mpi.bcast(tempfile.mkdtemp(prefix="fields_bench_", dir=args.scratch) if comm.getRank() == 0 else None)
    records = []
    with elasticity_system(lc, comm=comm, solver="mg") as system:
        density_filter = DensityFilter(system)
        writer = fields.HistoryWriter(os.path.join(folder, "history"), system)
        last = [None]

        def callback(iteration, compliance, physical, change):
            mpi.Barrier()
            enter = time.perf_counter()
            writer(iteration, compliance, physical, change)
            mpi.Barrier()
            leave = time.perf_counter()
            records.append({"iteration": iteration,
                            "iteration_seconds": None if last[0] is None else enter - last[0],
                            "write_seconds": leave - enter, "compliance": compliance})
            last[0] = leave

        mpi.Barrier()
        start = time.perf_counter()
        result = simp.run_simp(system, density_filter, 0.4, free, pinned,
                               simp.SimpSettings(max_iterations=args.iterations), callback=callback)
        run_seconds = time.perf_counter() - start
        writer.close()
        others = {}
        for fmt in ("xdmf-quad", "vtu"):
            with fields.HistoryWriter(os.path.join(folder, f"other_{fmt}"), system, fields_format=fmt) as w:
                mpi.Barrier()
                t0 = time.perf_counter()
                w.write_step(1, result.densities, result.compliance)
                mpi.Barrier()
                others[fmt] = time.perf_counter() - t0
        density_filter.close()
        h5_bytes = os.path.getsize(os.path.join(folder, "history.h5")) if comm.getRank() == 0 else 0
    load_end = os.getloadavg()
    if comm.getRank() == 0:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        timed = [r for r in records if r["iteration_seconds"] is not None]
        iteration = statistics.median(r["iteration_seconds"] for r in timed)
        write = statistics.median(r["write_seconds"] for r in timed)
        out = {
            "ranks": comm.getSize(), "nely": nely, "nelx": nelx, "dofs": lc.n_dofs, "solver": "mg",
            "iterations_run": result.iterations, "run_seconds": run_seconds,
            "median_iteration_seconds": iteration, "median_write_seconds": write, "write_fraction": write / iteration,
            "max_write_fraction": max(r["write_seconds"] / r["iteration_seconds"] for r in timed),
            "first_iteration_write_seconds": records[0]["write_seconds"],
            "other_formats_write_seconds": others, "h5_bytes_per_step": h5_bytes / max(len(records), 1),
            "iterations": records, "loadavg_start": load_start, "loadavg_end": load_end,
        }
        with open(args.worker_out, "w") as fh:
            json.dump(out, fh, indent=1)


def markdown(results):
    lines = [
        "# fields_write: HistoryWriter.write_step against one SIMP iteration",
        "",
        f"{results['date']}, {results['machine']['platform']}, {results['machine']['cpus']} CPUs, "
        f"Python {results['machine']['python']}.",
        "",
        results["method"],
        "",
        "| ranks | grid | median iteration s | median write_step s | write / iteration | worst step | "
        "xdmf-quad s | vtu s | MB per step | load avg start / end |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        lines.append(
            f"| {r['ranks']} | {r['nely']}x{r['nelx']} | {r['median_iteration_seconds']:.3f} | "
            f"{r['median_write_seconds']:.4f} | {100 * r['write_fraction']:.2f} % | "
            f"{100 * r['max_write_fraction']:.2f} % | {r['other_formats_write_seconds']['xdmf-quad']:.3f} | "
            f"{r['other_formats_write_seconds']['vtu']:.3f} | {r['h5_bytes_per_step'] / 1e6:.1f} | "
            f"{r['loadavg_start'][0]:.2f} / {r['loadavg_end'][0]:.2f} |")
    verdict = all(r["write_fraction"] < THRESHOLD for r in results["runs"])
    lines += ["", f"Claim: write_step < {100 * THRESHOLD:.0f} % of an iteration: "
                  f"{'met' if verdict else 'NOT met'} on every rank count."]
    return "\n".join(lines) + "\n"


def _atomic(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".fields_write.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--nely", type=int, default=256)
    parser.add_argument("--nelx", type=int, default=512)
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--scratch", default=None, help="folder for the temporary field files (default: /tmp)")
    parser.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args(argv)
    if args.worker_out:
        worker(args)
        return 0
    python = os.path.join(REPO_ROOT, ".venv", "bin", "python")
    python = python if os.path.exists(python) else sys.executable
    runs = []
    for ranks in args.ranks:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
            job_out = tmp.name
        cmd = [os.path.join(REPO_ROOT, "bin", "mpirun"), "-n", str(ranks), python, os.path.abspath(__file__),
               "--worker-out", job_out, "--nely", str(args.nely), "--nelx", str(args.nelx),
               "--iterations", str(args.iterations)] + (["--scratch", args.scratch] if args.scratch else [])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
        subprocess.run(cmd, check=True, cwd=REPO_ROOT, env=env)
        with open(job_out) as fh:
            run = json.load(fh)
        os.unlink(job_out)
        print(f"{ranks} rank(s): iteration {run['median_iteration_seconds']:.3f} s, write_step "
              f"{run['median_write_seconds']:.4f} s = {100 * run['write_fraction']:.2f} % "
              f"(worst {100 * run['max_write_fraction']:.2f} %), load avg {run['loadavg_start'][0]:.2f} -> "
              f"{run['loadavg_end'][0]:.2f}", flush=True)
        runs.append(run)
    results = {
        "benchmark": "fields_write",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "method": ("Median over iterations 2..N of one run_simp (solver mg, HistoryWriter every iteration as its "
                   "callback); iteration = end of the previous callback to the start of this one, write = the "
                   "write_step inside the callback (both between barriers); iteration 1 (multigrid set-up) is "
                   "not timed. Other formats: one write_step of the final state."),
        "threshold": THRESHOLD,
        "runs": runs,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    _atomic(args.out, json.dumps(results, indent=1) + "\n")
    _atomic(os.path.splitext(args.out)[0] + ".md", markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
