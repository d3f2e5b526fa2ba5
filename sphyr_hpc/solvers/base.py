"""What every linear-elastic system offers the analysis and the optimiser.

A *system* solves K(E) u = f for one :class:`~sphyr_hpc.core.loadcase.LoadCase`
given element moduli E, and reports what a SIMP run needs of the solution.
Element fields are *slabs*: this rank's box of elements, row-major and
flattened (on one rank, the whole natural (nely, nelx) array flattened).

Implementations: :class:`~sphyr_hpc.solvers.system.GridSystem`, the PETSc
system on a DMDA, any number of ranks, with the method that solves it
(:class:`~sphyr_hpc.solvers.direct.DirectMethod`,
:class:`~sphyr_hpc.solvers.multigrid.MultigridMethod`,
:class:`~sphyr_hpc.solvers.gamg.GAMGMethod`; chosen by size in
:func:`sphyr_hpc.solvers.elasticity.elasticity_system`), and
:class:`~sphyr_hpc.solvers.condensed.CondensedSystem` (one rank, condensed
onto the DOFs of the cells an optimiser may change).

The rules of docs/scoring.md shared by every implementation live here too:
when a solution is accepted (:func:`residual_acceptable`).
"""

import abc

# A solution is accepted when ||K u - f|| <= RESIDUAL_TOLERANCE * max(||f||, 1).
RESIDUAL_TOLERANCE = 1e-6


class SolverError(RuntimeError):
    """An iterative solve that did not converge (never turned into a number)."""


def residual_acceptable(residual_norm, force_norm):
    """Whether a solution whose residual norm is ``residual_norm`` counts (False for inf and NaN)."""
    return bool(residual_norm <= RESIDUAL_TOLERANCE * max(force_norm, 1.0))


class LinearSystem(abc.ABC):
    """K(E) u = f of one load case; ``loadcase``, ``comm`` (PETSc) and ``ke`` (unit element matrix)."""

    loadcase = None
    comm = None
    ke = None

    @abc.abstractmethod
    def solve(self, moduli):
        """Assemble for the element moduli (this rank's slab), solve; the compliance f.u or +inf.

        +inf when there is no free DOF or no load, the solution is not
        finite, its residual is not acceptable, or the compliance is not a
        finite non-negative number.
        """

    @abc.abstractmethod
    def unit_energies(self):
        """u_e^T K0 u_e of every element of this rank's slab, after the last solve."""

    @abc.abstractmethod
    def slab_of(self, natural):
        """This rank's slab of a natural (nely, nelx) element array."""

    @abc.abstractmethod
    def gather(self, slab, root=None):
        """The natural (nely, nelx) array of a slab field on every rank (or on ``root`` only)."""

    def reset(self):
        """Forget what the last solve leaves for the next (a warm start), so that a run's results
        depend on that run alone; nothing to forget by default."""

    def close(self):
        """Release what the system owns (PETSc handles)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
