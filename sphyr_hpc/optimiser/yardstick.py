"""The yardstick: the best design the optimiser finds at the reference budget (SPEC 8).

Designs: a cold SIMP run at each penalty of the schedule; a warm-started chain
through it; for every seed (the dataset answer) the seed itself and a run at
the final penalty warm-started from it.  Candidates are every design and its
binarisation to the free budget.  The stiffest candidate within the cell budget
wins (first on ties; the last candidate if none fits); the polished
binarisation of the winner replaces it if strictly better and within budget.

Yardsticks are cached per :class:`YardstickKey` in a
:class:`~sphyr_hpc.cache.BoundedCache`: every model's completion of a sample
shares one.
"""

from dataclasses import dataclass

import numpy as np

from .. import discretisation as fe
from ..analysis import compliance_of
from ..solvers import condensed
from . import simp
from .discrete import binarise, polish
from .filter import FILTER_RADIUS, DensityFilter

PENAL_SCHEDULE = (1.0, 2.0, 3.0)
BUDGET_SLACK = 1e-9


@dataclass(frozen=True)
class YardstickResult:
    densities: np.ndarray
    compliance: float
    candidates: int
    polished: bool


def yardstick(system, volume_fraction, free, pinned, seeds=(), penal=fe.PENAL, radius=FILTER_RADIUS,
              schedule=PENAL_SCHEDULE, polish_design=True, max_iterations=simp.MAX_ITERATIONS,
              tolerance=simp.TOLERANCE):
    """Best design at ``volume_fraction`` on ``system`` (collective on its communicator)."""
    lc = system.loadcase
    free, pinned = simp.design_space(lc, free, pinned)
    budget_cells, _ = simp.free_budget(free, pinned, volume_fraction)
    cell_budget = float(volume_fraction) * lc.n_elements + BUDGET_SLACK
    # The filter depends on the grid alone: one per system and radius, closed with the system.
    density_filter = system.attachments.get(("filter", float(radius)))
    if density_filter is None:
        density_filter = system.attachments[("filter", float(radius))] = DensityFilter(system, radius)
    # Every design here shares the pinned cells: on one rank, solve them condensed onto the free cells' DOFs.
    solver = condensed.shared(system, free) if condensed.usable(system, free) else system
    def run(p, initial=None):
        return simp.run_simp(solver, density_filter, volume_fraction, free, pinned, penal=p,
                             max_iterations=max_iterations, tolerance=tolerance, initial=initial).densities

    cold = [run(p) for p in schedule]
    chain = []
    warm = None
    for i, p in enumerate(schedule):
        # The chain starts cold, so its first design is the first cold run (deterministic).
        warm = cold[0] if i == 0 else run(p, initial=warm)
        chain.append(warm)
    designs = cold + chain
    for seed in seeds:
        seed = np.where(free, np.clip(np.asarray(seed, dtype=float).reshape(lc.shape), 0.0, 1.0), pinned)
        designs += [seed, run(penal, initial=seed)]

    candidates = []
    for design in designs:
        candidates += [design, binarise(design, free, budget_cells)]
    known = {}  # equal candidates (the chain starts with the cold run; binarisations coincide) solved once

    def compliance(design):
        key = design.tobytes()
        if key not in known:
            known[key] = compliance_of(solver, design, penal)
        return known[key]

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
    if polish_design:
        design, c = polish(system, binarise(best, free, budget_cells), free, penal)
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
