"""``python -m sphyr_hpc.optimize``: SIMP topology optimisation of one problem over all MPI ranks.

Usage::

    mpirun -n N python -m sphyr_hpc.optimize PROBLEM [options] [PETSc options]
    mpirun -n N python -m sphyr_hpc.optimize --preset mbb --size 300x100 [--volfrac 0.5] [options]
    mpirun -n N python -m sphyr_hpc.optimize --dataset v1/full_easy.jsonl --index 3 --upscale 32

PROBLEM is a grid file (:mod:`sphyr_hpc.problems`: a ``.json`` problem file or
a SPhyR text grid, optionally ``--upscale K``).  One problem is distributed
over all ranks (``PETSc.COMM_WORLD``): the stiffness matrix, the CG +
multigrid solve (``--solver``, default ``mg`` above 200k DOFs), the density
filter (a parallel Mat) and the optimality-criteria update, whose bisection
sums are collective.  No field is gathered inside the loop; the final density
is gathered to rank 0 for ``--png`` / ``--save-density`` / scoring output.

Every iteration logs one line on rank 0: compliance, volume fraction, change,
penalty, KSP iterations and seconds.  The multigrid hierarchy (levels,
unknowns, nonzeros, operator complexity) is logged after the first set-up.

Scoring: when the problem carries a ground truth (an upscaled SPhyR sample)
or ``--ground-truth FILE`` gives one (a grid file of the same size, or one
that upscales to it by an integer factor), the result is compared with it
at the same penalty: ``compliance``, ``ground_truth_compliance``,
``volume_fraction``, ``ground_truth_volume_fraction``,
``compliance_efficiency_vs_ground_truth = clip(gt_c / c, 0, 1)`` and
``material_efficiency = min(1, gt_vf / vf)`` (names of docs/scoring.md, "Metrics").

Hooks: ``optimise(..., callback=f)`` calls ``f(iteration, system,
physical_slab, compliance, change)`` every iteration; ``--fields DIR``
writes the history with :class:`sphyr_hpc.io.fields.HistoryWriter` when that
module is installed (skipped with a message otherwise).

PETSc options (``-sphyr_ksp_rtol 1e-8``, ``-sphyr_pc_type gamg``,
``-sphyr_mg_levels_ksp_max_it 3``, ``-sphyr_ksp_monitor``, ``-log_view``)
may be given anywhere on the command line.

Exit status: 0 done (converged or not), 1 a solve failed (SolverError) or
the design cannot carry its load, 2 a usage or problem error.
"""

import os
import sys
import traceback
from pathlib import Path

import numpy as np

from . import discretisation as fe
from . import problems
from . import timing
from .optimiser import simp
from .optimiser.driver import (DEFAULT_CONTINUATION, DEFAULT_ITERATIONS, DEFAULT_RADIUS, DEFAULT_TOLERANCE,
                               copy_bandwidth, mg_cg_bytes_per_iteration, optimise, rank0_logger,
                               run_summary)
from ._petsc import split_petsc_args
from .cli import Parser, UsageError, report_usage_error
from .io.atomic import write_json_atomic
from .io.field_files import FORMATS
from .solvers.elasticity import SOLVERS
from .problems import ProblemError

FAILED_STATUS, ABORT_STATUS = 1, 3  # usage errors: cli.USAGE_STATUS
PROG = "python -m sphyr_hpc.optimize"


# -- command line ---------------------------------------------------------------------------------
def build_parser():
    p = Parser(
        prog=PROG,
        description="SIMP topology optimisation of one problem over all MPI ranks.\n\n"
                    "The problem: a grid file, --preset NAME --size NXxNY, or --dataset FILE --index I.\n"
                    "The solver: a direct factorisation (Cholesky on one rank, MUMPS LU on several) up to\n"
                    "200k DOFs, CG + geometric multigrid above (--solver chooses).",
        epilog="Single-dash options go to PETSc: the solver's under the prefix -sphyr_ (-sphyr_ksp_rtol 1e-8,\n"
               "-sphyr_ksp_view: shown once), PETSc's own (-log_view).  An option under -sphyr_ that no\n"
               "solver reads, or a value PETSc rejects, is a usage error (exit status 2).",
    )
    src = p.add_argument_group("problem")
    src.add_argument("problem", nargs="?", help="grid file: .json problem or SPhyR text grid")
    src.add_argument("--preset", choices=None, help=f"preset problem: {', '.join(problems.PRESETS)}")
    src.add_argument("--size", help="NELXxNELY for --preset, e.g. 300x100")
    src.add_argument("--dataset", help="SPhyR dataset file (JSON lines); with --index")
    src.add_argument("--index", type=int, default=0, help="record index in --dataset")
    src.add_argument("--masked", action="store_true",
                     help="with --dataset: design only the record's V cells (default: the whole grid)")
    src.add_argument("--upscale", type=int, default=1, help="split every cell into K x K elements")
    src.add_argument("--volfrac", type=float, help="volume fraction (default: the problem's)")
    src.add_argument("--gravity", help="gravity step dr,dc (default: the problem's, down)")
    opt = p.add_argument_group("optimiser")
    opt.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, help="at most this many")
    opt.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                     help="stop when the largest density change is below (0: never)")
    opt.add_argument("--penal", type=float, default=fe.PENAL, help="SIMP penalty (the final one)")
    opt.add_argument("--continuation", default=DEFAULT_CONTINUATION,
                     help="p_start,p_step,every (penalty raised every N iterations up to --penal) or 'none'")
    opt.add_argument("--radius", type=float, default=DEFAULT_RADIUS, help="density filter radius, elements")
    opt.add_argument("--move", type=float, default=simp.MOVE_LIMIT, help="OC move limit")
    opt.add_argument("--initial", help="warm start: a .npy density (resampled to the grid)")
    opt.add_argument("--solver", choices=SOLVERS, help="linear solver (default: direct up to 200k DOFs, else mg)")
    out = p.add_argument_group("output")
    out.add_argument("--ground-truth", help="grid file to score the result against")
    out.add_argument("--png", help="write the final density as a PNG")
    out.add_argument("--save-density", help="write the final density as .npy (natural rows x columns)")
    out.add_argument("--json", help="write the run (history, timings, memory, hierarchy) as JSON")
    out.add_argument("--fields", metavar="DIR", help="write the history for ParaView into DIR (a temporal "
                                                      "collection: load it with UpdatePipeline(time), see README)")
    out.add_argument("--fields-every", type=int, default=10, help="with --fields: a step every K iterations")
    out.add_argument("--fields-format", choices=FORMATS, default=FORMATS[0],
                     help="with --fields: HDF5 + XDMF 3, explicit-quad XDMF, or VTU via meshio")
    out.add_argument("--bandwidth", action="store_true",
                     help="after the run, measure a 400 MB numpy copy per rank and the fraction of it "
                          "the MG-CG solve moved")
    out.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    return p


def parse_continuation(text):
    if text is None or str(text).lower() in ("", "none", "off"):
        return None
    try:
        start, step, every = (float(v) for v in str(text).split(","))
    except ValueError:
        raise ProblemError(f"--continuation {text!r} is not p_start,p_step,every (e.g. 1,0.5,10) or none") from None
    if step <= 0 or every < 1 or every != int(every) or start < 1:
        raise ProblemError(f"--continuation {text!r}: need p_start >= 1, p_step > 0, every a positive integer")
    return (start, step, int(every))


def load_problem(args):
    """The problem the arguments describe (ProblemError with a message otherwise)."""
    return problems.resolve(args.problem, args.preset, args.size, args.dataset, args.index, args.masked,
                            args.upscale, args.gravity, args.volfrac)


def _check_settings(args):
    if args.iterations < 1:
        raise ProblemError(f"--iterations {args.iterations} must be at least 1")
    if args.tolerance < 0:
        raise ProblemError(f"--tolerance {args.tolerance} must be >= 0")
    if not args.radius > 0:
        raise ProblemError(f"--radius {args.radius} must be positive")
    if not 0 < args.move <= 1:
        raise ProblemError(f"--move {args.move} must be in (0, 1]")
    if not args.penal >= 1:
        raise ProblemError(f"--penal {args.penal} must be >= 1")
    if args.fields_every < 1:
        raise ProblemError(f"--fields-every {args.fields_every} must be at least 1")
    if args.fields and os.path.exists(args.fields) and not os.path.isdir(args.fields):
        raise ProblemError(f"--fields {args.fields} is a file; --fields names a folder (new or existing)")
    for option, path in (("--json", args.json), ("--png", args.png), ("--save-density", args.save_density)):
        if path and os.path.isdir(path):
            raise ProblemError(f"{option} {path} is a folder; {option} names a file (e.g. {path.rstrip('/')}/run"
                               f"{'.json' if option == '--json' else '.png' if option == '--png' else '.npy'})")
    continuation = parse_continuation(args.continuation)
    if continuation is not None and continuation[0] > args.penal:
        raise ProblemError(f"--continuation starts at p={continuation[0]} above --penal {args.penal}")
    return continuation


def ground_truth_of(args, problem):
    """Natural ground-truth densities for scoring, or None."""
    if args.ground_truth:
        truth_problem = problems.read_problem(args.ground_truth)
        rho = truth_problem.ground_truth()
        if rho is None:
            raise ProblemError(f"{args.ground_truth}: a ground truth must be a grid of densities (no V cells)")
        ny, nx = rho.shape
        if (problem.nely % ny or problem.nelx % nx or problem.nely // ny != problem.nelx // nx):
            raise ProblemError(f"{args.ground_truth}: a {nx}x{ny} ground truth does not upscale to the "
                               f"{problem.nelx}x{problem.nely} problem by an integer factor")
        k = problem.nely // ny
        return np.repeat(np.repeat(rho, k, axis=0), k, axis=1)
    return problem.ground_truth()


# -- output ----------------------------------------------------------------------------------------
def save_png(density, path, title=None):
    """The density as a grey image (black = material), row 0 at the top, square cells.

    Every cell is the same whole number of pixels (at least 800 pixels across
    for small grids, one pixel a cell from 800 columns on).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    density = np.asarray(density, dtype=float)
    ny, nx = density.shape
    scale = max(1, -(-800 // nx))  # pixels a cell
    dpi = 100.0
    title_px = 30 if title else 0
    width, height = nx * scale, ny * scale
    fig = plt.figure(figsize=(width / dpi, (height + title_px) / dpi), dpi=dpi)
    ax = fig.add_axes([0.0, 0.0, 1.0, height / (height + title_px)])
    ax.imshow(density, cmap="gray_r", vmin=0.0, vmax=1.0, interpolation="nearest", origin="upper", aspect="equal")
    ax.set_axis_off()
    if title:
        fig.text(0.5, 1.0 - 0.5 * title_px / (height + title_px), title, ha="center", va="center", fontsize=9)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def run(args, comm, petsc_args=()):
    from mpi4py import MPI

    from .solvers.elasticity import PartitionError, SolverError

    mpi = comm.tompi4py()
    log = rank0_logger(mpi)
    quiet_log = rank0_logger(mpi, args.quiet)
    try:
        continuation = _check_settings(args)
        problem = load_problem(args)
        truth = ground_truth_of(args, problem)
        initial = np.load(args.initial) if args.initial else None
    except (ProblemError, OSError, ValueError) as err:
        return report_usage_error(PROG, err, mpi.rank)
    load_start = list(os.getloadavg())
    if mpi.rank == 0:
        print(f"load average at start: {' '.join(f'{v:.2f}' for v in load_start)}", flush=True)

    def iteration_log(line):
        if line.startswith("it "):
            quiet_log(line)
        else:
            log(line)

    from ._petsc import OptionsError, explain_petsc_error, petsc, unknown_options_message, unused_options

    started = []

    def check_options(iteration, system, physical, compliance, change):
        """After the first iteration every solver option has been read: report those nobody read."""
        if started:
            return
        started.append(iteration)
        unused = sorted(set().union(*mpi.allgather(unused_options())))
        if unused:
            raise OptionsError(unknown_options_message(unused))

    try:
        out = optimise(problem, comm=comm, solver=args.solver, iterations=args.iterations,
                       tolerance=args.tolerance, penal=args.penal, continuation=continuation, radius=args.radius,
                       move=args.move, initial=initial, log=iteration_log, fields_dir=args.fields,
                       fields_every=args.fields_every, truth=truth, keep_system=args.bandwidth,
                       fields_format=args.fields_format, callback=check_options)
    except petsc().Error as err:
        if started:
            raise
        raise OptionsError(f"PETSc rejected an option: {explain_petsc_error(err)}") from None
    except PartitionError as err:
        return report_usage_error(PROG, err, mpi.rank)
    except SolverError as err:
        log(f"error: the solve failed: {err}")
        return FAILED_STATUS
    summary = run_summary(out, mpi)
    out["summary"] = summary
    system = out.pop("system", None)
    if system is not None:
        try:
            bytes_per_it = mg_cg_bytes_per_iteration(system)
        finally:
            system.close()
        bandwidth = copy_bandwidth(mpi)
        solve_total = mpi.allreduce(sum(h["sphyr_solve_seconds"] for h in out["history"][1:]), op=MPI.MAX)
        its_total = sum(h["ksp_iterations"] for h in out["history"][1:])
        achieved = bytes_per_it * its_total / solve_total if bytes_per_it and solve_total > 0 else None
        out["bandwidth"] = {"copy_bytes_per_second": bandwidth, "mg_cg_bytes_per_iteration": bytes_per_it,
                            "mg_cg_bytes_per_second": achieved,
                            "fraction_of_copy": achieved / bandwidth if achieved else None}
    out["load_average_start"] = load_start
    out["load_average_end"] = list(os.getloadavg())
    density = out.pop("density")
    out["petsc_options"] = list(petsc_args)
    if mpi.rank == 0:
        status = "converged" if out["converged"] else "stopped"
        # The iteration lines show each design before its update; the result is the design after the
        # last update, analysed once more at the final penalty: hence a compliance of its own.
        print(f"{status} after {out['iterations']} iterations: compliance {out['compliance']:.6e} (the final "
              f"design, analysed at p = {args.penal:g}), volume "
              f"{out['volume_fraction']:.4f}; mean {summary['seconds']:.3f} s/iteration (after the first), "
              f"{summary['ksp_iterations_mean']:.1f} KSP iterations/solve, peak memory "
              f"{max(summary['peak_memory_mb_per_rank']):.0f} MB/rank", flush=True)
        if "bandwidth" in out and out["bandwidth"]["fraction_of_copy"]:
            b = out["bandwidth"]
            print(f"bandwidth: numpy copy {b['copy_bytes_per_second'] / 1e9:.1f} GB/s, MG-CG MatMults "
                  f"{b['mg_cg_bytes_per_second'] / 1e9:.1f} GB/s ({100 * b['fraction_of_copy']:.0f}%)", flush=True)
        if args.png:
            title = (f"{problem.name} {problem.nelx}x{problem.nely}, c = {out['compliance']:.4g}, "
                     f"vf = {out['volume_fraction']:.3f}")
            save_png(density, args.png, title)
            print(f"density -> {args.png}", flush=True)
        if args.save_density:
            saved = args.save_density if args.save_density.endswith(".npy") else args.save_density + ".npy"
            np.save(saved, density)  # np.save adds .npy to a name without it
            print(f"density array -> {saved}", flush=True)
        if args.json:
            out["problem_spec"] = problem.to_dict()
            out["arguments"] = {k: v for k, v in vars(args).items()}
            write_json_atomic(args.json, out)
            print(f"run (history, timings, memory) -> {args.json}", flush=True)
        if out.get("fields"):
            print(f"fields for ParaView -> {out['fields']} (a history: load a step with UpdatePipeline(time), "
                  f"see README)", flush=True)
    ok = np.isfinite(out["compliance"])
    return 0 if ok else FAILED_STATUS


def main(argv=None):
    from ._petsc import OptionsError, command_options, require

    argv = list(sys.argv[1:] if argv is None else argv)
    ours, petsc_args = split_petsc_args(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(ours)
    except UsageError as err:
        return report_usage_error(parser.prog, f"{err} (see --help)")
    require(parser.prog, h5py=args.fields is not None and args.fields_format != "vtu")
    # Only PETSc's own options reach its database (so -options_left lists just the unused ones);
    # they are removed afterwards, as main() may run again in this process (tests).
    try:
        with command_options(petsc_args) as options:
            timing.start_logging()
            comm = options.petsc.COMM_WORLD
            try:
                return run(args, comm, petsc_args)
            except OptionsError as err:
                return report_usage_error(parser.prog, err, comm.getRank())
            except Exception:
                if comm.getSize() == 1:
                    raise
                traceback.print_exc(file=sys.stderr)
                print(f"sphyr_hpc.optimize: unexpected error on rank {comm.getRank()}; aborting all ranks",
                      file=sys.stderr, flush=True)
                comm.tompi4py().Abort(ABORT_STATUS)
    except OptionsError as err:  # options PETSc could not even parse
        return report_usage_error(parser.prog, err)


if __name__ == "__main__":
    sys.exit(main())
