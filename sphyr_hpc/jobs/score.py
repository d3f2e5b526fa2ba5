"""What ``python -m sphyr_hpc.score`` runs: inputs -> tasks over ranks -> results.jsonl -> summary -> report.

:class:`ScoringRun` is one run, in named steps: the inputs read (every rank
reads them itself), the output folder locked and its log opened (``--resume``
keeps what it holds), the large samples' yardsticks spread over the ranks in
pieces (:mod:`sphyr_hpc.scoring.pieces`), every group of records scored on
whichever rank is free (:func:`~sphyr_hpc.runtime.tasks.run_dynamic`), then
results.jsonl sorted, summary.json, leaderboard.png, report.html and last
run.json with ``"finished": true``: a run that did not get there (killed,
interrupted, aborted) never says it finished.
"""

import json
import time
from pathlib import Path

from ..io.atomic import write_text_atomic
from ..io.jsonl import read_rows
from ..io.output_lock import LockRefused, acquire, this_process
from ..io.results_log import ResultsLog, row_key
from ..io.yardstick_store import store_of_arguments
from ..reporting.html import PICTURES, REPORT_NAME
from ..reporting.leaderboard import plot_leaderboard, warm_up
from ..runtime.messages import WRITE_FAILED_STATUS, certified_count, prog_of, say, unanswered, write_failed
from ..runtime.petsc import trim_memory
from ..runtime.process import PEER_GRACE_SECONDS, PROCESS_STARTED, UsageError, heap_frozen
from ..runtime.progress import progress_bar
from ..runtime.tasks import Interruptible, run_dynamic, wait_idle
from ..scoring import pieces
from ..scoring.certified import certified_metrics, read_certified, sample_id
from ..scoring.diagnosis import SUMMARY_KEY, format_failures
from ..scoring.sample_scorer import sample_scorers
from ..scoring.scorer import Scorer, ScoringConfig
from ..reporting.collect import ReportData
from ..scoring.summary import format_leaderboard, leaderboard
from ..scoring.tasks import make_tasks, score_record, sorted_places
from ..scoring.tool_runs import TOOLS_KEY, format_tool_runs
from ..scoring.yardstick_store import StoredYardsticks, format_counts, merged, summed
from .report import Report
from ..io.inspect_log import FAILED_IN_INSPECT
from .score_inputs import check_resume, input_paths, inputs_of, load_inputs

PROG = prog_of("score")
# The records a model left without a completion, one per line (model, subject, index, where): written
# to --out instead of one stderr line each.
UNANSWERED_NAME = "unanswered.txt"
# Added to the "items done" counter when a rank stops writing: more than any run's items, so rank 0's
# progress stops waiting for the ones that will not come.
STOPPED = 1 << 40


def _kept(log_path):
    """The complete records of a results.jsonl (what --resume keeps)."""
    try:
        return len(read_rows(log_path)[0])
    except OSError:
        return "(unknown number of)"


def _failed_folder(err, out):
    return Path(err.filename).parent if getattr(err, "filename", None) else out


class ScoringRun:
    """One scoring run on ``comm``: :meth:`run` returns the exit status (the same on every rank)."""

    def __init__(self, args, comm):
        self.args, self.comm, self.rank = args, comm, comm.rank
        self.out = Path(args.out)
        self.log = ResultsLog(self.out / "results.jsonl")
        self.lock = None
        self.unanswered = []  # this rank's records without a completion (UNANSWERED_NAME)
        self.certified = 0  # this rank's records given a certified optimum (--certified)
        self.write_error = None  # the OSError of a failed append to results.jsonl on this rank
        self.times = {"started": time.perf_counter()}  # sphyr_hpc, MPI and PETSc are loaded: start-up ends

    def run(self):
        self.times["reading"] = time.perf_counter()
        # Every rank reads the inputs itself, at the same time: no rank waits for rank 0 to read and
        # pickle them all (the serial part of a run).
        samples, problems = load_inputs(self.args)
        if not samples and not problems:
            raise UsageError(f"no result files under {', '.join(map(str, input_paths(self.args) + self.args.inspect_log))}")
        if not self._lock():
            return 2
        try:
            return self._locked_run(samples, problems)
        finally:  # however the run ends (interrupted too), the folder is free for --resume
            if self.lock is not None:
                self.lock.release()

    def _locked_run(self, samples, problems):
        self.problems_count = len(problems)
        done = self._open_log(problems)
        pending = [s for s in samples if s.key not in done]
        tasks = make_tasks(pending)
        self.times["read"] = time.perf_counter()
        if self.rank == 0 and self.args.resume and not self.args.quiet:
            say(PROG, f"resuming: {len(done)} records already in {self.log.path}, {len(pending)} to score")
        try:
            with heap_frozen():  # the inputs (read once, kept to the end) out of the collector's scans
                running, places, total = self._score(pending, tasks)
            failed = [err for err in self.comm.allgather(self.write_error) if err is not None]
            if failed:
                return self._stopped_writing(failed[0])
            return self._finish(pending, running, places, total)
        except OSError as err:  # writing the end of the run (rank 0 or the drawer alone): see _write_failed
            return self._write_failed(err)

    def _stop_writing(self, err, counters, n_tasks):
        """An append to results.jsonl failed on this rank (a full disk, a quota, a folder gone): no rank
        takes another task, and rank 0's progress stops waiting for the records that will not come.
        Collective from here on like a finished run, so no rank is aborted (:meth:`_stopped_writing`)."""
        self.write_error = err
        counters.stop(n_tasks)
        counters.add_done(STOPPED)

    def _stopped_writing(self, err):
        """Every rank, after a failed append on one of them: one line from rank 0 naming the folder, the
        records kept (every complete line of results.jsonl, which --resume keeps) and what to do."""
        if self.rank == 0:
            say(PROG, write_failed(_failed_folder(err, self.out), err, _kept(self.log.path)))
            self.lock.close()
        return WRITE_FAILED_STATUS

    def _write_failed(self, err):
        """A write at the end of the run failed on this rank (the others may wait in a collective): the
        same line, then every rank ended.  Another rank that hits it too waits for rank 0's abort first,
        so the line is printed once."""
        if self.rank != 0 and self.comm.size > 1:
            time.sleep(PEER_GRACE_SECONDS)
        say(PROG, write_failed(_failed_folder(err, self.out), err, _kept(self.log.path)))
        if self.comm.size > 1:
            self.comm.Abort(WRITE_FAILED_STATUS)
        return WRITE_FAILED_STATUS

    def _lock(self):
        """The output folder locked by rank 0 for this run, naming every rank's process (False:
        another run holds it, said on stderr; see sphyr_hpc/io/output_lock.py)."""
        processes = self.comm.gather(this_process(), root=0)
        refused = None
        if self.rank == 0:
            try:
                self.lock = acquire(self.out, processes, lambda text: say(PROG, text))
            except LockRefused as err:
                refused = err
                say(PROG, f"error: {err}")
        return not self.comm.bcast(refused is not None, root=0)

    def _open_log(self, problems):
        """The keys of the records already scored (``--resume``); results.jsonl and run.json started."""
        done = None
        self.sources = inputs_of(self.args, input_paths(self.args))
        if self.rank == 0:
            try:
                if self.args.resume:
                    check_resume(self.out / "run.json", self.sources)
            except UsageError as err:
                done = err
            else:
                for problem in problems:  # not fatal: the rest is scored (exit status 1)
                    say(PROG, f"not scored: {problem.path}: {problem.reason}")
                if self.args.resume:
                    done = {row_key(row) for row in self.log.recover()}
                else:
                    self.log.reset()
                    done = set()
                self.write_run_json({"inputs": self.sources, "finished": False})
        done = self.comm.bcast(done, root=0)
        if isinstance(done, UsageError):
            if self.lock is not None:
                self.lock.close()
            raise done
        return done

    def write_run_json(self, content):
        write_text_atomic(self.out / "run.json", json.dumps(content, indent=2) + "\n")

    def _score(self, pending, tasks):
        """Every pending record scored and appended to the log: ``(running summary, places, total)``."""
        args, comm = self.args, self.comm
        self.stored, scorer = _scorer(args)
        certified = None
        if args.certified:
            certified = comm.bcast(read_certified(args.certified) if self.rank == 0 else None, root=0)
        # Large samples' yardsticks in pieces over the ranks first (scoring/pieces.py), then every group.
        planned = pieces.plan(tasks, scorer, comm.size, comm=comm)
        cases = {p.task: p.case for p in planned}
        promised = [len(group) + (0 if i in cases or group[0].error else pieces.YARDSTICK_RUNS)
                    for i, group in enumerate(tasks)]
        phase = {"offset": 0, "total": sum(p.runs for p in planned)}
        self.bar = bar = progress_bar(phase["total"] + sum(promised), args.quiet) if self.rank == 0 else None

        def progress(count):
            bar.update(min(phase["offset"] + count, bar.total) - bar.n)
            return count >= phase["total"]

        refresh = progress if bar is not None else None
        steps = pieces.Steps(refresh)
        scorer.on_run = steps.step
        computed = {}

        def run_piece(i, counters):
            steps.start(counters, planned[i].runs)
            computed[(planned[i].task, planned[i].piece)] = scorer.run_piece(planned[i].case, planned[i].piece)
            steps.finish()

        # What the end of the run needs of the rows this rank writes: the summary's running counts and
        # sums and the report's data (best and worst rows, categories), and where each line is in the
        # log and goes in the sorted file (sorted_places).
        running = ReportData()
        position, owner = sorted_places(pending)
        places = []

        def run(i, counters):
            if self.write_error is not None:  # claimed before this rank stopped: left for --resume
                return
            steps.start(counters, promised[i])
            if i in gathered:
                scorer.supply(cases[i], gathered.pop(i))
            self.stored.dataset = ",".join(sorted({sample.subject for sample in tasks[i]}))  # provenance
            for sample, sample_scorer in sample_scorers(scorer, tasks[i]):
                row, text = score_record(sample, scorer, args.fields, args.fields_format, sample_scorer)
                row = self._noted(row, sample, certified)
                try:  # the row's own text, unless --certified adds to the row
                    offset, length = self.log.append(row, text if certified is None else None)
                except OSError as err:
                    return self._stop_writing(err, counters, len(tasks))
                if owner[sample.key] is sample:  # not a row the sorted file drops
                    running.add(row)
                    places.append((position[sample.key], offset, length))
                steps.step(1)
            steps.finish()

        comm.Barrier()
        self.times["scoring"] = time.perf_counter()
        if comm.size > 1 and self.rank == self.drawer:
            # With several ranks the drawer loads matplotlib (and its fonts) now, so the dynamic
            # balancing absorbs that instead of the run's serial end.
            warm_up()  # the other ranks are already taking tasks
        gathered = {}
        if planned:
            run_dynamic(comm, len(planned), run_piece, refresh)
            gathered = pieces.gather_pieces(comm, computed)
            computed.clear()
            phase.update(offset=phase["total"], total=sum(promised))
        else:
            phase["total"] = sum(promised)
        run_dynamic(comm, len(tasks), run, refresh)
        self.times["scored"] = time.perf_counter()
        self.yardsticks = _yardstick_counts(comm, self.stored)
        self.completions = _completion_counts(comm, self.stored)
        self.log.close()
        scorer.close()
        if bar is not None:
            bar.close()
        comm.Barrier()
        return running, places, len(position)

    def _noted(self, row, sample, certified):
        """``row`` with its certified metrics (--certified), counted; a record without a completion
        is listed for unanswered.txt, another error said on stderr."""
        if certified is not None and "error" not in row:
            row.update(certified_metrics(row, certified.get(
                sample_id(sample.ground_truth, sample.input_grid, sample.gravity))))
            self.certified += row["certified_optimal_compliance"] is not None
        if row.get("completion_status") == "missing":
            self.unanswered.append(f"{row['model']}\t{row['subject']}\t{row['index']}\t{row['error']}")
        elif "error" in row:
            say(PROG, f"error: {row['error']}")
        return row

    @property
    def drawer(self):
        """The rank that draws leaderboard.png and writes report.html: the last one."""
        return self.comm.size - 1

    def _finish(self, pending, running, places, total):
        """results.jsonl sorted, summary.json, the pictures and report, then run.json "finished"."""
        comm, rank, out = self.comm, self.rank, self.out
        trim_memory()  # the end's peak is its own, not stacked on what scoring freed (about 100 MB)
        if self.args.resume:  # rank 0 counts every row of the log again while sorting it
            self.certified = 0
        running = self._sort_log(running, places, total)
        unanswered_lines = self._write_unanswered()
        certified = sum(comm.gather(self.certified, root=0) or [])
        summary = None
        if rank == 0:
            summary = running.result()
            write_text_atomic(out / "summary.json", json.dumps(summary, indent=2, allow_nan=False) + "\n")
        # Waits below are asleep (wait_idle), not in a spinning collective: a rank that waits must not
        # take a shared core from the one summing up or drawing.
        wait_idle(comm)
        self.times["summarised"] = time.perf_counter()
        board, report_seconds = _pictures_and_report(self, running, summary)
        status = None
        if rank == 0:
            records, scored = running.records, running.scored
            missing = len(unanswered_lines or ())
            print(f"\n{records} records ({scored} scored, {missing} without a completion, {records - scored - missing} "
                  f"errors) on {comm.size} rank(s) -> {self.log.path}")
            if self.problems_count:
                print(f"not scored: {self.problems_count} of the inputs' files or lines (each named above)")
            print(format_counts(self.yardsticks, self.stored.store, self.completions))
            print("\n".join(format_leaderboard(board)))
            if TOOLS_KEY in summary:  # runs with tools: their delta against the runs without, and calls
                print("\n" + "\n".join(format_tool_runs(summary[TOOLS_KEY])))
            print("\n" + "\n".join(format_failures(summary[SUMMARY_KEY])))
            if self.args.certified:
                say(PROG, certified_count(self.args.certified, certified, scored))
            if unanswered_lines:
                say(PROG, unanswered(len(unanswered_lines), records, out / UNANSWERED_NAME))
                failed = [line for line in unanswered_lines if FAILED_IN_INSPECT in line]
                if failed:  # not the model's answers: the Inspect run's samples failed
                    first = failed[0].split(FAILED_IN_INSPECT + ": ", 1)[1]
                    say(PROG, f"{len(failed)} of them are samples that failed in Inspect, not answers (the first "
                              f"error: {first}): rerun them (inspect eval-retry LOG) and score the log again")
            print(f"\nleaderboard: {out / 'leaderboard.png'}")
            if self.args.report:
                print(f"report: {out / REPORT_NAME} (a page per model in {out / PICTURES})")
            status = 1 if self.problems_count + records - scored else 0
            _write_finished(self, running, len(pending), report_seconds)
            self.lock.close()
        return comm.bcast(status, root=0)

    def _write_unanswered(self):
        """Rank 0: the records without a completion, sorted, in OUT/unanswered.txt (removed when there
        are none); returns their lines (the other ranks: None).  With --resume the earlier run's are
        counted too (rank 0 reads them back while sorting the log)."""
        parts = self.comm.gather(self.unanswered, root=0)
        if self.rank != 0:
            return None
        lines = sorted(set(sum(parts, [])), key=lambda line: line.split("\t")[:2] + [int(line.split("\t")[2])])
        path = self.out / UNANSWERED_NAME
        if lines:
            write_text_atomic(path, "model\tsubject\tindex\twhere\n" + "\n".join(lines) + "\n")
        elif path.exists():
            path.unlink()
        return lines

    def _sort_log(self, running, places, total):
        """results.jsonl sorted, and rank 0's summary of all of it.

        Every rank copies its own lines to their places (ResultsLog.assemble) and the summary
        comes from the ranks' running sums: neither reads back nor holds what was written.
        With --resume the log also holds an earlier run's lines: decoded and rewritten by rank 0.
        """
        if self.args.resume:
            if self.rank == 0:
                running = ReportData()
                for row in self.log.finalise():
                    running.add(row)
                    self.certified += row.get("certified_optimal_compliance") is not None
                    if row.get("completion_status") == "missing":
                        self.unanswered.append(f"{row['model']}\t{row['subject']}\t{row['index']}\t{row['error']}")
            return running
        self.log.assemble(self.comm, places, total)
        parts = self.comm.gather(running, root=0)
        if self.rank == 0:
            running = parts[0]
            for part in parts[1:]:
                running.merge(part)
        return running


def _pictures_and_report(run, running, summary):
    """Every rank: leaderboard.png and the report, from the ranks' merged data (as python -m
    sphyr_hpc.report makes it from results.jsonl, without reading it back).  Every rank writes a
    share of the model pages, the drawer a small one: it also draws leaderboard.png, the charts and
    report.html before it waits for the others' pages.  Returns the leaderboard and the report's
    seconds (None: --no-report); sets ``run.end``: what the end cost each rank."""
    comm, rank, out, report, main = run.comm, run.rank, run.out, None, None
    started, cpu, peak = time.perf_counter(), time.process_time(), _peak_mb()
    summary = comm.bcast(summary, root=0)
    board = leaderboard(summary)
    if run.args.report:  # each rank its share of the pages, with only their data (scatter)
        # the drawer a sixth of another rank's share: leaderboard.png, the charts and report.html are
        # most of a share's work at 60 models
        weights = [1 if r == run.drawer and comm.size > 1 else 5 for r in range(comm.size)]
        counts = dict(run.yardsticks, completions=run.completions)
        parts = Report.of(out, running, summary, yardsticks=counts).parts(weights) if rank == 0 else None
        report = comm.scatter(parts, root=0)
        report.write_model_pages()
    if rank == run.drawer:
        plot_leaderboard(board, out / "leaderboard.png")
        main = report.render_main() if report is not None else None
    wait_idle(comm)  # every model page is written before report.html names it
    if main is not None:
        report.write_main(main)
    # every output is written before run.json says so, and before the folder is unlocked
    wait_idle(comm)
    report_seconds = comm.bcast(time.perf_counter() - started, root=run.drawer) if run.args.report else None
    # CPU seconds (a loaded machine stretches wall time, not these) and peak memory before the end
    # and after (the report's own share of a rank's peak).
    run.end = comm.gather((round(time.process_time() - cpu, 3), peak, _peak_mb()), root=0)
    return board, report_seconds


def _write_finished(run, running, scored_this_run, report_seconds):
    """Rank 0: run.json saying the run finished, with its counts and the seconds of every phase."""
    t = run.times
    now = time.perf_counter()
    scoring_seconds = t["scored"] - t["scoring"]
    records, scored = running.records, running.scored
    run.write_run_json({
        "ranks": run.comm.size, "records": records, "scored": scored, "errors": records - scored,
        "scored_this_run": scored_this_run, "resumed": bool(run.args.resume), "inputs": run.sources,
        "finished": True,
        "yardsticks": run.yardsticks,  # from the store and computed, this run (docs/store.md)
        "completions": run.completions,  # distinct completions' metrics from the store and computed
        "peak_mb_per_rank": {"before_the_end": [b for _, b, _ in run.end], "at_the_end": [a for _, _, a in run.end]},
        # The scoring phase (every rank at work) and the whole command as this process saw it, up
        # to this file; phases, which add up to process: rank 0's start-up (imports, MPI), reading
        # the inputs and grouping them, waiting for every rank before scoring, scoring, the summary
        # (results.jsonl assembled, summary.json), then pictures and the report (leaderboard.png,
        # report.html, on the last rank; null: --no-report) and printing; process - scoring is the serial part.
        "seconds": {"scoring": round(scoring_seconds, 3),
                    "process": round(now - PROCESS_STARTED, 3),
                    "report": None if report_seconds is None else round(report_seconds, 3),
                    "end_cpu_per_rank": [c for c, _, _ in run.end],
                    "phases": {"start_up": round(t["started"] - PROCESS_STARTED, 3),
                               "reading": round(t["read"] - t["started"], 3),
                               "waiting": round(t["scoring"] - t["read"], 3),
                               "scoring": round(scoring_seconds, 3),
                               "summary": round(t["summarised"] - t["scored"], 3),
                               "pictures_and_report": round(now - t["summarised"], 3)}},
    })


def _completion_counts(comm, stored):
    """How many distinct completions' metrics every rank read from the store's tables and computed."""
    return summed(comm.allgather(stored.scored_counts()))


def _yardstick_counts(comm, stored):
    """How many yardsticks every rank read from the store and computed (on every rank); rank 0 says
    one warning line for every rank's problems with the store."""
    counts, warning = merged(comm, stored)
    if warning is not None and comm.rank == 0:
        say(PROG, warning)
    counts["store"] = str(stored.store.root) if stored.store is not None else None
    return counts


def _scorer(args):
    """The yardstick store (docs/store.md) and the scorer that uses it."""
    stored = StoredYardsticks(store_of_arguments(args), warn=False)
    return stored, Scorer(ScoringConfig(design_efficiency=args.design_efficiency, mg_min_dofs=args.multigrid_dofs),
                          store=stored)


def _peak_mb():
    """This process's peak resident memory so far, MB (Linux reports KB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def run_score(args, comm):
    """The exit status of one scoring run (collective on ``comm``; its collectives wait asleep first, so
    that an interrupt reaches every rank: :class:`~sphyr_hpc.runtime.tasks.Interruptible`)."""
    return ScoringRun(args, Interruptible(comm) if comm.size > 1 else comm).run()
