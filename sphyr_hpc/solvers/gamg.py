"""CG + smoothed-aggregation algebraic multigrid (PCGAMG) on the assembled K.

K is stored as AIJ (block size 2) and assembled in 2x2 element blocks
(:class:`~.assembly.ElementBlockAssembly`); the three plane rigid-body modes
(two translations, one rotation), from the DMDA's node coordinates, are its
near-null space.  Defaults (each overridable under the prefix,
``-<prefix>pc_gamg_threshold`` ...): one smoothing step of the prolongator,
threshold 0.01, a coarse grid of about :data:`~.hierarchy.COARSE_MAX_DOFS`
equations, Chebyshev(2)/Jacobi smoothing with CG eigenvalue estimates.
"""

from .hierarchy import COARSE_MAX_DOFS
from .multigrid import MAX_IT, RTOL, SMOOTHING, StoredLevel, plain_csr_kernels


class GAMGMethod:
    """CG + PCGAMG (see the module docstring): the part of a :class:`~.system.GridSystem` that solves
    by algebraic multigrid, K a :class:`~.multigrid.StoredLevel` (AIJ) with its rigid-body modes."""

    name = "gamg"
    iterative = True

    def __init__(self, system):
        self.PETSc = system.PETSc
        self.fine = StoredLevel(system, "aij")
        self._near_null = self.PETSc.NullSpace().createRigidBody(system.da.getCoordinates())
        self.fine.mat.setNearNullSpace(self._near_null)

    def configure(self, ksp):
        PETSc = self.PETSc
        ksp.setType(PETSc.KSP.Type.CG)
        ksp.setTolerances(rtol=RTOL, max_it=MAX_IT)
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
        ksp.setInitialGuessNonzero(True)  # warm start from the previous displacements
        ksp.getPC().setType(PETSc.PC.Type.GAMG)
        return {"pc_gamg_type": "agg", "pc_gamg_agg_nsmooths": 1, "pc_gamg_threshold": 0.01,
                "pc_gamg_coarse_eq_limit": COARSE_MAX_DOFS, **SMOOTHING["chebyshev"]}

    def options_read(self, ksp, options):
        """Nothing to check."""

    def set_up(self, ksp, first):
        """The levels GAMG made switched to the plain CSR kernels, once."""
        if first:
            plain_csr_kernels(ksp)

    def assemble(self, moduli, ksp):
        self.fine.assemble(moduli)

    def close(self):
        self.fine.close()
        if self._near_null is not None:
            self._near_null.destroy()
            self._near_null = None
