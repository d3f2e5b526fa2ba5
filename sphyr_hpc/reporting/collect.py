"""What a report needs of results.jsonl, gathered row by row: never all the rows at once.

:class:`ReportData` adds one row at a time and keeps:

* the summary's running sums and per-record scores
  (:class:`~sphyr_hpc.scoring.summary.RunningSummary`: means, coverage,
  failure tallies, the bootstrap's values);
* failure tallies per model and subject (the per-model pages);
* per (model, subject) the best and the worst record by topology_score, with
  their ``grids`` (ties: the first in results.jsonl's order, i.e. the lowest
  index), and how many records tie with each; only these rows are kept whole;
* per record its tally category and topology_score (a comparison of two runs).

A 24,660-record results.jsonl (59 MB) is thus reported in well under its size
in memory.  Like the running summary, each rank of a scoring run adds the rows
it scores and the ranks' parts are merged (:meth:`ReportData.merge`), so the
report at the end of a run reads nothing back.
"""

import math
from collections import defaultdict

from ..io.jsonl import ROW_FIELDS, read_jsonl
from ..io.results_log import row_key, sort_key
from ..scoring import diagnosis
from ..scoring.summary import RunningSummary

NOT_SCORED = "excluded"  # the category of a record of a broken sample in a comparison


def score_of(row):
    value = row.get("topology_score")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


class Pick:
    """The best and worst scored record of one model and subject, and how many tie with each."""

    def __init__(self, row):
        self.best = self.worst = row
        self.best_ties = self.worst_ties = 1
        self.count = 1

    def add(self, row):
        self.count += 1
        score, key = score_of(row), None
        for side in ("best", "worst"):  # each side against its record before this row
            mine = getattr(self, side)
            theirs = score_of(mine)
            if score > theirs if side == "best" else score < theirs:
                setattr(self, side, row)
                setattr(self, side + "_ties", 1)
            elif score == theirs:
                setattr(self, side + "_ties", getattr(self, side + "_ties") + 1)
                key = sort_key(row_key(row)) if key is None else key  # only a tie needs the order
                if key < sort_key(row_key(mine)):
                    setattr(self, side, row)

    def merge(self, other):
        """The pick of both parts' records (ties: the lower index, whichever part it came from)."""
        count = self.count + other.count
        for side, sign in (("best", 1), ("worst", -1)):
            mine, theirs = getattr(self, side), getattr(other, side)
            a, b = sign * score_of(mine), sign * score_of(theirs)
            if b > a or (b == a and sort_key(row_key(theirs)) < sort_key(row_key(mine))):
                setattr(self, side, theirs)
            ties = (getattr(self, side + "_ties") if a >= b else 0) + (getattr(other, side + "_ties") if b >= a else 0)
            setattr(self, side + "_ties", ties)
        self.count = count
        return self

    @property
    def all_tie(self):
        """Every record scores the same: best and worst are one picture."""
        return score_of(self.best) == score_of(self.worst)


class ReportData:
    """A report's view of results.jsonl, gathered with :meth:`add` (see the module docstring)."""

    def __init__(self):
        self.running = RunningSummary()
        self.tallies = defaultdict(lambda: defaultdict(diagnosis.FailureTally))
        self.picks = defaultdict(dict)
        self.categories = {}  # (model, subject, index) -> (category, topology_score or None)
        self.rows = self.broken = self.unclassified = 0
        self.subjects = set()

    @property
    def records(self):
        return self.running.records

    @property
    def scored(self):
        return self.running.scored

    def result(self):
        """summary.json's content (:meth:`RunningSummary.result`)."""
        return self.running.result()

    summary = result

    def merge(self, other):
        self.running.merge(other.running)
        for model, subjects in other.tallies.items():
            for subject, tally in subjects.items():
                self.tallies[model][subject].merge(tally)
        for model, picks in other.picks.items():
            for subject, theirs in picks.items():
                mine = self.picks[model].get(subject)
                self.picks[model][subject] = theirs if mine is None else mine.merge(theirs)
        self.categories.update(other.categories)
        self.rows += other.rows
        self.broken += other.broken
        self.unclassified += other.unclassified
        self.subjects |= other.subjects
        return self

    def slim(self, models):
        """What the pages of ``models`` and report.html need, and nothing else: their picks and
        tallies and the counts (no per-record scores or categories); for another rank to draw them."""
        part = ReportData()
        part.rows, part.broken, part.unclassified, part.subjects = self.rows, self.broken, self.unclassified, self.subjects
        for model in models:
            if model in self.picks:
                part.picks[model] = self.picks[model]
            if model in self.tallies:
                part.tallies[model] = self.tallies[model]
        return part

    def __getstate__(self):  # picklable (comm.gather): plain dicts instead of defaultdicts of lambdas
        state = dict(self.__dict__)
        state["tallies"] = {m: dict(s) for m, s in self.tallies.items()}
        state["picks"] = dict(self.picks)
        return state

    def __setstate__(self, state):
        self.__init__()
        tallies, picks = state.pop("tallies"), state.pop("picks")
        self.__dict__.update(state)
        for model, subjects in tallies.items():
            self.tallies[model].update(subjects)
        self.picks.update(picks)

    def add(self, row):
        model, subject = row["model"], row["subject"]
        self.rows += 1
        self.subjects.add(subject)
        self.running.add(row)
        self.tallies[model][subject].add(row)
        category = diagnosis.category_of(row)
        scored = "error" not in row
        if scored and category not in diagnosis.CATEGORIES:
            self.unclassified += 1
        self.categories[(model, subject, row.get("index"))] = (category or NOT_SCORED,
                                                            score_of(row) if scored else None)
        if scored:
            pick = self.picks[model].get(subject)
            if pick is None:
                self.picks[model][subject] = Pick(row)
            else:
                pick.add(row)

    @classmethod
    def read(cls, path):
        """The report data of a results.jsonl (streamed), and ``[(line number, why)]`` of the lines dropped.

        A line is dropped when it is not a results row (broken JSON, e.g. the
        truncated last line of a killed run; not an object; no model, subject
        or index), as :func:`~sphyr_hpc.io.jsonl.read_rows` counts them.
        """
        data, dropped = cls(), []
        for number, row, problem in read_jsonl(path)[0]:
            if problem or not isinstance(row, dict) or not set(ROW_FIELDS) <= row.keys():
                dropped.append((number, problem or "not a results row (model, subject, index)"))
            elif not isinstance(row["model"], str) or not isinstance(row["subject"], str):
                dropped.append((number, "model or subject is not text"))
            else:
                data.add(row)
        data.broken = len(dropped)
        return data, dropped

