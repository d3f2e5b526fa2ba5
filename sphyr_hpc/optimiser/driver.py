"""The SIMP driver of one problem at any size over all ranks (``python -m sphyr_hpc.optimize``).

:func:`optimise` runs one problem with one frozen :class:`RunSettings` (checked when made):
it builds the system (solver by size, see
:mod:`sphyr_hpc.solvers.elasticity`), the density filter and, with
``fields_dir``, a ParaView history; runs :func:`~sphyr_hpc.optimiser.simp.run_simp`
with ``volume_sums="linear"`` and logs one line per iteration on rank 0
(compliance, volume, change, penalty, KSP iterations, seconds) and the
multigrid hierarchy after the first set-up.  It returns the history with the
PETSc log-event seconds of every iteration, the final compliance and, with a
ground truth, the comparison with it (:func:`score_against`).  The
measurement helpers (:func:`run_summary`, :func:`copy_bandwidth`,
:func:`mg_cg_bytes_per_iteration`, :func:`peak_memory_mb`) serve the
command's ``--json`` and the scaling study.
"""

import os
import resource
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..core import discretisation as fe
from ..core.metrics import clipped_ratio, material_efficiency, raw_ratio
from ..io import field_files
from . import problems
from ..runtime import events
from ..runtime.process import Interrupted, interrupt_point, signals_deferred
from . import simp
from .simp import SettingError, SimpSettings
from .checkpointing import RunCheckpoint
from ..solvers.hierarchy import format_hierarchy, level_visits
from .filter import DensityFilter, filter_reach

DEFAULT_ITERATIONS = 300
DEFAULT_TOLERANCE = 0.01     # the 88-line code's stopping change
DEFAULT_RADIUS = 1.5         # in elements; the 88-line code's MBB example (mesh dependent)
DEFAULT_CONTINUATION = "1,0.5,10"
BANDWIDTH_BYTES = 400 * 2**20  # larger than any cache: copy_bandwidth measures memory
BANDWIDTH_SAMPLES = 9           # copy_bandwidth: measurements ...
BANDWIDTH_PAUSE = 0.3           # ... seconds apart


@dataclass(frozen=True)
class RunSettings:
    """How :func:`optimise` runs a problem, checked once when made (:class:`~sphyr_hpc.optimiser.simp.SettingError`
    naming the field of a value out of range).

    The SIMP run's (:class:`~sphyr_hpc.optimiser.simp.SimpSettings` with the linear volume sums, ``simp``):
    ``iterations``, ``tolerance``, ``penal``, ``continuation`` (``(p_start, p_step, every)`` or None),
    ``move``, ``update`` (``"oc"``, ``"oc88"`` or ``"mma"``) and ``filter`` (what ``"oc88"`` filters);
    the run's own: the filter ``radius`` in elements, the ``solver`` (None: by size,
    :func:`~sphyr_hpc.solvers.elasticity.default_solver`) and the ParaView history (``fields_dir``
    with a step every ``fields_every`` iterations in ``fields_format``).
    """

    iterations: int = DEFAULT_ITERATIONS
    tolerance: float = DEFAULT_TOLERANCE
    penal: float = fe.PENAL
    continuation: Optional[tuple] = None
    move: float = simp.MOVE_LIMIT
    update: str = "oc"
    filter: str = "density"
    radius: float = DEFAULT_RADIUS
    solver: Optional[str] = None
    fields_dir: Optional[str] = None
    fields_every: int = 10
    fields_format: str = field_files.FORMATS[0]
    simp: SimpSettings = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        from ..solvers.elasticity import SOLVERS

        def require(ok, name, requirement):
            if not ok:
                raise SettingError(name, getattr(self, name), requirement)

        require(self.iterations >= 1, "iterations", "must be at least 1")
        require(self.penal >= 1, "penal", "must be >= 1")
        require(self.radius > 0, "radius", "must be positive")
        require(self.solver is None or self.solver in SOLVERS, "solver", f"is not one of {', '.join(SOLVERS)}")
        require(self.fields_every >= 1, "fields_every", "must be at least 1")
        require(self.fields_format in field_files.FORMATS, "fields_format",
                f"is not one of {', '.join(field_files.FORMATS)}")
        names = {"max_iterations": "iterations", "move_limit": "move"}  # SimpSettings' names of this run's fields
        try:
            settings = SimpSettings(penal=self.penal, max_iterations=self.iterations, tolerance=self.tolerance,
                                         move_limit=self.move, continuation=self.continuation, update=self.update,
                                         filter=self.filter, volume_sums="linear")
        except SettingError as err:
            raise SettingError(names.get(err.field, err.field), err.value, err.requirement) from None
        object.__setattr__(self, "simp", settings)


# -- the run --------------------------------------------------------------------------------------
def _fields_writer(directory, problem, system, every, log, fields_format="xdmf", steps=None):
    try:
        from ..io.fields import HistoryWriter, safe_name
    except ImportError as err:
        log(f"--fields: sphyr_hpc.io.fields.HistoryWriter is not available ({err}); no fields written")
        return None
    comm = system.comm.tompi4py()
    if comm.rank == 0:
        os.makedirs(directory, exist_ok=True)
    comm.Barrier()
    stem = os.path.join(directory, f"{safe_name(problem.name)}_{problem.nelx}x{problem.nely}")
    return HistoryWriter(stem, system, every=every, fields_format=fields_format, steps=steps)


def rank0_logger(comm, quiet=False):
    def log(line):
        if comm.rank == 0 and not quiet:
            print(line, flush=True)
    return log


def optimise(problem, settings=RunSettings(), comm=None, prefix="sphyr_", initial=None, callback=None, log=None,
             truth=None, keep_system=False, checkpoint=None):
    """Run SIMP on ``problem`` with ``settings`` (a :class:`RunSettings`) over ``comm`` (default
    PETSc.COMM_WORLD); collective.

    Returns a dict (the same on every rank except ``density``, the natural
    final density on rank 0 and None elsewhere) with the history (one dict per
    iteration: iteration, compliance, volume, change, penal, ksp_iterations,
    seconds and this rank's event seconds), the final compliance, the update that ran,
    the multigrid hierarchy and, with ``truth``, the comparison with it.
    ``callback(iteration, system, physical_slab, compliance, change)`` runs
    every iteration.  ``initial``: a warm start (natural densities, resampled to the grid).
    ``checkpoint``
    (:class:`~sphyr_hpc.optimiser.checkpointing.CheckpointSettings`) saves the
    run every few iterations and on SIGTERM/SIGINT, and resumes it from its
    ``record``: the loop then runs with signals deferred to the end of an
    iteration (:mod:`sphyr_hpc.optimiser.checkpointing`).  ``keep_system``: the result holds
    the system under ``"system"`` (the caller closes it).
    """
    from ..runtime.petsc import large_arrays_reused, petsc  # mpi4py and PETSc only once the command has checked
    from ..solvers.elasticity import elasticity_system

    PETSc = petsc()
    events.start_logging()
    radius = settings.radius
    comm = comm if comm is not None else PETSc.COMM_WORLD
    mpi = comm.tompi4py()
    log = log or rank0_logger(mpi)
    lc = problem.loadcase()
    free, pinned = simp.design_space(lc, *problem.design())
    volume_fraction = problem.target_volume_fraction()
    started = time.perf_counter()
    system = elasticity_system(lc, comm=comm, prefix=prefix, solver=settings.solver,
                              element_halo=max(1, filter_reach(radius)))
    density_filter = DensityFilter(system, radius, kind="stencil")
    setup_seconds = time.perf_counter() - started
    log(f"{problem.name}: {lc.nelx}x{lc.nely} elements, {lc.n_dofs} DOFs, volume fraction "
        f"{volume_fraction:.4g}, {int(free.sum())} free cells, {mpi.size} rank(s), solver {system.solver} "
        f"({system.ksp.getType()}/{system.ksp.getPC().getType()}), "
        f"{settings.filter} filter radius {radius:g}, update {settings.update}, "
        f"set-up {setup_seconds:.2f} s")
    if initial is not None:
        initial = problems.resize_nearest(initial, lc.shape)
    resumed = checkpoint.record if checkpoint is not None else None
    steps = resumed.get("fields_steps") or {} if resumed is not None else None
    writer = _fields_writer(settings.fields_dir, problem, system, settings.fields_every, log, settings.fields_format,
                            steps) if settings.fields_dir else None
    on_iteration = _IterationLog(system, mpi, lc, log, callback, writer, total=settings.iterations)
    hooks = RunCheckpoint(checkpoint, system, on_iteration, writer, log) if checkpoint is not None else None
    on_iteration.interrupts = mpi if hooks is None else None  # (a checkpoint takes it once written)
    labels = {"filter": settings.filter, "update": settings.update, "free_cells": int(free.sum())}
    try:
        with large_arrays_reused():
            result = _at_safe_points(mpi, lambda: simp.run_simp(
                system, density_filter, volume_fraction, free, pinned, settings.simp, initial=initial,
                callback=on_iteration, gather=False, checkpoint=hooks),
                lambda: _interrupted_outcome(problem, system, mpi, on_iteration, volume_fraction, setup_seconds, labels))
        out = {**_outcome(problem, system, mpi, result, on_iteration.history, volume_fraction, setup_seconds),
               **labels}
        if writer is not None:
            writer.write_step(result.iterations, result.densities, compliance=result.compliance, force=True)
            out["fields"] = str(writer.path)
        if truth is not None:
            out["score"] = score_against(system, result.densities, truth, settings.penal, result.compliance)
            log("score: " + ", ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
                                      for k, v in out["score"].items()))
        out["density"] = system.gather(result.densities, root=0)
        if keep_system:
            out["system"] = system
        return out
    finally:
        if writer is not None:
            writer.close()
        density_filter.close()
        if not keep_system:
            system.close()


def _at_safe_points(mpi, loop, so_far):
    """``loop()`` with signals taken only at safe points, on every rank at once
    (:func:`~sphyr_hpc.runtime.process.interrupt_point`): now (in the command, whose signals wait all
    along: ``cli.Command.safe_points``), and at the end of every iteration (the iteration log's or the
    checkpoint's).  The :class:`Interrupted` carries ``so_far()`` as its ``outcome``: the design so far."""
    interrupt_point(mpi)
    try:
        with signals_deferred():
            return loop()
    except Interrupted as err:
        err.outcome = so_far()
        raise


class _IterationLog:
    """What happens after every SIMP iteration: the history row (with the PETSc log events' seconds),
    the log line, the multigrid hierarchy after the first set-up, the callback and the fields step."""

    def __init__(self, system, mpi, loadcase, log, callback, writer, total=None):
        self.system, self.mpi, self.loadcase = system, mpi, loadcase
        self.log, self.callback, self.writer, self.total = log, callback, writer, total
        self.history = []
        self.physical = None  # the design (physical densities) of the last iteration
        self.interrupts = None  # the communicator whose safe point the end of every iteration is
        self.first = 0  # the iteration the run (or its resumption) started after
        self.last = self.started = time.perf_counter()
        self.events = {n: events.seconds(n) for n in events.EVENTS}
        self.passes = events.count(events.BISECTION_PASS)

    def __call__(self, iteration, compliance, physical, change, penal):
        """After iteration ``iteration`` at penalty ``penal`` (run_simp's callback)."""
        from mpi4py import MPI

        system, log = self.system, self.log
        now = time.perf_counter()
        seconds = {n: events.seconds(n) for n in events.EVENTS}
        volume = self.mpi.allreduce(float(np.sum(physical)), op=MPI.SUM) / self.loadcase.n_elements
        row = {"iteration": iteration, "compliance": float(compliance), "volume": volume, "change": float(change),
               "penal": penal, "ksp_iterations": int(system.last_iterations),
               "seconds": now - self.last}
        row.update({f"{n}_seconds": seconds[n] - self.events[n] for n in events.EVENTS})
        row["bisection_passes"] = events.count(events.BISECTION_PASS) - self.passes
        self.history.append(row)
        if iteration == self.first + 1 and system.hierarchy:
            for line in format_hierarchy(*system.hierarchy, getattr(system.method, "levels", None)):
                log(line)
        log(f"it {iteration:4d}{self._of_total(iteration, now)}  c {compliance:.6e}  vol {volume:.4f}  "
            f"change {change:.4f}  p {row['penal']:.2f}  ksp {row['ksp_iterations']:3d}  {row['seconds']:.2f} s")
        if self.callback is not None:
            self.callback(iteration, system, physical, compliance, change)
        if self.writer is not None:
            self.writer.write_step(iteration, physical, compliance=compliance, change=change, penal=penal)
        self.last = time.perf_counter()
        self.events = {n: events.seconds(n) for n in events.EVENTS}
        self.passes = events.count(events.BISECTION_PASS)
        self.physical = physical
        if self.interrupts is not None:
            interrupt_point(self.interrupts)

    def resume(self, history):
        """A resumed run: the rows of the iterations before it (as saved: rank 0's seconds)."""
        self.history = list(history)
        self.first = self.history[-1]["iteration"] if self.history else 0

    def _of_total(self, iteration, now):
        """``/300 (ETA <= 3:58)``: the iteration limit and the time left should the run reach it (it may
        converge sooner) at the mean pace so far; empty without a limit."""
        if not self.total:
            return ""
        left = (now - self.started) / max(iteration - self.first, 1) * max(self.total - iteration, 0)
        return f"/{self.total} (ETA <= {int(left // 60)}:{int(left % 60):02d})"


def _outcome(problem, system, mpi, result, history, volume_fraction, setup_seconds):
    """The run's dict (what every rank returns but the density)."""
    from mpi4py import MPI

    lc = system.loadcase
    volume = mpi.allreduce(float(np.sum(result.densities)), op=MPI.SUM) / lc.n_elements
    return {
        "problem": problem.name, "nelx": lc.nelx, "nely": lc.nely, "dofs": lc.n_dofs, "ranks": mpi.size,
        "solver": system.solver, "volume_fraction_target": volume_fraction, "compliance": result.compliance,
        "volume_fraction": volume, "iterations": result.iterations, "converged": result.converged,
        "history": history, "setup_seconds_once": setup_seconds,
        "hierarchy": _hierarchy_json(system),
    }


def _interrupted_outcome(problem, system, mpi, on_iteration, volume_fraction, setup_seconds, labels):
    """What an interrupted run returns (collective: every rank takes the interrupt at one point): the
    history so far and the design of its last iteration (None before the first has ended), with
    ``"interrupted": True``; the density gathered to rank 0 as :func:`optimise`'s."""
    history = on_iteration.history
    if on_iteration.physical is None:
        return None
    last = history[-1]
    result = simp.SimpResult(on_iteration.physical, last["compliance"], last["iteration"], False, [])
    out = {**_outcome(problem, system, mpi, result, history, volume_fraction, setup_seconds), **labels}
    out["interrupted"] = True
    out["density"] = system.gather(on_iteration.physical, root=0)
    return out


def _hierarchy_json(system):
    if not system.hierarchy:
        return None
    rows, complexity = system.hierarchy
    return {"levels": rows, "operator_complexity": complexity}


def score_against(system, slab, truth, penal, compliance):
    """Compare a result (this rank's slab) with natural ground-truth densities at the same penalty."""
    from mpi4py import MPI

    mpi = system.comm.tompi4py()
    n = system.loadcase.n_elements
    truth = np.clip(np.asarray(truth, dtype=float), 0.0, 1.0).copy()
    truth[system.loadcase.structural_mask()] = 1.0
    gt_compliance = system.solve(system.slab_of(fe.simp_modulus(truth, penal)))
    vf = mpi.allreduce(float(np.sum(slab)), op=MPI.SUM) / n
    gt_vf = float(truth.mean())
    return {
        "compliance": float(compliance),
        "ground_truth_compliance": float(gt_compliance),
        "volume_fraction": vf,
        "ground_truth_volume_fraction": gt_vf,
        "compliance_efficiency_vs_ground_truth": clipped_ratio(gt_compliance, compliance),
        "compliance_ratio_raw": raw_ratio(gt_compliance, compliance),
        "material_efficiency": material_efficiency(gt_vf, vf),
    }


# -- measurements ------------------------------------------------------------------------------------
def peak_memory_mb():
    """This process's peak resident set size since it started its program, MB: Linux's VmHWM.

    Not ru_maxrss where VmHWM can be read: ru_maxrss is kept across fork and exec, so a run
    started by a large process (a notebook, a test session) would report that process's peak.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def copy_bandwidth(mpi, nbytes=BANDWIDTH_BYTES, repeats=3, samples=BANDWIDTH_SAMPLES, pause=BANDWIDTH_PAUSE):
    """(median, every sample) of the aggregate bandwidth (bytes/s, read + write) of every rank copying its
    own ``nbytes`` array at once, each sample the best of ``repeats`` copies, ``samples`` of them ``pause``
    seconds apart: what this machine's memory gives varies from one moment to the next (a shared host's
    other work), and one moment's best is not the bandwidth a run of seconds had."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # first touch
    rates = []
    for sample in range(samples):
        if sample:
            time.sleep(pause)
        best = np.inf
        for _ in range(repeats):
            mpi.Barrier()
            t0 = time.perf_counter()
            np.copyto(dst, src)
            mpi.Barrier()
            best = min(best, time.perf_counter() - t0)
        rates.append(mpi.size * 2.0 * src.nbytes / best)
    return float(np.median(rates)), rates


def mg_cg_bytes_per_iteration(system):
    """Bytes the MatMults of one MG-CG iteration move (a lower bound: vector updates not counted).

    CG: one MatMult on the fine level.  A cycle visits the level d below the
    finest once (V-cycle), 2^d times (W-cycle) or 2^(d-1) (W below a V on the finest level:
    ``hierarchy.level_visits``); every visit of a level but
    the coarsest does m Chebyshev steps down and m up (one MatMult each), one
    residual, and the restriction and interpolation to the level below.  A
    MatMult moves the matrix (8-byte values, 4-byte column indices) and reads
    x / writes y once.  The smoothers' vector updates and the coarse solves are
    not counted.
    """
    if not system.hierarchy or not system.hierarchy[0]:
        return None
    PETSc = system.PETSc
    pc = system.ksp.getPC()
    rows = system.hierarchy[0]  # finest first
    n_levels = len(rows)

    def mat_bytes(nnz, m, n):
        return 12.0 * nnz + 8.0 * (m + n)

    cycle = getattr(system.method, "mg_cycle", "v")
    finest_cycle = getattr(system.method, "mg_finest_cycle", cycle)
    interps = list(getattr(system.method, "interpolations", ()))[::-1]  # finest pair first
    total = mat_bytes(rows[0]["nonzeros"], rows[0]["rows"], rows[0]["rows"])  # CG's MatMult
    for depth, level in enumerate(rows[:-1]):
        visits = level_visits(depth, cycle, finest_cycle)
        steps = pc.getMGSmoother(n_levels - 1 - depth).getTolerances()[3]
        total += visits * (2 * steps + 1) * mat_bytes(level["nonzeros"], level["rows"], level["rows"])
        if depth < len(interps):
            P = interps[depth]
            nnz = 0.0 if P.getType() == "python" else P.getInfo(PETSc.Mat.InfoType.GLOBAL_SUM)["nz_used"]
            m, n = P.getSize()
            total += visits * 2 * mat_bytes(nnz, m, n)
    return total


def run_summary(out, mpi, warmup=1):
    """Steady-state means over iterations after ``warmup`` (max over ranks), and memory per rank."""
    from mpi4py import MPI

    hist = out["history"]
    steady = hist[warmup:] if len(hist) > warmup else hist
    summary = {"iterations_timed": len(steady), "first_iteration_seconds": hist[0]["seconds"] if hist else None}
    local = {k: float(np.mean([h[k] for h in steady])) if steady else 0.0
             for k in ["seconds"] + [f"{n}_seconds" for n in events.EVENTS]}
    for key, value in local.items():
        summary[key] = mpi.allreduce(value, op=MPI.MAX)
    summary["ksp_iterations_mean"] = float(np.mean([h["ksp_iterations"] for h in steady])) if steady else 0.0
    summary["ksp_iterations_max"] = int(max([h["ksp_iterations"] for h in steady], default=0))
    # The optimality-criteria bisection's passes over the cells (the bytes model's count; all ranks make the same).
    summary["bisection_passes_mean"] = float(np.mean([h.get("bisection_passes", 0) for h in steady])) if steady else 0.0
    memory = mpi.allgather(peak_memory_mb())
    summary["peak_memory_mb_per_rank"] = memory
    return summary
