"""The published scorer's Python interface: ``get_structural_metrics`` and friends, on sphyr_hpc.

Evaluation scripts written against the published SPhyR scorer switch with one
import::

    from sphyr_hpc import get_structural_metrics, clear_reference_cache, StructuralMetrics

(``STRUCTURAL_METRIC_KEYS``, the metrics worth averaging over a subject, too.)

Conventions (the published interface's, kept exactly):

* Grids are lists of rows of string cells (``"L"``, ``"S"``, ``"V"`` or a
  density), or text with one row per line (a model's raw answer works: its grid
  is found in the prose, docs/scoring.md, "Grids").  A grid that is neither gives the
  all-zero metrics, never an exception.
* Boundary conditions (loads, supports, load direction ``gravity_dir`` as
  (row step, column step), default (1, 0) = down) come from ``gt_grid`` only;
  ``input_grid`` marks the masked cells (``V``) the yardstick re-optimises;
  without it, every non-L/S cell is masked.
* :class:`StructuralMetrics` carries the published fields with their types
  (booleans, floats, ints); an infinite compliance is ``math.inf`` on the
  object and ``None`` in :meth:`StructuralMetrics.as_dict`.
  ``own_budget_optimal_compliance`` and ``design_efficiency`` stay ``None``
  unless ``include_own_budget_reference=True``.  Beside them: the
  reconstruction metrics, ``valid_output_grid``, ``invalid_reason`` (why the
  all-zero metrics apply, else None), and in ``extras`` every further metric
  the scorer (:class:`sphyr_hpc.scoring.scorer.Scorer`) returns, readable as an
  attribute (``metrics.<name>``) and written by ``as_dict()``.
* Yardsticks (docs/scoring.md, "Yardstick", the expensive part) are kept in one module-level
  LRU cache of :data:`REFERENCE_CACHE_SIZE` entries, shared by every call and
  every penalty/filter setting (both are part of the key): many completions of
  one sample cost one yardstick.  :func:`clear_reference_cache` empties it and
  releases the solvers; :func:`reference_cache_info` reports hits and misses.
  The cache is per process and not thread-safe.
* Behind that cache, the yardstick store (docs/store.md): a yardstick computed
  once is kept on disk and read back by every later call, run and process.
  ``store=True`` (the default) is the user's cache folder
  (``$XDG_CACHE_HOME/sphyr_hpc``, else ``~/.cache/sphyr_hpc``), the store
  ``python -m sphyr_hpc.score`` uses too; ``store="DIR"`` another folder;
  ``store=None`` (or False) computes every yardstick and keeps none.
* :func:`score_records` scores many records: over the ranks of ``comm``
  (``MPI.COMM_WORLD`` by default, so ``mpirun -n N python script.py`` uses N
  processes and ``python script.py`` one), samples distributed as the score
  command distributes them (:class:`sphyr_hpc.runtime.tasks.SharedCounters`, one
  yardstick per sample), results yielded on rank 0 as they finish.

* :func:`prompt_of` is the prompt a model is shown for a dataset record: SPhyR's template filled
  with the record's input grid, easy or hard by the subject's name (docs/harness.md).

Importing this module does not start MPI or PETSc; the first score does.
"""

import math
import numbers
import warnings
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping, NamedTuple, Optional

from .core import grid as grids
from .core.discretisation import PENAL
from .core.prompt import prompt_of  # noqa: F401  (the public API: the prompt of a record)
from .optimiser.filter import FILTER_RADIUS

REFERENCE_CACHE_SIZE = 1024
"""Yardsticks kept by the module-level LRU cache (least recently used dropped first).
An entry holds its key (mask, pinned densities, seed) and the optimum's densities:
~10 kB on a 20x20 grid, so a full cache is ~10 MB."""

PUBLISHED_FIELDS = (
    "physically_valid", "load_carrying", "compliance", "ground_truth_compliance", "optimal_compliance",
    "own_budget_optimal_compliance", "topology_score", "structural_efficiency", "structural_efficiency_raw",
    "design_efficiency", "material_efficiency", "compliance_efficiency_vs_ground_truth", "volume_fraction",
    "ground_truth_volume_fraction", "volume_ratio", "max_displacement", "unfilled_cells", "unparsable_cells",
)


@dataclass(frozen=True)
class StructuralMetrics:
    """Physics-based scores of one completion (the published fields first, then sphyr_hpc's).

    Ratios lie in [0, 1], higher is better; compliances are raw physical
    quantities, lower is better, ``math.inf`` for a design that cannot carry
    its load at all.  Frozen (the published class is a plain dataclass): use
    ``dataclasses.replace`` to derive a changed copy.
    """

    physically_valid: bool = False
    load_carrying: bool = False
    compliance: float = math.inf
    ground_truth_compliance: float = math.inf
    optimal_compliance: float = math.inf
    own_budget_optimal_compliance: Optional[float] = None
    topology_score: float = 0.0
    structural_efficiency: float = 0.0
    structural_efficiency_raw: float = 0.0
    design_efficiency: Optional[float] = None
    material_efficiency: float = 0.0
    compliance_efficiency_vs_ground_truth: float = 0.0
    volume_fraction: float = 0.0
    ground_truth_volume_fraction: float = 0.0
    volume_ratio: float = 0.0
    max_displacement: float = 0.0
    unfilled_cells: int = 0
    unparsable_cells: int = 0
    # sphyr_hpc's own: reconstruction metrics (cell by cell against the ground truth) and validity
    exact_match: bool = False
    difference_ratio: float = 0.0
    relative_difference_ratio: float = 0.0
    penalized_difference_ratio: float = 0.0
    valid_output_grid: bool = False
    invalid_reason: Optional[str] = None
    # every other metric the scorer returns, by name (e.g. a failure category)
    extras: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @classmethod
    def from_metrics(cls, metrics):
        """From a :meth:`sphyr_hpc.scoring.scorer.Scorer.score` dict: declared fields typed, the rest in ``extras``."""
        declared = {f.name: f for f in fields(cls) if f.name != "extras"}
        values, extras = {}, {}
        for key, value in metrics.items():
            if key not in declared:
                extras[key] = value
            elif value is None:
                values[key] = None
            elif declared[key].type in (bool, int, float):
                values[key] = declared[key].type(value)  # numpy scalars become Python's
            elif declared[key].type == Optional[float]:
                values[key] = float(value)
            else:
                values[key] = value
        return cls(**values, extras=extras)

    def __getattr__(self, name):
        # Only reached for names that are not fields: the scorer's further metrics.
        if name.startswith("__") or name == "extras":
            raise AttributeError(name)
        extras = self.__dict__.get("extras", {})
        if name in extras:
            return extras[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def as_dict(self):
        """Every field by name, ``extras`` flattened in; non-finite floats become ``None``
        (``inf`` is not JSON), so ``json.dumps(m.as_dict(), allow_nan=False)`` works."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extras"}
        values.update(self.extras)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in values.items()}


def __getattr__(name):
    # STRUCTURAL_METRIC_KEYS (the metrics worth averaging over a subject, as published) lives in
    # sphyr_hpc.core.metrics, whose import starts MPI: fetched on first use (PEP 562).
    if name == "STRUCTURAL_METRIC_KEYS":
        from .core.metrics import STRUCTURAL_METRIC_KEYS

        return STRUCTURAL_METRIC_KEYS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    currsize: int
    maxsize: int


# -- the module-level cache ----------------------------------------------------------------------
_yardsticks = None  # the first scorer's yardstick cache (REFERENCE_CACHE_SIZE), shared by every later one
_scorer = None  # the Scorer of the last configuration used


def _scorer_for(penal, filter_radius, include_own_budget_reference):
    """The scorer of this configuration, sharing the module's yardstick cache.

    A new configuration replaces the scorer (its solvers and analyses depend on
    the penalty); yardsticks stay cached across configurations.
    """
    global _scorer, _yardsticks
    from .scoring.scorer import Scorer, ScoringConfig

    config = ScoringConfig(penal=float(penal), filter_radius=float(filter_radius),
                           design_efficiency=bool(include_own_budget_reference))
    if _scorer is None or _scorer.config != config:
        if _scorer is not None:
            _scorer.close()
        _scorer = Scorer(config, cache_size=REFERENCE_CACHE_SIZE, yardsticks=_yardsticks)
        _yardsticks = _scorer.yardsticks
    return _scorer


def clear_reference_cache():
    """Drop every cached yardstick, analysis and solver (mainly useful in tests)."""
    global _scorer
    if _scorer is not None:
        _scorer.close()
        _scorer = None
    if _yardsticks is not None:
        _yardsticks.clear()


def reference_cache_info():
    """Hits, misses and size of the yardstick cache since it was last cleared."""
    cache = _yardsticks
    if cache is None:
        return CacheInfo(0, 0, 0, REFERENCE_CACHE_SIZE)
    return CacheInfo(cache.hits, cache.misses, len(cache), cache.maxsize)


def _stored_for(store):
    """The :class:`~sphyr_hpc.scoring.yardstick_store.StoredYardsticks` of ``store`` (one per folder,
    so its counts run over every call)."""
    from .io.yardstick_store import open_store
    from .scoring.yardstick_store import StoredYardsticks

    opened = open_store(store)
    where = None if opened is None else opened.root.absolute()
    if where not in _stores:
        _stores[where] = StoredYardsticks(opened, "api")
    return _stores[where]


_stores = {}


# -- one completion ------------------------------------------------------------------------------
def _check_parameters(gravity_dir, penal, filter_radius):
    """The load direction as floats; ValueError for parameters no problem can have."""
    try:
        if isinstance(gravity_dir, (str, bytes)):
            raise TypeError
        dr, dc = (float(v) for v in gravity_dir)
    except (TypeError, ValueError):
        raise ValueError(f"gravity_dir must be two numbers (row step, column step), not {gravity_dir!r}") from None
    if not (math.isfinite(dr) and math.isfinite(dc)) or (dr == 0.0 and dc == 0.0):
        raise ValueError(f"gravity_dir must be finite and non-zero, not {gravity_dir!r}")
    for name, value in (("penal", penal), ("filter_radius", filter_radius)):
        if isinstance(value, bool) or not (isinstance(value, numbers.Real) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, not {value!r}")
    return (dr, dc)


def _rows(value):
    """(rows, why not) of a grid argument: text or rows; anything else is no grid."""
    try:
        return grids.as_grid(value), None
    except grids.GridError as err:
        return [], str(err)


def _score(scorer, completion, ground_truth, input_grid, gravity):
    """:class:`StructuralMetrics` of grids already read as rows."""
    return StructuralMetrics.from_metrics(scorer.score(completion, ground_truth, input_grid or None, gravity))


def get_structural_metrics(output_grid, gt_grid, input_grid=None, gravity_dir=(1, 0), penal=PENAL,
                           filter_radius=FILTER_RADIUS, include_own_budget_reference=False, *, store=True):
    """Score a completion by simulating it and re-optimising its masked cells (docs/scoring.md, "Metrics").

    ``output_grid`` is the completion, ``gt_grid`` the dataset answer (loads,
    supports and the reference budget come from it), ``input_grid`` the masked
    grid shown to the model (the dataset record's ``input_grid``): its ``V``
    cells are the ones the yardstick re-optimises, every other cell is pinned
    to the answer.

    ``input_grid=None`` means "no mask known": every cell that is not ``L`` or
    ``S`` counts as masked, so the yardstick re-optimises the whole design and
    even the dataset answer scores below 1 (``1_random_cell_easy`` record 0:
    0.821 instead of 1.000).  That is the published scorer's rule without an
    input grid (docs/scoring.md, "Metrics"), rarely what is meant, so it is
    said by a :class:`UserWarning` (once per calling line); pass the record's
    ``input_grid`` to score a completion as ``score`` does.

    ``include_own_budget_reference`` adds
    ``own_budget_optimal_compliance`` and ``design_efficiency``: a second
    yardstick at the completion's own material budget (one per budget).
    ``store`` (keyword only, beside the published signature): the yardstick store
    (True: the default one; a folder; None: none; docs/store.md).

    The headline number is ``topology_score``: stiffness relative to the best
    design found on the reference budget, discounted by material spent beyond
    that budget.  Bad grids give the all-zero metrics with ``invalid_reason``;
    only parameters no problem can have (zero gravity, a non-positive penalty
    or radius) raise ``ValueError``.
    """
    gravity = _check_parameters(gravity_dir, penal, filter_radius)
    if input_grid is None:
        warnings.warn("get_structural_metrics(input_grid=None): every cell that is not L or S counts as masked "
                      "(the whole design is re-optimised, so even the dataset answer scores below 1); pass the "
                      "record's input_grid to score as the score command does", UserWarning, stacklevel=2)
    completion, completion_problem = _rows(output_grid)
    truth, truth_problem = _rows(gt_grid)
    masked, _ = _rows(input_grid) if input_grid is not None else (None, None)
    scorer = _scorer_for(penal, filter_radius, include_own_budget_reference)
    scorer.stored = _stored_for(store)
    metrics = _score(scorer, completion, truth, masked, gravity)
    why = (f"gt_grid: {truth_problem}" if truth_problem else
           f"output_grid: {completion_problem}" if completion_problem else
           None if completion else grids.unread_format(output_grid))
    return replace(metrics, invalid_reason=why) if why else metrics


# -- many records --------------------------------------------------------------------------------
class ScoredRecord(NamedTuple):
    """One result of :func:`score_records`: the record's position in the input, its metrics
    (None when the record could not be read) and the reason it could not (else None)."""

    position: int
    metrics: Optional[StructuralMetrics]
    error: Optional[str] = None


def score_records(records, gravity_dir=(1, 0), penal=PENAL, filter_radius=FILTER_RADIUS,
                  include_own_budget_reference=False, comm=None, *, store=True):
    """Score many records, over MPI ranks when there are several; yield results as they finish.

    A record is a dict as SPhyR stores them: ``ground_truth`` and
    ``completion`` (grids as text or rows), and ``input_grid`` or the
    ``prompt`` quoting it (dataset records with a ``completion`` added, or
    result records).  Results come as :class:`ScoredRecord` in the order they
    finish, each naming its record's ``position``; a record missing a field or
    holding something that is not a grid yields an ``error``, never an
    exception.

    Collective on ``comm`` (default ``MPI.COMM_WORLD``): every rank calls it
    and iterates the result to the end.  The records are taken from rank 0
    (other ranks may pass None), samples (ground truth, mask, gravity) go to
    whichever rank is free next, largest first, and every result is yielded on
    rank 0; on the other ranks the iteration is empty.  Stopping early on rank
    0 (``break``) stops the other ranks after their current sample.  An
    unexpected error on one of several ranks aborts the job rather than leave
    the others waiting.  ``store``: the yardstick store, as for :func:`get_structural_metrics`.
    """
    gravity = _check_parameters(gravity_dir, penal, filter_radius)
    _scorer_for(penal, filter_radius, include_own_budget_reference).stored = _stored_for(store)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    if comm.size == 1:
        return _score_serially(list(records), gravity, penal, filter_radius, include_own_budget_reference)
    return _score_over_ranks(records, gravity, penal, filter_radius, include_own_budget_reference, comm)


def _tasks(records, gravity):
    """Records as samples, grouped by yardstick and ordered as the score command orders them."""
    from .io.records import sample_from_record
    from .scoring.tasks import make_tasks

    samples = [sample_from_record(record, "", "", i, "input", gravity) for i, record in enumerate(records)]
    return make_tasks(samples)


def _scored(group, scorer):
    """A task's records, scored as the score command scores them: one :class:`~sphyr_hpc.scoring.sample_scorer.SampleScorer`
    per sample, so what its completions share is computed once."""
    from .scoring.sample_scorer import sample_scorers
    from .scoring.tasks import EXPECTED_RECORD_ERRORS

    for sample, sample_scorer in sample_scorers(scorer, group):
        if sample.error:
            yield ScoredRecord(sample.index, None, sample.error)
            continue
        try:
            if sample_scorer is None:  # the sample itself raises: its own scoring names the error
                metrics = _score(scorer, sample.completion, sample.ground_truth, sample.input_grid, sample.gravity)
            else:
                metrics = StructuralMetrics.from_metrics(sample_scorer.score(sample.completion)[0])
            yield ScoredRecord(sample.index, metrics)
        except EXPECTED_RECORD_ERRORS as err:
            yield ScoredRecord(sample.index, None, f"input record {sample.index}: {err}")


def _score_serially(records, gravity, penal, filter_radius, own_budget):
    scorer = _scorer_for(penal, filter_radius, own_budget)
    for group in _tasks(records, gravity):
        yield from _scored(group, scorer)


def _score_over_ranks(records, gravity, penal, filter_radius, own_budget, comm):
    from .runtime.process import guarded
    from .runtime.tasks import stream_to_root

    comm = comm.Dup()  # our messages never meet the caller's
    try:
        records = comm.bcast(list(records) if comm.rank == 0 else None, root=0)
        tasks = _tasks(records, gravity)
        scorer = _scorer_for(penal, filter_radius, own_budget)
    except BaseException:
        comm.Free()
        raise
    try:
        yield from stream_to_root(comm, len(tasks), lambda i: guarded(
            comm, lambda: list(_scored(tasks[i], scorer)), "sphyr_hpc.score_records"))
    finally:
        comm.Free()
