"""The yardstick: the best design the optimiser finds at the reference budget (docs/scoring.md, "Yardstick").

Designs: a cold SIMP run at each penalty of the schedule; a warm-started chain
through it; for every seed (the dataset answer) the seed itself and a run at
the final penalty warm-started from it.  Candidates are every design and its
binarisation to the free budget.  The stiffest candidate within the cell budget
wins (first on ties; the last candidate if none fits); the polished
binarisation of the winner replaces it if strictly better and within budget.

The SIMP runs fall into independent :func:`pieces` that :func:`run_piece`
computes on any rank; :func:`yardstick` takes those already computed and
does the rest, so a sample's work can be spread over idle ranks with the same
result.  Large load cases run SIMP on multigrid (:mod:`sphyr_hpc.solvers.sizing`).

A yardstick runs in a :class:`Workspace`: what the yardsticks of one load case reuse (the condensed
systems, the filter, the SIMP runs' multigrid system, the solid compliance), kept with the load case's
system by its owner.  How it runs is one frozen :class:`YardstickSettings`.  Yardsticks are cached per
:class:`YardstickKey` in a :class:`~sphyr_hpc.runtime.cache.BoundedCache`: every model's completion
of a sample shares one.
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..core import discretisation as fe
from ..core.analysis import compliance_of, solid_compliance
from ..solvers import condensed, sizing
from ..solvers.base import SolverError
from . import simp
from .discrete import binarise, polish
from .filter import FILTER_RADIUS, DensityFilter

PENAL_SCHEDULE = (1.0, 2.0, 3.0)
BUDGET_SLACK = 1e-9
# The yardstick store (scoring/yardstick_store.py) keys its entries by this version: raise it with
# every change that could change a yardstick's bits (here, in simp/filter/discrete, the solvers, the
# element matrix or the analysis), so no run is ever served a yardstick another algorithm computed.
YARDSTICK_ALGORITHM_VERSION = 1


@dataclass(frozen=True)
class YardstickSettings:
    """How a yardstick runs (checked when made): the final ``penal``ty, the filter ``radius``, the
    penalty ``schedule`` of its cold runs and chain, whether the winner is polished, each SIMP run's
    ``max_iterations`` and ``tolerance``, and the DOFs from which its SIMP runs solve on multigrid
    (``mg_min_dofs``, None: never; :mod:`sphyr_hpc.solvers.sizing`)."""

    penal: float = fe.PENAL
    radius: float = FILTER_RADIUS
    schedule: tuple = PENAL_SCHEDULE
    polish: bool = True
    max_iterations: int = simp.MAX_ITERATIONS
    tolerance: float = simp.TOLERANCE
    mg_min_dofs: Optional[int] = sizing.MG_MIN_DOFS

    def __post_init__(self):
        if not self.radius > 0:
            raise simp.SettingError("radius", self.radius, "must be positive")
        if not self.schedule:
            raise simp.SettingError("schedule", self.schedule, "needs at least one penalty")
        for p in (*self.schedule, self.penal):  # every SIMP run's settings are valid
            self.simp_settings(p)

    def simp_settings(self, penal):
        """The settings of one SIMP run at ``penal``."""
        return simp.SimpSettings(penal=penal, max_iterations=self.max_iterations, tolerance=self.tolerance)


class Workspace:
    """What the yardsticks of one load case reuse, kept with its ``system`` by whoever keeps that (and
    closed by it first, :meth:`close`): the condensed systems (``condensed``, shared with the analyses
    of the completions), a density filter per radius, the SIMP runs' multigrid system (made when first
    needed, :func:`~sphyr_hpc.solvers.sizing.simp_system`) and the solid compliance per penalty."""

    def __init__(self, system):
        self.system = system
        self.condensed = condensed.CondensedSystems(system)
        self._filters = {}
        self._multigrid = None
        self._solid = {}

    def density_filter(self, radius):
        """The density filter of ``radius`` on the system's grid (one per radius)."""
        if float(radius) not in self._filters:
            self._filters[float(radius)] = DensityFilter(self.system, radius)
        return self._filters[float(radius)]

    def simp_system(self, exact, mg_min_dofs):
        """The system the SIMP runs solve on: ``exact``, or from the crossover on the multigrid system."""
        if not sizing.uses_multigrid(self.system, exact, mg_min_dofs):
            return exact
        if self._multigrid is None:
            self._multigrid = sizing.simp_system(self.system)
        return self._multigrid

    def solid_compliance(self, penal):
        """The all-solid design's compliance at ``penal`` (solved once)."""
        if float(penal) not in self._solid:
            self._solid[float(penal)] = solid_compliance(self.system, penal)
        return self._solid[float(penal)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for density_filter in self._filters.values():
            density_filter.close()
        if self._multigrid is not None:
            self._multigrid.close()
        self.condensed.close()
        self._filters, self._multigrid = {}, None


@dataclass(frozen=True)
class YardstickResult:
    densities: np.ndarray
    compliance: float
    candidates: int
    polished: bool


def pieces(schedule=PENAL_SCHEDULE, n_seeds=1):
    """The independent pieces of a yardstick's SIMP work, the longest expected first.

    ``("chain",)``: the cold run at the first penalty and the warm-started
    chain through the others (its runs depend on each other); ``("seed", j)``:
    seed j and the run warm-started from it (at the final penalty);
    ``("cold", i)``: the cold run at ``schedule[i]``, i >= 1, the highest
    penalty first (a run at a higher penalty usually takes more iterations:
    on the upscaled samples p = 3 took 33-416, p = 2 56-239, the seed's 8-500,
    the chain 53-683), so ranks taking pieces in this order finish close
    together.  :func:`run_piece` computes one anywhere (any rank, any order: a
    run depends on its inputs alone), :func:`yardstick` the rest.
    """
    return ([("chain",)] + [("seed", j) for j in range(n_seeds)]
            + [("cold", i) for i in range(len(schedule) - 1, 0, -1)])


def piece_runs(piece, schedule=PENAL_SCHEDULE):
    """SIMP runs a piece makes."""
    return len(schedule) if piece[0] == "chain" else 1


@dataclass(frozen=True)
class PieceResult:
    """What :func:`run_piece` computed: the piece's designs (natural arrays) and the compliances of
    its candidates within the cell budget ({design bytes: compliance}), so the rank that assembles
    the yardstick solves only what no piece solved."""

    designs: list
    compliances: dict


@dataclass(frozen=True)
class _Setup:
    free: np.ndarray
    pinned: np.ndarray
    budget_cells: float
    cell_budget: float
    exact: object        # the system candidates are solved on (condensed where usable)
    run: object          # run(penalty, initial=None) -> natural densities of one SIMP run


def _setup(workspace, volume_fraction, free, pinned, settings, on_run):
    lc = workspace.system.loadcase
    free, pinned = simp.design_space(lc, free, pinned)
    budget_cells, _ = simp.free_budget(free, pinned, volume_fraction)
    cell_budget = float(volume_fraction) * lc.n_elements + BUDGET_SLACK
    density_filter = workspace.density_filter(settings.radius)
    # Every design here shares the pinned cells: on one rank, solve them condensed onto the free cells' DOFs;
    # SIMP runs of large load cases on multigrid (sizing.MG_MIN_DOFS).
    exact = sizing.exact_system(workspace.condensed, free)
    solver = workspace.simp_system(exact, settings.mg_min_dofs)

    def run(p, initial=None):
        run_settings = settings.simp_settings(p)
        try:
            densities = simp.run_simp(solver, density_filter, volume_fraction, free, pinned, run_settings,
                                      initial=initial).densities
        except SolverError:
            if solver is exact:
                raise
            # The multigrid stalled on some design of this run: the whole run again on the exact
            # solver, which decides the run's designs alone (a run depends on its inputs only).
            densities = simp.run_simp(exact, density_filter, volume_fraction, free, pinned, run_settings,
                                      initial=initial).densities
        if on_run is not None:
            on_run()
        return densities

    return _Setup(free, pinned, budget_cells, cell_budget, exact, run)


def _run_piece(setup, piece, seeds, penal, schedule):
    kind = piece[0]
    if kind == "chain":
        chain = [setup.run(schedule[0])]  # the chain starts cold: its first design is the first cold run
        for p in schedule[1:]:
            chain.append(setup.run(p, initial=chain[-1]))
        return chain
    if kind == "cold":
        return [setup.run(schedule[piece[1]])]
    seed = np.asarray(seeds[piece[1]], dtype=float).reshape(setup.free.shape)
    seed = np.where(setup.free, np.clip(seed, 0.0, 1.0), setup.pinned)
    return [seed, setup.run(penal, initial=seed)]


def _candidates(setup, designs):
    """Every design and its binarisation to the free budget, in order."""
    out = []
    for design in designs:
        out += [design, binarise(design, setup.free, setup.budget_cells)]
    return out


def _compliance_of(setup, known, design, penal):
    """The exact compliance of ``design``, solved once per distinct design (``known``: bytes -> value)."""
    key = design.tobytes()
    if key not in known:
        known[key] = compliance_of(setup.exact, design, penal)
    return known[key]


def _computed_piece(setup, piece, seeds, penal, schedule):
    designs = _run_piece(setup, piece, seeds, penal, schedule)
    known = {}
    for candidate in _candidates(setup, designs):
        if candidate.sum() <= setup.cell_budget:
            _compliance_of(setup, known, candidate, penal)
    return PieceResult(designs, known)


def run_piece(workspace, piece, volume_fraction, free, pinned, seeds=(), settings=YardstickSettings(),
              on_run=None):
    """One of :func:`pieces` as :func:`yardstick` computes it: a :class:`PieceResult` (its designs,
    and the exact compliances of their candidates within the cell budget)."""
    setup = _setup(workspace, volume_fraction, free, pinned, settings, on_run)
    return _computed_piece(setup, tuple(piece), seeds, settings.penal, settings.schedule)


def yardstick(workspace, volume_fraction, free, pinned, seeds=(), settings=YardstickSettings(), computed=None,
              on_run=None):
    """Best design at ``volume_fraction`` on the :class:`Workspace`'s system (collective on its communicator).

    ``computed``: {piece: :class:`PieceResult`} of pieces already computed by :func:`run_piece`
    (elsewhere); the others are computed here.  ``on_run()`` is called after every SIMP run.
    """
    penal, schedule = settings.penal, settings.schedule
    setup = _setup(workspace, volume_fraction, free, pinned, settings, on_run)
    computed = dict(computed or {})
    for piece in pieces(schedule, len(seeds)):
        if piece not in computed:  # its candidates are solved below, with everyone else's
            computed[piece] = PieceResult(_run_piece(setup, piece, seeds, penal, schedule), {})
    chain = list(computed[("chain",)].designs)
    cold = [chain[0]] + [computed[("cold", i)].designs[0] for i in range(1, len(schedule))]
    designs = cold + chain
    for j in range(len(seeds)):
        designs += list(computed[("seed", j)].designs)
    free, budget_cells, cell_budget = setup.free, setup.budget_cells, setup.cell_budget

    candidates = _candidates(setup, designs)
    # Equal candidates (the chain starts with the cold run; binarisations coincide) are solved once;
    # the pieces solved theirs already (the same exact system, so the same values to the bit).
    known = {}
    for result in computed.values():
        known.update(result.compliances)

    def compliance(design):
        return _compliance_of(setup, known, design, penal)

    best, best_c = None, np.inf
    for candidate in candidates:
        if candidate.sum() > cell_budget:
            continue
        c = compliance(candidate)
        if c < best_c:
            best, best_c = candidate, c
    if best is None:
        best = candidates[-1]
        best_c = compliance(best)
    polished = False
    if settings.polish:
        design, c = polish(workspace.system, binarise(best, free, budget_cells), free, penal,
                           solid=workspace.solid_compliance(penal))
        if c < best_c and design.sum() <= cell_budget:
            best, best_c, polished = design, c, True
    return YardstickResult(np.array(best, dtype=float), float(best_c), len(candidates), polished)


@dataclass(frozen=True)
class YardstickKey:
    """Everything a yardstick depends on (rounded as the published cache rounds)."""

    loadcase: object
    free: bytes
    pinned: bytes
    volume_fraction: float
    penal: float
    radius: float
    seeds: tuple

    @classmethod
    def of(cls, loadcase, free, pinned, volume_fraction, seeds, penal, radius):
        return cls(
            loadcase,
            np.asarray(free, dtype=bool).tobytes(),
            np.round(np.asarray(pinned, dtype=float), 6).tobytes(),
            round(float(volume_fraction), 6),
            float(penal),
            float(radius),
            tuple(np.round(np.asarray(s, dtype=float), 6).tobytes() for s in seeds),
        )
