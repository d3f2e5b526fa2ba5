"""What ``python -m sphyr_hpc.certify`` runs: every record certified on whichever rank is free.

Records are dealt over the ranks like ``score``'s samples (largest masks
first, to whichever rank asks: :func:`~sphyr_hpc.runtime.tasks.run_dynamic`),
each on ``COMM_SELF``; rank 0 writes certify.jsonl, summary.json and
certify.png atomically and prints the table.
"""

import json
import sys
import time
from pathlib import Path

from ..io.atomic import write_text_atomic
from ..io.jsonl import read_dataset, write_jsonl_atomic
from ..reporting.certified import plot
from ..runtime.progress import progress_bar
from ..runtime.tasks import run_dynamic
from ..scoring.certified import certify_record, format_table, summarise
from ..io.yardstick_store import store_of_arguments
from ..scoring.scorer import Scorer
from ..scoring.yardstick_store import StoredYardsticks, format_counts, merged


def _tasks(datasets, samples):
    """(subject, index, record) of the first ``samples`` records of every dataset, largest masks first."""
    tasks = []
    for path in datasets:
        subject = Path(path).name.removesuffix(".jsonl")
        for position, record in read_dataset(path, samples):
            index = record.get("index", position)
            mask = record["input_grid"] or []
            tasks.append((subject, index, record, sum(cell == "V" for row in mask for cell in row)))
    tasks.sort(key=lambda t: -t[3])  # stable: ties keep input order
    return [t[:3] for t in tasks]


def run_certify(args, comm):
    """The exit status of one certify run (collective on ``comm``)."""
    rank = comm.rank
    tasks = _tasks(args.dataset, args.samples) if rank == 0 else None
    tasks = comm.bcast(tasks, root=0)
    started = time.perf_counter()
    stored = StoredYardsticks(store_of_arguments(args), warn=False)
    mine = _certify(tasks, args, comm, stored)
    seconds = time.perf_counter() - started
    gathered = comm.gather(mine, root=0)
    counts, warning = merged(comm, stored)
    status = None
    if rank == 0:
        if warning is not None:
            print(warning, file=sys.stderr, flush=True)
        rows = sorted((r for part in gathered for r in part), key=lambda r: (r["subject"], r["index"]))
        status = _write(rows, args, comm.size, seconds, counts)
        if not args.quiet:
            print(format_counts(counts, stored.store))
    return comm.bcast(status, root=0)


def _certify(tasks, args, comm, stored):
    """The rows of the records this rank certified."""
    scorer = Scorer(store=stored)
    mine = []
    bar = progress_bar(len(tasks), args.quiet, unit="sample") if comm.rank == 0 else None

    def run(i, counters):
        subject, index, record = tasks[i]
        stored.dataset = subject  # provenance of the yardsticks written
        mine.append(certify_record(scorer, subject, index, record["ground_truth"], record["input_grid"],
                                   node_budget=args.node_budget, time_budget=args.time_budget))
        counters.add_done(1)

    def progress(count):
        bar.update(count - bar.n)
        return count >= len(tasks)

    try:
        run_dynamic(comm, len(tasks), run, progress if bar is not None else None)
    finally:
        scorer.close()
    if bar is not None:
        bar.close()
    return mine


def _write(rows, args, ranks, seconds, yardsticks):
    """certify.jsonl, summary.json, certify.png and the table (rank 0); the exit status."""
    summary = summarise(rows)
    out = Path(args.out)
    write_jsonl_atomic(out / "certify.jsonl", rows)
    write_text_atomic(out / "summary.json", json.dumps(
        {"ranks": ranks, "node_budget": args.node_budget, "time_budget": args.time_budget,
         "seconds": round(seconds, 3), "yardsticks": yardsticks, "subjects": summary}, indent=2,
        allow_nan=False) + "\n")
    plot(rows, summary, out / "certify.png")
    if not args.quiet:
        print("\n".join(format_table(summary)))
        print(f"\n{len(rows)} samples on {ranks} rank(s) in {seconds:.1f} s -> {out / 'certify.jsonl'}")
    for row in rows:
        if "error" in row:
            print(f"error: {row['subject']} record {row['index']}: {row['error']}", file=sys.stderr)
    return 1 if any("error" in r for r in rows) else 0
