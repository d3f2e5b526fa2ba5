"""One SIMP run: minimum compliance under a volume constraint (SPEC section 5).

Runs on the slabs of an :class:`~sphyr_hpc.solvers.elasticity.ElasticitySystem`
(any number of ranks): sensitivities and the filter are local/parallel PETSc
operations and every sum in the optimality-criteria bisection is an
``allreduce``, so no field is gathered inside the loop.

Inputs and results are natural (nely, nelx) arrays: ``free`` marks the design
variables, ``pinned`` holds every other cell's density (L/S already forced to 1
by the caller, see :func:`design_space`).

Large grids (``python -m sphyr_hpc.optimize``) use two options the scorer does
not:

* ``volume_sums="linear"``: on every rank count, the bisection's volume
  ``sum(physical)`` is ``pinned volume + dv . x`` (``dv = H^T (free / Hs)``,
  the filtered volume sensitivity; equal to the sum of the filtered candidate
  in exact arithmetic because the filter is linear), one dot product and one
  allreduce a step over the free cells, with ``sqrt(base)`` computed once; the
  settled candidate is filtered once.  The default, ``"scorer"``, is
  :func:`_oc_update`, the scorer's arithmetic (the same identity on one rank,
  a filter MatMult a step on several).
* ``continuation=(p_start, p_step, every)``: the penalty starts at
  ``p_start`` and grows by ``p_step`` every ``every`` iterations up to
  ``penal``; the run cannot converge before it gets there.
"""

from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from .. import discretisation as fe
from .. import timing

MAX_ITERATIONS = 500
TOLERANCE = 1e-3
MOVE_LIMIT = 0.2
VOLUME_SUMS = ("scorer", "linear")
WARM_START_FLOOR = 1e-3
OC_BOUNDS = (1e-9, 1e9)
OC_RELATIVE_GAP = 1e-6


@dataclass
class SimpResult:
    densities: np.ndarray  # natural (nely, nelx) physical densities
    compliance: float      # at this run's penalty
    iterations: int
    converged: bool
    history: list = field(default_factory=list)  # (iteration, compliance, change)


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


def run_simp(system, density_filter, volume_fraction, free, pinned, penal=fe.PENAL,
             max_iterations=MAX_ITERATIONS, tolerance=TOLERANCE, move_limit=MOVE_LIMIT,
             initial=None, callback=None, volume_sums="scorer", continuation=None, gather=True):
    """Minimise compliance; ``free``/``pinned`` as returned by :func:`design_space`.

    ``callback(iteration, compliance, physical, change)`` runs after every
    iteration's update (``physical`` is this rank's slab).  ``gather=False``
    leaves ``SimpResult.densities`` as this rank's slab (flattened) instead of
    the natural array on every rank.
    """
    if volume_sums not in VOLUME_SUMS:
        raise ValueError(f"volume_sums must be one of {VOLUME_SUMS}, not {volume_sums!r}")
    penalty = _penalty_schedule(penal, continuation)
    mpi = system.comm.tompi4py()
    budget, pinned_volume = free_budget(free, pinned, volume_fraction)
    n_free = int(free.sum())
    if n_free == 0:
        c = system.solve(system.slab_of(fe.simp_modulus(pinned, penal)))
        return SimpResult(pinned.copy(), c, 0, True)

    free_s = system.slab_of(free)
    is_free = free_s > 0.5
    pinned_s = system.slab_of(pinned)
    design = pinned_s.copy()
    if initial is None:
        design[is_free] = budget / n_free
    else:
        warm = np.clip(system.slab_of(initial), WARM_START_FLOOR, 1.0)
        design[is_free] = warm[is_free]
    physical = design.copy()
    dv = density_filter.chain(np.ones_like(design), free_s)
    target = pinned_volume + budget

    compliance = np.inf
    iteration = 0
    converged = False
    history = []
    while iteration < max_iterations:
        iteration += 1
        p = penalty(iteration)
        compliance = system.solve(fe.simp_modulus(physical, p))
        if not np.isfinite(compliance):
            break
        with timing.timed(timing.UPDATE):
            energies = system.unit_energies()
            dc = -p * np.maximum(physical, 1e-9) ** (p - 1.0) * energies
            dc = density_filter.chain(dc, free_s)
            if volume_sums == "scorer":
                new_design, physical = _oc_update(mpi, design, dc, dv, is_free, pinned_s, density_filter,
                                                  target, move_limit)
            else:
                new_design, physical = _oc_update_linear(mpi, design, dc, dv, is_free, pinned_s,
                                                         density_filter, target, move_limit)
            local_change = float(np.max(np.abs(new_design[is_free] - design[is_free]))) if is_free.any() else 0.0
            change = mpi.allreduce(local_change, op=MPI.MAX)
        design = new_design
        if callback is not None:
            callback(iteration, compliance, physical, change)
        history.append((iteration, compliance, change))
        if change < tolerance and p == penal:
            converged = True
            break

    compliance = system.solve(fe.simp_modulus(physical, penal))
    return SimpResult(system.gather(physical) if gather else physical, compliance, iteration, converged, history)


def _penalty_schedule(penal, continuation):
    """Penalty of each iteration (1-based): constant, or raised in steps up to ``penal``."""
    if continuation is None:
        return lambda iteration: penal
    start, step, every = continuation
    if step <= 0 or every < 1 or start > penal:
        raise ValueError(f"continuation needs p_start <= penal, p_step > 0 and every >= 1, got {continuation}")
    return lambda iteration: min(float(penal), float(start) + float(step) * ((iteration - 1) // int(every)))


def _oc_update(mpi, design, dc, dv, is_free, pinned, density_filter, target, move_limit):
    """Optimality criteria with bisection on the volume multiplier (sums are collective).

    The volume of a candidate is linear in it: sum(physical) = sum of pinned
    cells + dv . new_design, with dv = H^T (free / Hs) the filtered volume
    sensitivity.  On one rank the bisection uses that identity and touches only
    the free cells; the step it settles on is then filtered as SPEC says.  On
    several ranks every step filters and sums collectively.
    """
    base = np.maximum(-dc, 0.0) / np.maximum(dv, 1e-12)
    low = design - move_limit
    high = design + move_limit

    def step(middle):
        candidate = _clip(_clip(design * np.sqrt(base / middle), low, high), 0.0, 1.0)
        new_design = np.where(is_free, candidate, pinned)
        return new_design, np.where(is_free, density_filter.apply(new_design), pinned)

    lower, upper = OC_BOUNDS
    if mpi.Get_size() == 1:
        fixed = ~is_free
        offset = float(pinned[fixed].sum() + dv[fixed] @ pinned[fixed])
        d, b, lo, hi, g = design[is_free], base[is_free], low[is_free], high[is_free], dv[is_free]

        def over(middle):
            return offset + g @ _clip(_clip(d * np.sqrt(b / middle), lo, hi), 0.0, 1.0) > target

        below, above = _certain_multipliers(offset, g, d * np.sqrt(b), np.maximum(lo, 0.0),
                                            np.minimum(hi, 1.0), target)
        middle = None
        while (upper - lower) / (lower + upper) > OC_RELATIVE_GAP:
            middle = 0.5 * (lower + upper)
            if middle < below or (middle <= above and over(middle)):
                lower = middle
            else:
                upper = middle
        return step(middle) if middle is not None else (design.copy(), design.copy())

    new_design = design.copy()
    physical = design.copy()
    while (upper - lower) / (lower + upper) > OC_RELATIVE_GAP:
        middle = 0.5 * (lower + upper)
        new_design, physical = step(middle)
        if mpi.allreduce(float(physical.sum()), op=MPI.SUM) > target:
            lower = middle
        else:
            upper = middle
    return new_design, physical


# The ufunc itself: np.clip's Python wrapper costs more than the clipping on small grids.
_clip = np.core.umath.clip


def _volume(offset, g, a, floor, ceiling, s):
    """offset + g . clip(a s, floor, ceiling): the bisection's volume at multiplier 1/s^2."""
    return offset + g @ _clip(a * s, floor, ceiling)


def _certain_multipliers(offset, g, a, floor, ceiling, target):
    """Multipliers ``(below, above)`` outside which the bisection's comparison is known.

    With ``s = 1/sqrt(middle)`` a candidate cell is ``clip(a s, floor, ceiling)``
    (``a = x sqrt(B)``; the two clips of SPEC 5 are one because ``floor <=
    ceiling``), so the volume ``V(s) = offset + g . clip(a s, floor,
    ceiling)`` is continuous, piecewise linear and non-decreasing in ``s``
    (``g, a >= 0``), with breakpoints ``floor/a`` and ``ceiling/a``.  Sorting
    them gives the crossing ``s*`` of ``V = target`` exactly; every middle
    below ``below`` has ``V > target`` and every middle above ``above`` has
    ``V <= target`` by a margin larger than the rounding of the bisection's own
    sum, so the bisection only evaluates ``V`` (the published arithmetic) for
    the rare middles between them and settles on the very same multiplier.
    Where the margin cannot be shown (a flat ``V`` at the target) the interval
    is everything and the bisection evaluates every step.
    """
    everything = (-np.inf, np.inf)
    scale = max(offset + float(g @ ceiling), abs(target), 1.0)
    # Worst-case rounding of a sum of n non-negative terms, with room to spare.
    margin = 8.0 * (g.size + 8) * np.finfo(float).eps * scale
    base = offset + float(g @ floor)        # V for s below every breakpoint
    if base > target + margin:
        return np.inf, np.inf               # V > target for every middle
    moving = a > 0.0
    ga = g[moving] * a[moving]
    with np.errstate(over="ignore"):        # a denormal a: the cell never leaves its floor
        starts = floor[moving] / a[moving]
        stops = ceiling[moving] / a[moving]
    # Events: at floor/a a cell starts growing like g a s, at ceiling/a it stops at g ceiling.
    points = np.concatenate((starts, stops))
    order = np.argsort(points, kind="stable")
    points = points[order]
    slope = np.cumsum(np.concatenate((ga, -ga))[order])
    intercept = np.cumsum(np.concatenate((g[moving] * floor[moving], -g[moving] * floor[moving]))[order])
    plateau = np.cumsum(np.concatenate((np.zeros(ga.size), g[moving] * (ceiling[moving] - floor[moving])))[order])
    volumes = base + slope * points - intercept + plateau
    crossing = np.flatnonzero(volumes > target)
    if crossing.size == 0:
        if volumes.size and volumes[-1] >= target - margin or not volumes.size and base >= target - margin:
            return everything
        return -np.inf, -np.inf             # V <= target for every middle
    k = int(crossing[0])
    if k == 0 or slope[k - 1] <= 0.0:
        return everything
    root = points[k - 1] + (target - volumes[k - 1]) / slope[k - 1]
    if not np.isfinite(root) or root <= 0.0:
        return everything
    # A relative step in s that moves V by several margins along this segment.
    delta = max(1e-9, 4.0 * margin / (slope[k - 1] * root))
    if delta > 1e-4:
        return everything
    s_high, s_low = root * (1.0 + delta), root * (1.0 - delta)
    if not (_volume(offset, g, a, floor, ceiling, s_high) > target + margin
            and _volume(offset, g, a, floor, ceiling, s_low) < target - margin):
        return everything
    # middle = 1/s^2; a hair of slack for the rounding of these two divisions.
    return (1.0 - 1e-12) / s_high**2, (1.0 + 1e-12) / s_low**2


def _oc_update_linear(mpi, design, dc, dv, is_free, pinned, density_filter, target, move_limit):
    """:func:`_oc_update` with the volume of a candidate as ``pinned part + dv . x`` (no MatMult a step).

    sum(physical) = sum of pinned over non-free cells + sum over free cells of
    (H x)_e / Hs_e, and the latter is x . H^T (free / Hs) = x . dv.  Only the
    final design is filtered.
    """
    lower, upper = OC_BOUNDS
    free_dv = dv[is_free]
    scaled = design[is_free] * np.sqrt(np.maximum(-dc[is_free], 0.0) / np.maximum(free_dv, 1e-12))
    low = np.maximum(design[is_free] - move_limit, 0.0)
    high = np.minimum(design[is_free] + move_limit, 1.0)
    fixed = float(pinned[~is_free].sum() + np.dot(dv[~is_free], pinned[~is_free]))
    candidate = np.empty_like(scaled)
    while (upper - lower) / (lower + upper) > OC_RELATIVE_GAP:
        middle = 0.5 * (lower + upper)
        np.multiply(scaled, 1.0 / np.sqrt(middle), out=candidate)
        np.clip(candidate, low, high, out=candidate)
        if mpi.allreduce(fixed + float(np.dot(free_dv, candidate)), op=MPI.SUM) > target:
            lower = middle
        else:
            upper = middle
    new_design = pinned.copy()
    new_design[is_free] = candidate
    physical = np.where(is_free, density_filter.apply(new_design), pinned)
    return new_design, physical
