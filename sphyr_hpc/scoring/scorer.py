"""Scoring completions: :class:`Scorer` (docs/scoring.md, "Metrics", with the published field names).

:class:`Scorer` holds everything that is shared between completions of the
same sample: the solvers of each load case, the solid compliances, the
analyses and the bounded yardstick cache, and fills in the formulas of
:mod:`sphyr_hpc.core.metrics`.  :meth:`Scorer.score` never raises on bad grids: a
problem that docs/scoring.md, "Metrics" prescribes metrics for gets them (all
zero, ``physically_valid`` false) plus an ``invalid_reason`` saying why.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..core import discretisation as fe
from ..core import grid as grids
from ..core import loadcase as loadcases
from ..core.analysis import analyse, clipped_volume_fraction
from ..runtime.cache import BoundedCache
from .diagnosis import diagnose
from ..core.metrics import (clipped_ratio, empty_metrics, material_efficiency, reconstruction_metrics,
                            valid_output_grid)
from ..optimiser.filter import FILTER_RADIUS
from ..optimiser.yardstick import (PENAL_SCHEDULE, Workspace, YardstickKey, YardstickSettings, pieces, run_piece,
                                   yardstick)
from ..solvers.sizing import MG_MIN_DOFS
from .yardstick_store import StoredYardsticks, reference_fingerprint


@dataclass(frozen=True)
class Case:
    """A completion's problem: load case, densities (L/S solid), free cells, cell counts, L/S cells."""

    loadcase: object
    rho: np.ndarray
    truth: np.ndarray
    free: np.ndarray
    counts: dict
    structural: np.ndarray  # the load case's L and S cells


@dataclass(frozen=True)
class ScoringConfig:
    penal: float = fe.PENAL
    filter_radius: float = FILTER_RADIUS
    design_efficiency: bool = False
    solver_prefix: str = "sphyr_"
    mg_min_dofs: int = MG_MIN_DOFS  # SIMP runs on multigrid from this many DOFs (solvers/sizing.py)


class _Problem:
    """The solver, its yardstick workspace and the solid compliance of one load case: analyses and
    yardsticks share them."""

    def __init__(self, lc, config):
        from ..solvers.elasticity import elasticity_system
        from ..runtime.petsc import petsc

        self.system = elasticity_system(lc, comm=petsc().COMM_SELF, prefix=config.solver_prefix)
        self.workspace = Workspace(self.system)
        self.solid = self.workspace.solid_compliance(config.penal)

    def close(self):
        self.workspace.close()
        self.system.close()


class Scorer:
    """Scores completions; caches solvers per load case and yardsticks per sample."""

    def __init__(self, config=None, cache_size=256, problem_cache_size=64, yardsticks=None, store=None):
        """``yardsticks``: a :class:`~sphyr_hpc.runtime.cache.BoundedCache` to share with other scorers (its keys
        hold penalty and filter radius), else a new one of ``cache_size`` entries.  ``store``: the
        :class:`~sphyr_hpc.scoring.yardstick_store.StoredYardsticks` a yardstick missing from the
        cache is read from or computed through (default: none, every yardstick computed)."""
        from ..solvers.condensed import one_blas_thread

        one_blas_thread()  # every metric rounds the same whatever the machine's thread setting
        self.config = config or ScoringConfig()
        self.yardsticks = BoundedCache(cache_size) if yardsticks is None else yardsticks
        # Analyses per (load case, design): a sample's ground truth is analysed once for
        # all its completions, and a completion equal to it costs nothing more.
        self._analyses = BoundedCache(cache_size)
        self._problems = BoundedCache(problem_cache_size, on_evict=_Problem.close)
        self._computed = {}  # YardstickKey -> {piece: designs} computed elsewhere (see supply)
        self.on_run = None   # called after every SIMP run of a yardstick (progress)
        self.stored = StoredYardsticks() if store is None else store
        # Ground truths' analyses read from the store (stored_reference), by (load case, design, free, truth).
        self._stored_analyses = BoundedCache(cache_size)

    def problem(self, lc):
        return self._problems.get_or_compute(lc, lambda: _Problem(lc, self.config))

    def analysis(self, lc, rho, pinned=None):
        """:func:`~sphyr_hpc.core.analysis.analyse` of a natural density array, cached.

        ``pinned``: ``(free, truth)`` of the sample; a design equal to ``truth``
        outside the ``free`` cells is solved condensed onto them
        (:meth:`~sphyr_hpc.solvers.condensed.CondensedSystems.analysis_system`).
        """
        if pinned is not None and len(self._stored_analyses):
            known = _reference_key(lc, rho, *pinned)
            if known in self._stored_analyses:  # the store's: no solve (stored_reference)
                return self._stored_analyses.get_or_compute(known, None)
        prob = self.problem(lc)
        system = prob.system if pinned is None else prob.workspace.condensed.analysis_system(rho, *pinned)
        # Keyed by the system too: the last digits of a condensed and a full solve differ, and a
        # record must not depend on which sample analysed its design first (on which rank).
        where = None if system is prob.system else np.asarray(pinned[0], dtype=bool).tobytes()
        return self._analyses.get_or_compute(
            (lc, np.asarray(rho, dtype=float).tobytes(), where),
            lambda: analyse(system, rho, prob.solid, self.config.penal))

    def optimum(self, lc, free, pinned, volume_fraction, seeds, reference=None):
        """The yardstick (from memory, the store, or computed).  ``reference``: the analysis of
        ``pinned`` (the ground truth's, ``analysis(lc, pinned, (free, pinned))``), kept with it in the
        store for :meth:`stored_reference`."""
        cfg = self.config
        key = YardstickKey.of(lc, free, pinned, volume_fraction, seeds, cfg.penal, cfg.filter_radius)
        kept = None if reference is None else (reference_fingerprint(pinned, free, cfg.solver_prefix), reference)

        def compute():
            return yardstick(self.problem(lc).workspace, volume_fraction, free, pinned, seeds=seeds,
                             settings=self._yardstick_settings(), computed=self._computed.pop(key, None),
                             on_run=self.on_run)

        inputs = (lc, free, pinned, volume_fraction, seeds, cfg.penal, cfg.filter_radius)
        return self.yardsticks.get_or_compute(key, lambda: self.stored.get(key, inputs, cfg.mg_min_dofs, compute,
                                                                           kept))

    def _yardstick_settings(self):
        cfg = self.config
        return YardstickSettings(penal=cfg.penal, radius=cfg.filter_radius, mg_min_dofs=cfg.mg_min_dofs)

    def stored_reference(self, lc, free, truth):
        """``(analysis, optimum)`` of a sample (ground truth ``truth``, ``free`` cells) when the store
        holds both (no solve, no solver made: :meth:`analysis` of ``truth`` then answers with the
        stored analysis); None otherwise (compute them: :meth:`analysis`, :meth:`optimum`)."""
        cfg = self.config

        def key_of(volume_fraction):
            return YardstickKey.of(lc, free, truth, volume_fraction, (truth,), cfg.penal, cfg.filter_radius)

        key = key_of(clipped_volume_fraction(truth)[1])  # the volume fraction analyse reports
        if key in self.yardsticks:
            return None
        found = self.stored.reference(key, cfg.mg_min_dofs, reference_fingerprint(truth, free, cfg.solver_prefix),
                                      accept=lambda analysis: key_of(analysis.volume_fraction) == key)
        if found is None:
            return None
        result, analysis = found
        self._stored_analyses.get_or_compute(_reference_key(lc, truth, free, truth), lambda: analysis)
        return analysis, self.yardsticks.get_or_compute(key, lambda: result)

    def has_stored_yardstick(self, case):
        """True when ``case``'s sample yardstick is in memory or in the store (so not worth splitting)."""
        key, _ = self._main_yardstick(case)
        return key in self.yardsticks or self.stored.has(key, self.config.mg_min_dofs)

    # -- a sample's yardstick in pieces (sphyr_hpc/scoring/pieces.py spreads them over ranks) --------------
    def _main_yardstick(self, case):
        """(key, arguments) of the yardstick every completion of ``case``'s sample is scored against."""
        cfg = self.config
        vf = float(np.clip(case.truth, 0.0, 1.0).mean())  # the ground truth's volume fraction (analyse's)
        args = (case.loadcase, case.free, case.truth, vf, (case.truth,))
        return YardstickKey.of(*args, cfg.penal, cfg.filter_radius), args

    def yardstick_pieces(self, case):
        """The independent pieces of ``case``'s yardstick (:func:`~sphyr_hpc.optimiser.yardstick.pieces`)."""
        return pieces(PENAL_SCHEDULE, 1)

    def run_piece(self, case, piece):
        """The designs of one piece of ``case``'s yardstick, on this process."""
        _, (lc, free, pinned, vf, seeds) = self._main_yardstick(case)
        return run_piece(self.problem(lc).workspace, piece, vf, free, pinned, seeds=seeds,
                         settings=self._yardstick_settings(), on_run=self.on_run)

    def supply(self, case, computed):
        """Pieces of ``case``'s yardstick computed elsewhere ({piece: designs}), used when it is needed."""
        key, _ = self._main_yardstick(case)
        self._computed[key] = dict(computed)

    def prepare(self, completion, ground_truth, input_grid=None, gravity=loadcases.DOWN):
        """The problem a completion poses, or the reason it poses none.

        Returns ``(case, reason)``: ``case`` is a :class:`Case` (load case,
        completion and ground-truth densities with L/S solid, free cells,
        completion cell counts) or None with ``reason`` saying why the "Metrics" rules'
        all-zero metrics apply.
        """
        try:
            lc = loadcases.from_grid(ground_truth, gravity=gravity)
        except loadcases.LoadCaseError as err:
            return None, str(err)
        structural = lc.structural_mask()
        rho_gt, counts = grids.densities(ground_truth)
        rho_gt[structural] = 1.0
        free = ~structural
        if input_grid:
            try:
                if grids.grid_shape(input_grid) == lc.shape:
                    free = grids.mask_of(input_grid, grids.MASK)
            except grids.GridError:
                pass
        return self.completion_case(Case(lc, rho_gt, rho_gt, free, counts, structural), completion)

    def completion_case(self, sample_case, completion):
        """``(case, reason)`` of ``completion`` against a sample's case (its load case, ground truth and
        free cells, as :meth:`prepare` makes them): what a sample's completions do not share."""
        lc = sample_case.loadcase
        if len(completion) != lc.nely or any(len(row) != lc.nelx for row in completion):
            rows = len(completion)
            shape = f"{rows} row{'s' * (rows != 1)}" if completion else "no grid"
            widths = sorted({len(row) for row in completion})
            if completion:  # many widths are named by their range, so the reason stays one short line
                named = "/".join(map(str, widths)) if len(widths) <= 3 else f"{widths[0]} to {widths[-1]}"
                shape += f" of {named} cell{'s' * (widths != [1])}"
            hint = ""
            if widths == [1] and lc.nelx > 1 and any(len(row[0]) == lc.nelx for row in completion):
                hint = " (its rows are written without spaces: each row is one cell; separate the cells by spaces)"
            return None, f"completion has {shape}, ground truth is {lc.nely}x{lc.nelx}{hint}"
        rho, counts = grids.densities(completion)
        rho[sample_case.structural] = 1.0
        return Case(lc, rho, sample_case.truth, sample_case.free, counts, sample_case.structural), None

    def designs(self, case):
        """Completion, ground truth and yardstick optimum of a prepared case (natural arrays)."""
        vf = float(np.clip(case.truth, 0.0, 1.0).mean())
        optimum = self.optimum(case.loadcase, case.free, case.truth, vf, (case.truth,))
        return {"completion": case.rho, "ground_truth": case.truth, "optimum": optimum.densities}

    def score(self, completion, ground_truth, input_grid=None, gravity=loadcases.DOWN):
        """All metrics of one completion (grids as lists of rows of str), with its failure diagnosis
        (:func:`~sphyr_hpc.scoring.diagnosis.diagnose`: ``failure``, ``checks``, ``floating_clusters``,
        ``beats_yardstick``)."""
        case, reason = self.prepare(completion, ground_truth, input_grid, gravity)
        return self.score_case(completion, ground_truth, case, reason)

    def score_case(self, completion, ground_truth, case, reason=None, reference=None):
        """:meth:`score` of a completion :meth:`prepare` made ``(case, reason)`` of.

        ``reference``: what every completion of the sample shares, when the
        caller holds it (:class:`~sphyr_hpc.scoring.sample_scorer.SampleScorer`): the ground
        truth's material (:func:`~sphyr_hpc.core.metrics.material`), analysis and yardstick.
        """
        metrics = self._physical_metrics(completion, ground_truth, case, reason, reference)
        metrics.update(diagnose(completion, ground_truth, case, metrics))
        return metrics

    def _physical_metrics(self, completion, ground_truth, case, reason, reference=None):
        cfg = self.config
        metrics = empty_metrics()
        metrics.update(reconstruction_metrics(completion, ground_truth, reference and reference.material))
        metrics["valid_output_grid"] = valid_output_grid(completion, ground_truth)
        if case is None:
            metrics["invalid_reason"] = reason
            return metrics
        lc, rho, rho_gt, free = case.loadcase, case.rho, case.truth, case.free
        metrics["physically_valid"] = True
        metrics.update(case.counts)

        out = self.analysis(lc, rho, (free, rho_gt))
        gt = self.analysis(lc, rho_gt, (free, rho_gt)) if reference is None else reference.analysis
        metrics.update(
            compliance=out.compliance,
            ground_truth_compliance=gt.compliance,
            load_carrying=out.load_carrying,
            max_displacement=out.max_displacement,
            volume_fraction=out.volume_fraction,
            ground_truth_volume_fraction=gt.volume_fraction,
        )

        optimum = self.optimum(lc, free, rho_gt, gt.volume_fraction, (rho_gt,)) if reference is None else reference.optimum
        metrics["optimal_compliance"] = optimum.compliance
        if cfg.design_efficiency:
            own = self.optimum(lc, free, rho_gt, out.volume_fraction, (rho_gt,))
            metrics["own_budget_optimal_compliance"] = own.compliance
        if gt.volume_fraction > 0.0:
            metrics["volume_ratio"] = float(out.volume_fraction / gt.volume_fraction)
        if not out.load_carrying:
            return metrics

        metrics["structural_efficiency"] = clipped_ratio(optimum.compliance, out.compliance)
        if metrics["own_budget_optimal_compliance"] is not None:
            metrics["design_efficiency"] = clipped_ratio(metrics["own_budget_optimal_compliance"], out.compliance)
        metrics["compliance_efficiency_vs_ground_truth"] = clipped_ratio(gt.compliance, out.compliance)
        if math.isfinite(optimum.compliance) and out.compliance > 0.0:
            metrics["structural_efficiency_raw"] = float(optimum.compliance / out.compliance)
        metrics["material_efficiency"] = material_efficiency(gt.volume_fraction, out.volume_fraction)
        metrics["topology_score"] = float(metrics["structural_efficiency"] * metrics["material_efficiency"])
        return metrics

    def close(self):
        self._problems.clear()  # closes every problem
        self._analyses.clear()
        self._stored_analyses.clear()
        self._computed.clear()


def _reference_key(lc, rho, free, truth):
    """The key of a stored ground-truth analysis (:meth:`Scorer.stored_reference`)."""
    return (lc, np.asarray(rho, dtype=float).tobytes(), np.asarray(free, dtype=bool).tobytes(),
            np.asarray(truth, dtype=float).tobytes())
