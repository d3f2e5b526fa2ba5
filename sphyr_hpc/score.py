"""``python -m sphyr_hpc.score``: score SPhyR completions like the published scorer, over MPI ranks.

Usage::

    mpirun -n N python -m sphyr_hpc.score [PATH ...] [--out DIR] [--resume]
    mpirun -n N python -m sphyr_hpc.score --dataset D.jsonl --completions C.jsonl [--model NAME]
    mpirun -n N python -m sphyr_hpc.score validate --dataset D.jsonl --samples N

PATH is a result file (a JSON array of records with prompt, ground_truth,
completion) or a folder of model folders of them; with no input the bundled
example data (``examples/results``) is scored.  ``--dataset``/``--completions``
pair dataset records (index, input_grid, ground_truth) with completions (index,
completion as text or grid) by index.

Work: records are grouped by sample (ground truth, mask, gravity); each group's
yardstick is computed once, by one rank, and every completion of that sample
is scored against it.  Groups go to whichever rank is free next (largest
first), so the records written do not depend on the number of ranks.

Outputs under ``--out`` (default ``out``): ``results.jsonl`` (one object per
record: model, subject, index, every metric with infinite compliances as null,
``error`` where a record could not be scored; ``failure``, ``checks``,
``floating_clusters``, ``beats_yardstick`` (:mod:`sphyr_hpc.failures`) and the
``grids`` the report draws), appended and flushed as records
finish and sorted when the run ends; ``summary.json`` (per model and subject:
count, errors and metric means; ``failures``: category shares and the
exact_match x load_carrying table per model and overall); ``leaderboard.png``;
``report.html`` with ``report/*.png`` (unless ``--no-report``); ``run.json`` (ranks,
record counts, seconds of the scoring phase and of the process); the leaderboard is
printed.  ``--fields DIR`` also writes, for every scored record, the
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
usage error; 3 when an unexpected error on one rank aborted the job (what was
written stays valid for ``--resume``).
"""

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from mpi4py import MPI

from . import PROCESS_STARTED
from . import grid as grids
from . import loadcase as loadcases
from .io import limits as input_limits
from .io.records import (FileProblem, ResultsLog, find_result_files, read_dataset_completions,
                         read_result_file, row_key, write_text_atomic)
from .batch import SampleScorer, sample_scorers
from .failures import SUMMARY_KEY, format_failures
from .io.html_report import write_report
from .metrics import ScoringConfig, Scorer, json_safe
from .parallel import run_dynamic
from .report import format_leaderboard, leaderboard, plot_leaderboard, summarise, summary_fields, warm_up

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "results"
ABORT_STATUS = 3


def _gravity(text):
    try:
        dr, dc = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"gravity must be 'dr,dc', e.g. 1,0 (down), not {text!r}") from None
    if dr == 0.0 and dc == 0.0:
        raise argparse.ArgumentTypeError("gravity must be non-zero")
    return (dr, dc)


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m sphyr_hpc.score", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", metavar="PATH", help="result files or folders of model folders")
    parser.add_argument("--dataset", help="dataset JSONL (index, input_grid, ground_truth)")
    parser.add_argument("--completions", nargs="+", default=[], metavar="C.jsonl",
                        help="completions JSONL (index, completion) for --dataset")
    parser.add_argument("--model", help="model name for --completions (default: the file's name)")
    parser.add_argument("--out", default="out", help="output folder (default: ./out)")
    parser.add_argument("--resume", action="store_true", help="keep the records already in DIR/results.jsonl")
    parser.add_argument("--gravity", type=_gravity, default=None,
                        help="load direction dr,dc for every record (default: from the folder name)")
    parser.add_argument("--design-efficiency", action="store_true",
                        help="also re-optimise at each completion's own budget (slow)")
    parser.add_argument("--fields", metavar="DIR",
                        help="also write each record's completion, ground truth and yardstick optimum for ParaView")
    parser.add_argument("--fields-format", choices=("xdmf", "xdmf-quad", "vtu"), default="xdmf",
                        help="format of --fields (default: HDF5 + XDMF 3)")
    parser.add_argument("--report", action=argparse.BooleanOptionalAction, default=True,
                        help="write DIR/report.html and its pictures (DIR/report/*.png) at the end "
                             "(default: on; python -m sphyr_hpc.report DIR makes it again later)")
    parser.add_argument("--certified", metavar="DIR",
                        help="a certify folder: add certified_optimal_compliance and certified_structural_efficiency")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    input_limits.add_arguments(parser)
    return parser


def _paths(args):
    return list(args.paths) if args.paths or args.dataset else [EXAMPLES]


def check_inputs(args, parser):
    """Usage errors of the input options (``parser.error``: printed, exit status 2)."""
    if args.completions and not args.dataset:
        parser.error("--completions needs --dataset")
    if args.dataset and not args.completions:
        parser.error("--dataset needs --completions (to validate a dataset use: score validate --dataset ...)")
    if args.model and len(args.completions) > 1:
        parser.error("--model names one completions file; give one --completions file per run")
    paths = _paths(args)
    missing = [str(p) for p in paths + ([args.dataset] if args.dataset else []) + args.completions
               if not Path(p).exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    if args.certified and not (Path(args.certified) / "certify.jsonl").is_file():
        parser.error(f"no certify.jsonl in {args.certified} (made by python -m sphyr_hpc.certify --out DIR)")


def load_inputs(args):
    """(samples, problems) of every input, in input order; every rank reads them itself."""
    samples, problems = [], []
    limits = input_limits.from_args(args)
    for path in find_result_files(_paths(args)):
        read = read_result_file(path, gravity=args.gravity, limits=limits)
        if isinstance(read, FileProblem):
            problems.append(read)
        else:
            samples += read
    for completions in args.completions:
        read, trouble = read_dataset_completions(args.dataset, completions, args.model, args.gravity, limits)
        samples += read
        problems += trouble
    return samples, problems


def sample_key(sample):
    """What a yardstick depends on: ground truth, masked cells and gravity.

    Cells are compared by value, so an easy subject's ``1`` and a hard
    subject's ``1.0`` (SPhyR's full_easy and full_hard share samples) make one
    task: one rank computes the yardstick once, instead of two ranks twice.
    """
    if sample.error:
        return ("error", sample.key)
    truth = tuple(tuple(_cell_value(cell) for cell in row) for row in sample.ground_truth)
    mask = tuple(tuple(cell == grids.MASK for cell in row) for row in sample.input_grid or ())
    return (sample.gravity, truth, mask)


def _cell_value(cell):
    value = grids.parse_density(cell)  # None for L, S, V and anything that is not a finite number
    return cell if value is None else round(value, 6)  # rounded as YardstickKey rounds densities


def _cost(group):
    sample = group[0]
    if sample.error or not sample.ground_truth:
        return 0
    cells = sum(len(row) for row in sample.ground_truth)
    masked = sum(cell == grids.MASK for row in (sample.input_grid or ()) for cell in row) or cells
    return cells * masked


def make_tasks(samples):
    """Samples grouped by yardstick, most expensive group first (ties: input order)."""
    groups = {}
    keys = {}  # records quoting the same texts share their parsed grids: one key per sample
    for sample in samples:
        shared = None if sample.error else (id(sample.ground_truth), id(sample.input_grid), sample.gravity)
        key = keys.get(shared)
        if key is None:
            key = sample_key(sample)
            if shared is not None:
                keys[shared] = key
        groups.setdefault(key, []).append(sample)
    ordered = list(groups.values())
    ordered.sort(key=_cost, reverse=True)
    return ordered


EXPECTED_RECORD_ERRORS = (grids.GridError, loadcases.LoadCaseError)


def score_sample(sample, scorer, fields=None, fields_format="xdmf", sample_scorer=None):
    """The results row of one sample; bad data becomes ``error``, not an exception.

    With ``fields`` (a folder) the completion, the ground truth and the
    yardstick optimum are also written there for ParaView.  ``sample_scorer``:
    the :class:`~sphyr_hpc.batch.SampleScorer` of the record's sample, which
    holds what its completions share (made here when not given).
    """
    row = {"model": sample.model, "subject": sample.subject, "index": sample.index}
    if sample.error:
        row["error"] = sample.error
        return row
    try:
        if sample_scorer is None:
            sample_scorer = SampleScorer(scorer, sample.ground_truth, sample.input_grid, sample.gravity)
        metrics, case = sample_scorer.score(sample.completion)
    except EXPECTED_RECORD_ERRORS as err:
        row["error"] = f"{sample.source} record {sample.index}: {err}"
        return row
    if sample.invalid_reason:  # a completion left unparsed: scored as one with no grid, for this reason
        metrics["invalid_reason"] = sample.invalid_reason
    row.update(json_safe(metrics))
    row["grids"] = sample_scorer.record_grids(sample.completion, case)
    if fields is not None and case is not None:
        from .io.fields import write_record_fields

        masked = None
        if sample.input_grid and grids.grid_shape(sample.input_grid) == case.loadcase.shape:
            masked = grids.mask_of(sample.input_grid, grids.MASK)
        write_record_fields(fields, sample.model, sample.subject, sample.index, case.loadcase,
                            scorer.designs(case), masked=masked, penal=scorer.config.penal,
                            fields_format=fields_format)
    return row


def _progress_bar(total, quiet):
    from tqdm import tqdm

    return tqdm(total=total, unit="rec", disable=quiet, file=sys.stderr, dynamic_ncols=True, smoothing=0.05)


def run_score(args, parser, comm):
    rank = comm.rank
    # Usage is checked by rank 0 (one message); then every rank reads the inputs itself, at the
    # same time: no rank waits for rank 0 to read and pickle them all (the serial part of a run).
    usage = None
    if rank == 0:
        try:
            check_inputs(args, parser)
        except SystemExit as error:  # printed by rank 0; every rank must leave with its status, not wait
            usage = error.code
    usage = comm.bcast(usage, root=0)
    if usage is not None:
        return usage
    samples, problems = load_inputs(args)
    if not samples and not problems:
        if rank == 0:
            parser.error(f"no result files under {', '.join(map(str, _paths(args)))}")  # exit status 2
        return 2
    out = Path(args.out)
    log = ResultsLog(out / "results.jsonl")
    lock = _lock_output(out) if rank == 0 else None
    if not comm.bcast(lock is not None if rank == 0 else None, root=0):
        if rank == 0:
            print(f"error: another run is writing to {out} (it holds {out / LOCK_NAME}); "
                  f"wait for it to end or kill it before --resume", file=sys.stderr)
        return 2
    done = None
    if rank == 0:
        for problem in problems:
            print(f"error: {problem.path}: {problem.reason}", file=sys.stderr)
        if args.resume:
            done = {row_key(row) for row in log.recover()}
        else:
            log.reset()
            done = set()
    done = comm.bcast(done, root=0)
    pending = [s for s in samples if s.key not in done]
    tasks = make_tasks(pending)
    if rank == 0 and args.resume and not args.quiet:
        print(f"resuming: {len(done)} records already in {log.path}, {len(pending)} to score", file=sys.stderr)

    scorer = Scorer(ScoringConfig(design_efficiency=args.design_efficiency))
    certified = None
    if args.certified:
        from .certify import certified_metrics, read_certified, sample_id

        certified = comm.bcast(read_certified(args.certified) if rank == 0 else None, root=0)
    bar = _progress_bar(len(pending), args.quiet) if rank == 0 else None

    briefs = []  # what the summary reads of each row this rank wrote (report.summary_fields)

    def run(i, counters):
        for sample, sample_scorer in sample_scorers(scorer, tasks[i]):
            row = score_sample(sample, scorer, args.fields, args.fields_format, sample_scorer)
            if certified is not None and "error" not in row:
                row.update(certified_metrics(row, certified.get(
                    sample_id(sample.ground_truth, sample.input_grid, sample.gravity))))
            if "error" in row:
                print(f"error: {row['error']}", file=sys.stderr)
            log.append(row)
            briefs.append(summary_fields(row))
            counters.add_done(1)

    def progress(count):
        bar.update(count - bar.n)
        return count >= len(pending)

    # The leaderboard is drawn by the last rank.  With several ranks it loads matplotlib (and
    # its fonts) now, so the dynamic balancing absorbs that instead of the run's serial end.
    drawer = comm.size - 1
    comm.Barrier()
    scoring_started = time.perf_counter()
    if comm.size > 1 and rank == drawer:
        warm_up()  # the other ranks are already taking tasks
    run_dynamic(comm, len(tasks), run, progress if bar is not None else None)
    scoring_seconds = time.perf_counter() - scoring_started
    log.close()
    scorer.close()
    if bar is not None:
        bar.close()
    comm.Barrier()

    # Each rank hands rank 0 where its lines are and the few fields the summary reads, so
    # results.jsonl is sorted by copying lines, without decoding what every rank wrote.
    gathered = comm.gather((log.written, briefs) if not args.resume else None, root=0)
    status = board = None
    if rank == 0:
        if args.resume:  # the log also holds an earlier run's lines
            rows = log.finalise()
        else:
            at = {written[1]: brief for lines, kept in gathered for written, brief in zip(lines, kept)}
            rows = [at[offset] for _, offset in log.finalise_lines([w for lines, _ in gathered for w in lines])]
        summary = summarise(rows)
        board = leaderboard(summary)
        write_text_atomic(out / "summary.json", json.dumps(summary, indent=2, allow_nan=False) + "\n")
    board = comm.bcast(board, root=0)
    if rank == drawer:
        plot_leaderboard(board, out / "leaderboard.png")
        if args.report:
            write_report(out)  # from results.jsonl, as python -m sphyr_hpc.report does
    if rank == 0:
        scored = sum(1 for r in rows if "error" not in r)
        write_text_atomic(out / "run.json", json.dumps({
            "ranks": comm.size, "records": len(rows), "scored": scored, "errors": len(rows) - scored,
            "scored_this_run": len(pending), "resumed": bool(args.resume),
            # The scoring phase (every rank at work) and the whole command as this process saw it.
            "seconds": {"scoring": round(scoring_seconds, 3),
                        "process": round(time.perf_counter() - PROCESS_STARTED, 3)},
        }, indent=2) + "\n")
        print(f"\n{len(rows)} records ({scored} scored, {len(rows) - scored} errors) on {comm.size} rank(s) -> {log.path}")
        print("\n".join(format_leaderboard(board)))
        print("\n" + "\n".join(format_failures(summary[SUMMARY_KEY])))
        failed = len(problems) + len(rows) - scored
        status = 1 if failed else 0
    comm.Barrier()  # leaderboard.png is written before the output folder is unlocked
    if rank == 0:
        lock.close()
    return comm.bcast(status, root=0)


LOCK_NAME = ".sphyr_hpc.lock"


def _lock_output(out):
    """An exclusive lock on the output folder for this run (None if another run holds it).

    Two runs appending to and rewriting the same results.jsonl would lose
    records; the lock dies with its process, so a killed run never blocks --resume.
    """
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    handle = open(out / LOCK_NAME, "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "validate":
        from .validate import main as validate_main

        return validate_main(argv[1:])
    parser = build_parser()
    args, petsc_args = parser.parse_known_args(argv)
    unknown = [a for a in petsc_args if a.startswith("--")]
    if unknown:
        parser.error(f"unrecognised arguments: {' '.join(unknown)}")
    from ._petsc import petsc

    PETSc = petsc()
    if petsc_args:
        PETSc.Options().insertString(" ".join(petsc_args))
    comm = MPI.COMM_WORLD
    try:
        return run_score(args, parser, comm)
    except Exception:
        if comm.size == 1:
            raise
        traceback.print_exc(file=sys.stderr)
        print(f"sphyr_hpc.score: unexpected error on rank {comm.rank}; aborting all {comm.size} ranks "
              f"(results.jsonl stays valid for --resume)", file=sys.stderr, flush=True)
        comm.Abort(ABORT_STATUS)


if __name__ == "__main__":
    sys.exit(main())
