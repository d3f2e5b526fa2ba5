"""A large sample's work over several ranks, and progress in steps inside a sample.

A sample's yardstick (docs/scoring.md, "Yardstick") is six SIMP runs and a polish.  Its runs fall
into independent pieces (:func:`sphyr_hpc.optimiser.yardstick.pieces`: the
cold run at p = 1 with the warm chain through p = 2 and 3, the cold runs at
p = 2 and 3, the run seeded by the dataset answer), and a piece's designs do
not depend on which rank computes it nor on what that rank solved before (each
run starts its solver afresh).  So, when there are several ranks:

1. the pieces of the yardsticks of the largest samples (at least
   :data:`SPLIT_MIN_CELLS` cells; as many samples as ranks, see :func:`plan`)
   are tasks that any rank takes, longest first (:func:`sphyr_hpc.runtime.tasks.run_dynamic`: a rank with nothing else to
   do takes the next piece, so two ranks share even a single sample);
2. their designs are gathered on every rank (an ``allgather`` of numpy arrays);
3. the samples are scored as before, one group per task, each yardstick
   completed (candidates, polish) from the pieces gathered.

The records are those of one rank, bit for bit (``tests/test_sizes.py``).
Small samples (SPhyR's 10x10 and 20x20) are not split: their yardsticks take
a fraction of a second, and whole samples already keep every rank busy.

Progress is counted in *steps*: one per SIMP run of a yardstick and one per
record, so a bar moves (and estimates) inside a long sample; :class:`Steps`
keeps every task to the steps it was promised, so the total is reached exactly
whatever a task really ran.
"""

import time
from dataclasses import dataclass

from ..optimiser.yardstick import piece_runs, pieces

# SIMP runs of a sample's yardstick (its progress steps).
YARDSTICK_RUNS = sum(piece_runs(p) for p in pieces())
# Samples with at least this many cells (40x40) have their yardstick's pieces spread over ranks.
SPLIT_MIN_CELLS = 1600


@dataclass(frozen=True)
class Piece:
    """Piece ``piece`` of the yardstick of task (sample group) ``task``, whose problem is ``case``."""

    task: int
    case: object
    piece: tuple

    @property
    def runs(self):
        return piece_runs(self.piece)


def plan(tasks, scorer, n_ranks, min_cells=SPLIT_MIN_CELLS):
    """The pieces to spread over ``n_ranks`` ranks, longest first (the same list on every rank).

    ``tasks`` are groups of samples sharing a yardstick (``score.make_tasks``,
    most expensive first).  With several ranks, the first ``n_ranks`` groups
    whose sample is large and poses a problem (an invalid ground truth has no
    yardstick) are split: enough to keep every rank busy where whole samples
    would leave some idle, and the designs gathered stay those of at most
    ``n_ranks`` samples.  Further large samples are whole tasks, as when
    there are more of them than ranks.
    """
    if n_ranks < 2:
        return []
    out = []
    split = 0
    for i, group in enumerate(tasks):
        if split >= n_ranks:
            break
        sample = group[0]
        if sample.error or not sample.ground_truth or sum(len(row) for row in sample.ground_truth) < min_cells:
            continue
        # The yardstick depends on the ground truth, mask and gravity only: a completion of the
        # wrong shape (whose record gets the all-zero metrics of docs/scoring.md) must not keep the sample whole.
        case, _ = scorer.prepare(sample.ground_truth, sample.ground_truth, sample.input_grid, sample.gravity)
        if case is None:
            continue
        out += [Piece(i, case, piece) for piece in scorer.yardstick_pieces(case)]
        split += 1
    out.sort(key=lambda p: p.runs, reverse=True)  # stable: ties keep the tasks' order (largest first)
    return out


def gather_pieces(comm, computed):
    """{task: {piece: designs}} of every rank's ``computed`` ({(task, piece): designs}), on every rank."""
    merged = {}
    for part in comm.allgather(computed):
        for (task, piece), designs in part.items():
            merged.setdefault(task, {})[piece] = designs
    return merged


class Steps:
    """Progress steps of the task at hand, reported through :class:`~sphyr_hpc.runtime.tasks.SharedCounters`.

    :meth:`start` promises a task's steps, :meth:`step` reports some (never more
    than promised), :meth:`finish` reports what is left.  Steps are sent to the
    shared counter (an MPI one-sided operation) at most every ``interval``
    seconds and at :meth:`finish`, not one by one: a record is a step, and
    thousands of them a second would each pay for one.  On the rank that draws
    the bar, ``refresh(done)`` runs after every report, so the bar moves inside
    a long task too.
    """

    def __init__(self, refresh=None, interval=0.1):
        self.refresh = refresh
        self.interval = interval
        self.counters = None
        self.left = 0
        self.unsent = 0
        self.sent_at = 0.0

    def start(self, counters, promised):
        self.counters, self.left, self.unsent = counters, int(promised), 0

    def step(self, count=1):
        count = min(int(count), self.left)
        if count <= 0 or self.counters is None:
            return
        self.left -= count
        self.unsent += count
        now = time.monotonic()
        if self.left == 0 or now - self.sent_at >= self.interval:
            self._send(now)

    def _send(self, now):
        count, self.unsent, self.sent_at = self.unsent, 0, now
        done = self.counters.add_done(count)
        if self.refresh is not None:
            self.refresh(done)

    def finish(self):
        self.step(self.left)  # the step that empties ``left`` sends everything unsent
