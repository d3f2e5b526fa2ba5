"""``python -m sphyr_hpc.optimize``: SIMP topology optimisation of one problem over all MPI ranks.

Usage::

    mpirun -n N python -m sphyr_hpc.optimize PROBLEM [options] [PETSc options]
    mpirun -n N python -m sphyr_hpc.optimize --preset mbb --size 300x100 [--volfrac 0.5] [options]
    mpirun -n N python -m sphyr_hpc.optimize --dataset v1/full_easy.jsonl --index 3 --upscale 32

PROBLEM is a grid file (:mod:`sphyr_hpc.optimiser.problems`: a ``.json`` problem file or
a SPhyR text grid, optionally ``--upscale K``).  One problem is distributed
over all ranks (``PETSc.COMM_WORLD``): the stiffness matrix, the CG +
multigrid solve (``--solver``, default ``mg`` above 200k DOFs), the density
filter (a parallel Mat) and the optimality-criteria update, whose bisection
sums are collective.  No field is gathered inside the loop; the final density
is gathered to rank 0 for ``--png`` / ``--save-density`` / scoring output.
``--preset mbb88 --continuation none`` runs the 88-line code's half MBB beam
with its filter (``--filter sensitivity|density``), OC update and stopping
rule (docs/optimize.md, "The 88-line code's half MBB beam").

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

PETSc options (``-sphyr_ksp_rtol 1e-8``, ``-sphyr_pc_mg_cycle_type v``,
``-sphyr_mg_levels_ksp_max_it 3``, ``-sphyr_ksp_monitor``, ``-log_view``)
may be given anywhere on the command line.

Exit status: 0 done (converged or not), 1 a solve failed (SolverError) or
the design cannot carry its load, 2 a usage or problem error (before any
work: also an output that cannot be written), 3 an unexpected error aborted
every rank, 130/143 interrupted by SIGINT/SIGTERM, taken at the end of an iteration on every rank
at once (the design of that iteration is written first where ``--png``, ``--save-density`` and
``--json`` ask for it; with ``--checkpoint DIR``, the run is saved there: ``--resume`` continues it).  The run itself is
:mod:`sphyr_hpc.jobs.optimize`'s.
"""

import sys

from . import cli
from .cli import Output, Parser, UsageError

PROG = "python -m sphyr_hpc.optimize"


def build_parser():
    from .core import discretisation as fe
    from .io.field_files import FORMATS
    from .optimiser import problems, simp
    from .optimiser.filter import FILTERS
    from .optimiser.checkpointing import DEFAULT_EVERY
    from .optimiser.driver import DEFAULT_CONTINUATION, DEFAULT_ITERATIONS, DEFAULT_RADIUS, DEFAULT_TOLERANCE
    from .solvers.elasticity import SOLVERS

    p = Parser(
        prog=PROG,
        description="SIMP topology optimisation of one problem over all MPI ranks.\n\n"
                    "The problem: a grid file, --preset NAME --size NXxNY, or --dataset FILE --index I.\n"
                    "The solver: a direct factorisation (Cholesky, on rank 0 for several ranks) up to\n"
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
    opt.add_argument("--radius", type=float, default=DEFAULT_RADIUS, help="filter radius, elements")
    opt.add_argument("--filter", choices=FILTERS, default=FILTERS[0],
                     help="filter the densities (the 88-line code's ft=2) or the sensitivities (ft=1, with "
                          "the 88-line code's OC update); with --preset mbb88 --continuation none the 88-line "
                          "code's update and stopping rule run with either")
    opt.add_argument("--optimizer", choices=simp.OPTIMIZERS, default="oc",
                     help="the design update: optimality criteria, or Svanberg's method of moving asymptotes")
    opt.add_argument("--move", type=float, default=simp.MOVE_LIMIT, help="move limit (OC and MMA)")
    opt.add_argument("--initial", help="warm start: a .npy density (resampled to the grid)")
    opt.add_argument("--solver", choices=SOLVERS, help="linear solver (default: direct up to 200k DOFs, else mg)")
    opt.add_argument("--force", action="store_true",
                     help="run even when the memory estimate per rank is over what the node has (docs/optimize.md)")
    run = p.add_argument_group("checkpoint (a run that survives a time limit)")
    run.add_argument("--checkpoint", metavar="DIR",
                     help="save the run in DIR every --checkpoint-every iterations, at the end and on "
                          "SIGTERM/SIGINT (written atomically; any number of ranks resumes it)")
    run.add_argument("--checkpoint-every", type=int, default=DEFAULT_EVERY, help="iterations between checkpoints")
    run.add_argument("--resume", action="store_true",
                     help="with --checkpoint: continue the run saved in DIR (the same settings; --iterations "
                          "may grow); without a checkpoint there yet, start it")
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
                     help="after the run, measure a 400 MB numpy copy per rank (all ranks at once; the "
                          "median of 9 measurements over ~3 s) and the fraction of it the MG-CG solve moved")
    out.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    return p


def _check(args):
    """The run's settings, checked once here (before MPI starts) and kept as ``args.settings``."""
    from .jobs.optimize_settings import run_settings
    from .optimiser.problems import ProblemError

    try:
        args.settings = run_settings(args)
    except ProblemError as err:
        raise UsageError(str(err)) from None


def _memory(args, comm):
    from .jobs.optimize_settings import check_memory

    check_memory(args, comm)


def _outputs(args):
    from .jobs.optimize_settings import density_path

    for path in (args.png, args.json):
        if path:
            yield Output(path)
    if args.save_density:
        yield Output(density_path(args.save_density))
    if args.fields:
        yield Output(args.fields, folder=True)
    if args.checkpoint:
        yield Output(args.checkpoint, folder=True)


def _interrupt_note(args):
    written = getattr(args, "written_on_interrupt", None)  # set by the run once it has written them
    note = f"; the design of its last iteration is in {', '.join(written)}" if written else ""
    if not args.checkpoint:
        return note
    return note + f"; the run is saved in {args.checkpoint}: run the same command with --resume to continue it"


def _run(args, context):
    from .jobs.optimize import run
    from .runtime import events
    from .runtime.petsc import petsc

    events.start_logging()
    return run(args, petsc().COMM_WORLD, context.petsc_args)


COMMAND = cli.Command(prog=PROG, build_parser=build_parser, run=_run, check=_check, outputs=_outputs,
                      probe=False, preflight=_memory, h5py=lambda args: args.fields is not None and args.fields_format != "vtu",
                      interrupt_note=_interrupt_note, safe_points=True)


def main(argv=None):
    return cli.main(COMMAND, argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
