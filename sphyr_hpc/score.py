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
first), so the records written do not depend on the number of ranks.  With
several ranks, the SIMP runs of large samples' yardsticks are spread over the
ranks first (:mod:`sphyr_hpc.split`); the progress bar counts records and
SIMP runs.

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
import signal
import sys
import time
import traceback
from pathlib import Path

from . import PROCESS_STARTED
from . import grid as grids
from . import loadcase as loadcases
from .cli import Parser, UsageError, report_usage_error
from .failures import SUMMARY_KEY, format_failures
from .io import limits as input_limits
from .io.field_files import FORMATS
from .io.records import (FileProblem, ResultsLog, find_result_files, read_dataset_completions,
                         read_result_file, row_key, sort_key, write_text_atomic)
# mpi4py, PETSc and what needs them are imported once _petsc.require() has vouched for them, so
# that --help and the install message work without them.
from .solvers.sizing import MG_MIN_DOFS

# The bundled example records: the repository's examples/ folder, which sphyr_hpc/_examples links
# to and a non-editable install carries as package data.
# (The package's own folder, which is what importlib.resources.files("sphyr_hpc") gives for an
# installed or editable package, without importing importlib.resources at every start.)
EXAMPLES = Path(__file__).parent / "_examples" / "results"
ABORT_STATUS = 3


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised like SIGINT so that both end the run the same way."""


def _gravity(text):
    """``--gravity`` for argparse: :func:`~sphyr_hpc.loadcase.parse_gravity`."""
    try:
        return loadcases.parse_gravity(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser():
    parser = Parser(
        prog="python -m sphyr_hpc.score",
        description=__doc__.splitlines()[0] + "\n\n"
        "With no PATH and no --dataset the bundled examples (examples/results: two baselines, 144\n"
        "records) are scored.  `python -m sphyr_hpc.score validate --help` describes the dataset check.",
        epilog="PETSc options for the solvers go anywhere on the command line under the prefix -sphyr_\n"
               "(-sphyr_ksp_type cg -sphyr_pc_type gamg, -sphyr_ksp_view: shown once per distinct solver);\n"
               "an option no solver reads, or a value PETSc rejects, is a usage error.\n"
               "Exit status: 0 all scored, 1 some record or file could not be, 2 usage error,\n"
               "3 unexpected error (--resume finishes the job), 130/143 interrupted by SIGINT/SIGTERM (likewise).",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="result files, or folders of model folders of them (default: the bundled examples)")
    parser.add_argument("--dataset", help="dataset JSONL (index, input_grid, ground_truth); needs --completions")
    parser.add_argument("--completions", nargs="+", default=[], metavar="C.jsonl",
                        help="completions JSONL (index, completion) of --dataset's records; the model is the "
                             "file's name")
    parser.add_argument("--model", help="model name for one --completions file (instead of the file's name)")
    parser.add_argument("--out", default="out", help="output folder (results.jsonl, summary.json, leaderboard.png, "
                                                     "run.json); outside every input folder")
    parser.add_argument("--resume", action="store_true",
                        help="keep the records already in OUT/results.jsonl and score the rest (same inputs only)")
    parser.add_argument("--gravity", type=_gravity, default=None,
                        help="load direction dr,dc for every record (default: from the folder name, else 1,0 = down)")
    parser.add_argument("--design-efficiency", action="store_true",
                        help="also re-optimise at each completion's own budget (slow)")
    parser.add_argument("--fields", metavar="DIR",
                        help="also write each record's completion, ground truth and yardstick optimum for ParaView")
    parser.add_argument("--fields-format", choices=FORMATS, default=FORMATS[0],
                        help="format of --fields: HDF5 + XDMF 3, explicit-quad XDMF, or VTU")
    parser.add_argument("--report", action=argparse.BooleanOptionalAction, default=True,
                        help="write DIR/report.html and its pictures (DIR/report/*.png) at the end "
                             "(python -m sphyr_hpc.report DIR makes it again later)")
    parser.add_argument("--certified", metavar="DIR",
                        help="a certify folder: add certified_optimal_compliance and certified_structural_efficiency")
    parser.add_argument("--multigrid-dofs", type=int, default=MG_MIN_DOFS, metavar="N",
                        help="yardstick SIMP runs use CG + multigrid from N DOFs (0: always)")
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
    if not args.paths and not args.dataset and not EXAMPLES.is_dir():
        parser.error(f"no input given and the bundled examples are not installed ({EXAMPLES}): name result "
                     f"files or folders, or --dataset D.jsonl --completions C.jsonl")
    missing = [str(p) for p in paths + ([args.dataset] if args.dataset else []) + args.completions
               if not Path(p).exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    if args.certified and not (Path(args.certified) / "certify.jsonl").is_file():
        parser.error(f"no certify.jsonl in {args.certified} (made by python -m sphyr_hpc.certify --out DIR)")
    check_output_folders(args, paths, parser)


def load_inputs(args):
    """(samples, problems) of every input, in input order; every rank reads them itself.

    Ground truths and prompts are parsed once per distinct text; completions are kept as read
    and parsed by the rank that scores them (:meth:`~sphyr_hpc.io.records.Sample.parsed`).
    """
    samples, problems = [], []
    limits = input_limits.from_args(args)
    for path in find_result_files(_paths(args)):
        read = read_result_file(path, gravity=args.gravity, limits=limits, defer_completion=True)
        if isinstance(read, FileProblem):
            problems.append(read)
        else:
            samples += read
    for completions in args.completions:
        read, trouble = read_dataset_completions(args.dataset, completions, args.model, args.gravity, limits,
                                                 defer_completion=True)
        samples += read
        problems += trouble
    return samples, problems


def check_output_folders(args, paths, parser):
    """--out and --fields must be folders (or not exist yet) outside every input folder."""
    inputs = [Path(p).resolve() for p in paths + [args.dataset] + args.completions if p]
    for option, folder in (("--out", args.out), ("--fields", args.fields)):
        if folder is None:
            continue
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            parser.error(f"{option} {folder} is a file; {option} names a folder (give a new or existing folder)")
        resolved = folder.resolve()
        for source in inputs:
            if source.is_dir() and (resolved == source or source in resolved.parents):
                parser.error(f"{option} {folder} is inside the input folder {source}: the next run would read "
                             f"its outputs as results; choose a folder outside it")


def inputs_of(args, paths):
    """What a run's records come from, as run.json records it: --resume must see the same."""
    return {"paths": sorted(str(Path(p).resolve()) for p in paths),
            "dataset": str(Path(args.dataset).resolve()) if args.dataset else None,
            "completions": [str(Path(c).resolve()) for c in args.completions],
            "model": args.model, "gravity": list(args.gravity) if args.gravity else None,
            "design_efficiency": args.design_efficiency}


def check_resume(run_json, inputs):
    """A UsageError naming what differs if ``run_json`` was written from other inputs."""
    try:
        before = json.loads(Path(run_json).read_text(encoding="utf-8")).get("inputs")
    except (OSError, ValueError, AttributeError):
        return  # no (readable) record of the inputs: nothing to compare
    if not isinstance(before, dict):
        return
    changed = [key for key in inputs if before.get(key) != inputs[key]]
    if changed:
        what = "; ".join(f"{key}: {before.get(key)} then, {inputs[key]} now" for key in changed)
        raise UsageError(f"--resume: {Path(run_json).parent} was written from other inputs ({what}); "
                         f"rerun with the same inputs, or drop --resume to start over")


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
    shared = {}  # records quoting the same texts share their parsed grids: grouped by identity first
    for sample in samples:
        if sample.error:
            groups.setdefault(sample_key(sample), []).append(sample)
        else:
            shared.setdefault((id(sample.ground_truth), id(sample.input_grid), sample.gravity), []).append(sample)
    for records in shared.values():  # then by value: one sample_key per distinct text, not per record
        groups.setdefault(sample_key(records[0]), []).extend(records)
    ordered = list(groups.values())
    ordered.sort(key=_cost, reverse=True)
    return ordered


def sorted_places(samples):
    """``(position, owner)``: each record key's place in the sorted results file, and the sample
    whose row the file keeps when several share a key (the last in input order)."""
    owner = {sample.key: sample for sample in samples}
    return {key: i for i, key in enumerate(sorted(owner, key=sort_key))}, owner


EXPECTED_RECORD_ERRORS = (grids.GridError, loadcases.LoadCaseError)


def score_sample(sample, scorer, fields=None, fields_format="xdmf", sample_scorer=None):
    """The results row of one sample; bad data becomes ``error``, not an exception.

    With ``fields`` (a folder) the completion, the ground truth and the
    yardstick optimum are also written there for ParaView.  ``sample_scorer``:
    the :class:`~sphyr_hpc.batch.SampleScorer` of the record's sample, which
    holds what its completions share (made here when not given).
    """
    from .batch import SampleScorer
    from .io.atomic import json_safe

    sample = sample.parsed()  # a completion read with defer_completion is parsed here, by its rank
    row = {"model": sample.model, "subject": sample.subject, "index": sample.index}
    if sample.error:
        row["error"] = sample.error
        if sample.completion_status:
            row["completion_status"] = sample.completion_status  # counts 0 in the model's means
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
    """Steps: one per record and one per SIMP run of a yardstick (split.Steps), so it moves inside a sample.
    None with ``quiet``: nothing drawn, nothing polled, tqdm not even imported."""
    if quiet:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="step", file=sys.stderr, dynamic_ncols=True, smoothing=0.05)


def run_score(args, parser, comm):
    from .io.html_report import write_report
    from . import split
    from .scorer import ScoringConfig, Scorer
    from .parallel import run_dynamic
    from .batch import sample_scorers
    from .report import RunningSummary, format_leaderboard, leaderboard, plot_leaderboard, warm_up

    rank = comm.rank
    started = time.perf_counter()  # sphyr_hpc, MPI and PETSc are loaded: the start-up ends here
    # Usage is checked by rank 0 (one message); then every rank reads the inputs itself, at the
    # same time: no rank waits for rank 0 to read and pickle them all (the serial part of a run).
    usage = None
    if rank == 0:
        try:
            check_inputs(args, parser)
        except UsageError as err:
            usage = err
    usage = comm.bcast(usage, root=0)
    if usage is not None:
        raise usage  # every rank leaves with it; rank 0 prints it
    reading = time.perf_counter()
    samples, problems = load_inputs(args)
    if not samples and not problems:
        raise UsageError(f"no result files under {', '.join(map(str, _paths(args)))}")
    out = Path(args.out)
    log = ResultsLog(out / "results.jsonl")
    lock = _lock_output(out) if rank == 0 else None
    if not comm.bcast(lock is not None if rank == 0 else None, root=0):
        if rank == 0:
            print(f"error: another run is writing to {out} (it holds {out / LOCK_NAME}); "
                  f"wait for it to end or kill it before --resume", file=sys.stderr)
        return 2
    done = None
    sources = inputs_of(args, _paths(args))
    if rank == 0:
        try:
            if args.resume:
                check_resume(out / "run.json", sources)
        except UsageError as err:
            done = err
        else:
            for problem in problems:
                print(f"error: {problem.path}: {problem.reason}", file=sys.stderr)
            if args.resume:
                done = {row_key(row) for row in log.recover()}
            else:
                log.reset()
                done = set()
            write_text_atomic(out / "run.json", json.dumps({"inputs": sources, "finished": False}, indent=2) + "\n")
    done = comm.bcast(done, root=0)
    if isinstance(done, UsageError):
        if lock is not None:
            lock.close()
        raise done
    pending = [s for s in samples if s.key not in done]
    tasks = make_tasks(pending)
    read = time.perf_counter()
    if rank == 0 and args.resume and not args.quiet:
        print(f"resuming: {len(done)} records already in {log.path}, {len(pending)} to score", file=sys.stderr)

    scorer = Scorer(ScoringConfig(design_efficiency=args.design_efficiency, mg_min_dofs=args.multigrid_dofs))
    certified = None
    if args.certified:
        from .certify import certified_metrics, read_certified, sample_id

        certified = comm.bcast(read_certified(args.certified) if rank == 0 else None, root=0)
    # Large samples' yardsticks in pieces over the ranks first (sphyr_hpc/split.py), then every group.
    pieces = split.plan(tasks, scorer, comm.size)
    cases = {p.task: p.case for p in pieces}
    promised = [len(group) + (0 if i in cases or group[0].error else split.YARDSTICK_RUNS)
                for i, group in enumerate(tasks)]
    phase = {"offset": 0, "total": sum(p.runs for p in pieces)}
    bar = _progress_bar(phase["total"] + sum(promised), args.quiet) if rank == 0 else None

    def progress(count):
        bar.update(phase["offset"] + count - bar.n)
        return count >= phase["total"]

    steps = split.Steps(progress if bar is not None else None)
    scorer.on_run = steps.step
    computed = {}

    def run_piece(i, counters):
        steps.start(counters, pieces[i].runs)
        computed[(pieces[i].task, pieces[i].piece)] = scorer.run_piece(pieces[i].case, pieces[i].piece)
        steps.finish()

    # What the end of the run needs of the rows this rank writes: the summary's running counts and
    # sums, and where each line is in the log and goes in the sorted file (sorted_places).
    running = RunningSummary()
    position, owner = sorted_places(pending)
    places = []

    def run(i, counters):
        steps.start(counters, promised[i])
        if i in gathered:
            scorer.supply(cases[i], gathered.pop(i))
        for sample, sample_scorer in sample_scorers(scorer, tasks[i]):
            row = score_sample(sample, scorer, args.fields, args.fields_format, sample_scorer)
            if certified is not None and "error" not in row:
                row.update(certified_metrics(row, certified.get(
                    sample_id(sample.ground_truth, sample.input_grid, sample.gravity))))
            if "error" in row:
                print(f"error: {row['error']}", file=sys.stderr)
            offset, length = log.append(row)
            if owner[sample.key] is sample:  # not a row the sorted file drops
                running.add(row)
                places.append((position[sample.key], offset, length))
            steps.step(1)
        steps.finish()

    # The leaderboard is drawn by the last rank.  With several ranks it loads matplotlib (and
    # its fonts) now, so the dynamic balancing absorbs that instead of the run's serial end.
    drawer = comm.size - 1
    comm.Barrier()
    scoring_started = time.perf_counter()
    if comm.size > 1 and rank == drawer:
        warm_up()  # the other ranks are already taking tasks
    gathered = {}
    if pieces:
        run_dynamic(comm, len(pieces), run_piece, progress if bar is not None else None)
        gathered = split.gather_pieces(comm, computed)
        computed.clear()
        phase.update(offset=phase["total"], total=sum(promised))
    else:
        phase["total"] = sum(promised)
    run_dynamic(comm, len(tasks), run, progress if bar is not None else None)
    scoring_seconds = time.perf_counter() - scoring_started
    log.close()
    scorer.close()
    if bar is not None:
        bar.close()
    comm.Barrier()

    # results.jsonl sorted: every rank copies its own lines to their places (ResultsLog.assemble);
    # the summary from the ranks' running sums.  Neither reads back nor holds what was written.
    status = board = None
    if args.resume:  # the log also holds an earlier run's lines: decoded and rewritten by rank 0
        if rank == 0:
            running = RunningSummary()
            for row in log.finalise():
                running.add(row)
    else:
        log.assemble(comm, places, len(position))
        parts = comm.gather(running, root=0)
        if rank == 0:
            running = parts[0]
            for part in parts[1:]:
                running.merge(part)
    if rank == 0:
        summary = running.result()
        board = leaderboard(summary)
        write_text_atomic(out / "summary.json", json.dumps(summary, indent=2, allow_nan=False) + "\n")
    board = comm.bcast(board, root=0)
    if rank == drawer:
        plot_leaderboard(board, out / "leaderboard.png")
        if args.report:
            write_report(out)  # from results.jsonl, as python -m sphyr_hpc.report does
    if rank == 0:
        records, scored = running.records, running.scored
        write_text_atomic(out / "run.json", json.dumps({
            "ranks": comm.size, "records": records, "scored": scored, "errors": records - scored,
            "scored_this_run": len(pending), "resumed": bool(args.resume), "inputs": sources, "finished": True,
            # The scoring phase (every rank at work) and the whole command as this process saw it;
            # phases: rank 0's start-up (imports, MPI), reading the inputs and grouping them, and
            # the end (results.jsonl assembled, summary.json); process - scoring is the serial part.
            "seconds": {"scoring": round(scoring_seconds, 3),
                        "process": round(time.perf_counter() - PROCESS_STARTED, 3),
                        "phases": {"start_up": round(started - PROCESS_STARTED, 3),
                                   "reading": round(read - reading, 3),
                                   "finishing": round(time.perf_counter() - scoring_started - scoring_seconds, 3)}},
        }, indent=2) + "\n")
        print(f"\n{records} records ({scored} scored, {records - scored} errors) on {comm.size} rank(s) -> {log.path}")
        print("\n".join(format_leaderboard(board)))
        print("\n" + "\n".join(format_failures(summary[SUMMARY_KEY])))
        failed = len(problems) + records - scored
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
    import errno
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    handle = open(out / LOCK_NAME, "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    except OSError as err:
        if err.errno not in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP):
            raise
        # A file system without locks (Lustre mounted without -o flock, some NFS): the run goes on.
        print(f"warning: {out} is on a file system without file locks ({err.strerror}): nothing stops "
              f"another run from writing there at the same time", file=sys.stderr)
    return handle


def _raise_interrupted(signum, frame):
    raise Interrupted()


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "validate":
        from .validate import main as validate_main

        return validate_main(argv[1:])
    from ._petsc import OptionsError, check_options, command_options, require, split_petsc_args

    parser = build_parser()
    ours, petsc_args = split_petsc_args(argv)
    try:
        args = parser.parse_args(ours)
    except UsageError as err:
        return report_usage_error(parser.prog, f"{err} (see --help)")
    require(parser.prog, h5py=args.fields is not None and args.fields_format != "vtu")
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        with command_options(petsc_args):
            check_options()
            return run_score(args, parser, comm)
    except (UsageError, OptionsError) as err:
        return report_usage_error(parser.prog, err, comm.rank)
    except KeyboardInterrupt as err:
        signum = signal.SIGTERM if isinstance(err, Interrupted) else signal.SIGINT
        status = 128 + signum  # the shell's convention for a process ended by a signal
        if comm.rank == 0:
            print(f"\n{parser.prog}: interrupted ({signal.Signals(signum).name}); the records scored so far are in "
                  f"{Path(args.out) / 'results.jsonl'}: run the same command with --resume to finish",
                  file=sys.stderr, flush=True)
        if comm.size > 1:
            comm.Abort(status)  # the other ranks may be inside a collective
        return status
    except Exception:
        if comm.size == 1:
            raise
        traceback.print_exc(file=sys.stderr)
        print(f"sphyr_hpc.score: unexpected error on rank {comm.rank}; aborting all {comm.size} ranks "
              f"(results.jsonl stays valid for --resume)", file=sys.stderr, flush=True)
        comm.Abort(ABORT_STATUS)
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
