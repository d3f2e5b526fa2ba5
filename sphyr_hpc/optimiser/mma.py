"""The method of moving asymptotes (MMA) for minimum compliance, over all ranks (``optimize --optimizer mma``).

Svanberg's MMA (K. Svanberg, "The method of moving asymptotes - a new method for structural
optimization", IJNME 24, 1987), with the asymptote update and the approximations of his notes
"MMA and GCMMA - two methods for nonlinear optimization" (2007).  Written from the paper and the
notes.  The problem is

    min f0(x)  s.t.  f_1(x) <= 0,  0 <= x_j <= 1,

here compliance (scaled) and the volume constraint ``f_1 = V(x) / V* - 1`` (``V(x) = fixed + dv . x``,
the linear identity of :class:`~sphyr_hpc.optimiser.simp.LinearOC`), on the free cells of every
rank's slab.  Every iteration (the notes' section 2-3):

* asymptotes ``L_j < x_j < U_j``: ``x -/+ 0.5 (xmax - xmin)`` in the first two iterations, then
  widened (``1.2``) where x_j moved the same way twice and narrowed (``0.7``) where it
  oscillated, kept within ``[0.01, 10] (xmax - xmin)`` of x;
* move limits ``alpha = max(xmin, L + 0.1 (x - L), x - move)``, ``beta`` likewise;
* the convex separable approximations ``p_ij / (U_j - x_j) + q_ij / (x_j - L_j) - b_i`` with
  ``p_ij = (U_j - x_j)^2 (1.001 (df_ij)^+ + 0.001 (df_ij)^- + 1e-5 / (xmax - xmin))``, ``q`` the mirror;
* the subproblem with artificial variables ``y`` (weight ``c = 1000``, ``d = 1``) and ``z``
  (``a_0 = 1``, ``a = 0``), solved exactly through its dual (:class:`Subproblem`): with one
  constraint the dual is a concave function of one multiplier, whose derivative's root is found by
  a safeguarded Newton iteration from the last iteration's multiplier (about four evaluations, each
  one pass over the cells, compiled in mma_dual.c, and one allreduce of two numbers).

Parallel: every n-sized quantity is this rank's free cells; what couples them are sums over j,
reduced over the ranks (MPI allreduce), and every rank then takes the same step in the multiplier.
The primal x is never gathered.
"""

import functools
import math

import numpy as np

from ..core import discretisation as fe
from .update import Update

ASYINIT, ASYINCR, ASYDECR = 0.5, 1.2, 0.7
ALBEFA = 0.1
RAA0 = 1e-5
CONSTRAINT_WEIGHT = 1000.0   # c_i: the artificial y_i costs this much a unit
DUAL_ITERATIONS = 200        # at most this many evaluations of the dual's derivative (a handful are taken)
DUAL_RELATIVE_STEP = 1e-12   # the multiplier is settled once Newton's step is below this (relative)
OBJECTIVE_SCALE = 10.0       # f0 scaled so that sum(x df0) = 10 at the first iteration


class Reductions:
    """Sums and maxima over the ranks (the only communication of a subproblem)."""

    def __init__(self, mpi):
        self.mpi = mpi
        self.single = mpi.Get_size() == 1

    def sum(self, values):
        from mpi4py import MPI

        values = np.asarray(values, dtype=float)
        return values if self.single else self.mpi.allreduce(values, op=MPI.SUM)

    def max(self, value):
        from mpi4py import MPI

        return float(value) if self.single else self.mpi.allreduce(float(value), op=MPI.MAX)


@functools.lru_cache(maxsize=1)
def _kernels():
    """The compiled ``mma_dual`` and ``mma_asymptotes`` (mma_dual.c: one pass over the cells each), or None
    without the compiled kernels (numpy's passes)."""
    from ..runtime import native

    try:
        return native.native_function("mma_dual"), native.native_function("mma_asymptotes")
    except native.NativeUnavailable:
        return None


class Subproblem:
    """One MMA subproblem with one constraint on this rank's ``n`` variables, solved through its dual.

    The subproblem (the notes' section 5 with ``m = 1``, ``a_0 = 1``, ``a = 0``) at the design ``x``::

        min  sum_j p0_j / (U_j - x_j) + q0_j / (x_j - L_j) + z + c y + d y^2 / 2
        s.t. sum_j P_j / (U_j - x_j) + Q_j / (x_j - L_j) - y <= b,  alpha <= x <= beta,  y, z >= 0

    (``p0, q0`` the :func:`approximations` of the objective's gradient ``df0``, ``P, Q`` of the
    constraint's ``g``, ``alpha, beta`` the move limits of ``x``, ``low`` and ``move``)
    is convex and separable: for a multiplier ``lam >= 0`` of the constraint its Lagrangian is
    minimised cell by cell in closed form, ``x_j(lam) = (sqrt(p_j) L_j + sqrt(q_j) U_j) / (sqrt(p_j)
    + sqrt(q_j))`` clipped to ``[alpha_j, beta_j]`` with ``p = p0 + lam P``, ``q = q0 + lam Q``, and
    ``y(lam) = max(0, (lam - c) / d)``, ``z = 0``.  The dual ``W(lam)`` is concave and its derivative
    ``phi(lam) = g(x(lam)) - y(lam) - b`` is continuous and non-increasing, so the optimum is
    ``lam = 0`` where ``phi(0) <= 0`` (the constraint inactive) and otherwise the root of ``phi``:
    Newton's method on ``phi`` (``phi' = -sum over the unclipped cells of G_j^2 / H_j``, ``G`` the
    constraint's and ``H`` the Lagrangian's second derivative in x_j) from ``start`` (the last
    iteration's multiplier), kept inside a bracket that halves where Newton would leave it, until the
    step is below :data:`DUAL_RELATIVE_STEP` of lam.  Every evaluation is one pass over the cells
    (with the compiled kernels: one read of x, L, U, df0 and g, one write of x(lam): mma_dual.c) and
    one allreduce of two numbers.
    """

    def __init__(self, reduce, x, low, upp, df0, g, move, b, c=CONSTRAINT_WEIGHT, d=1.0):
        self.reduce = reduce
        self.x, self.low, self.upp, self.df0, self.g = x, low, upp, df0, g
        self.move, self.b = float(move), float(b)
        self.c, self.d = float(c), float(d)
        self.kernel = None if _kernels() is None else _kernels()[0]  # None: numpy's passes
        self.evaluations = 0

    # The numpy form of the subproblem (without the kernels; made when first asked for).
    @functools.cached_property
    def alpha(self):
        x, low = self.x, self.low
        return np.maximum(np.maximum(low + ALBEFA * (x - low), x - self.move), 0.0)

    @functools.cached_property
    def beta(self):
        x, upp = self.x, self.upp
        return np.minimum(np.minimum(upp - ALBEFA * (upp - x), x + self.move), 1.0)

    @functools.cached_property
    def _objective(self):
        return approximations(self.x, self.low, self.upp, self.df0)

    @functools.cached_property
    def _constraint(self):
        return approximations(self.x, self.low, self.upp, self.g)

    p0 = property(lambda self: self._objective[0])
    q0 = property(lambda self: self._objective[1])
    P = property(lambda self: self._constraint[0])
    Q = property(lambda self: self._constraint[1])

    def x_of(self, lam):
        """This rank's minimiser of the Lagrangian at the multiplier ``lam``, with its ``p`` and ``q`` (numpy)."""
        p = self.p0 + lam * self.P
        q = self.q0 + lam * self.Q
        sp, sq = np.sqrt(p), np.sqrt(q)
        x = sp * self.low
        x += sq * self.upp
        sp += sq
        x /= sp
        np.maximum(x, self.alpha, out=x)  # (np.clip's dispatch costs as much as the rest of the pass)
        np.minimum(x, self.beta, out=x)
        return x, p, q

    def _sums(self, lam):
        """``(x(lam), this rank's constraint g(x(lam)), its part of -phi'(lam))``."""
        if self.kernel is not None:
            x, sums = np.empty_like(self.x), np.empty(2)
            self.kernel(x.size, self.x.ctypes.data, self.low.ctypes.data, self.upp.ctypes.data, self.df0.ctypes.data,
                        self.g.ctypes.data, self.move, lam, x.ctypes.data, sums.ctypes.data)
            return x, sums[0], 0.5 * sums[1]
        x, p, q = self.x_of(lam)
        ux = 1.0 / (self.upp - x)
        xl = 1.0 / (x - self.low)
        constraint = float(self.P @ ux + self.Q @ xl)
        ux2, xl2 = ux * ux, xl * xl
        slope_terms = self.P * ux2 - self.Q * xl2          # G: the constraint's derivative in x_j
        p *= ux2
        p *= ux
        q *= xl2
        q *= xl
        p += q                                             # H / 2: the Lagrangian's second derivative
        slope_terms *= slope_terms
        slope_terms /= p
        inside = (x > self.alpha) & (x < self.beta)        # clipped cells do not move with lam
        return x, constraint, 0.5 * float(np.add.reduce(slope_terms, where=inside))

    def _phi(self, lam):
        """``(phi(lam), phi'(lam), x(lam))`` (collective: one allreduce)."""
        self.evaluations += 1
        x, constraint, slope = self._sums(lam)
        constraint, slope = self.reduce.sum([constraint, slope])
        y, dy = (max(0.0, (lam - self.c) / self.d), 1.0 / self.d if lam > self.c else 0.0)
        return constraint - y - self.b, -slope - dy, x

    def solve(self, start=None):
        """``(x, lam)``: this rank's part of the subproblem's solution and its multiplier.  ``start``: a
        guess of the multiplier (the previous iteration's); the root is the same to the stopping step.
        ``phi(0)`` is evaluated only where Newton's step would leave ``lam > 0``."""
        low, high = 0.0, None                               # phi(low) > 0 >= phi(high) (phi(0) unknown yet)
        lam = start if start is not None and start > 0.0 else 1.0
        zero_known = False                                  # whether phi(0) > 0 has been seen
        for _ in range(DUAL_ITERATIONS):
            phi, slope, x = self._phi(lam)
            if lam == 0.0:
                if phi <= 0.0:                              # the constraint inactive: lam = 0
                    return x, 0.0
                zero_known = True
            if phi > 0.0:
                low = lam
            else:
                high = lam
            if phi == 0.0:
                break
            step = -phi / slope if slope < 0.0 else np.inf
            if abs(step) <= DUAL_RELATIVE_STEP * lam:
                break
            guess = lam + step
            if low == 0.0 and not zero_known and guess <= 0.0:  # Newton's line ends at lam <= 0: look at 0
                lam = 0.0
                continue
            if lam > 0.0 and math.isfinite(step):      # Newton's step in 1 / lam, where phi ~ A + B / lam
                reciprocal = 1.0 / lam - step / (lam * lam)
                if reciprocal > 0.0:
                    guess = 1.0 / reciprocal
            if high is None:                                 # no upper end yet: Newton, or grow the bracket
                lam = guess if math.isfinite(guess) and guess > low else 2.0 * max(lam, low, 1.0)
            elif low < guess < high:
                lam = guess
            else:
                lam = 0.5 * (low + high)
                if not low < lam < high:                    # the bracket is down to adjacent numbers
                    break
        return x, lam


def approximations(x, low, upp, df, xmin=0.0, xmax=1.0):
    """The notes' ``p`` and ``q`` of a function's gradient ``df``."""
    xmami = max(xmax - xmin, 1e-5)
    positive, negative = np.maximum(df, 0.0), np.maximum(-df, 0.0)
    p = (upp - x)**2 * (1.001 * positive + 0.001 * negative + RAA0 / xmami)
    q = (x - low)**2 * (0.001 * positive + 1.001 * negative + RAA0 / xmami)
    return p, q


class MMAUpdate(Update):
    """MMA's update of the design in place of OC's (an :class:`~sphyr_hpc.optimiser.update.Update`).

    State between iterations (what a checkpoint saves, :meth:`state`): the two previous designs,
    the asymptotes, the iteration count, the objective's scale and the last multiplier.
    """

    name = "mma"

    def __init__(self, context):
        super().__init__(context)
        mpi, dv, is_free, pinned = context.mpi, context.dv, context.is_free, context.pinned
        self.mpi, self.is_free, self.pinned = mpi, is_free, pinned
        self.density_filter, self.target, self.move = context.density_filter, context.target, context.move_limit
        self.reduce = Reductions(mpi)
        self.free_dv = dv[is_free]
        self.fixed = float(pinned[~is_free].sum() + np.dot(dv[~is_free], pinned[~is_free]))
        self.gradient = self.free_dv / self.target  # the constraint's, V(x) / V* - 1, in x
        self.k = 0
        self.scale = None
        self.xold1 = self.xold2 = self.low = self.upp = None
        self.dual = None  # the last subproblem's multiplier: where the next one's root find starts
        self.last_subproblem = None

    # -- state ----------------------------------------------------------------------------------
    def state(self):
        """``(arrays, scalars)``: arrays as full slabs (0 on pinned cells), scalars JSON-able."""
        arrays = {}
        for name in ("xold1", "xold2", "low", "upp"):
            value = getattr(self, name)
            if value is not None:
                slab = np.zeros(self.is_free.shape)
                slab[self.is_free] = value
                arrays[name] = slab
        return arrays, {"k": self.k, "scale": self.scale, "dual": self.dual}

    def load_state(self, arrays, scalars):
        self.k, self.scale, self.dual = int(scalars.get("k", 0)), scalars.get("scale"), scalars.get("dual")
        for name in ("xold1", "xold2", "low", "upp"):
            setattr(self, name, arrays[name][self.is_free].copy() if name in arrays else None)

    # -- one iteration ------------------------------------------------------------------------------
    def _asymptotes(self, x):
        """``(low, upp, this rank's sum_j P_j / (U_j - x_j) + Q_j / (x_j - L_j))`` of this iteration."""
        first = self.k <= 2 or self.low is None
        kernels = _kernels()
        if kernels is not None:  # one pass (mma_dual.c), in place on copies of the last asymptotes
            low, upp = (np.empty_like(x), np.empty_like(x)) if first else (self.low.copy(), self.upp.copy())
            old1, old2 = (x, x) if first else (self.xold1, self.xold2)
            local = kernels[1](x.size, int(first), x.ctypes.data, old1.ctypes.data, old2.ctypes.data, low.ctypes.data,
                               upp.ctypes.data, self.gradient.ctypes.data)
            return low, upp, local
        span = 1.0  # xmax - xmin
        if first:
            low, upp = x - ASYINIT * span, x + ASYINIT * span
        else:
            sign = (x - self.xold1) * (self.xold1 - self.xold2)
            factor = np.where(sign > 0.0, ASYINCR, np.where(sign < 0.0, ASYDECR, 1.0))
            low = x - factor * (self.xold1 - self.low)
            upp = x + factor * (self.upp - self.xold1)
            low = np.minimum(np.maximum(low, x - 10.0 * span), x - 0.01 * span)
            upp = np.minimum(np.maximum(upp, x + 0.01 * span), x + 10.0 * span)
        P, Q = approximations(x, low, upp, self.gradient)
        return low, upp, float(P @ (1.0 / (upp - x)) + Q @ (1.0 / (x - low)))

    def step(self, design, physical, energies, p):
        self.k += 1
        x = design[self.is_free]
        df0 = self.density_filter.chain(fe.compliance_sensitivity(physical, energies, p),
                                        self.context.free_s)[self.is_free]
        if self.scale is None:
            self.scale = OBJECTIVE_SCALE / max(abs(float(self.reduce.sum([np.dot(x, df0)])[0])), 1e-300)
        df0 *= self.scale
        low, upp, local = self._asymptotes(x)
        # One allreduce: the volume at x (the constraint V(x) / V* - 1) and the constraint's approximation there.
        volume, approximation = self.reduce.sum([self.fixed + float(np.dot(self.free_dv, x)), local])
        b = approximation - (volume / self.target - 1.0)
        self.last_subproblem = Subproblem(self.reduce, x, low, upp, df0, self.gradient, self.move, b)
        new_x, self.dual = self.last_subproblem.solve(self.dual)
        self.xold2, self.xold1, self.low, self.upp = self.xold1, x, low, upp
        new_design = self.pinned.copy()
        new_design[self.is_free] = new_x
        physical = np.where(self.is_free, self.density_filter.apply(new_design), self.pinned)
        change = self.reduce.max(float(np.abs(new_x - x).max()) if x.size else 0.0)
        return new_design, physical, change
