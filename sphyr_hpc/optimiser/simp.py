"""One SIMP run: minimum compliance under a volume constraint (docs/scoring.md, "SIMP run").

Runs on the slabs of an :class:`~sphyr_hpc.solvers.system.GridSystem`
(any number of ranks): sensitivities and the filter are local/parallel PETSc
operations and every sum in the optimality-criteria bisection is an
``allreduce``, so no field is gathered inside the loop.  The system may also be a
:class:`~sphyr_hpc.solvers.condensed.CondensedSystem`.

Inputs and results are natural (nely, nelx) arrays: ``free`` marks the design
variables, ``pinned`` holds every other cell's density (L/S already forced to 1
by the caller, see :func:`design_space`).  How the run goes is one frozen
:class:`SimpSettings`; its design update is one
:class:`~sphyr_hpc.optimiser.update.Update` chosen by name (:func:`make_update`):

* ``update="oc"``, optimality criteria.  ``volume_sums="scorer"`` is the scorer's
  arithmetic: on one rank :class:`SerialOC` (the free cells only, the bisection's
  comparisons decided analytically where they are certain, :func:`_certain_multipliers`:
  the same multipliers and designs, bit for bit, at a fraction of the cost), on several
  :class:`CollectiveOC` (a filter MatMult a step).  ``volume_sums="linear"`` (the large
  grids of ``python -m sphyr_hpc.optimize``) is :class:`LinearOC`: on every rank count, the
  bisection's volume ``sum(physical)`` is ``pinned volume + dv . x`` (``dv = H^T (free /
  Hs)``, the filtered volume sensitivity; equal to the sum of the filtered candidate in
  exact arithmetic because the filter is linear), one dot product and one allreduce a step
  over the free cells; the settled candidate is filtered once.
* ``update="oc88"``: the 88-line code's update and stopping rule (Andreassen et al. 2011,
  :class:`OC88Update`): its sensitivity filter (``filter="sensitivity"``, ``ft = 1``) or
  density filter (``"density"``, ``ft = 2``), its bisection, and its loop ``while change >
  tolerance``; the result's compliance is then the listing's, the last iteration's analysis.
* ``update="mma"``: Svanberg's method of moving asymptotes (:mod:`.mma`, with ``volume_sums="linear"``).

``continuation=(p_start, p_step, every)``: the penalty starts at ``p_start`` and grows by
``p_step`` every ``every`` iterations up to ``penal``; the run cannot converge before it gets there.
"""

import functools
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..core import discretisation as fe
from ..runtime import events
from ..solvers import csr
from .filter import FILTERS, filter_sensitivity
from .update import Update, UpdateContext

MAX_ITERATIONS = 500
TOLERANCE = 1e-3
MOVE_LIMIT = 0.2
VOLUME_SUMS = ("scorer", "linear")
UPDATES = ("oc", "oc88", "mma")   # the design updates a run chooses by name (SimpSettings.update)
OPTIMIZERS = ("oc", "mma")        # what ``optimize --optimizer`` offers (oc88: --preset mbb88, --filter sensitivity)
WARM_START_FLOOR = 1e-3
OC_BOUNDS = (1e-9, 1e9)
OC_RELATIVE_GAP = 1e-6
# A volume bound decides a bisection step only when it clears the target by this much (relative):
# far above the rounding of a sum of a few million positive terms (n * eps ~ 1e-9 at 4M).
BOUND_MARGIN = 1e-7


@dataclass
class SimpResult:
    densities: np.ndarray  # natural (nely, nelx) physical densities
    compliance: float      # at this run's penalty
    iterations: int
    converged: bool
    history: list = field(default_factory=list)  # (iteration, compliance, change)


class SettingError(ValueError):
    """A setting out of range: ``field`` names it (the command line names its option instead)."""

    def __init__(self, field_name, value, requirement):
        super().__init__(f"{field_name} {value} {requirement}")
        self.field, self.value, self.requirement = field_name, value, requirement


@dataclass(frozen=True)
class SimpSettings:
    """How a SIMP run goes, checked once when made (:class:`SettingError` for a value out of range).

    ``update``: the design update by name (:data:`UPDATES`, :func:`make_update`): ``"oc"``
    (optimality criteria), ``"oc88"`` (the 88-line code's update, filter and stopping rule, with
    ``filter`` "density" or "sensitivity": what it filters) or ``"mma"`` (needs ``volume_sums="linear"``).
    ``volume_sums``: ``"scorer"`` (the scorer's bisection arithmetic) or ``"linear"`` (the large-grid
    driver's, see the module's docstring).  ``continuation``: ``(p_start, p_step, every)`` or None.
    """

    penal: float = fe.PENAL
    max_iterations: int = MAX_ITERATIONS
    tolerance: float = TOLERANCE
    move_limit: float = MOVE_LIMIT
    continuation: Optional[tuple] = None
    update: str = "oc"
    filter: str = "density"
    volume_sums: str = "scorer"

    def __post_init__(self):
        def require(ok, name, requirement):
            if not ok:
                raise SettingError(name, getattr(self, name), requirement)

        require(self.update in UPDATES, "update", f"is not one of {', '.join(UPDATES)}")
        require(self.filter in FILTERS, "filter", f"is not one of {', '.join(FILTERS)}")
        require(self.volume_sums in VOLUME_SUMS, "volume_sums", f"is not one of {', '.join(VOLUME_SUMS)}")
        require(self.max_iterations >= 0, "max_iterations", "must be at least 0")
        require(self.tolerance >= 0, "tolerance", "must be >= 0")
        require(0 < self.move_limit <= 1, "move_limit", "must be in (0, 1]")
        require(self.penal > 0, "penal", "must be positive")
        require(self.update != "mma" or self.volume_sums == "linear", "update",
                'needs volume_sums="linear" (the volume as one dot product)')
        require(self.filter == "density" or self.update == "oc88", "filter",
                "is the 88-line code's (update oc88): the other updates filter the densities")
        if self.continuation is not None:
            start, step, every = self.continuation
            require(step > 0 and every >= 1 and every == int(every) and start <= self.penal, "continuation",
                    f"needs p_start <= penal ({self.penal:g}), p_step > 0 and every a positive integer")


def design_space(loadcase, free, pinned):
    """Free cells without L/S, and pinned densities clipped with L/S at 1."""
    structural = loadcase.structural_mask()
    free = np.asarray(free, dtype=bool).reshape(loadcase.shape) & ~structural
    pinned = np.clip(np.asarray(pinned, dtype=float).reshape(loadcase.shape), 0.0, 1.0).copy()
    pinned[structural] = 1.0
    return free, pinned


def free_budget(free, pinned, volume_fraction):
    """Material (in cells) left for the free cells once pinned cells are paid for."""
    n_free = int(free.sum())
    pinned_volume = float(pinned[~free].sum())
    budget = min(max(float(volume_fraction) * free.size - pinned_volume, 0.0), float(n_free))
    return budget, pinned_volume


def run_simp(system, density_filter, volume_fraction, free, pinned, settings=SimpSettings(), initial=None,
             callback=None, gather=True, checkpoint=None):
    """Minimise compliance; ``free``/``pinned`` as returned by :func:`design_space`, ``settings`` a
    :class:`SimpSettings` (its update made once, :func:`make_update`).

    ``callback(iteration, compliance, physical, change, p)`` runs after every
    iteration's update (``physical`` is this rank's slab, ``p`` the iteration's penalty).  ``gather=False``
    leaves ``SimpResult.densities`` as this rank's slab (flattened) instead of
    the natural array on every rank.  ``checkpoint`` (:mod:`.checkpointing`) restores a saved run
    before the loop and saves the loop's state after its iterations.
    """
    penalty = penalty_schedule(settings.penal, settings.continuation)
    system.reset()  # an iterative solver warm-starts within this run only, never from another's
    mpi = system.comm.tompi4py()
    budget, pinned_volume = free_budget(free, pinned, volume_fraction)
    n_free = int(free.sum())
    if n_free == 0:
        c = system.solve(system.slab_of(fe.simp_modulus(pinned, settings.penal)))
        return SimpResult(pinned.copy() if gather else system.slab_of(pinned), c, 0, True)  # (as below)

    free_s = system.slab_of(free)
    is_free = free_s > 0.5
    pinned_s = system.slab_of(pinned)
    design = pinned_s.copy()
    warm = None if initial is None else np.clip(system.slab_of(initial), WARM_START_FLOOR, 1.0)
    design[is_free] = budget / n_free if warm is None else warm[is_free]
    physical = design.copy()
    dv = density_filter.chain(np.ones_like(design), free_s)
    update = make_update(settings, UpdateContext(mpi, dv, is_free, pinned_s, density_filter,
                                                 pinned_volume + budget, settings.move_limit))

    compliance, iteration, converged, history = np.inf, 0, False, []
    if checkpoint is not None:  # checkpoint: a resumed run starts from the loop's state as it was saved
        design, physical, iteration, converged, history = checkpoint.restore(design, physical, update, history)
    while not converged and iteration < settings.max_iterations:
        iteration += 1
        p = penalty(iteration)
        compliance = system.solve(fe.simp_modulus(physical, p))
        if not math.isfinite(compliance):
            break
        with events.timed(events.UPDATE):
            design, physical, change = update.step(design, physical, system.unit_energies(), p)
        if callback is not None:
            callback(iteration, compliance, physical, change, p)
        history.append((iteration, compliance, change))
        converged = update.stops(change, settings.tolerance) and p == settings.penal
        if checkpoint is not None:  # checkpoint: saved every few iterations, at the end, on SIGTERM/SIGINT
            checkpoint.after_iteration(iteration, design, physical, update, converged,
                                       iteration >= settings.max_iterations)

    if update.name != "oc88":  # (the 88-line code's result is its last analysis: it does not analyse its final update)
        compliance = system.solve(fe.simp_modulus(physical, settings.penal))
    return SimpResult(system.gather(physical) if gather else physical, compliance, iteration, converged, history)


def make_update(settings, context):
    """The :class:`~sphyr_hpc.optimiser.update.Update` a run with ``settings`` steps its design by, chosen
    by ``settings.update``; OC's arithmetic by ``settings.volume_sums`` and the rank count (the scorer's
    on one rank: :class:`SerialOC`; on several: :class:`CollectiveOC`; the linear sums: :class:`LinearOC`)."""
    if settings.update == "oc88":
        return OC88Update(context, settings.filter)
    if settings.update == "mma":
        from .mma import MMAUpdate

        return MMAUpdate(context)
    if settings.volume_sums == "linear":
        return LinearOC(context)
    return SerialOC(context) if context.mpi.Get_size() == 1 else CollectiveOC(context)


def penalty_schedule(penal, continuation):
    """Penalty of each iteration (1-based): constant, or raised in steps up to ``penal``."""
    if continuation is None:
        return lambda iteration: penal
    start, step, every = continuation
    if step <= 0 or every < 1 or start > penal:
        raise ValueError(f"continuation needs p_start <= penal, p_step > 0 and every >= 1, got {continuation}")
    return lambda iteration: min(float(penal), float(start) + float(step) * ((iteration - 1) // int(every)))


def _sensitivities(context, physical, energies, p):
    """The filtered compliance sensitivity ``H^T (dc * free / Hs)`` on this rank's slab."""
    return context.density_filter.chain(fe.compliance_sensitivity(physical, energies, p), context.free_s)


def _largest_change(mpi, new, old):
    """The largest change of a free cell over the ranks (``new``, ``old``: this rank's free cells)."""
    from mpi4py import MPI

    return mpi.allreduce(float(np.max(np.abs(new - old))) if old.size else 0.0, op=MPI.MAX)


class CollectiveOC(Update):
    """Optimality criteria with bisection on the volume multiplier, sums collective (docs/scoring.md, "SIMP run").

    Every step filters its candidate and sums it over the ranks.  One rank
    uses :class:`SerialOC` instead (the same multipliers, far fewer sums).
    """

    name = "oc"

    def step(self, design, physical, energies, p):
        from mpi4py import MPI

        c = self.context
        mpi, is_free, pinned, density_filter = c.mpi, c.is_free, c.pinned, c.density_filter
        dc = _sensitivities(c, physical, energies, p)
        base = np.maximum(-dc, 0.0) / np.maximum(c.dv, 1e-12)
        low = design - c.move_limit
        high = design + c.move_limit
        last = {}

        def over(middle):
            candidate = fe.clip(fe.clip(design * np.sqrt(base / middle), low, high), 0.0, 1.0)
            last["design"] = np.where(is_free, candidate, pinned)
            last["physical"] = np.where(is_free, density_filter.apply(last["design"]), pinned)
            return mpi.allreduce(float(last["physical"].sum()), op=MPI.SUM) > c.target

        _bisect(-np.inf, np.inf, over)  # every step evaluated: ``last`` holds the final middle's design
        return last["design"], last["physical"], _largest_change(mpi, last["design"][is_free], design[is_free])


OC88_BOUNDS = (0.0, 1e9)
OC88_RELATIVE_GAP = 1e-3


class OC88Update(Update):
    """The 88-line code's optimality-criteria update and stopping rule (Andreassen et al. 2011), on slabs.

    ``filter``: ``"sensitivity"`` (the listing's ``ft = 1``: the sensitivities
    filtered with the guard ``max(1e-3, x)``, the physical densities are the
    design) or ``"density"`` (``ft = 2``: the densities and the volume
    sensitivity filtered).  The update bisects the multiplier on [0, 1e9]
    until ``(l2 - l1) / (l1 + l2) <= 1e-3``, every step filtering its
    candidate and summing its volume over the ranks; the step is ``x sqrt(-dc / dv / lmid)``
    (damping 0.5) within the move limit and [0, 1].  The run stops after the
    first iteration whose largest change is not above the tolerance (the
    listing's ``while change > 0.01``).  Pinned cells keep their densities and are not design variables.
    """

    name = "oc88"

    def __init__(self, context, filter="density"):
        super().__init__(context)
        if filter not in FILTERS:
            raise ValueError(f"filter must be one of {FILTERS}, not {filter!r}")
        self.sensitivity = filter == "sensitivity"
        is_free = context.is_free
        self.dv = np.ones(int(is_free.sum())) if self.sensitivity else context.dv[is_free]  # ft = 1: dv = 1
        self.fixed_volume = float(context.pinned[~is_free].sum())

    def stops(self, change, tolerance):
        return not change > tolerance

    def step(self, design, physical, energies, p):
        from mpi4py import MPI

        c = self.context
        mpi, free, f, move = c.mpi, c.is_free, c.density_filter, c.move_limit
        dc = -p * (fe.E0 - fe.EMIN) * physical ** (p - 1.0) * energies
        dc = filter_sensitivity(f, design, dc) if self.sensitivity else f.chain(dc, c.free_s)
        ratio = -dc[free] / self.dv
        x = design[free]
        new_design = c.pinned.copy()
        l1, l2 = OC88_BOUNDS
        while (l2 - l1) / (l1 + l2) > OC88_RELATIVE_GAP:
            lmid = 0.5 * (l2 + l1)
            new_design[free] = np.maximum(0.0, np.maximum(x - move, np.minimum(
                1.0, np.minimum(x + move, x * np.sqrt(ratio / lmid)))))
            if self.sensitivity:
                new_physical = new_design
                volume = self.fixed_volume + float(new_design[free].sum())
            else:
                new_physical = np.where(free, f.apply(new_design), c.pinned)
                volume = float(new_physical.sum())
            if mpi.allreduce(volume, op=MPI.SUM) > c.target:
                l1 = lmid
            else:
                l2 = lmid
        return new_design, new_physical.copy(), _largest_change(mpi, new_design[free], x)


class SerialOC(Update):
    """Sensitivities, filter and OC step of one iteration on one rank, on the free cells only.

    The same arithmetic as the collective path, term for term: the filter's
    rows are PETSc's (``H`` read back as SciPy CSR, same column order, so every
    sum adds the same terms in the same order), and the chain rule only needs
    the free rows and columns of ``H^T`` (pinned cells' sensitivities are
    multiplied by 0).  The volume of a candidate is linear in it: sum(physical)
    = sum of pinned cells + dv . new_design, with dv = H^T (free / Hs) the
    filtered volume sensitivity, so the bisection only needs the free cells'
    ``g . x``, and :func:`_certain_multipliers` decides all but a few of its
    comparisons exactly; the step it settles on is filtered as docs/scoring.md ("SIMP run") says.
    """

    name = "oc"

    def __init__(self, context):
        super().__init__(context)
        dv, is_free, pinned = context.dv, context.is_free, context.pinned
        self.free = np.flatnonzero(is_free)
        self.pinned = pinned
        self.target = context.target
        self.move = context.move_limit
        fixed = ~is_free
        self.offset = float(pinned[fixed].sum() + dv[fixed] @ pinned[fixed])
        self.g = dv[self.free]
        self.g_floor = np.maximum(self.g, 1e-12)
        # Rows of H for the free cells' physical densities, H^T on the free cells for the chain rule.
        self.rows, self.chain_rule, self.Hs = context.density_filter.on_cells(self.free)

    def volume_over(self, d, b, middle, floor, ceiling):
        """The published comparison: is the candidate at ``middle`` over the budget?

        ``clip(clip(v, d - move, d + move), 0, 1)`` is ``clip(v, floor, ceiling)`` with
        ``floor = max(d - move, 0)``, ``ceiling = min(d + move, 1)``: clipping only
        selects, and ``d`` in [0, 1] keeps ``floor <= ceiling``, so the values are the same.
        """
        return self.offset + self.g @ fe.clip(d * np.sqrt(b / middle), floor, ceiling) > self.target

    def step(self, design, physical, energies, p):
        free, move = self.free, self.move
        dc = fe.compliance_sensitivity(physical[free], energies[free], p)
        dc = csr.matvec(self.chain_rule, dc / self.Hs)
        d = design[free]
        b = np.maximum(-dc, 0.0) / self.g_floor
        floor, ceiling = np.maximum(d - move, 0.0), np.minimum(d + move, 1.0)
        below, above = _certain_multipliers(self.offset, self.g, d * np.sqrt(b), floor, ceiling, self.target)
        if below == above:  # every comparison known and the same: the bisection's end is a constant
            middle = _settled(below > 0.0)
        else:
            middle = _bisect(below, above, lambda m: self.volume_over(d, b, m, floor, ceiling))
        if middle is None:
            return design.copy(), design.copy(), 0.0
        x = fe.clip(d * np.sqrt(b / middle), floor, ceiling)  # the "SIMP run" rules' two clips (see volume_over)
        new_design = self.pinned.copy()
        new_design[free] = x
        new_physical = self.pinned.copy()
        new_physical[free] = csr.matvec(self.rows, new_design) / self.Hs
        return new_design, new_physical, float(np.abs(x - d).max()) if x.size else 0.0


def _bisect(below, above, over):
    """The "SIMP run" rules' bisection on the multiplier: a middle below ``below`` is over the budget, one above
    ``above`` is not, ``over(middle)`` decides the rest.  Returns the last middle."""
    lower, upper = OC_BOUNDS
    gap = OC_RELATIVE_GAP
    middle = None
    while (upper - lower) / (lower + upper) > gap:
        middle = 0.5 * (lower + upper)
        if middle < below:
            lower = middle
        elif middle > above:
            upper = middle
        elif over(middle):
            lower = middle
        else:
            upper = middle
    return middle


@functools.lru_cache(maxsize=2)
def _settled(over):
    """Where the "SIMP run" rules' bisection ends when every candidate is over the budget (or none is)."""
    return _bisect(np.inf, np.inf, None) if over else _bisect(-np.inf, -np.inf, None)


_EPS = float(np.finfo(float).eps)


@functools.lru_cache(maxsize=1)
def _oc_kernels():
    """The compiled ``oc_volume`` and ``oc_candidate`` (the bisection's pass in one read of three
    arrays), or None without the compiled kernels (numpy's passes)."""
    from ..runtime import native

    try:
        return native.native_function("oc_volume"), native.native_function("oc_candidate")
    except native.NativeUnavailable:
        return None


class LinearOC(Update):
    """:class:`CollectiveOC` with the volume of a candidate as ``pinned part + dv . x`` (no MatMult a step).

    sum(physical) = sum of pinned over non-free cells + sum over free cells of
    (H x)_e / Hs_e, and the latter is x . H^T (free / Hs) = x . dv.  Only the
    final design is filtered.  What a run does not change (dv and the pinned
    cells' part) is taken once; the free cells' design is kept from one step to
    the next (the same values a gather of the design would give).
    """

    name = "oc"

    def __init__(self, context):
        super().__init__(context)
        mpi, dv, is_free, pinned = context.mpi, context.dv, context.is_free, context.pinned
        self.mpi, self.is_free, self.pinned = mpi, is_free, pinned
        self.density_filter, self.target, self.move_limit = context.density_filter, context.target, context.move_limit
        self.free_dv = dv[is_free]
        self.dv_floor = np.maximum(self.free_dv, 1e-12)
        self.fixed = float(pinned[~is_free].sum() + np.dot(dv[~is_free], pinned[~is_free]))
        self._x = None  # the free cells' design the last step returned
        self._returned = None

    def load_state(self, arrays, scalars):
        """A resumed run: nothing saved (OC's step depends on the design and the sensitivities only;
        the free cells kept between steps are the design's)."""
        self._x = self._returned = None

    def _free_design(self, design):
        if self._returned is not None and design is self._returned:
            return self._x
        return design[self.is_free]

    def step(self, design, physical, energies, p):
        from mpi4py import MPI

        dc = _sensitivities(self.context, physical, energies, p)
        mpi, free_dv, move_limit, target = self.mpi, self.free_dv, self.move_limit, self.target
        x = self._free_design(design)
        scaled = np.negative(dc[self.is_free])
        np.maximum(scaled, 0.0, out=scaled)
        np.divide(scaled, self.dv_floor, out=scaled)
        np.sqrt(scaled, out=scaled)
        np.multiply(x, scaled, out=scaled)
        low = np.subtract(x, move_limit)
        np.maximum(low, 0.0, out=low)
        fixed = self.fixed
        kernels = _oc_kernels()
        high = np.minimum(x + move_limit, 1.0) if kernels is None else None  # numpy's clip (the C pass derives it)
        candidate = np.empty_like(scaled)
        # Bounds of the volume (dv >= 0, scaled >= 0): clip(x, low, high) <= low + x gives
        # V(s) <= top + s * slope, so a middle whose bound is under the target by far more than
        # the sums' rounding is not over it, and the pass over the cells is skipped: the bisection
        # takes the very same steps (most of its first ~30 halve a far too large multiplier).
        top, slope = mpi.allreduce(np.array([fixed + float(np.dot(free_dv, low)), float(np.dot(free_dv, scaled))]),
                                   op=MPI.SUM)
        margin = BOUND_MARGIN * max(abs(target), 1.0)

        def candidate_at(middle):
            """``candidate`` of the multiplier ``middle``: clip(scaled / sqrt(middle), low, high)."""
            if kernels is not None:
                kernels[1](x.size, scaled.ctypes.data, x.ctypes.data, move_limit, 1.0 / np.sqrt(middle),
                           candidate.ctypes.data)
            else:
                np.multiply(scaled, 1.0 / np.sqrt(middle), out=candidate)
                fe.clip(candidate, low, high, out=candidate)

        def over(middle):
            if top + slope / np.sqrt(middle) < target - margin:
                return False
            with events.timed(events.BISECTION_PASS):  # counted: the bytes model's passes
                if kernels is not None:  # one pass reading scaled, x and dv (oc_volume.c), nothing stored
                    volume = kernels[0](x.size, scaled.ctypes.data, x.ctypes.data, free_dv.ctypes.data, move_limit,
                                        1.0 / np.sqrt(middle))
                else:
                    candidate_at(middle)
                    volume = float(np.dot(free_dv, candidate))
                return mpi.allreduce(fixed + volume, op=MPI.SUM) > target

        # The final middle's candidate (what its pass computes, also where the bound decided that step).
        candidate_at(_bisect(-np.inf, np.inf, over))
        local_change = float(np.max(np.abs(candidate - x))) if x.size else 0.0
        new_design = self.pinned.copy()
        new_design[self.is_free] = candidate
        physical = np.where(self.is_free, self.density_filter.apply(new_design), self.pinned)
        self._x, self._returned = candidate, new_design
        return new_design, physical, mpi.allreduce(local_change, op=MPI.MAX)


def _certain_multipliers(offset, g, a, floor, ceiling, target):
    """Multipliers ``(below, above)`` outside which the bisection's comparison is known.

    With ``s = 1/sqrt(middle)`` a candidate cell is ``clip(a s, floor, ceiling)``
    (``a = x sqrt(B)``; the two clips of docs/scoring.md "SIMP run" are one because ``floor <=
    ceiling``), so the volume ``V(s) = offset + g . clip(a s, floor,
    ceiling)`` is continuous, piecewise linear and non-decreasing in ``s``
    (``g, a >= 0``): a cell adds a ramp of slope ``g a`` from ``s = floor/a``
    to ``ceiling/a``.  Sorting these breakpoints gives ``V`` at every one of
    them (cumulative slopes and intercepts) and so the crossing ``s*`` of
    ``V = target`` exactly.  Every middle below ``below`` has ``V > target``
    and every middle above ``above`` has ``V <= target`` by a margin larger
    than the rounding of the bisection's own sum (and of these sums), so the
    bisection only evaluates ``V`` the published way for the rare middles
    between them and settles on the very same multiplier.  Where ``V`` is
    flat at the target the interval widens to the nearest breakpoints clear of
    it (the bisection then evaluates a few more steps), or to everything.
    """
    n = g.size
    lowest = offset + float(g @ floor)       # V below every breakpoint
    highest = offset + float(g @ ceiling)    # V above every breakpoint
    # Worst-case rounding of sums of n non-negative terms, with room to spare.
    margin = 16.0 * (n + 8) * _EPS * max(highest, abs(target), 1.0)
    if lowest > target + margin:
        return np.inf, np.inf                # V > target for every middle
    if highest < target - margin:
        return -np.inf, -np.inf              # V <= target for every middle
    # events[0]: breakpoints; [1]: slope change; [2]: intercept change (V = lowest + S1 s - S2).
    events = np.empty((3, 2 * n))
    inverse = np.divide(1.0, a, out=np.zeros(n), where=a > 1e-200)  # a ~ 0: no ramp (events of size 0)
    np.multiply(floor, inverse, out=events[0, :n])
    np.multiply(ceiling, inverse, out=events[0, n:])
    np.multiply(g, a, out=events[1, :n])
    np.negative(events[1, :n], out=events[1, n:])
    np.multiply(events[1], events[0], out=events[2])
    events = events.take(events[0].argsort(), axis=1)  # ties: any order, the same V up to rounding
    points = events[0]
    slope, intercept = events[1:].cumsum(axis=1)  # array methods: no np.* wrapper call per update
    volumes = lowest + slope * points - intercept
    s_high = s_low = None  # V(s) > target + margin for s >= s_high, V(s) < target - margin for s <= s_low
    k = int((volumes > target).argmax())
    if k > 0 and volumes[k] > target and slope[k - 1] > 0.0:
        # The crossing lies on segment k-1 .. k: a relative step either side of it
        # that moves V by several margins, if the segment reaches that far.  (Python floats
        # from here: numpy's scalars cost three times as much an operation.)
        start, stop, rising = float(points[k - 1]), float(points[k]), float(slope[k - 1])
        root = start + (target - float(volumes[k - 1])) / rising
        delta = max(1e-9, 4.0 * margin / (rising * root)) if root > 0.0 else np.inf
        line = lowest - float(intercept[k - 1])
        if delta < 1e-4:
            high, low = root * (1.0 + delta), root * (1.0 - delta)
            if high <= stop and line + rising * high > target + margin:
                s_high = high
            if low >= start and line + rising * low < target - margin:
                s_low = low
    # Otherwise (V flat at the target, a kink at it) the nearest breakpoints clear of it.
    if s_high is None:
        clear = np.flatnonzero(volumes > target + margin)
        s_high = float(points[clear[0]]) if clear.size else None
    if s_low is None:
        clear = np.flatnonzero(volumes < target - margin)
        s_low = float(points[clear[-1]]) if clear.size else None
    # middle = 1/s^2; a hair of slack for the rounding of these divisions.
    below = (1.0 - 1e-12) / min(s_high, 1e150)**2 if s_high else -np.inf
    above = (1.0 + 1e-12) / min(s_low, 1e150)**2 if s_low else np.inf
    return below, above
