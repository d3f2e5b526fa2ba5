"""``python -m sphyr_hpc.scaling``: SIMP iterations timed over grid sizes and rank counts.

Usage::

    python -m sphyr_hpc.scaling --sizes 128x64,256x128,512x256,1024x512 --ranks 1,2 \\
        --iterations 10 --json OUT.json [--md OUT.md] [--plots PREFIX] [--preset mbb]
        [--design-iterations 100 | --design FILE.npy] [-- PETSc options for every run]

Run it serially: for every size and rank count it starts ``mpirun -n R python
-m sphyr_hpc.optimize`` itself (``bin/mpirun`` of the repository when there is
one, else ``mpirun --oversubscribe`` with running as root allowed; ``--mpirun``
overrides).

Designs.  Timing SIMP on a uniform start would time easy solves.  So, unless
``--design-iterations 0``, the preset is first optimised at the smallest size
(serially, ``--design-iterations`` iterations with continuation) and every
timed run starts from that density, resampled to its grid, at the final
penalty (no continuation, ``--tolerance 0``): the N timed iterations solve
designs with voids and 0/1 contrast at every size.  ``--design FILE.npy``
uses a given density instead.

Output: ``--json`` holds a list with one object per (size, ranks): ``nelx``,
``nely``, ``ranks``, ``dofs``, ``ksp_iterations`` (mean per solve),
``seconds_per_iteration``, ``assembly_seconds``, ``setup_seconds``,
``solve_seconds``, ``update_seconds`` (means per iteration of the PETSc log
events ``sphyr_assembly``/``sphyr_setup``/``sphyr_solve``/``sphyr_update``,
max over ranks), ``peak_memory_mb`` (per rank, ``ru_maxrss``, max over ranks),
and more: ``peak_memory_mb_total``, ``memory_gb_per_million_dofs``,
``ksp_iterations_max``, ``first_iteration_seconds``, the multigrid hierarchy,
the copy bandwidth and the fraction of it the MG-CG solve moved, and the load
average before and after the run.  Means are over the iterations after the
first (whose set-up also builds the symbolic Galerkin products).  A Markdown
table (``--md``) adds speed-up and parallel efficiency against 1 rank, and
three plots (``--plots PREFIX``): ``PREFIX_time.png`` (seconds per iteration
against DOFs), ``PREFIX_ksp.png`` (KSP iterations against DOFs),
``PREFIX_speedup.png`` (speed-up against ranks).

Exit status: 0 when every run succeeded, 1 when some failed (recorded with its
``error``), 2 on a usage error (before any run: also an output that cannot be
written), 130/143 when interrupted by SIGINT/SIGTERM.  The study itself is
:mod:`sphyr_hpc.jobs.scaling`'s.
"""

import sys

from . import cli
from .cli import Output, Parser


def build_parser():
    # Imported here: a command's module loads no NumPy before cli.main has set the BLAS threads
    # (sphyr_hpc.runtime.process.command_environment).
    from .optimiser import problems
    from .solvers.elasticity import SOLVERS

    p = Parser(prog="python -m sphyr_hpc.scaling",
               description="Time SIMP iterations over grid sizes and MPI rank counts.\n\n"
                           "Runs `mpirun -n R python -m sphyr_hpc.optimize` itself for every size and rank count\n"
                           "(run this command without mpirun), each from one design optimised first at the\n"
                           "smallest size, and writes the timings as JSON, a Markdown table and three plots.",
               epilog="PETSc options (single dash, anywhere: -sphyr_ksp_rtol 1e-8 -log_view) go to every run,\n"
                      "as in every other command.\n"
                      "Exit status: 0 every run succeeded, 1 some failed (recorded with its error), 2 usage error.")
    p.add_argument("--sizes", required=True, help="comma-separated NELXxNELY, e.g. 128x64,256x128")
    p.add_argument("--ranks", default="1,2", help="comma-separated rank counts")
    p.add_argument("--iterations", type=int, default=10,
                   help="SIMP iterations a run (the first is not timed: at least 2)")
    p.add_argument("--json", required=True, help="output JSON (a list, one object per size and rank count)")
    p.add_argument("--md", help="Markdown table with speed-up and efficiency (default: the JSON path with .md)")
    p.add_argument("--plots", help="PNG prefix: PREFIX_time/_ksp/_speedup.png (default: the JSON path without "
                                   ".json)")
    p.add_argument("--preset", default="mbb", help=f"problem preset: {', '.join(problems.PRESETS)}")
    p.add_argument("--volfrac", type=float, help="volume fraction (default: the preset's)")
    p.add_argument("--radius", type=float, default=1.5, help="density filter radius in elements")
    p.add_argument("--solver", default="mg", choices=SOLVERS,
                   help="linear solver of the timed runs, at every size")
    p.add_argument("--design-iterations", type=int, default=100,
                   help="iterations of the design run at the smallest size (0: a uniform start)")
    p.add_argument("--design", help="start every run from this .npy density instead of a design run")
    p.add_argument("--no-bandwidth", action="store_true",
                   help="skip measuring the copy bandwidth (and the fraction of it MG-CG moves)")
    p.add_argument("--mpirun", help="mpirun command (default: the repository's bin/mpirun, else mpirun "
                                    "--oversubscribe)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed a run before it is stopped")
    p.add_argument("--force", action="store_true",
                   help="run even when a run's memory estimate is over what this node has (docs/optimize.md)")
    p.add_argument("--quiet", action="store_true", help="no line per run")
    p.add_argument("--resume", action="store_true",
                   help="keep the finished runs of an earlier, interrupted study in --json (same settings) and "
                        "run the rest; without one there yet, run them all")
    return p


def _check(args):
    from .jobs.scaling import check_settings

    check_settings(args)


def _outputs(args):
    from .jobs.scaling import output_paths

    return [Output(path) for path in output_paths(args)]


def _run(args, context):
    from .jobs.scaling import run_scaling

    return run_scaling(args, context.petsc_args)


# The runs are other processes: this one splits off the PETSc options for them and checks that they
# will find mpi4py and petsc4py, but starts neither MPI nor PETSc itself.
COMMAND = cli.Command(prog="python -m sphyr_hpc.scaling", build_parser=build_parser, run=_run, check=_check,
                      outputs=_outputs, mpi=False, split_petsc=True, requires=True,
                      interrupt_note=lambda args: f"; the finished runs are in {args.json}: run the same command "
                                                  f"with --resume to run the rest")


def main(argv=None):
    return cli.main(COMMAND, argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
