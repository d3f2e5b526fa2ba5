"""The method of moving asymptotes (MMA) for minimum compliance, over all ranks (``optimize --optimizer mma``).

Svanberg's MMA (K. Svanberg, "The method of moving asymptotes - a new method for structural
optimization", IJNME 24, 1987), with the asymptote update and the approximations of his notes
"MMA and GCMMA - two methods for nonlinear optimization" (2007).  Written from the paper and the
notes.  The problem is

    min f0(x)  s.t.  f_i(x) <= 0 (i = 1..m),  0 <= x_j <= 1,

here compliance (scaled) and the volume constraint ``f_1 = V(x) / V* - 1`` (``V(x) = fixed + dv . x``,
the linear identity of :class:`~sphyr_hpc.optimiser.simp._LinearUpdate`), on the free cells of every
rank's slab.  Every iteration (the notes' section 2-3):

* asymptotes ``L_j < x_j < U_j``: ``x -/+ 0.5 (xmax - xmin)`` in the first two iterations, then
  widened (``1.2``) where x_j moved the same way twice and narrowed (``0.7``) where it
  oscillated, kept within ``[0.01, 10] (xmax - xmin)`` of x;
* move limits ``alpha = max(xmin, L + 0.1 (x - L), x - move)``, ``beta`` likewise;
* the convex separable approximations ``p_ij / (U_j - x_j) + q_ij / (x_j - L_j) - b_i`` with
  ``p_ij = (U_j - x_j)^2 (1.001 (df_ij)^+ + 0.001 (df_ij)^- + 1e-5 / (xmax - xmin))``, ``q`` the mirror;
* the subproblem with artificial variables ``y_i`` (weight ``c_i = 1000``, ``d_i = 1``) and ``z``
  (``a_0 = 1``, ``a_i = 0``), solved by the primal-dual interior-point method of the notes
  (section 5): Newton steps on the perturbed KKT conditions, ``epsilon`` from 1 down to 1e-7 by
  factors of 10, each step's linear system reduced to the m x m system in the dual variables
  (plus ``z``), a step length that keeps every variable positive and a halving line search on the
  residual's norm.

Parallel: every n-sized quantity is this rank's free cells; what couples them are sums over j,
so each Newton step reduces the ``m + m^2`` entries of the reduced system and a residual's two
norms over the ranks (MPI allreduce), and every rank then takes the same step in the ``m`` dual
variables.  The primal x is never gathered.
"""

import numpy as np

ASYINIT, ASYINCR, ASYDECR = 0.5, 1.2, 0.7
ALBEFA = 0.1
RAA0 = 1e-5
CONSTRAINT_WEIGHT = 1000.0   # c_i: the artificial y_i costs this much a unit
EPSILON_MIN = 1e-7
NEWTON_LIMIT = 200
LINE_SEARCH_HALVINGS = 50
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


def _max_local(*arrays):
    return max((float(a.max()) for a in arrays if a.size), default=-np.inf)


class Subproblem:
    """One MMA subproblem: ``m`` constraints on this rank's ``n`` variables."""

    def __init__(self, reduce, low, upp, alpha, beta, p0, q0, P, Q, b, a0=1.0, a=None, c=None, d=None):
        self.reduce = reduce
        self.low, self.upp, self.alpha, self.beta = low, upp, alpha, beta
        self.p0, self.q0, self.P, self.Q, self.b = p0, q0, P, Q, np.asarray(b, dtype=float)
        m = self.b.size
        self.a0 = a0
        self.a = np.zeros(m) if a is None else np.asarray(a, dtype=float)
        self.c = np.full(m, CONSTRAINT_WEIGHT) if c is None else np.asarray(c, dtype=float)
        self.d = np.ones(m) if d is None else np.asarray(d, dtype=float)

    def _terms(self, x, lam):
        """``(1/(U-x), 1/(x-L), plam, qlam, g(x))``: the pieces every residual and step needs."""
        uxinv = 1.0 / (self.upp - x)
        xlinv = 1.0 / (x - self.low)
        plam = self.p0 + lam @ self.P
        qlam = self.q0 + lam @ self.Q
        return uxinv, xlinv, plam, qlam

    def residual(self, v, epsi):
        """(norm, max-norm) of the perturbed KKT conditions at ``v`` (collective)."""
        x, y, z, lam, xsi, eta, mu, zet, s = v
        uxinv, xlinv, plam, qlam = self._terms(x, lam)
        rex = plam * uxinv**2 - qlam * xlinv**2 - xsi + eta
        rexsi = xsi * (x - self.alpha) - epsi
        reeta = eta * (self.beta - x) - epsi
        local = np.concatenate([self.P @ uxinv + self.Q @ xlinv, [rex @ rex + rexsi @ rexsi + reeta @ reeta]])
        sums = self.reduce.sum(local)
        gvec, squares = sums[:-1], sums[-1]
        rey = self.c + self.d * y - mu - lam
        rez = self.a0 - zet - self.a @ lam
        relam = gvec - self.a * z - y + s - self.b
        small = np.concatenate([rey, [rez], relam, mu * y - epsi, [zet * z - epsi], lam * s - epsi])
        norm = np.sqrt(squares + small @ small)
        biggest = self.reduce.max(max(_max_local(np.abs(rex), np.abs(rexsi), np.abs(reeta)), 0.0))
        return norm, max(biggest, float(np.abs(small).max()))

    def _newton_step(self, v, epsi):
        """The Newton direction of the perturbed KKT system, reduced to m + 1 unknowns (collective)."""
        x, y, z, lam, xsi, eta, mu, zet, s = v
        uxinv, xlinv, plam, qlam = self._terms(x, lam)
        ux2, xl2 = uxinv * uxinv, xlinv * xlinv
        xa, bx = 1.0 / (x - self.alpha), 1.0 / (self.beta - x)
        G = self.P * ux2 - self.Q * xl2
        delx = plam * ux2 - qlam * xl2 - epsi * xa + epsi * bx
        diagx = 2.0 * (plam * ux2 * uxinv + qlam * xl2 * xlinv) + xsi * xa + eta * bx
        diagxinv = 1.0 / diagx
        m = lam.size
        GD = G * diagxinv
        local = np.concatenate([self.P @ uxinv + self.Q @ xlinv, G @ (delx * diagxinv), (GD @ G.T).ravel()])
        sums = self.reduce.sum(local)
        gvec, Gdelx, GDG = sums[:m], sums[m:2 * m], sums[2 * m:].reshape(m, m)
        dely = self.c + self.d * y - lam - epsi / y
        delz = self.a0 - self.a @ lam - epsi / z
        dellam = gvec - self.a * z - y - self.b + epsi / lam
        diagy = self.d + mu / y
        blam = dellam + dely / diagy - Gdelx
        A = np.zeros((m + 1, m + 1))
        A[:m, :m] = GDG + np.diag(s / lam + 1.0 / diagy)
        A[:m, m] = A[m, :m] = self.a
        A[m, m] = -zet / z
        solution = np.linalg.solve(A, np.concatenate([blam, [delz]]))
        dlam, dz = solution[:m], solution[m]
        dx = -delx * diagxinv - dlam @ GD
        dy = (dlam - dely) / diagy
        dxsi = -xsi + epsi * xa - xsi * dx * xa
        deta = -eta + epsi * bx + eta * dx * bx
        dmu = -mu + epsi / y - mu * dy / y
        dzet = -zet + epsi / z - zet * dz / z
        ds = -s + epsi / lam - s * dlam / lam
        step = (dx, dy, dz, dlam, dxsi, deta, dmu, dzet, ds)
        # The longest step that keeps every positive variable positive (with 1 % to spare).
        local_ratio = _max_local(-1.01 * dx * xa, 1.01 * dx * bx, -1.01 * dxsi / xsi, -1.01 * deta / eta)
        small_ratio = max(float(np.max(-1.01 * dy / y)), -1.01 * dz / z, float(np.max(-1.01 * dlam / lam)),
                          float(np.max(-1.01 * dmu / mu)), -1.01 * dzet / zet, float(np.max(-1.01 * ds / s)))
        ratio = max(self.reduce.max(local_ratio), small_ratio, 1.0)
        return step, 1.0 / ratio

    def solve(self):
        """The subproblem's x (this rank's part) by the primal-dual interior-point method."""
        m = self.b.size
        x = 0.5 * (self.alpha + self.beta)
        v = [x, np.ones(m), 1.0, np.ones(m), np.maximum(1.0 / (x - self.alpha), 1.0),
             np.maximum(1.0 / (self.beta - x), 1.0), np.maximum(1.0, 0.5 * self.c), 1.0, np.ones(m)]
        epsi = 1.0
        while epsi > EPSILON_MIN:
            norm, biggest = self.residual(v, epsi)
            for _ in range(NEWTON_LIMIT):
                if biggest <= 0.9 * epsi:
                    break
                step, length = self._newton_step(v, epsi)
                for _ in range(LINE_SEARCH_HALVINGS):
                    trial = [value + length * delta for value, delta in zip(v, step)]
                    trial_norm, trial_biggest = self.residual(trial, epsi)
                    if trial_norm <= norm:  # a step that does not make the residual worse
                        break
                    length *= 0.5
                v, norm, biggest = trial, trial_norm, trial_biggest
            epsi *= 0.1
        return v[0]


def approximations(x, low, upp, df, xmin=0.0, xmax=1.0):
    """The notes' ``p`` and ``q`` of a function's gradient ``df`` (rows: functions)."""
    xmami = max(xmax - xmin, 1e-5)
    positive, negative = np.maximum(df, 0.0), np.maximum(-df, 0.0)
    p = (upp - x)**2 * (1.001 * positive + 0.001 * negative + RAA0 / xmami)
    q = (x - low)**2 * (0.001 * positive + 1.001 * negative + RAA0 / xmami)
    return p, q


class MMAUpdate:
    """MMA's update of the design in place of OC's (``run_simp``'s ``update(design, dc)`` interface).

    State between iterations (what a checkpoint saves, :meth:`state`): the two previous designs,
    the asymptotes, the iteration count and the objective's scale.
    """

    def __init__(self, mpi, dv, is_free, pinned, density_filter, target, move_limit):
        self.mpi, self.is_free, self.pinned = mpi, is_free, pinned
        self.density_filter, self.target, self.move = density_filter, target, move_limit
        self.reduce = Reductions(mpi)
        self.free_dv = dv[is_free]
        self.fixed = float(pinned[~is_free].sum() + np.dot(dv[~is_free], pinned[~is_free]))
        self.k = 0
        self.scale = None
        self.xold1 = self.xold2 = self.low = self.upp = None
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
        return arrays, {"k": self.k, "scale": self.scale}

    def load_state(self, arrays, scalars):
        self.k, self.scale = int(scalars.get("k", 0)), scalars.get("scale")
        for name in ("xold1", "xold2", "low", "upp"):
            setattr(self, name, arrays[name][self.is_free].copy() if name in arrays else None)

    # -- one iteration ------------------------------------------------------------------------------
    def _asymptotes(self, x):
        span = 1.0  # xmax - xmin
        if self.k <= 2 or self.low is None:
            return x - ASYINIT * span, x + ASYINIT * span
        sign = (x - self.xold1) * (self.xold1 - self.xold2)
        factor = np.where(sign > 0.0, ASYINCR, np.where(sign < 0.0, ASYDECR, 1.0))
        low = x - factor * (self.xold1 - self.low)
        upp = x + factor * (self.upp - self.xold1)
        low = np.clip(low, x - 10.0 * span, x - 0.01 * span)
        upp = np.clip(upp, x + 0.01 * span, x + 10.0 * span)
        return low, upp

    def constraints(self, x):
        """``(values, gradients)`` of the constraints at x: the volume (m = 1)."""
        volume = float(self.reduce.sum([self.fixed + float(np.dot(self.free_dv, x))])[0])
        return np.array([volume / self.target - 1.0]), (self.free_dv / self.target)[None, :]

    def update(self, design, dc):
        """The new design, its physical densities and the largest change of a free cell."""
        self.k += 1
        x = design[self.is_free]
        df0 = dc[self.is_free]
        if self.scale is None:
            self.scale = OBJECTIVE_SCALE / max(abs(float(self.reduce.sum([np.dot(x, df0)])[0])), 1e-300)
        df0 = df0 * self.scale
        values, gradients = self.constraints(x)
        low, upp = self._asymptotes(x)
        alpha = np.maximum.reduce([np.zeros_like(x), low + ALBEFA * (x - low), x - self.move])
        beta = np.minimum.reduce([np.ones_like(x), upp - ALBEFA * (upp - x), x + self.move])
        p0, q0 = approximations(x, low, upp, df0)
        P, Q = approximations(x, low, upp, gradients)
        b = self.reduce.sum(P @ (1.0 / (upp - x)) + Q @ (1.0 / (x - low))) - values
        self.last_subproblem = Subproblem(self.reduce, low, upp, alpha, beta, p0, q0, P, Q, b)
        new_x = self.last_subproblem.solve()
        self.xold2, self.xold1, self.low, self.upp = self.xold1, x, low, upp
        new_design = self.pinned.copy()
        new_design[self.is_free] = new_x
        physical = np.where(self.is_free, self.density_filter.apply(new_design), self.pinned)
        change = self.reduce.max(float(np.abs(new_x - x).max()) if x.size else 0.0)
        return new_design, physical, change
