"""Summaries of scored records: summary.json's running sums and means, and the leaderboard.

``summarise`` gives, per model and subject, the record count, the number of
records with an ``error``, the model's coverage and the mean of each headline
metric (``null``, i.e. an infinite compliance's ratio, counts as 0; booleans
as 0/1).  Means cannot be gamed by not answering (docs/scoring.md, "Means"):
a record whose completion is missing or unreadable (``completion_status``)
counts 0, like any completion that cannot be judged; only a record whose
sample itself is broken (ground truth or prompt) is left out, for every model
alike.  ``coverage`` is the fraction of the counted records the model
answered readably.  The leaderboard ranks models by the mean over their
subjects of the per-subject mean topology_score, so every subject weighs the
same.
"""

import math
from collections import defaultdict

from .diagnosis import SUMMARY_KEY, FailureTally, failure_summary
from ..core.metrics import STRUCTURAL_METRIC_KEYS

COMPLETION_STATUSES = ("missing", "unreadable")
_SHORT = {"topology_score": "topo", "structural_efficiency": "struct", "material_efficiency": "material",
          "compliance_efficiency_vs_ground_truth": "vs GT", "load_carrying": "carrying",
          "volume_ratio": "vol ratio"}


def _mean(values):
    return sum(values) / len(values) if values else None


# Sums are exact: integers in units of the smallest subnormal float, 2**-1074, so a mean (the
# exact sum rounded once, then divided) does not depend on the order rows arrive in or on how
# the ranks split them.
_UNIT = 1074


def _exact(value):
    numerator, denominator = value.as_integer_ratio()
    return numerator << (_UNIT - denominator.bit_length() + 1)


class _Group:
    """The counts and exact sums of one model's records of one subject."""

    def __init__(self):
        self.count = self.scored = 0
        self.status = dict.fromkeys(COMPLETION_STATUSES, 0)
        self.sums = dict.fromkeys(STRUCTURAL_METRIC_KEYS, 0)
        self.inexact = dict.fromkeys(STRUCTURAL_METRIC_KEYS, 0.0)  # infinities and NaNs, which have no exact sum

    def add(self, row):
        self.count += 1
        if "error" in row:
            if row.get("completion_status") in COMPLETION_STATUSES:
                self.status[row["completion_status"]] += 1  # counts 0
            return
        self.scored += 1
        for key in STRUCTURAL_METRIC_KEYS:
            value = float(row.get(key) or 0.0)
            if math.isfinite(value):
                self.sums[key] += _exact(value)
            else:
                self.inexact[key] += value

    def merge(self, other):
        self.count += other.count
        self.scored += other.scored
        for mine, theirs in ((self.status, other.status), (self.sums, other.sums), (self.inexact, other.inexact)):
            for key in mine:
                mine[key] += theirs[key]

    def entry(self):
        zero = sum(self.status.values())
        counted = self.scored + zero
        entry = {"count": self.count, "errors": self.count - self.scored, **self.status,
                 "excluded": self.count - self.scored - zero,  # broken samples: in no model's means
                 "coverage": self.scored / counted if counted else None}
        for key in STRUCTURAL_METRIC_KEYS:
            total = self.sums[key] / (1 << _UNIT) + self.inexact[key]  # int / int: rounded once
            entry[key] = total / counted if counted else None
        return entry


class RunningSummary:
    """:func:`summarise` one row at a time: counts and exact sums, never the rows themselves.

    Each rank of a run adds the rows it scores; the ranks' summaries are
    merged (:meth:`merge`) and :meth:`result` is then ``summarise`` of all the
    rows, whatever their order and split.
    """

    def __init__(self):
        self.groups = defaultdict(lambda: defaultdict(_Group))
        self.failures = defaultdict(FailureTally)
        self.records = self.scored = 0

    def add(self, row):
        self.groups[row["model"]][row["subject"]].add(row)
        self.failures[row["model"]].add(row)
        self.records += 1
        self.scored += "error" not in row

    def merge(self, other):
        for model, subjects in other.groups.items():
            for subject, group in subjects.items():
                self.groups[model][subject].merge(group)
            self.failures[model].merge(other.failures[model])
        self.records += other.records
        self.scored += other.scored
        return self

    def __getstate__(self):  # picklable (comm.gather): plain dicts instead of defaultdicts of lambdas
        return {"groups": {m: dict(s) for m, s in self.groups.items()}, "failures": dict(self.failures),
                "records": self.records, "scored": self.scored}

    def __setstate__(self, state):
        self.__init__()
        for model, subjects in state["groups"].items():
            self.groups[model].update(subjects)
        self.failures.update(state["failures"])
        self.records, self.scored = state["records"], state["scored"]

    def result(self):
        summary = {model: {subject: self.groups[model][subject].entry() for subject in sorted(self.groups[model])}
                   for model in sorted(self.groups)}
        summary[SUMMARY_KEY] = failure_summary(self.failures)  # per model and overall (sphyr_hpc.scoring.diagnosis)
        return summary


def summarise(rows):
    """{model: {subject: {count, errors, <metric>: mean}}}, sorted by name, and ``failures``.

    ``failures`` (not a model) holds the failure categories and the exact-match
    table per model and over all models (:func:`sphyr_hpc.scoring.diagnosis.failure_summary`).
    Means are of exact sums (:class:`RunningSummary`).
    """
    running = RunningSummary()
    for row in rows:
        running.add(row)
    return running.result()


def leaderboard(summary):
    """Models ranked by mean over subjects of mean topology_score (best first)."""
    board = []
    for model, subjects in summary.items():
        if model == SUMMARY_KEY:
            continue
        entry = {"model": model, "subjects": len(subjects),
                 "records": sum(s["count"] for s in subjects.values()),
                 "errors": sum(s["errors"] for s in subjects.values())}
        counted = sum(s["count"] - s["excluded"] for s in subjects.values())
        answered = sum(s["count"] - s["errors"] for s in subjects.values())
        entry["coverage"] = answered / counted if counted else None
        for key in STRUCTURAL_METRIC_KEYS:
            entry[key] = _mean([s[key] for s in subjects.values() if s[key] is not None])
        board.append(entry)
    board.sort(key=lambda e: (-(e["topology_score"] if e["topology_score"] is not None else -math.inf), e["model"]))
    return board


NOTHING_TO_RANK = "nothing to rank: no record was scored"


def rankable(board):
    """True when some model has a mean topology_score (some record was scored)."""
    return any(e.get("topology_score") is not None for e in board)


def format_leaderboard(board):
    if not rankable(board):
        return [NOTHING_TO_RANK]
    width = max([len("model")] + [len(e["model"]) for e in board])
    header = (f"{'#':>3s} {'model':{width}s} {'subjects':>8s} {'records':>7s} {'errors':>6s} {'coverage':>8s} "
              + " ".join(f"{_SHORT[k]:>9s}" for k in STRUCTURAL_METRIC_KEYS))
    lines = [header, "-" * len(header)]
    for rank, e in enumerate(board, start=1):
        values = " ".join(f"{e[k]:9.3f}" if e[k] is not None else f"{'-':>9s}" for k in STRUCTURAL_METRIC_KEYS)
        coverage = f"{100 * e['coverage']:7.1f}%" if e.get("coverage") is not None else f"{'-':>8s}"
        lines.append(f"{rank:3d} {e['model']:{width}s} {e['subjects']:8d} {e['records']:7d} {e['errors']:6d} "
                     f"{coverage} {values}")
    return lines
