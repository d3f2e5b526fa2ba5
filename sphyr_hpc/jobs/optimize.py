"""What ``python -m sphyr_hpc.optimize`` runs: one problem optimised over all ranks, then its outputs.

:func:`run` loads the problem, runs :func:`~sphyr_hpc.optimiser.driver.optimise`
(PETSc options that no solver of the run would read are a usage error before it starts,
:func:`~sphyr_hpc.solvers.probe.check_options`),
measures the bandwidth if asked, and writes what the options ask for
(``--png``, ``--save-density``, ``--json``) on rank 0.
"""

import os

import numpy as np
from mpi4py import MPI

from ..io.atomic import write_json_atomic
from ..optimiser.driver import copy_bandwidth, mg_cg_bytes_per_iteration, optimise, rank0_logger, run_summary
from ..optimiser.measure import bounds, phase_bytes
from ..optimiser.problems import ProblemError
from ..reporting.density import problem_markers, save_png
from ..reporting.html import plural
from ..runtime.petsc import PREFIX, OptionsError, explain_petsc_error, petsc
from ..runtime.process import Interrupted, UsageError
from ..solvers.base import SolverError
from ..solvers.elasticity import default_solver
from ..solvers.layout import PartitionError
from ..solvers.probe import check_options, grid_for
from .optimize_settings import checkpoint_of, density_path, ground_truth_of, load_problem

FAILED_STATUS = 1


def run(args, comm, petsc_args=()):
    """The exit status of one optimisation on the PETSc communicator ``comm`` (collective);
    ``args.settings``: the run's settings, checked by the command (:func:`~.optimize_settings.run_settings`)."""
    mpi = comm.tompi4py()
    try:
        problem = load_problem(args)
        truth = ground_truth_of(args, problem)
        initial = np.load(args.initial) if args.initial else None
        checkpoint = checkpoint_of(args, problem, rank0_logger(mpi))
    except (ProblemError, OSError, ValueError) as err:
        raise UsageError(str(err)) from None
    solver = args.settings.solver or default_solver(2 * (problem.nelx + 1) * (problem.nely + 1))
    check_options(PREFIX, [(grid_for(solver), {"prefix": PREFIX, "solver": solver})], comm=mpi)
    load_start = list(os.getloadavg())
    if mpi.rank == 0:
        print(f"load average at start: {' '.join(f'{v:.2f}' for v in load_start)}", flush=True)
    try:
        out = _optimise(args, comm, problem, truth, initial, checkpoint)
    except Interrupted as err:  # every rank here at once (a safe point): the design so far written, then the interrupt
        if getattr(err, "outcome", None) is not None:
            _finish(args, problem, err.outcome, mpi, petsc_args, load_start)
        raise
    except PartitionError as err:
        raise UsageError(str(err)) from None
    except SolverError as err:
        rank0_logger(mpi)(f"error: the solve failed: {err}")
        return FAILED_STATUS
    _finish(args, problem, out, mpi, petsc_args, load_start)
    ok = np.isfinite(out["compliance"])
    return 0 if ok else FAILED_STATUS


def _finish(args, problem, out, mpi, petsc_args, load_start):
    """The summary and the outputs of a run that ended or was interrupted (collective)."""
    out["summary"] = run_summary(out, mpi)
    _measure_bandwidth(out, mpi)
    out["load_average_start"] = load_start
    out["load_average_end"] = list(os.getloadavg())
    density = out.pop("density")
    out["petsc_options"] = list(petsc_args)
    if mpi.rank == 0:
        _report(args, problem, out, density)
        if out.get("interrupted"):  # named in the interrupt's message (sphyr_hpc.optimize)
            args.written_on_interrupt = [path for path in (args.png, args.save_density and density_path(args.save_density),
                                                           args.json) if path]


def _optimise(args, comm, problem, truth, initial, checkpoint):
    """:func:`optimise` with the command's options; a PETSc error before the first iteration has
    ended is a value PETSc rejects, an :class:`OptionsError`."""
    mpi = comm.tompi4py()
    log = rank0_logger(mpi)
    quiet_log = rank0_logger(mpi, args.quiet)

    def iteration_log(line):
        if line.startswith(("it ", "checkpoint:")):
            quiet_log(line)
        else:
            log(line)

    started = []

    def first_iteration_ended(iteration, system, physical, compliance, change):
        started.append(iteration)

    try:
        return optimise(problem, args.settings, comm=comm, initial=initial, log=iteration_log, truth=truth,
                        keep_system=args.bandwidth, callback=first_iteration_ended, checkpoint=checkpoint)
    except petsc().Error as err:
        if started:
            raise
        raise OptionsError(f"PETSc rejected an option: {explain_petsc_error(err)}") from None


def _measure_bandwidth(out, mpi):
    """With ``--bandwidth`` (the run kept its system): the copy bandwidth and the MG-CG solve's share."""
    system = out.pop("system", None)
    if system is None:
        return
    summary = out["summary"]
    try:
        bytes_per_it = mg_cg_bytes_per_iteration(system)
        phases = phase_bytes(system, summary["ksp_iterations_mean"], out.get("free_cells", system.loadcase.n_elements),
                             bisection_passes=summary.get("bisection_passes_mean") or None)
        if phases is not None:  # the model's count (storage of every level, vector passes)
            bytes_per_it = phases["mg_cg_iteration"]
    finally:
        system.close()
    bandwidth, samples = copy_bandwidth(mpi)
    solve_total = mpi.allreduce(sum(h["sphyr_solve_seconds"] for h in out["history"][1:]), op=MPI.MAX)
    its_total = sum(h["ksp_iterations"] for h in out["history"][1:])
    achieved = bytes_per_it * its_total / solve_total if bytes_per_it and solve_total > 0 else None
    out["bandwidth"] = {"copy_bytes_per_second": bandwidth, "copy_samples_bytes_per_second": samples,
                        "mg_cg_bytes_per_iteration": bytes_per_it,
                        "mg_cg_bytes_per_second": achieved,
                        "fraction_of_copy": achieved / bandwidth if achieved else None}
    if phases is not None:
        seconds = {name: summary[f"sphyr_{name}_seconds"] for name in ("assembly", "setup", "solve", "update")}
        seconds["iteration"] = summary["seconds"]
        out["bandwidth"]["phases"] = bounds(phases, seconds, bandwidth)
        out["bandwidth"]["mg_cg_iteration_bytes_model"] = phases["mg_cg_iteration"]


def _report(args, problem, out, density):
    """The result line and the outputs the options ask for (rank 0)."""
    summary = out["summary"]
    status = "interrupted" if out.get("interrupted") else "converged" if out["converged"] else "stopped"
    # The iteration lines show each design before its update; the result is the design after the
    # last update, analysed once more at the final penalty: hence a compliance of its own.  The
    # 88-line code's update reports its last iteration's analysis instead, as the listing does, and
    # so does an interrupted run (the design written is its last update's).
    analysed = ("the last iteration's analysis, as the 88-line code reports it" if out["update"] == "oc88"
                else "the last iteration's analysis" if out.get("interrupted")
                else f"the final design, analysed at p = {args.penal:g}")
    print(f"{status} after {plural(out['iterations'], 'iteration')}: compliance {out['compliance']:.6e} ({analysed}), volume "
          f"{out['volume_fraction']:.4f}; mean {summary['seconds']:.3f} s/iteration (after the first), "
          f"{summary['ksp_iterations_mean']:.1f} KSP iterations/solve, peak memory "
          f"{max(summary['peak_memory_mb_per_rank']):.0f} MB/rank", flush=True)
    if "bandwidth" in out and out["bandwidth"]["fraction_of_copy"]:
        b = out["bandwidth"]
        rates = [r / 1e9 for r in b["copy_samples_bytes_per_second"]]
        print(f"bandwidth: numpy copy {b['copy_bytes_per_second'] / 1e9:.1f} GB/s (median of {len(rates)}, "
              f"{min(rates):.1f}-{max(rates):.1f}), MG-CG MatMults "
              f"{b['mg_cg_bytes_per_second'] / 1e9:.1f} GB/s ({100 * b['fraction_of_copy']:.0f}%)", flush=True)
    for name, p in out.get("bandwidth", {}).get("phases", {}).items():
        print(f"  {name:9s} {p['bytes'] / 1e9:8.2f} GB  bound {p['bound_seconds']:.3f} s  measured "
              f"{p['seconds']:.3f} s  measured/bound {p['measured_over_bound']:.1f}", flush=True)
    if args.png:
        title = (f"{problem.name} {problem.nelx}x{problem.nely}, c = {out['compliance']:.4g}, "
                 f"vf = {out['volume_fraction']:.3f}")
        save_png(density, args.png, title, markers=problem_markers(problem))
        print(f"density -> {args.png}", flush=True)
    if args.save_density:
        np.save(density_path(args.save_density), density)  # np.save adds .npy to a name without it
        print(f"density array -> {density_path(args.save_density)}", flush=True)
    if args.json:
        out["problem_spec"] = problem.to_dict()
        out["arguments"] = {k: v for k, v in vars(args).items() if k != "settings"}
        write_json_atomic(args.json, out)
        print(f"run (history, timings, memory) -> {args.json}", flush=True)
    if out.get("fields"):
        print(f"fields for ParaView -> {out['fields']} (a history: load a step with UpdatePipeline(time), "
              f"see README)", flush=True)
