"""``python -m sphyr_hpc.prompts``: SPhyR's prompt for every dataset record, one JSON line each.

Usage::

    python -m sphyr_hpc.prompts DATASET.jsonl|FOLDER ... --out prompts.jsonl [--hard | --easy]

Each line of ``--out`` is ``{"index", "subject", "dataset", "prompt"}``: the record's index, its
subject (the dataset file's name without ``.jsonl``), the dataset file's name and the prompt
exactly as SPhyR shows it (the template filled with the record's input grid; docs/harness.md).
A subject whose name ends in ``_hard`` is asked for one-decimal densities, any other for 0 or 1;
``--hard`` or ``--easy`` sets it for every file.  A folder stands for its ``*.jsonl`` files.  A
model's answers, added to these lines as ``completion``, are what ``python -m sphyr_hpc.score
--dataset DATASET.jsonl --completions FILE`` reads.

Exit status: 0 every record has its prompt; 1 some record had none (each named on stderr,
``FILE:LINE: skipped, reason``; the others are written); 2 on a usage error (before any work).
The work is :mod:`sphyr_hpc.jobs.prompts`'s.
"""

import sys

from . import cli
from .cli import Output, Parser


def build_parser():
    parser = Parser(prog="python -m sphyr_hpc.prompts",
                    description=__doc__.splitlines()[0].split(": ", 1)[1] + "\n\n"
                    "A folder stands for its *.jsonl files; --out gets index, subject, dataset and prompt a line.")
    parser.add_argument("datasets", nargs="+", metavar="DATASET",
                        help="dataset JSONL files (index, input_grid, ground_truth) or folders of them")
    parser.add_argument("--out", required=True, help="the prompts file to write (JSONL)")
    difficulty = parser.add_mutually_exclusive_group()
    difficulty.add_argument("--hard", dest="hard", action="store_const", const=True,
                            help="ask for one-decimal densities in every file (default: by the subject's name)")
    difficulty.add_argument("--easy", dest="hard", action="store_const", const=False,
                            help="ask for 0 or 1 in every file (default: by the subject's name)")
    return parser


def _check(args):
    from .jobs.prompts import dataset_files

    dataset_files(args.datasets)


def _run(args, context):
    from .jobs.prompts import run_prompts

    return run_prompts(args.datasets, args.out, args.hard)


COMMAND = cli.Command(prog="python -m sphyr_hpc.prompts", build_parser=build_parser, run=_run, check=_check,
                      outputs=lambda args: [Output(args.out)], mpi=False)


def main(argv=None):
    return cli.main(COMMAND, argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
