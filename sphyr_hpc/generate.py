"""``python -m sphyr_hpc.generate``: write problems at any size as grid files.

Usage::

    python -m sphyr_hpc.generate --preset mbb --size 300x100 [--volfrac 0.5] --out mbb.json
    python -m sphyr_hpc.generate --dataset v1/full_easy.jsonl --index 3 --upscale 32 --out s.json
    python -m sphyr_hpc.generate --grid ground_truth.txt --upscale 8 --out s.txt

The formats are those of :mod:`sphyr_hpc.optimiser.problems`: ``.json`` (compact at any
size; the only one for presets, whose rollers a SPhyR grid cannot express) or,
for SPhyR samples, any other suffix for the upscaled SPhyR text grid (up to
``problems.TEXT_MAX_CELLS`` cells).  ``python -m sphyr_hpc.optimize FILE``
reads either.

Exit status: 0 written, 2 on a usage or problem error (message on stderr).
"""

import sys

from . import cli
from .cli import Output, Parser, UsageError

# NumPy comes with the problems module, imported where it is used: a command's module loads no
# NumPy before cli.main has set the BLAS threads (sphyr_hpc.runtime.process.command_environment).


def build_parser():
    from .optimiser import problems

    p = Parser(prog="python -m sphyr_hpc.generate",
               description="Write a preset or an upscaled SPhyR sample as a grid file (.json, or a SPhyR text "
                           "grid),\nwhich `python -m sphyr_hpc.optimize FILE` reads.")
    p.add_argument("--preset", help=f"one of {', '.join(problems.PRESETS)}")
    p.add_argument("--size", help="NELXxNELY for --preset, e.g. 300x100")
    p.add_argument("--dataset", help="SPhyR dataset file (JSON lines); with --index")
    p.add_argument("--index", type=int, default=0, help="record index in --dataset")
    p.add_argument("--masked", action="store_true", help="with --dataset: free only the record's V cells")
    p.add_argument("--grid", help="a SPhyR text grid (or a .json grid file) to upscale")
    p.add_argument("--upscale", type=int, default=1, help="split every cell into K x K elements")
    p.add_argument("--volfrac", type=float, help="volume fraction (default: the problem's)")
    p.add_argument("--gravity", help="gravity step dr,dc (default: 1,0, down)")
    p.add_argument("--out", required=True, help="output: .json, or a text grid for SPhyR samples")
    return p


def problem_of(args):
    from .optimiser import problems

    return problems.resolve(args.grid, args.preset, args.size, args.dataset, args.index, args.masked, args.upscale,
                            args.gravity, args.volfrac, path_option="--grid FILE")


def _run(args, context):
    from .optimiser import problems
    from .optimiser.problems import ProblemError

    try:
        problem = problem_of(args)
        path = problems.write_problem(problem, args.out)
    except ProblemError as err:
        raise UsageError(str(err)) from None
    print(f"{problem.name}: {problem.nelx}x{problem.nely} elements, {problem.n_dofs} DOFs -> {path}")
    return 0


COMMAND = cli.Command(prog="python -m sphyr_hpc.generate", build_parser=build_parser, run=_run,
                      outputs=lambda args: [Output(args.out)], mpi=False)


def main(argv=None):
    return cli.main(COMMAND, argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
