"""Summaries of scored records: summary.json's running sums and means, and the leaderboard.

``summarise`` gives, per model and subject, the record count, the number of
records with an ``error``, the model's coverage and the mean of each headline
metric (``null``, i.e. an infinite compliance's ratio, counts as 0; booleans
as 0/1).  Means cannot be gamed by not answering (docs/scoring.md, "Means"):
a record whose completion is missing or unreadable (``completion_status``)
counts 0, like any completion that cannot be judged; only a record whose
sample itself is broken (ground truth or prompt) is left out, for every model
alike.  ``coverage`` is the fraction of the counted records the model
answered readably; ``answered`` counts those records.  The leaderboard ranks
models by the mean over their subjects of the per-subject mean
topology_score, so every subject weighs the same.

``uncertainty`` (not a model) holds each model's mean topology_score, overall
and per subject, with its standard error and 95 % bootstrap interval, and the
paired comparison of every two models adjacent on the leaderboard
(:mod:`sphyr_hpc.scoring.uncertainty`); the running summary keeps each
counted record's topology_score for it (a float per record, not the rows).

``tools`` (not a model; only when a record was made with tools) holds each
run with tools against the same model's run without: the paired delta of
topology_score and the tool calls (:mod:`sphyr_hpc.scoring.tool_runs`).
"""

import math
from collections import defaultdict

from . import uncertainty
from .diagnosis import SUMMARY_KEY, FailureTally, failure_summary
from .tool_runs import TOOLS_KEY, ToolRuns
from ..core.grid import TokenTable
from ..core.metrics import STRUCTURAL_METRIC_KEYS

UNCERTAINTY_KEY = "uncertainty"  # summary.json's top-level entry (not a model)
NOT_MODELS = (SUMMARY_KEY, UNCERTAINTY_KEY, TOOLS_KEY)

COMPLETION_STATUSES = ("missing", "unreadable")
_SHORT = {"topology_score": "topo", "structural_efficiency": "struct", "material_efficiency": "material",
          "compliance_efficiency_vs_ground_truth": "vs GT", "load_carrying": "carrying",
          "volume_ratio": "vol ratio"}


def _index_order(index):
    return (0, index, "") if isinstance(index, (int, float)) else (1, 0, str(index))


def _finite(value):
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def _mean(values):
    return sum(values) / len(values) if values else None


# Sums are exact: integers in units of the smallest subnormal float, 2**-1074, so a mean (the
# exact sum rounded once, then divided) does not depend on the order rows arrive in or on how
# the ranks split them.
_UNIT = 1074


def _exact(value):
    numerator, denominator = value.as_integer_ratio()
    return numerator << (_UNIT - denominator.bit_length() + 1)


# The exact sums of the values a benchmark's records repeat (0, 1, a sample's ratios), each
# computed once; finite floats only (an infinity or NaN is never looked up).
_EXACT = TokenTable(_exact, size=65536)


def unparsable(row):
    """True when a scored record's completion has a cell left ``V`` or that is not a number (NaN, inf, a
    word): the published rule reads such a cell as 0 and scores the rest (docs/scoring.md)."""
    return bool((row.get("unfilled_cells") or 0) + (row.get("unparsable_cells") or 0))


class _Group:
    """The counts and exact sums of one model's records of one subject."""

    def __init__(self):
        self.count = self.scored = 0
        self.unparsable = 0  # scored records with a cell left V or not a number (read as 0: unparsable)
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
        self.unparsable += unparsable(row)
        sums = self.sums
        for key in STRUCTURAL_METRIC_KEYS:
            value = float(row.get(key) or 0.0)
            if math.isfinite(value):
                sums[key] += _EXACT[value]
            else:
                self.inexact[key] += value

    def merge(self, other):
        self.count += other.count
        self.scored += other.scored
        self.unparsable += other.unparsable
        for mine, theirs in ((self.status, other.status), (self.sums, other.sums), (self.inexact, other.inexact)):
            for key in mine:
                mine[key] += theirs[key]

    def entry(self):
        zero = sum(self.status.values())
        counted = self.scored + zero
        entry = {"count": self.count, "errors": self.count - self.scored, "answered": self.scored, **self.status,
                 "unparsable": self.unparsable,
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
        # {model: {subject: {index: (topology_score, answered)}}} of the counted records: the bootstrap's
        self.scores = defaultdict(lambda: defaultdict(dict))
        self.tool_runs = ToolRuns()  # the runs with tools and their calls (summary.json's "tools")
        self.records = self.scored = 0

    def add(self, row):
        self.groups[row["model"]][row["subject"]].add(row)
        self.tool_runs.add(row)
        self.failures[row["model"]].add(row)
        answered = "error" not in row
        if answered or row.get("completion_status") in COMPLETION_STATUSES:
            self.scores[row["model"]][row["subject"]][row.get("index")] = (
                _finite(row.get("topology_score")) if answered else 0.0, answered)
        self.records += 1
        self.scored += "error" not in row

    def merge(self, other):
        for model, subjects in other.groups.items():
            for subject, group in subjects.items():
                self.groups[model][subject].merge(group)
            self.failures[model].merge(other.failures[model])
        for model, subjects in other.scores.items():
            for subject, scores in subjects.items():
                self.scores[model][subject].update(scores)
        self.tool_runs.merge(other.tool_runs)
        self.records += other.records
        self.scored += other.scored
        return self

    def __getstate__(self):  # picklable (comm.gather): plain dicts instead of defaultdicts of lambdas
        return {"groups": {m: dict(s) for m, s in self.groups.items()}, "failures": dict(self.failures),
                "scores": {m: dict(s) for m, s in self.scores.items()}, "tool_runs": self.tool_runs,
                "records": self.records, "scored": self.scored}

    def __setstate__(self, state):
        self.__init__()
        for model, subjects in state["groups"].items():
            self.groups[model].update(subjects)
        self.failures.update(state["failures"])
        for model, subjects in state["scores"].items():
            self.scores[model].update(subjects)
        self.tool_runs = state["tool_runs"]
        self.records, self.scored = state["records"], state["scored"]

    def result(self):
        summary = {model: {subject: self.groups[model][subject].entry() for subject in sorted(self.groups[model])}
                   for model in sorted(self.groups)}
        summary[SUMMARY_KEY] = failure_summary(self.failures)  # per model and overall (sphyr_hpc.scoring.diagnosis)
        summary[UNCERTAINTY_KEY] = self.uncertainty([e["model"] for e in leaderboard(summary)])
        if self.tool_runs:
            summary[TOOLS_KEY] = self.tool_runs.result(self.scores)
        return summary

    def uncertainty(self, ranked):
        """summary.json's ``uncertainty``: per model (in ``ranked`` order) and per adjacent pair."""
        models = {}
        for model in ranked:
            subjects = self.scores.get(model, {})
            # in index order: the resamples must not depend on the order the rows arrived in
            models[model] = uncertainty.stratified(
                {s: [scores[i][0] for i in sorted(scores, key=_index_order)] for s, scores in subjects.items()})
        answered = {m: {s: {i: score for i, (score, ok) in scores.items() if ok}
                        for s, scores in self.scores.get(m, {}).items()} for m in ranked}
        adjacent = []
        for above, below in zip(ranked, ranked[1:]):
            pair = uncertainty.paired(answered[below], answered[above])  # above minus below
            adjacent.append(dict(above=above, below=below, **(pair or {"difference": None, "samples": 0})))
        return {"statistic": "topology_score", "resamples": uncertainty.RESAMPLES, "seed": uncertainty.SEED,
                "level": uncertainty.LEVEL, "models": models, "adjacent": adjacent}


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
        if model in NOT_MODELS:
            continue
        entry = {"model": model, "subjects": len(subjects)}
        for key in ("count", "errors", "answered", "missing", "unreadable", "unparsable", "excluded"):
            entry["records" if key == "count" else key] = sum(s.get(key, 0) for s in subjects.values())
        counted = sum(s["count"] - s["excluded"] for s in subjects.values())
        answered = sum(s["count"] - s["errors"] for s in subjects.values())
        entry["coverage"] = answered / counted if counted else None
        for key in STRUCTURAL_METRIC_KEYS:
            entry[key] = _mean([s[key] for s in subjects.values() if s[key] is not None])
        board.append(entry)
    board.sort(key=lambda e: (-(e["topology_score"] if e["topology_score"] is not None else -math.inf), e["model"]))
    stats = summary.get(UNCERTAINTY_KEY) or {}
    below = {pair["above"]: pair for pair in stats.get("adjacent", [])}
    for entry in board:
        mine = (stats.get("models") or {}).get(entry["model"]) or {}
        entry["topology_score_se"], entry["topology_score_ci95"] = mine.get("se"), mine.get("ci95")
        entry["vs_next"] = below.get(entry["model"])
    return board


NOTHING_TO_RANK = "nothing to rank: no record was scored"
UNPARSABLE_NOTE = ("unparsable: records scored although their completion has a cell left V or that is not a number "
                   "(NaN, inf, a word): such a cell reads as 0, the published rule, so the score is of the rest "
                   "(docs/scoring.md, \"Unparsable cells\")")


def rankable(board):
    """True when some model has a mean topology_score (some record was scored)."""
    return any(e.get("topology_score") is not None for e in board)


def _interval(ci):
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"


def _versus_next(pair):
    """'yes'/'no': whether the paired interval of this model minus the next excludes 0 ('-': last, or nothing shared)."""
    if not pair or pair.get("difference") is None:
        return "-"
    return "yes" if pair["excludes_zero"] else "no"


def format_leaderboard(board):
    """The printed leaderboard: coverage beside the means, and topology_score's 95 % interval.

    ``> next``: whether the paired interval (over the samples both answered) of
    this model minus the next one excludes 0, i.e. whether the order is sure.
    """
    if not rankable(board):
        return [NOTHING_TO_RANK]
    width = max([len("model")] + [len(e["model"]) for e in board])
    others = [k for k in STRUCTURAL_METRIC_KEYS if k != "topology_score"]
    header = (f"{'#':>3s} {'model':{width}s} {'subjects':>8s} {'records':>7s} {'answered':>8s} {'missing':>7s} "
              f"{'unreadable':>10s} {'unparsable':>10s} {'coverage':>8s} {'topo':>7s} {'95% interval':>16s} {'> next':>6s} "
              + " ".join(f"{_SHORT[k]:>9s}" for k in others))
    lines = [header, "-" * len(header)]
    for rank, e in enumerate(board, start=1):
        values = " ".join(f"{e[k]:9.3f}" if e[k] is not None else f"{'-':>9s}" for k in others)
        coverage = f"{100 * e['coverage']:7.1f}%" if e.get("coverage") is not None else f"{'-':>8s}"
        topo = f"{e['topology_score']:7.3f}" if e["topology_score"] is not None else f"{'-':>7s}"
        lines.append(f"{rank:3d} {e['model']:{width}s} {e['subjects']:8d} {e['records']:7d} {e['answered']:8d} "
                     f"{e['missing']:7d} {e['unreadable']:10d} {e['unparsable']:10d} {coverage} {topo} "
                     f"{_interval(e.get('topology_score_ci95')):>16s} {_versus_next(e.get('vs_next')):>6s} {values}")
    lines.append("95% interval: bootstrap over samples (2000 resamples, fixed seed); > next: the paired interval "
                 "of this model minus the next excludes 0")
    if any(e["unparsable"] for e in board):
        lines.append(UNPARSABLE_NOTE)
    return lines
