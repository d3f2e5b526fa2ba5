"""K(E) u = f when only a few cells change: static condensation onto their DOFs.

A yardstick (docs/scoring.md, "Yardstick") solves hundreds of systems that differ only in the
moduli of the free (masked) cells; every other cell keeps its pinned
density.  Split the free DOFs into I, those of the free cells' nodes, and A,
the rest.  Only the I-I block changes:

    K = [[K_AA, K_AI], [K_IA, C + sum_free E_e K0_e]]

so with one factorisation of the constant K_AA (per set of pinned moduli,
i.e. per penalty) the system condenses to a dense ``k x k`` one,

    S(E) u_I = g,   S = C - K_IA K_AA^-1 K_AI + sum_free E_e K0_e,
    g = f_I - K_IA K_AA^-1 f_A,   compliance = f_A . K_AA^-1 f_A + g . u_I,

factorised with LAPACK's Cholesky each solve.  With up to ``MAX_DOFS`` such
DOFs on 10x10 (SPhyR's cell, row and column masks; more on larger grids, see
:func:`usable`) that is several times cheaper than factorising all of K, and
it is the same solution up to rounding.  Whatever the condensed solve cannot vouch for (a Cholesky that
breaks down, a residual above the "Finite elements" rules' bound, a design whose compliance
exceeds ``SINGULARITY_RATIO`` (:mod:`sphyr_hpc.core.discretisation`) times that of
the design with every free cell solid: a severed load path) is solved again by the PETSc system in full, so
The "Finite elements" rules' infinite compliances come from where they always did.

:class:`CondensedSystem` is a :class:`~sphyr_hpc.solvers.base.LinearSystem`
that stands in for a one-rank
:class:`~sphyr_hpc.solvers.system.GridSystem` assembled in place
(``in_place``) in a SIMP run: ``solve`` and ``unit_energies`` (energies of the
free cells; pinned cells read 0, their sensitivities never count) are its
own; slabs are the base system's (one rank: the natural array).  It reads K
through the base system's public ``stiffness_pattern`` / ``stiffness_values``.
It keeps, per set of pinned moduli, the factorisation of K_AA, so the full
displacement field of a solve is one more back-substitution,
``u_A = K_AA^-1 (f_A - K_AI u_I)`` (:meth:`~CondensedSystem.natural_displacements`,
:meth:`~CondensedSystem.max_displacement`): an analysis (docs/scoring.md, "Analysis") of a design
that differs from the pinned one only in the free cells runs here too.

:class:`CondensedSystems` keeps one condensed system per free mask of a base system
(bounded), so a sample's yardstick and the analyses of its
completions share the condensation: every completion equal to the ground
truth outside the mask costs one dense k x k Cholesky.
"""

import functools
import math

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

from ..core import discretisation as fe
from ..runtime.cache import BoundedCache
from ..runtime.process import signals_deferred
from . import csr
from .assembly import element_map
from .base import LinearSystem, residual_acceptable

# Above this many condensed DOFs a dense Cholesky (k^3) costs more than PETSc's sparse one of
# all of K (~n^1.5 with nested dissection) on 10x10's 242 DOFs: 100 DOFs ~40 us against
# ~60 us (benchmarks/results/factorisation.md).  Other sizes scale it by sqrt(n / 242):
# k^3 ~ n^1.5, so 191 at 20x20 (882 DOFs, where the sparse one takes ~450 us).
MAX_DOFS = 100
REFERENCE_DOFS = 242
# An analysis (one solve) is condensed only where that beats PETSc's full solve of ~0.4 ms on
# 10x10: a 1-cell mask (k = 8) 0.27 ms; k = 28-44 about equal; k = 120 0.54 ms, 186 0.97 ms
# (benchmarks/results/score_many.md); scaled with the grid as MAX_DOFS is.
ANALYSIS_MAX_DOFS = 16
# Sets of pinned moduli kept (one per penalty in a yardstick).
MAX_CACHED = 8
# Condensed systems kept per base system by :class:`CondensedSystems` (one per free mask: a load case's samples).
MAX_SHARED = 8


_FULL = ("the last solve was the PETSc system's",)


@functools.lru_cache(maxsize=None)
def one_blas_thread():
    """Limit the loaded BLAS to one thread, once a process.

    The Schur complement's products and the dense Cholesky round differently
    with 1 and 2 OpenBLAS threads, and a yardstick must not depend on the
    machine's thread settings (the records of ``score`` are equal for any
    number of ranks and any environment).  MPI ranks fill the cores anyway.
    """
    with signals_deferred():  # an interrupt during the library scan's C callbacks would be lost
        threadpool_limits(limits=1, user_api="blas")  # once: the cache remembers the call


def condensed_dofs(loadcase, free):
    """Free DOFs of the free cells' nodes (sorted natural numbers)."""
    cells = np.flatnonzero(np.asarray(free, dtype=bool).ravel())
    marked = np.zeros(loadcase.n_dofs, dtype=bool)  # a mark a DOF: sorted and unique by construction
    marked[_element_dofs(loadcase.shape)[cells]] = True
    marked[loadcase.fixed_dofs()] = False
    return np.flatnonzero(marked)


@functools.lru_cache(maxsize=16)
def _element_dofs(shape):
    """The (n_elements, 8) natural DOFs of a grid's elements (read-only: shared)."""
    dofs = fe.nodes_to_dofs(fe.element_nodes(*shape))
    dofs.flags.writeable = False
    return dofs


def usable(system, free, max_dofs=MAX_DOFS):
    """Whether a condensed system can stand in for ``system`` on this free mask (and is cheaper)."""
    limit = max_dofs * np.sqrt(system.loadcase.n_dofs / REFERENCE_DOFS)
    # A mask whose nodes are all supported (a masked S cell; cells between supports) condenses to nothing.
    return (getattr(system, "in_place", False) and bool(np.any(free))
            and 0 < condensed_dofs(system.loadcase, free).size <= limit)


class CondensedSystems:
    """The condensed systems of one base system, one per free mask (the last :data:`MAX_SHARED`), and
    which masks an analysis condenses: kept by whoever keeps ``base`` (a sample's yardstick and the
    analyses of its completions share them), closed by it before ``base``."""

    def __init__(self, base):
        self.base = base
        self._systems = BoundedCache(MAX_SHARED)
        self._decided = BoundedCache(MAX_SHARED)

    def shared(self, free):
        """The :class:`CondensedSystem` of the base system on ``free``, made once."""
        return self._systems.get_or_compute(np.asarray(free, dtype=bool).tobytes(),
                                            lambda: CondensedSystem(self.base, free))

    def analysis_system(self, rho, free, truth, max_dofs=ANALYSIS_MAX_DOFS):
        """The system to analyse design ``rho`` on: :meth:`shared` when it equals ``truth`` outside ``free``
        and the condensation is small enough to be cheaper (decided once per free mask), else the base."""
        free = np.asarray(free, dtype=bool)
        cheaper = self._decided.get_or_compute((free.tobytes(), max_dofs), lambda: usable(self.base, free, max_dofs))
        if cheaper and np.array_equal(np.asarray(rho)[~free], np.asarray(truth)[~free]):
            return self.shared(free)
        return self.base

    def close(self):
        self._systems.clear()
        self._decided.clear()


class CondensedSystem(LinearSystem):
    """The system of ``base`` (one rank, in-place assembly) condensed onto the DOFs of ``free`` cells."""

    def __init__(self, base, free):
        one_blas_thread()
        self.base = base
        lc = base.loadcase
        self.loadcase = lc
        self.comm = base.comm
        self.ke = base.ke
        self.free_cells = np.flatnonzero(np.asarray(free, dtype=bool).ravel())
        self.fixed_cells = np.flatnonzero(~np.asarray(free, dtype=bool).ravel())
        self.dofs = condensed_dofs(lc, free)
        k = self.dofs.size
        self.k = k
        position = np.full(lc.n_dofs, -1)
        position[self.dofs] = np.arange(k)
        local = position[fe.nodes_to_dofs(fe.element_nodes(*lc.shape))[self.free_cells]]  # (m, 8), -1: fixed
        self.cell_positions = local  # each free cell's 8 DOFs as positions in ``dofs`` (-1: fixed DOF)
        self._local = np.where(local >= 0, local, k)  # fixed DOFs read the zero kept at u[k]
        # S = S0 + (map @ E_free).reshape(k, k): each free cell's K0 scattered to its condensed DOFs.
        both = (local[:, :, None] >= 0) & (local[:, None, :] >= 0)
        self._map = element_map(np.where(both, local[:, :, None] * k + local[:, None, :], -1), base.ke, k * k)
        free_dofs = np.ones(lc.n_dofs, dtype=bool)
        free_dofs[lc.fixed_dofs()] = False
        free_dofs[self.dofs] = False
        self.other = np.flatnonzero(free_dofs)  # the A block
        # Where the blocks' entries sit in K's CSR values (nnz: an appended zero), found once:
        # condensing a new set of pinned moduli is then a few takes, no sparse slicing.
        indptr, indices = base.stiffness_pattern()  # natural order (one rank, in place)
        n, nnz = lc.n_dofs, indices.size
        I, A = self.dofs, self.other
        row = np.repeat(np.arange(n), np.diff(indptr))
        col = np.asarray(indices)
        in_I, in_A = position, np.full(n, -1)  # position of a DOF in I (above), and in A
        in_A[A] = np.arange(A.size)
        entry = np.arange(nnz)
        self._C = np.full((I.size, I.size), nnz)       # absent entries read the appended zero
        both = (in_I[row] >= 0) & (in_I[col] >= 0)
        self._C[in_I[row[both]], in_I[col[both]]] = entry[both]
        self._AI = np.full((A.size, I.size), nnz)
        both = (in_A[row] >= 0) & (in_I[col] >= 0)
        self._AI[in_A[row[both]], in_I[col[both]]] = entry[both]
        both = (in_A[row] >= 0) & (in_A[col] >= 0)
        K_AA = sp.csc_matrix((entry[both] + 1.0, (in_A[row[both]], in_A[col[both]])), shape=(A.size, A.size))
        self._AA = ((K_AA.data - 1.0).astype(np.int64), K_AA.indices, K_AA.indptr, K_AA.shape)
        forces = lc.force_vector()
        forces[lc.fixed_dofs()] = 0.0
        self.forces = forces
        self.f_norm = float(np.linalg.norm(forces))
        self._pinned = BoundedCache(MAX_CACHED)
        self._u = np.zeros(k + 1)  # condensed displacements, and a 0 for fixed DOFs
        self._energies = np.zeros(lc.n_elements)
        self._last = None  # the reduced system of the last solve, _FULL (the PETSc system's), None (no solve)
        self.full_solves = 0  # solves handed to the PETSc system

    def slab_of(self, natural):
        return self.base.slab_of(natural)

    def gather(self, slab, root=None):
        return self.base.gather(slab, root)

    def _reduced(self, moduli):
        """(S0, g, c0, reference compliance, K_AA's factorisation, K_AI) for the pinned part of ``moduli``, cached."""
        return self._pinned.get_or_compute(moduli[self.fixed_cells].tobytes(), lambda: self._condense(moduli))

    def _condense(self, moduli):
        base = self.base
        pinned = np.array(moduli, dtype=float)
        pinned[self.free_cells] = 0.0
        values = np.append(base.stiffness_values(pinned), 0.0)  # K's CSR values, then a 0
        I, A = self.dofs, self.other
        C = values[self._C]
        fI = self.forces[I]
        if A.size:
            entries, indices, indptr, shape = self._AA
            K_AA = sp.csc_matrix((values[entries], indices, indptr), shape=shape)
            K_AI = values[self._AI]
            rhs = np.column_stack([K_AI, self.forces[A]])
            lu = spla.splu(K_AA)
            X = lu.solve(rhs)
            S0 = C - K_AI.T @ X[:, :-1]
            g = fI - K_AI.T @ X[:, -1]
            c0 = float(self.forces[A] @ X[:, -1])
        else:
            S0, g, c0, lu, K_AI = C, fI, 0.0, None, None
        S0 = 0.5 * (S0 + S0.T)
        solid = np.array(moduli, dtype=float)
        solid[self.free_cells] = fe.E0
        reduced = (S0, g, c0, np.inf)
        reference = self._solve_reduced(reduced, solid)
        return S0, g, c0, reference if reference is not None else np.inf, lu, K_AI

    def _solve_reduced(self, reduced, moduli):
        S0, g, c0, reference = reduced[:4]
        S = self._assembled(S0, moduli)
        factor, info = lapack.dpotrf(S, lower=False, clean=True)
        if info != 0:
            return None
        u, info = lapack.dpotrs(factor, g, lower=False)
        if info != 0:
            return None
        r = S @ u - g  # a non-finite u makes this inf or NaN, which fails the test as well
        if not residual_acceptable(math.sqrt(r @ r), self.f_norm):
            return None
        compliance = c0 + float(g @ u)
        if not (math.isfinite(compliance) and 0.0 <= compliance <= fe.SINGULARITY_RATIO * reference):
            return None
        self._u[:-1] = u
        return compliance

    def reduced_system(self, moduli):
        """``(S, g, c0)`` for element moduli: compliance = c0 + g . S^-1 g, S dense on ``dofs``.

        S is symmetric positive definite for any positive moduli; the caller
        factorises it (a search over many designs of the free cells, see
        :mod:`sphyr_hpc.optimiser.exact`).
        """
        moduli = np.asarray(moduli, dtype=float)
        S0, g, c0 = self._reduced(moduli)[:3]
        return self._assembled(S0, moduli), g, c0

    def _assembled(self, S0, moduli):
        """S = S0 + the free cells' element matrices scattered to the condensed DOFs."""
        return S0 + csr.matvec(self._map, moduli[self.free_cells]).reshape(self.k, self.k)

    def solve(self, moduli):
        """Compliance for element moduli (natural order = this rank's slab); +inf as "Finite elements" says."""
        moduli = np.asarray(moduli, dtype=float)
        if self.base.n_free == 0 or not self.base.has_load:
            return np.inf
        reduced = self._reduced(moduli)
        compliance = self._solve_reduced(reduced, moduli)
        self._last = reduced if compliance is not None else _FULL
        if compliance is None:
            self.full_solves += 1
            compliance = self.base.solve(moduli)
            self._u[:-1] = self.base.natural_displacements()[self.dofs] if np.isfinite(compliance) else 0.0
        return compliance

    def natural_displacements(self):
        """The natural displacement field (n_dofs,) of the last solve: u_I, and u_A from K_AA's factorisation."""
        if self._last is None:
            raise RuntimeError("no solve yet: no displacements")
        if self._last is _FULL:  # the base system solved this design itself: its field is current
            return self.base.natural_displacements()
        lu, K_AI = self._last[4:]
        u = np.zeros(self.loadcase.n_dofs)
        u[self.dofs] = self._u[:-1]
        if lu is not None:
            u[self.other] = lu.solve(self.forces[self.other] - K_AI @ self._u[:-1])
        return u

    def max_displacement(self):
        """Largest nodal displacement magnitude of the last solve, as the base system reports it."""
        if self._last is _FULL:
            return self.base.max_displacement()
        nodal = self.natural_displacements().reshape(-1, 2)
        return float(np.hypot(nodal[:, 0], nodal[:, 1]).max())

    def unit_energies(self):
        """u_e^T K0 u_e of the free cells (0 for pinned cells) after the last solve."""
        ue = self._u[self._local]
        self._energies[self.free_cells] = np.einsum("ij,ij->i", ue @ self.base.ke, ue)
        return self._energies
