"""Every completion of one sample, scored against what the sample paid for once.

At benchmark scale dozens of models answer each sample, so what depends on
the sample alone is computed once per sample and each completion pays only
for itself.  :class:`SampleScorer` holds, for one ground truth, input grid and
gravity: the load case, the ground truth's densities (L/S solid), the free
(masked) cells, the ground truth's material (the reconstruction metrics'
denominator), its analysis, the yardstick, and the text rows of the ground
truth, input grid and yardstick optimum that every record keeps (``grids``).
A completion then costs its own parse into densities, its reconstruction
metrics, its analysis (shared by equal completions through the scorer's
analysis cache, and condensed onto the masked cells' DOFs where that is
cheaper, see :meth:`~sphyr_hpc.solvers.condensed.CondensedSystems.analysis_system`) and its
diagnosis; a completion whose cells equal an earlier completion's of the same
sample (models often agree, and often give the answer itself) costs a table
lookup: every metric is a function of the cells (``SCORED_PER_SAMPLE`` distinct
completions are kept per sample).  With a store, a completion an earlier run
scored against the same sample costs a row of the sample's table instead
(:mod:`sphyr_hpc.scoring.scored_store`): its metrics, and its prepared case only
when a caller asks for it (``--fields``).

The metrics are :meth:`~sphyr_hpc.scoring.scorer.Scorer.score`'s, computed by the
same code (:meth:`~sphyr_hpc.scoring.scorer.Scorer.score_case`); a completion that
is not the ground truth's shape, or a sample whose ground truth poses no
problem, goes through :meth:`~sphyr_hpc.scoring.scorer.Scorer.score` unchanged.
Errors :meth:`~sphyr_hpc.scoring.scorer.Scorer.score` raises for bad data are raised
by :meth:`SampleScorer.score` too.
"""

import functools
from dataclasses import dataclass

import numpy as np

from ..core import grid as grids
from ..core import loadcase as loadcases
from ..runtime.cache import BoundedCache
from ..core.metrics import material
from ..io.atomic import json_safe
from ..io.results_log import encode_items, encode_row
from .scored_store import ScoredTable, completion_digest, sample_digest
from .yardstick_store import solver_options

# Distinct completions of one sample whose metrics are kept: more than the models of any published
# benchmark answer one sample with (dozens), and a sample's scorer lives for its task only.
SCORED_PER_SAMPLE = 256


class Scored:
    """One distinct completion of a sample scored: its metrics and prepared case (shared by every
    record of it: read-only), and, made for its first record, what each of its records holds
    (:meth:`SampleScorer.record`).  ``posed``: whether the completion poses a problem (its case is
    not None).  Metrics read from the store come with ``prepare`` instead of the case: the case is
    prepared when first asked for."""

    __slots__ = ("metrics", "posed", "_case", "_prepare", "fields", "items", "grids", "text")

    def __init__(self, metrics, case, posed=None, prepare=None):
        self.metrics, self._case, self._prepare = metrics, case, prepare
        self.posed = case is not None if posed is None else posed
        self.fields = self.items = self.grids = self.text = None

    @property
    def case(self):
        if self._prepare is not None:
            self._case, self._prepare = self._prepare()[0], None
        return self._case


@dataclass(frozen=True)
class SampleReference:
    """What every completion of a sample is measured against (see :meth:`Scorer.score_case`)."""

    material: float
    analysis: object
    optimum: object


class SampleScorer:
    """Scores the completions of one sample (ground truth, input grid, gravity) with ``scorer``."""

    _rows_text = None  # the JSON text of the items of the sample's own grids (made on first use)

    def __init__(self, scorer, ground_truth, input_grid, gravity):
        self.scorer = scorer
        self.ground_truth = ground_truth
        self.input_grid = input_grid
        self.gravity = gravity
        self.case, _ = scorer.prepare(ground_truth, ground_truth, input_grid, gravity)
        self.reference = None
        self._rows = None
        self._scored = BoundedCache(SCORED_PER_SAMPLE)
        self._table = None
        if self.case is None:  # every completion gets the generic path (and its reason)
            return
        case = self.case
        lc = case.loadcase
        stored = scorer.stored_reference(lc, case.free, case.truth)  # a warm store: no solve
        if stored is None:
            gt = scorer.analysis(lc, case.truth, (case.free, case.truth))
            optimum = scorer.optimum(lc, case.free, case.truth, gt.volume_fraction, (case.truth,), reference=gt)
        else:
            gt, optimum = stored
        self.reference = SampleReference(material(ground_truth), gt, optimum)
        self._rows = record_grids(None, ground_truth, input_grid, optimum.densities)
        if scorer.stored.store is not None:  # the table of what this sample's records read
            self._table = ScoredTable(scorer.stored, sample_digest(ground_truth, input_grid, gravity, scorer.config,
                                                                   solver_options(), (gt, optimum)))

    def prepare(self, completion):
        """``(case, reason)`` of a completion, as :meth:`Scorer.prepare` makes it."""
        if self.case is None:
            return self.scorer.prepare(completion, self.ground_truth, self.input_grid, self.gravity)
        return self.scorer.completion_case(self.case, completion)

    def score(self, completion):
        """``(metrics, case)`` of one completion: :meth:`Scorer.score`'s metrics (a dict of the caller's
        own) and its prepared case (shared by equal completions: read-only)."""
        scored = self.scored(completion)
        return dict(scored.metrics), scored.case

    def scored(self, completion):
        """The :class:`Scored` of a completion, computed once per distinct completion (by its cells)."""
        return self._scored.get_or_compute(tuple(map(tuple, completion)), lambda: self._stored_or_scored(completion))

    def _stored_or_scored(self, completion):
        """A distinct completion's :class:`Scored`: from the sample's table in the store, else computed
        (and added to the table); counted in the scorer's ``stored`` (run.json's ``completions``)."""
        table, counts = self._table, self.scorer.stored
        if table is None:
            counts.scored_computed += 1
            return Scored(*self._score(completion))
        key = completion_digest(completion)
        found = table.get(key)
        counts.scored_from_store += found is not None
        counts.scored_computed += found is None
        if found is not None:
            posed, fields, items, metrics = found
            scored = Scored(metrics, None, posed, lambda: self.prepare(completion))
        else:
            scored = Scored(*self._score(completion))
            fields = json_safe(scored.metrics)
            items = encode_items(fields)
            table.add(key, scored.posed, fields, items, scored.metrics)
        scored.fields, scored.items = fields, items
        return scored

    def flush(self):
        """Write the completions this scorer computed to the sample's table in the store (when there is one)."""
        if self._table is not None:
            self._table.flush()

    def record(self, scored, completion):
        """``(fields, grids, text)`` of a record of ``completion`` (``scored`` is :meth:`scored`'s):
        its metrics as JSON takes them (:func:`~sphyr_hpc.io.atomic.json_safe`), its ``grids``
        (:meth:`record_grids`) and their JSON text as a row holds them, the metrics' items then
        ``grids`` (:func:`~sphyr_hpc.io.results_log.encode_items`), made once: read-only."""
        if scored.text is None:
            if scored.fields is None:
                scored.fields = json_safe(scored.metrics)
                scored.items = encode_items(scored.fields)
            scored.grids = self._scored_grids(completion, scored)
            scored.text = scored.items + ', "grids": ' + self._grids_text(scored)
        return scored.fields, scored.grids, scored.text

    def _grids_text(self, scored):
        """The JSON text of a record's ``grids``: of its completion, then of the sample's own rows."""
        if self._rows is None or not scored.posed:
            return encode_row(scored.grids)
        if self._rows_text is None:
            self._rows_text = encode_items({key: rows for key, rows in self._rows.items() if key != "completion"})
        return '{"completion": ' + encode_row(scored.grids["completion"]) + ", " + self._rows_text + "}"

    def _score(self, completion):
        case, reason = self.prepare(completion)
        if self.reference is None or case is None:
            return self.scorer.score_case(completion, self.ground_truth, case, reason), case
        return self.scorer.score_case(completion, self.ground_truth, case, reason, self.reference), case

    def _scored_grids(self, completion, scored):
        """:meth:`record_grids` of a scored completion (its case prepared only when they need it)."""
        if self._rows is not None and scored.posed:
            return dict(self._rows, completion=[" ".join(row) for row in completion] if completion else [])
        return self.record_grids(completion, scored.case if scored.posed else None)

    def record_grids(self, completion, case):
        """The ``grids`` a record keeps (:func:`record_grids`)."""
        if self._rows is None or case is None:
            optimum = self.scorer.designs(case)["optimum"] if case is not None else None
            return record_grids(completion, self.ground_truth, self.input_grid, optimum)
        return dict(self._rows, completion=[" ".join(row) for row in completion] if completion else [])


def sample_scorers(scorer, samples):
    """A :class:`SampleScorer` per distinct (ground truth, input grid, gravity) object of ``samples``;
    once every sample is taken, each flushes what it computed to the store (:meth:`SampleScorer.flush`).

    Keyed by identity: records quoting the same text share its parsed grid
    (:mod:`sphyr_hpc.io.records`), so a sample's records share one scorer.
    None for a record in error, or whose sample raises a data error (its own scoring names it).
    """
    found = {}
    for sample in samples:
        if sample.error:
            yield sample, None
            continue
        key = (id(sample.ground_truth), id(sample.input_grid), sample.gravity)
        if key not in found:
            try:
                found[key] = SampleScorer(scorer, sample.ground_truth, sample.input_grid, sample.gravity)
            except (grids.GridError, loadcases.LoadCaseError):  # the record's own scoring reports it
                found[key] = None
        yield sample, found[key]
    for sample_scorer in found.values():  # every record scored: what was computed goes to the store
        if sample_scorer is not None:
            sample_scorer.flush()


# -- the grids a record keeps --------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)  # an optimum's densities repeat (0.001, 1): one text per value
def _density_text(value):
    text = f"{float(value):.3f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def record_grids(completion, ground_truth, input_grid, optimum):
    """``{"completion", "ground_truth", "input", "optimum"}`` as text rows (``[]`` when absent)."""
    def rows(grid):
        return [" ".join(row) for row in grid] if grid else []

    optimum_rows = [] if optimum is None else [" ".join(map(_density_text, row))
                                               for row in np.asarray(optimum, dtype=float).tolist()]
    return {"completion": rows(completion), "ground_truth": rows(ground_truth), "input": rows(input_grid),
            "optimum": optimum_rows}
