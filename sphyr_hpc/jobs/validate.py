"""What ``python -m sphyr_hpc.validate`` runs: the probes of the first N records, scored over the ranks."""

import os
import random
import sys
import time
from collections import OrderedDict

from mpi4py import MPI

from ..io.jsonl import read_dataset
from ..runtime.progress import progress_bar
from ..runtime.tasks import run_dynamic
from ..scoring.probes import build_probes, format_table, is_hard_dataset, probe_means
from ..io.yardstick_store import open_store
from ..scoring.scorer import Scorer
from ..scoring.yardstick_store import StoredYardsticks, format_counts, merged


def run_validate(dataset_path, samples, hard=None, scorer=None, out=None, errors=None, comm=None, store=None,
                 quiet=True):
    """Score the probes of the first ``samples`` records and print the table.

    Records are spread over the ranks of ``comm`` (default ``MPI.COMM_WORLD``;
    collective), each record's five probes on one rank so they share one
    yardstick; rank 0 reads the file, reports unreadable records and prints.
    ``hard`` None means "from the file name".  A ``scorer`` passed in is used
    and left open; otherwise one is created for the run and closed after it.
    ``out``/``errors`` default to the current ``sys.stdout``/``sys.stderr``
    (looked up at call time, so redirection and pytest capture work).
    ``store``: the yardstick store of a scorer made here (``open_store``'s
    argument: a folder, True for the default one, None for none).  ``quiet``: no progress bar (a bar
    of the samples on rank 0's stderr otherwise).

    Returns, on every rank, a dict: ``dataset``, ``hard``, ``samples`` (records
    scored), ``means`` (probe -> metric -> mean, probes in
    :data:`~sphyr_hpc.scoring.probes.PROBE_NAMES` order), ``optimiser_losses``
    and ``losses`` (positions of the records concerned).
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    if hard is None:
        hard = is_hard_dataset(dataset_path)
    records = list(read_dataset(dataset_path, samples, errors)) if comm.rank == 0 else None
    records = comm.bcast(records, root=0)
    started = time.time()
    stored = (scorer.stored if scorer is not None
              else StoredYardsticks(open_store(store), _subject(dataset_path), warn=False))
    bar = progress_bar(len(records), quiet, unit="sample") if comm.rank == 0 else None
    try:
        gathered = comm.gather(_score_probes(records, hard, scorer, comm, stored, bar), root=0)
    finally:
        if bar is not None:
            bar.close()
    counts, warning = merged(comm, stored)
    result = None
    if comm.rank == 0:
        if warning is not None and not stored.warn:
            print(warning, file=sys.stderr if errors is None else errors, flush=True)
        by_position = {}
        for part in gathered:
            by_position.update(part)
        result = _report(dataset_path, hard, by_position, time.time() - started, comm.size,
                         sys.stdout if out is None else out)
        print(format_counts(counts, stored.store), file=sys.stdout if out is None else out)
        result["yardsticks"] = counts
    return comm.bcast(result, root=0)


def _subject(path):
    return os.path.splitext(os.path.basename(path))[0]


def _score_probes(records, hard, scorer, comm, stored=None, bar=None):
    """``{position: {probe: metrics}}`` of the records this rank scored; ``bar`` (rank 0): a progress bar."""
    own_scorer = scorer is None
    if own_scorer:
        scorer = Scorer(store=stored)
    mine = {}

    def run(i, counters):
        position, record = records[i]
        truth = record["ground_truth"]
        mine[position] = OrderedDict(
            (name, scorer.score(completion, truth, record["input_grid"]))
            for name, completion in build_probes(truth, random.Random(position), hard).items()
        )
        counters.add_done(1)

    try:
        run_dynamic(comm, len(records), run, progress=None if bar is None else lambda done: _moved(bar, done))
    finally:
        if own_scorer:
            scorer.close()
    return mine


def _moved(bar, done):
    """Move ``bar`` to ``done`` samples; True once every sample is done."""
    bar.update(done - bar.n)
    return done >= bar.total


def _report(dataset_path, hard, by_position, seconds, ranks, out):
    """Print the probe table and return the result dict (rank 0)."""
    means, losses = probe_means(by_position)
    scored = len(by_position)
    subject = os.path.splitext(os.path.basename(dataset_path))[0]
    print(f"\n{subject}: {scored} sample{'s' * (scored != 1)} ({'hard' if hard else 'easy'}), {seconds:.0f}s "
          f"on {ranks} rank(s)\n", file=out)
    for line in format_table(means):
        print(line, file=out)
    print(
        f"\nYardstick beaten within budget (by the dataset answer, whose material is the yardstick's "
        f"budget) on {len(losses)}/{scored} samples: a non-zero count means the yardstick is too weak "
        f"(unlike a completion that beats it with more material).",
        file=out,
    )
    return {
        "dataset": dataset_path,
        "hard": hard,
        "samples": scored,
        "means": means,
        "optimiser_losses": len(losses),
        "losses": losses,
    }
