"""What the fused Chebyshev smoother needs of an operator, whatever stores it.

Two operators of the large-grid multigrid apply themselves in C and smooth in
fused passes (one pass over memory a Chebyshev step, a CG step of the
eigenvalue estimate in three): the finest level from the element moduli
(:class:`~sphyr_hpc.solvers.matfree.FineOperator`) and the coarser levels from
symmetric node stencils (:class:`~sphyr_hpc.solvers.stencil.StencilOperator`).
:class:`FusedOperator` holds what they share: the estimate's right-hand side
hashed from natural DOF numbers (the same on any number of ranks), the
Chebyshev recurrence and the Lanczos estimate of D^-1 A's extreme eigenvalues.
A subclass provides ``_chebyshev_step`` and ``_product_dot`` (its kernels), the
owned diagonal and its inverse, the owned box of nodes and its PETSc shell
matrix :attr:`mat`.  :class:`ChebyshevSmoother` is the KSPPYTHON smoothing
with any of them.
"""

import numpy as np

from ..runtime.native import native_function
from ..runtime.petsc import OptionsError, petsc

def vector_kernels():
    """The compiled ``chebyshev_first``, ``cg_residual`` and ``cg_direction`` (raises
    :class:`~sphyr_hpc.runtime.native.NativeUnavailable`)."""
    return native_function("chebyshev_first"), native_function("cg_residual"), native_function("cg_direction")


def ring_plan(PETSc, da, dof):
    """The ring of nodes around this rank's owned box of the DMDA ``da`` for vectors of ``dof``
    values a node on ``da``'s grid and ownership (``da``'s own dof or another):
    ``(halo, halo_vec, scatter, slots, (rows, cols))``.

    ``halo`` (numpy, wrapped by ``halo_vec``) holds the node rows above and below the box (nx + 2
    nodes each from column -1), then the node columns left and right of it (ny + 2 nodes each from
    row -1): corners twice, 0 where no node is.  ``scatter`` fills it from a global vector of
    ``da``'s layout (forward, INSERT_VALUES) or adds it into one (reverse, ADD_VALUES);
    ``slots`` are the ring positions of nodes in the grid, ``rows``/``cols`` every position's node."""
    (oxs, oxe), (oys, oye) = da.getRanges()
    (gxs, gxe), (gys, gye) = da.getGhostRanges()
    ny, nx = oye - oys, oxe - oxs
    rows = [np.full(nx + 2, oys - 1), np.full(nx + 2, oye)] + [np.arange(oys - 1, oye + 1)] * 2
    cols = [np.arange(oxs - 1, oxe + 1)] * 2 + [np.full(ny + 2, oxs - 1), np.full(ny + 2, oxe)]
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    inside = (rows >= gys) & (rows < gye) & (cols >= gxs) & (cols < gxe)  # the nodes in the grid
    slots = np.flatnonzero(inside)
    values = np.arange(dof)
    target = (dof * slots[:, None] + values).ravel()
    # The nodes' PETSc numbers from da's ordering (node by node, its dofs interleaved): no ordering
    # of dof values a node is made.
    own = da.getDof()
    natural = own * (rows[slots] * da.getSizes()[0] + cols[slots])
    index = PETSc.IntType
    nodes = np.asarray(da.getAO().app2petsc(natural.astype(index)), dtype=np.int64) // own
    petsc_numbers = (dof * nodes[:, None] + values).ravel()
    halo = np.zeros(dof * rows.size)
    halo_vec = PETSc.Vec().createWithArray(halo, comm=PETSc.COMM_SELF)
    template = PETSc.Vec().createMPI((dof * (oye - oys) * (oxe - oxs), PETSc.DECIDE), comm=da.getComm())
    source = PETSc.IS().createGeneral(np.asarray(petsc_numbers, dtype=index), comm=PETSc.COMM_SELF)
    target_is = PETSc.IS().createGeneral(target.astype(index), comm=PETSc.COMM_SELF)
    scatter = PETSc.Scatter().create(template, source, halo_vec, target_is)
    for obj in (template, source, target_is):
        obj.destroy()
    return halo, halo_vec, scatter, slots, (rows, cols)


def ring_pointers(halo, nx, ny, dof):
    """The addresses of a :func:`ring_plan` buffer's four parts: (top, bottom, left, right)."""
    top = halo.ctypes.data
    return (top, top + 8 * dof * (nx + 2), top + 8 * 2 * dof * (nx + 2),
            top + 8 * dof * (2 * (nx + 2) + (ny + 2)))


def operator_of(A):
    """The :class:`FusedOperator` behind ``A`` when ``A`` is one's shell matrix, else None."""
    if A.getType() != "python":
        return None
    context = A.getPythonContext()
    return context if isinstance(context, FusedOperator) else None


class FusedOperator:
    """Base of the operators smoothed by :class:`ChebyshevSmoother` (see the module's text).

    ``version`` counts assemblies (what a smoother derived from the operator is for);
    ``stored_bytes`` is what one product reads of the operator's own data, all ranks.
    """

    version = 0
    stored_bytes = 0.0

    def _init_fused(self, owned_box, nodes_x):
        self._first, self._cg_residual, self._cg_direction = vector_kernels()
        self._owned_box, self._nodes_x = owned_box, nodes_x
        self._noise = None  # the estimate's right-hand side and the smoother's update: made when first used
        self._d = None
        self._cg_vectors = None  # the estimate's r, p and K p

    def _destroy_cg_vectors(self):
        if self._cg_vectors is not None:
            for vec in self._cg_vectors[1:]:
                vec.destroy()
            self._cg_vectors = None

    def getDiagonal(self, mat, d):
        """K's diagonal for PETSc (PCJACOBI, or KSPCHEBYSHEV's estimate with ``petsc`` smoothers)."""
        with d as da:
            da[:] = self._diagonal

    def noise(self, vec):
        """Fill ``vec`` with values in [-1, 1) hashed from each DOF's natural number (row-major over
        the grid's nodes, 2 a node): the same right-hand side for an eigenvalue estimate on any number
        of ranks."""
        if self._noise is None:
            oys, oye, oxs, oxe = self._owned_box
            rows, cols = np.meshgrid(np.arange(oys, oye), np.arange(oxs, oxe), indexing="ij")
            node = (rows * self._nodes_x + cols).ravel().astype(np.uint64)
            h = np.stack([2 * node, 2 * node + 1], axis=1).ravel() & np.uint64(0xFFFFFFFF)
            for _ in range(2):
                h = (((h >> np.uint64(16)) ^ h) * np.uint64(0x45D9F3B)) & np.uint64(0xFFFFFFFF)
            h = (h >> np.uint64(16)) ^ h
            self._noise = h.astype(np.float64) * 2.0**-31 - 1.0
        with vec as values:
            values[:] = self._noise

    def chebyshev(self, b, x, steps, emin, emax, zero_guess):
        """``steps`` steps of Jacobi-preconditioned Chebyshev (the first kind, as KSPCHEBYSHEV) for
        ``K x = b`` on the eigenvalue interval [emin, emax] of D^-1 K; each step after the first
        is one pass of ``chebyshev_step``, and so is the first without ``zero_guess``."""
        theta, delta = (emax + emin) / 2.0, (emax - emin) / 2.0
        sigma = theta / delta
        if self._d is None:
            self._d = np.zeros_like(self._diagonal)
        d = self._d
        # b only read: a smoother's right-hand side is locked for reading inside KSPSolve (PETSc 3.22
        # refuses read-write access to it; 3.18 did not check).
        ba = b.getArray(readonly=True)
        with x as xa:
            # From zero the first step's d and x are equal: only x is written, and the next step reads
            # x for d (one pass less over memory, the same values).
            if zero_guess:
                self._first(d.size, ba.ctypes.data, self._inverse_diagonal.ctypes.data, 1.0 / theta, 0,
                            xa.ctypes.data)
                first = 1
            else:
                first = 0
            rho = 1.0 / sigma
            for k in range(first, steps):
                if k == 0:
                    c_d, c_r = 0.0, 1.0 / theta
                else:
                    rho, rho_before = 1.0 / (2.0 * sigma - rho), rho
                    c_d, c_r = rho * rho_before, 2.0 * rho / delta
                self._chebyshev_step(x, xa, ba, d, c_d, c_r, d_is_x=zero_guess and k == 1)

    def extreme_eigenvalues(self, steps, comm):
        """(smallest, largest) Lanczos value of D^-1 K after ``steps`` Jacobi-preconditioned CG steps
        from :meth:`noise` (x0 = 0), as PETSc's KSPCG with eigenvalue computation gives them: the
        tridiagonal of CG's coefficients.  Each step is a product (with p . Kp on the way) and two
        fused passes (``cg_residual``: r -= alpha Kp and r . D^-1 r; ``cg_direction``)."""
        mpi = comm.tompi4py()
        n = self._diagonal.size
        if self._cg_vectors is None:  # kept for the next estimate (a new operator's)
            self._cg_vectors = (np.empty(n), *self.mat.createVecs())
        r, p_vec, w_vec = self._cg_vectors
        if self._noise is None:
            self.noise(p_vec)
        r[:] = self._noise  # r0 = b
        dinv = self._inverse_diagonal
        with p_vec as pa:
            np.multiply(dinv, r, out=pa)
            rz = mpi.allreduce(float(np.dot(pa, r)))
        alphas, betas = [], []
        for _ in range(steps):
            pw = mpi.allreduce(self._product_dot(p_vec, w_vec))
            if not pw > 0.0 or not rz > 0.0:
                break
            alpha = rz / pw
            with w_vec as wa:
                rz_next = mpi.allreduce(self._cg_residual(n, alpha, r.ctypes.data, wa.ctypes.data, dinv.ctypes.data))
            alphas.append(alpha)
            beta = rz_next / rz
            betas.append(beta)
            with p_vec as pa:
                self._cg_direction(n, beta, r.ctypes.data, dinv.ctypes.data, pa.ctypes.data)
            rz = rz_next
        return lanczos_extremes(alphas, betas)


def lanczos_extremes(alphas, betas):
    """Smallest and largest eigenvalue of the Lanczos tridiagonal of CG's step lengths ``alphas`` and
    direction coefficients ``betas`` (PETSc's KSPComputeEigenvalues for KSPCG builds the same one)."""
    alphas = np.asarray(alphas, dtype=float)
    if alphas.size == 0:
        raise ValueError("no CG step to estimate eigenvalues from (a zero right-hand side or K not positive)")
    betas = np.asarray(betas[:alphas.size - 1], dtype=float)
    diagonal = 1.0 / alphas
    diagonal[1:] += betas / alphas[:-1]
    off = np.sqrt(betas) / alphas[:-1]
    T = np.diag(diagonal) + np.diag(off, 1) + np.diag(off, -1)
    values = np.linalg.eigvalsh(T)
    return float(values[0]), float(values[-1])


class ChebyshevSmoother:
    """A petsc4py KSP context (``KSPPYTHON``): Jacobi-preconditioned Chebyshev smoothing of a
    level whose operator is a :class:`FusedOperator`, each step one fused pass over memory (the
    product, the residual, the Jacobi scaling and both updates) where KSPCHEBYSHEV with PCJACOBI
    takes a product and four vector operations.

    The same iteration as KSPCHEBYSHEV (first kind, ``max_it`` steps, the first without a product
    from a zero initial guess) on the same interval: the extreme eigenvalues of D^-1 K estimated as
    KSPCHEBYSHEV's CG estimator does, by ``esteig_ksp_max_it`` (10) Jacobi-preconditioned CG steps
    from a noisy right-hand side (:meth:`FusedOperator.extreme_eigenvalues`, fused passes too), and
    the targets ``-ksp_chebyshev_esteig a,b,c,d`` (0,0.1,0,1.1), both under the smoother's prefix.
    The estimate is redone whenever the operator has new values.
    """

    def __init__(self):
        self._version = None
        self._bounds = None
        self._transform = (0.0, 0.1, 0.0, 1.1)  # -ksp_chebyshev_esteig, as KSPCHEBYSHEV's default
        self._estimate_steps = 10               # -esteig_ksp_max_it, as KSPCHEBYSHEV's CG estimator's

    def setFromOptions(self, ksp):
        """The smoother's own options under its KSP's prefix (called by KSPSetFromOptions, as
        KSPCHEBYSHEV reads its own): ``-ksp_chebyshev_esteig a,b,c,d``, ``-esteig_ksp_max_it``."""
        options = petsc().Options(ksp.getOptionsPrefix())
        transform = options.getString("ksp_chebyshev_esteig", ",".join(map(str, self._transform)))
        values = [v for v in transform.split(",") if v.strip()]
        try:
            self._transform = tuple(float(v) for v in values)
        except ValueError:
            values = ()
        if len(values) != 4:
            raise ValueError(f"-{ksp.getOptionsPrefix()}ksp_chebyshev_esteig {transform}: expected a,b,c,d")
        self._estimate_steps = options.getInt("esteig_ksp_max_it", self._estimate_steps)

    @property
    def bounds(self):
        """(emin, emax): the Chebyshev interval in use (None before the first set-up)."""
        return self._bounds

    def _operator(self, ksp):
        fine = operator_of(ksp.getOperators()[0])
        if fine is None:
            raise ValueError("the fused Chebyshev smoother needs a level applied by sphyr_hpc's own kernels "
                             "(a level the multigrid plan holds as matrix-free or stencil)")
        return fine

    def _estimate(self, ksp, fine):
        """The Chebyshev interval for K's current moduli (CG's Lanczos values, as KSPCHEBYSHEV)."""
        low, high = fine.extreme_eigenvalues(self._estimate_steps, ksp.getComm())
        a, b, c, d = self._transform
        return a * low + b * high, c * low + d * high

    def setUp(self, ksp):
        if ksp.getPC().getType() != "jacobi":
            # Its Jacobi scaling is fused into each step: another preconditioner would go unused.
            prefix = ksp.getOptionsPrefix()
            raise OptionsError(f"the fused Chebyshev smoother of -{prefix} applies Jacobi itself: with "
                             f"-{prefix}pc_type {ksp.getPC().getType()} give -{prefix}ksp_type too "
                             f"(e.g. chebyshev)")
        fine = self._operator(ksp)
        if fine.version != self._version:
            self._bounds = self._estimate(ksp, fine)
            self._version = fine.version

    def solve(self, ksp, b, x):
        PETSc = petsc()
        fine = self._operator(ksp)
        self.setUp(ksp)  # K had new moduli since the set-up
        steps = ksp.getTolerances()[3]
        emin, emax = self._bounds
        fine.chebyshev(b, x, steps, emin, emax, zero_guess=not ksp.getInitialGuessNonzero())
        ksp.setIterationNumber(steps)
        ksp.setConvergedReason(PETSc.KSP.ConvergedReason.CONVERGED_ITS)


__all__ = ["ChebyshevSmoother", "FusedOperator", "lanczos_extremes", "operator_of", "ring_plan",
           "ring_pointers", "vector_kernels"]
