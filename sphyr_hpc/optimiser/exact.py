"""The exact discrete optimum of a masked region, or a proven bound on it: branch and bound.

Problem (the "Yardstick" rules' budget): among the binary designs of the free cells with at
most ``T`` solid free cells (``T = floor(B + 1e-9)``, ``B`` the free budget of
:func:`~sphyr_hpc.optimiser.simp.free_budget`), pinned cells at their
ground-truth densities, find the one of least compliance (docs/scoring.md, "Finite elements", ``p = 3``;
on binary free cells every penalty gives the same moduli).

Conventions: ``free`` and ``pinned`` are natural (nely, nelx) arrays; free
cells are numbered in row-major order, and a search *state* holds one int8
per free cell: ``-1`` undecided, ``0`` void, ``1`` solid.  A node's *point*
is its state with every undecided cell solid.

Bounds.  Compliance is monotone: adding material never makes a structure
softer, so a node's point is at least as stiff as any design below it, and its
compliance is a lower bound whatever the budget (the bound the issue asks
for).  It is strengthened, never weakened, by convexity: with the free cells'
modulus interpolated linearly, ``E(x) = Emin + x (E0 - Emin)`` on ``x`` in
[0, 1] (the same moduli as SIMP's on binary cells, and stiffer than SIMP's
``x^3`` in between), compliance ``c(x) = f . K(x)^-1 f`` is convex in ``x``
(``f . K^-1 f`` is convex in K, K affine in x).  So at any point ``y``,

    c(x) >= c(y) + g(y) . (x - y),   g_e(y) = -(E0 - Emin) u_e . K0 u_e <= 0,

for every binary design ``x``: a *cut*.  Its minimum over a node's designs
(fixed cells as fixed, at most ``T - #solid`` undecided cells solid) is the
node's constant part plus the sum of the most negative ``g`` among its
undecided cells: a sort.  At the node's own point this is the monotone bound
plus the energy of the cells the budget forces out, so it is never below it.
A node's bound is the largest of its parent's bound (its designs are a subset
of the parent's), its own point's cut and the *root cuts*: cuts at the
iterates of an optimality-criteria solve of the convex relaxation at the root
(the relaxation's optimum is the tightest single cut).  Relaxation steps at
every node (warm-started from the root's solution) were tried and dropped: on
v1 full_easy they raised the certified bound less per second than the nodes
they displaced.

Search: best first (the open node of smallest bound; ties: the newest), so the
certified lower bound (the smallest bound of any open node) rises as fast as
the bounds allow.  A node is pruned when its bound is not below the incumbent
by more than ``RELATIVE_TOLERANCE`` (rounding: ``optimal`` means no design is
stiffer than the incumbent by more than that).  Before branching, a node fixes
every undecided cell whose opposite choice its own cut already prices at or
above the incumbent (reduced-cost fixing).  Branching rule: the undecided cell
of largest unit energy at the node's point, i.e. the one whose removal the
cut charges most: its void child is the most likely to be pruned, and its
solid child keeps the parent's point (no new solve).

Incumbent: the yardstick's design (its ``T`` densest free cells solid), the
rounding of the root relaxation, the swap polish (docs/scoring.md, "Swap polish" with up to
``POLISH_PASSES`` passes) of the better of them, then every leaf the search
reaches; the polish runs again on the incumbent when a budget stops the search.

Solves: the system is condensed once per sample onto the free cells' DOFs
(:meth:`~sphyr_hpc.solvers.condensed.CondensedSystem.reduced_system`: one
sparse factorisation of the pinned block), so a point costs one dense
Cholesky of at most a few hundred DOFs.  A point is factorised once and shared
by its node family: the solid child of every branching has its parent's point,
and points are cached.  A point whose Cholesky breaks down, or whose
compliance is not finite, is a severed design (docs/scoring.md, "Finite elements": infinite compliance):
its bound is +inf (every design below it is severed too).

Budgets: ``node_budget`` (nodes evaluated) and ``time_budget`` (seconds)
stop the search; the result is then the incumbent and the certified lower
bound, i.e. a proven gap.
"""

import heapq
import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

from ..core import discretisation as fe
from ..runtime.cache import BoundedCache
from .discrete import polish

RELATIVE_TOLERANCE = 1e-9
NODE_BUDGET = 20000
TIME_BUDGET = 60.0
# Optimality-criteria iterations on the root's convex relaxation, and the cuts kept.
ROOT_ITERATIONS = 60
ROOT_CUTS = 8
# Passes of the swap polish on the incumbent (before the search, and after it if it stopped short).
POLISH_PASSES = 20
# Points whose solves are kept (each a compliance and one energy per free cell).
POINT_CACHE = 4096


@dataclass(frozen=True)
class ExactResult:
    """The best design found and what is proven about the optimum."""

    design: np.ndarray   # natural (nely, nelx): the best binary design found (pinned cells as given)
    compliance: float    # its compliance
    lower_bound: float   # no design with at most budget_cells solid free cells is stiffer
    status: str          # "optimal" (lower_bound == compliance) or "gap"
    nodes: int           # nodes evaluated
    budget_cells: int
    free_cells: int
    seconds: float


def budget_cells(free_budget):
    """the "Binarising" rules' integer target of a free budget (in cells)."""
    return int(math.floor(free_budget + 1e-9))


def start_design(densities, budget):
    """The ``budget`` densest free cells solid, the rest void (ties: row-major order).

    By monotonicity no design with fewer solid cells beats its best superset,
    so the binary design a yardstick (grey or binary) points at spends the whole budget.
    """
    x = np.zeros(densities.size)
    x[np.argsort(-np.asarray(densities, dtype=float), kind="stable")[:max(budget, 0)]] = 1.0
    return x


class _Points:
    """Compliance and cut gradient at points of the free cells (linear interpolation), cached."""

    def __init__(self, condensed, pinned_moduli):
        self.condensed = condensed
        self.moduli = np.array(pinned_moduli, dtype=float).ravel()
        self.free = condensed.free_cells
        positions = condensed.cell_positions
        self.positions = np.where(positions >= 0, positions, condensed.k)  # fixed DOFs read a 0
        self.ke = condensed.ke
        self.cache = BoundedCache(POINT_CACHE)

    def evaluate(self, x):
        """(compliance, gradient over free cells) at ``x`` (free-cell densities in [0, 1])."""
        x = np.asarray(x, dtype=float)
        return self.cache.get_or_compute(x.tobytes(), lambda: self._evaluate(x))

    def _evaluate(self, x):
        moduli = self.moduli.copy()
        moduli[self.free] = fe.EMIN + x * (fe.E0 - fe.EMIN)
        S, g, c0 = self.condensed.reduced_system(moduli)
        factor, info = lapack.dpotrf(S, lower=False, clean=False)
        if info == 0:
            u, info = lapack.dpotrs(factor, g, lower=False)
            c = c0 + float(g @ u)
            if info == 0 and math.isfinite(c) and c >= 0.0:
                ue = np.append(u, 0.0)[self.positions]
                energies = np.einsum("ij,ij->i", ue @ self.ke, ue)
                return c, -(fe.E0 - fe.EMIN) * energies
        return math.inf, np.zeros(self.free.size)


def _cut_bounds(cuts, state, budget):
    """Each cut's minimum over the designs of ``state`` (array, one per cut)."""
    c, g, y = cuts  # (K,), (K, m), (K, m)
    undecided = state < 0
    room = min(budget - int((state == 1).sum()), int(undecided.sum()))
    fixed = np.where(undecided, 0.0, state)
    value = c + np.einsum("km,km->k", g, fixed[None, :] - y)  # undecided cells counted at 0 here
    if room > 0:
        gu = g[:, undecided]
        value = value + np.partition(gu, room - 1, axis=1)[:, :room].sum(axis=1)
    return value


def _relax(points, x, active, budget, iterations, move=0.2):
    """Cuts ``(c, g, x)`` at the iterates of optimality-criteria steps on the convex relaxation.

    Only ``active`` cells move (the others keep their values in ``x``), with at
    most ``budget`` material among them.  Every iterate's cut is valid, so the
    iterations need not converge.  Returns the cuts and the last iterate.
    """
    x = np.array(x, dtype=float)
    found = []
    for _ in range(iterations):
        c, g = points.evaluate(x)
        if not math.isfinite(c):
            break
        found.append((c, g, x.copy()))
        xa = x[active]
        low, high = np.maximum(xa - move, 0.0), np.minimum(xa + move, 1.0)
        sensitivity = np.sqrt(np.maximum(-g[active], 0.0))

        def step(multiplier):
            return np.clip(xa * sensitivity / math.sqrt(multiplier), low, high)

        lo, hi = 1e-12, 1e12
        while (hi - lo) / (hi + lo) > 1e-9:
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if step(mid).sum() > budget else (lo, mid)
        new = np.maximum(step(hi), 1e-3)  # never exactly 0: OC could not bring a cell back
        change = float(np.max(np.abs(new - xa))) if new.size else 0.0
        x[active] = new
        if change < 1e-4:
            break
    return found, x


def _best_cuts(found, state, budget, keep):
    """The ``keep`` cuts of ``found`` that bound the designs of ``state`` highest, stacked."""
    cuts = tuple(np.array([f[i] for f in found]) for i in range(3))
    order = np.argsort(-_cut_bounds(cuts, state, budget))[:keep]
    return tuple(a[order] for a in cuts)


def branch_and_bound(condensed, pinned, budget, incumbent, node_budget=NODE_BUDGET, time_budget=TIME_BUDGET,
                     penal=fe.PENAL, root_cuts=True, polish_passes=POLISH_PASSES):
    """The best binary design of the free cells of ``condensed`` with at most ``budget`` solid ones.

    ``condensed`` is a :class:`~sphyr_hpc.solvers.condensed.CondensedSystem`
    on the free cells; ``pinned`` the natural densities of every other cell
    (L/S at 1); ``incumbent`` a natural binary design to start from (the
    yardstick's; its ``budget`` densest free cells are made solid), improved
    by the relaxation's rounding and the swap polish before the search.  Returns an :class:`ExactResult`.
    """
    search = _Search(condensed, pinned, budget, incumbent, penal, polish_passes)
    search.prepare(root_cuts)
    stopped = search.run(node_budget, time_budget)
    return search.result(stopped)


class _Search:
    """One branch and bound: the incumbent, the open nodes (a heap of packed states, -1 undecided)."""

    def __init__(self, condensed, pinned, budget, incumbent, penal, polish_passes):
        self.started = time.perf_counter()
        self.condensed, self.budget, self.penal, self.polish_passes = condensed, budget, penal, polish_passes
        self.shape = condensed.loadcase.shape
        self.free_index = condensed.free_cells
        self.m = self.free_index.size
        self.free_mask = np.zeros(self.shape, dtype=bool)
        self.free_mask.ravel()[self.free_index] = True
        self.pinned = np.asarray(pinned, dtype=float).reshape(self.shape)
        self.points = _Points(condensed, fe.simp_modulus(self.pinned, penal))
        self.best_x = start_design(np.asarray(incumbent, dtype=float).ravel()[self.free_index], budget)
        self.best_c = self.points.evaluate(self.best_x)[0]
        self.cuts = None
        self.counter = 0
        self.nodes = 0
        self.heap = []

    def threshold(self):
        return self.best_c * (1.0 - RELATIVE_TOLERANCE)

    def consider(self, x, c):
        if c < self.best_c:
            self.best_x, self.best_c = np.array(x, dtype=float), c

    def improve(self):
        """The swap polish (docs/scoring.md, "Swap polish") of the incumbent, with up to ``polish_passes`` passes."""
        design = self.pinned.copy().ravel()
        design[self.free_index] = self.best_x
        polished, _ = polish(self.condensed.base, design.reshape(self.shape), self.free_mask, self.penal,
                             max_passes=self.polish_passes)
        x = polished.ravel()[self.free_index]
        self.consider(x, self.points.evaluate(x)[0])

    def prepare(self, root_cuts):
        """The root: the relaxation's cuts and rounded design, then the polished incumbent."""
        m, budget = self.m, self.budget
        if root_cuts and m > budget:
            found, relaxed = _relax(self.points, np.full(m, min(budget / m, 1.0)), np.ones(m, dtype=bool), budget,
                                    ROOT_ITERATIONS)
            self.cuts = _best_cuts(found, np.full(m, -1, dtype=np.int8), budget, ROOT_CUTS) if found else None
            rounded = start_design(relaxed, budget)  # the relaxation's densest cells: sometimes a better start
            self.consider(rounded, self.points.evaluate(rounded)[0])
        if self.polish_passes:
            self.improve()

    def push(self, bound, state):
        self.counter += 1
        heapq.heappush(self.heap, (bound, -self.counter, state.tobytes()))

    def run(self, node_budget, time_budget):
        """Explore nodes, best bound first; True if a budget stopped the search."""
        self.heap = [(-math.inf, self.counter, np.full(self.m, -1, dtype=np.int8).tobytes())]
        while self.heap:
            if self.nodes >= node_budget or time.perf_counter() - self.started > time_budget:
                return True
            bound, _, raw = heapq.heappop(self.heap)
            if bound >= self.threshold():
                continue
            self.nodes += 1
            self.expand(bound, np.frombuffer(raw, dtype=np.int8).copy())
        return False

    def expand(self, bound, state):
        """One node: a leaf's design, a fitting point, or cuts, fixing and two children."""
        budget = self.budget
        undecided = state < 0
        room = budget - int((state == 1).sum())
        if room <= 0 or not undecided.any():  # a leaf: one design left
            x = np.where(undecided, 0.0, state).astype(float)
            self.consider(x, self.points.evaluate(x)[0])
            return
        point = np.where(undecided, 1.0, state).astype(float)
        c, g = self.points.evaluate(point)
        if room >= undecided.sum():  # the point itself fits the budget: the node's best design
            self.consider(point, c)
            return
        if not math.isfinite(c):
            return  # even with every undecided cell solid the load path is severed
        own = (np.array([c]), g[None, :], point[None, :])
        bound = max(bound, float(_cut_bounds(own, state, budget)[0]))
        if self.cuts is not None:
            bound = max(bound, float(_cut_bounds(self.cuts, state, budget).max()))
        if bound >= self.threshold():
            return
        if self.fix(state, own, g, room):  # the point moved: evaluate the smaller node afresh
            self.push(bound, state)
            return
        undecided = state < 0
        room = budget - int((state == 1).sum())
        if room >= undecided.sum():
            self.consider(np.where(undecided, 1.0, state).astype(float), c)
            return
        cells = np.flatnonzero(undecided)
        e = cells[np.argmin(g[cells])]  # the largest unit energy
        for value in (0, 1):
            child = state.copy()
            child[e] = value
            child_bound = max(bound, float(_cut_bounds(own, child, budget)[0]))
            if child_bound < self.threshold():
                self.push(child_bound, child)

    def fix(self, state, own, g, room):
        """Reduced-cost fixing with the node's own cut, in ``state``; True if a cell was fixed void.

        With the undecided cells sorted by g, the cut's minimum makes the first
        ``room`` solid; forcing one of them void brings in the next, forcing
        another one solid pushes out the last of them.
        """
        cells = np.flatnonzero(state < 0)
        order = cells[np.argsort(g[cells], kind="stable")]
        own_bound = float(_cut_bounds(own, state, self.budget)[0])
        chosen, rest = order[:room], order[room:]
        to_void_cost = own_bound - g[chosen] + g[rest[0]]       # rest is non-empty: room < undecided
        to_solid_cost = own_bound + g[rest] - g[chosen[-1]]
        state[chosen[to_void_cost >= self.threshold()]] = 1
        state[rest[to_solid_cost >= self.threshold()]] = 0
        return bool((state[rest] == 0).any())

    def result(self, stopped):
        if stopped and self.polish_passes:
            self.improve()
        open_bound = min((b for b, _, _ in self.heap), default=math.inf)
        lower = min(self.best_c, open_bound) if stopped else self.best_c
        design = self.pinned.copy().ravel()
        design[self.free_index] = self.best_x
        return ExactResult(design.reshape(self.shape), float(self.best_c), float(lower),
                           "optimal" if lower >= self.best_c * (1.0 - RELATIVE_TOLERANCE) else "gap",
                           self.nodes, int(self.budget), int(self.m), time.perf_counter() - self.started)
