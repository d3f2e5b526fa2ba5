"""``python -m sphyr_hpc.score``: score SPhyR completions like the published scorer, over MPI ranks.

Usage::

    mpirun -n N python -m sphyr_hpc.score [PATH ...] [--out DIR] [--resume]
    mpirun -n N python -m sphyr_hpc.score --dataset D.jsonl --completions C.jsonl [--model NAME]
    mpirun -n N python -m sphyr_hpc.score --dataset DIR --completions DIR  # a whole benchmark: one leaderboard
    mpirun -n N python -m sphyr_hpc.score --inspect-log LOG [--model NAME]
    mpirun -n N python -m sphyr_hpc.score validate --dataset D.jsonl --samples N

PATH is a result file (a JSON array of records with prompt, ground_truth,
completion) or a folder of model folders of them; with no input the bundled
example data (``examples/results``) is scored.  ``--dataset``/``--completions``
pair dataset records (index, input_grid, ground_truth) with completions (index,
completion as text or grid) by index; a completions line may also be a line of the
prompts file with ``completion`` added, or an OpenAI batch output line (docs/harness.md).
``--inspect-log`` scores the answers of an Inspect AI log of the task ``sphyr_hpc/sphyr``
against the dataset it names (``--dataset`` when it moved), as the completions file would be.

Work: records are grouped by sample (ground truth, mask, gravity); each group's
yardstick is computed once, by one rank, and every completion of that sample
is scored against it.  Groups go to whichever rank is free next (largest
first), so the records written do not depend on the number of ranks.  With
several ranks, the SIMP runs of large samples' yardsticks are spread over the
ranks first (:mod:`sphyr_hpc.scoring.pieces`); the progress bar counts records and
SIMP runs.

Outputs under ``--out`` (default ``out``): ``results.jsonl`` (one object per
record: model, subject, index, every metric with infinite compliances as null,
``error`` where a record could not be scored; ``failure``, ``checks``,
``floating_clusters``, ``beats_yardstick`` (:mod:`sphyr_hpc.scoring.diagnosis`) and the
``grids`` the report draws), appended and flushed as records
finish and sorted when the run ends; ``summary.json`` (per model and subject:
count, answered, missing, unreadable, coverage and metric means; ``failures``:
category counts and shares, unanswered records their own category, and the
exact_match x load_carrying table per model and overall; ``uncertainty``: standard
errors, bootstrap intervals and paired comparisons of adjacent models; every key in
docs/report.md); ``leaderboard.png``;
``report.html`` with ``report/`` (a page per model, the pictures; unless ``--no-report``);
``run.json`` (ranks, record counts, seconds of the scoring phase, of the report and of
the process, and every phase's); the leaderboard is printed, then where
leaderboard.png and report.html are.  ``--fields DIR`` also writes, for every scored record, the
completion, the ground truth and the yardstick's optimum as HDF5 + XDMF (or
VTU) files for ParaView, named ``model__subject__index__design``.  ``--resume`` keeps what ``results.jsonl`` already holds and scores
the rest, so a killed run loses at most the records in flight.
``--certified DIR`` (a ``python -m sphyr_hpc.certify`` output folder) adds
``certified_optimal_compliance`` and ``certified_structural_efficiency`` to
every record whose sample certify proved optimal (null otherwise); the
published fields are unchanged.

Input is untrusted: each file and JSONL line is read on its own (one that
cannot be read is named on stderr and costs only itself), and
``--max-file-bytes``, ``--max-text-chars`` and ``--max-cells`` bound what a
file, a grid text and a ground truth may cost (``sphyr_hpc/io/limits.py``).

PETSc options (``-sphyr_ksp_type``, ``-sphyr_pc_type``, ...) may be given
anywhere on the command line.

Exit status: 0 when every record was scored; 1 when some record or input file
could not be (each is named on stderr, and records in results.jsonl); 2 on a
usage error (before any work: also an output folder that cannot be written);
3 when an unexpected error on one rank aborted the job (what was written stays
valid for ``--resume``); 4 when results.jsonl or another output could not be
written (a full disk: one line names the folder and the records kept;
``--resume`` finishes once space is freed); 130/143 when interrupted by SIGINT/SIGTERM (likewise).
The run itself is :mod:`sphyr_hpc.jobs.score`'s.
"""

import argparse
import sys
from pathlib import Path

from . import cli
from .cli import Output, Parser

# The library is imported inside the functions below, once the runner has started: an interrupt
# from the first moment takes the command's own path (this module itself loads in milliseconds).


def _gravity(text):
    """``--gravity`` for argparse: :func:`~sphyr_hpc.core.loadcase.parse_gravity`."""
    from .core import loadcase as loadcases

    try:
        return loadcases.parse_gravity(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser():
    from .io import limits as input_limits
    from .io import yardstick_store
    from .io.field_files import FORMATS
    from .solvers.sizing import MG_MIN_DOFS

    parser = Parser(
        prog="python -m sphyr_hpc.score",
        description=__doc__.splitlines()[0] + "\n\n"
        "With no PATH and no --dataset the bundled examples (examples/results: two baselines, 144\n"
        "records) are scored.  `python -m sphyr_hpc.score validate --help` describes the dataset check.",
        epilog="PETSc options for the solvers go anywhere on the command line under the prefix -sphyr_\n"
               "(-sphyr_ksp_type cg -sphyr_pc_type gamg, -sphyr_ksp_view: shown once per distinct solver);\n"
               "an option no solver reads, or a value PETSc rejects, is a usage error.\n"
               "Exit status: 0 all scored, 1 some record or file could not be, 2 usage error,\n"
               "3 unexpected error (--resume finishes the job), 4 an output could not be written (a full disk:\n"
               "likewise, once space is freed), 130/143 interrupted by SIGINT/SIGTERM (likewise).",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="result files, or folders of model folders of them (default: the bundled examples)")
    parser.add_argument("--dataset", action="append", default=[], metavar="D.jsonl|DIR",
                        help="dataset JSONL (index, input_grid, ground_truth), or a folder of them (every subject "
                             "in it); may be given again; needs --completions")
    parser.add_argument("--completions", nargs="+", default=[], metavar="C.jsonl|DIR",
                        help="completions JSONL (index, completion), or folders of them; with one dataset the "
                             "model is the file's name, with several each file answers the subject it is named by "
                             "(MODEL/SUBJECT.jsonl or SUBJECT/MODEL.jsonl)")
    parser.add_argument("--inspect-log", nargs="+", default=[], metavar="LOG",
                        help="Inspect AI logs of the task sphyr_hpc/sphyr (or folders of them), scored against "
                             "the dataset each names (or --dataset); the model is the log's")
    parser.add_argument("--model", help="model name for one --completions file (instead of the file's name)")
    parser.add_argument("--out", default="out", help="output folder, outside every input folder: results.jsonl, "
                                                     "summary.json, run.json, leaderboard.png, report.html and "
                                                     "report/ (a page per model, the pictures); the paths are "
                                                     "printed at the end")
    parser.add_argument("--resume", action="store_true",
                        help="keep the records already in OUT/results.jsonl and score the rest (same inputs only)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the results an earlier run left in OUT (without it, such an OUT is refused)")
    parser.add_argument("--gravity", type=_gravity, default=None,
                        help="load direction dr,dc for every record (default: from the folder name, else 1,0 = down)")
    parser.add_argument("--design-efficiency", action="store_true",
                        help="also re-optimise at each completion's own budget (slow)")
    parser.add_argument("--fields", metavar="DIR",
                        help="also write each record's completion, ground truth and yardstick optimum for ParaView")
    parser.add_argument("--fields-format", choices=FORMATS, default=FORMATS[0],
                        help="format of --fields: HDF5 + XDMF 3, explicit-quad XDMF, or VTU")
    parser.add_argument("--report", action=argparse.BooleanOptionalAction, default=True,
                        help="write OUT/report.html, a page per model and the pictures (OUT/report/) at the end "
                             "(python -m sphyr_hpc.report OUT makes them again later) (default: --report)")
    parser.add_argument("--certified", metavar="DIR",
                        help="a certify folder: add certified_optimal_compliance and certified_structural_efficiency")
    parser.add_argument("--multigrid-dofs", type=int, default=MG_MIN_DOFS, metavar="N",
                        help="yardstick SIMP runs use CG + multigrid from N DOFs (0: always)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    yardstick_store.add_arguments(parser)
    input_limits.add_arguments(parser)
    return parser


def _check(args):
    from .jobs.score_inputs import check_inputs

    check_inputs(args)


def _outputs(args):
    yield Output(args.out, folder=True)
    if args.fields is not None:
        yield Output(args.fields, folder=True)


def _run(args, context):
    from .jobs.score import run_score  # MPI, PETSc and the scorer: once the runner has vouched for them

    return run_score(args, context.comm)


COMMAND = cli.Command(
    prog="python -m sphyr_hpc.score", build_parser=build_parser, run=_run, outputs=_outputs, check=_check,
    h5py=lambda args: args.fields is not None and args.fields_format != "vtu",
    interrupt_note=lambda args: (f"; the records scored so far are in {Path(args.out) / 'results.jsonl'}: "
                                 f"run the same command with --resume to finish"),
    abort_note=" (results.jsonl stays valid for --resume)")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "validate":  # the dataset check, also python -m sphyr_hpc.validate
        from .validate import main as validate_main

        return validate_main(argv[1:], prog="python -m sphyr_hpc.score validate")
    return cli.main(COMMAND, argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
