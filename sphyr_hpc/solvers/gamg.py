"""CG + smoothed-aggregation algebraic multigrid (PCGAMG) on the assembled K.

K is stored as AIJ (block size 2) and assembled in 2x2 element blocks
(:class:`~.assembly.ElementBlockAssembly`); the three plane rigid-body modes
(two translations, one rotation), from the DMDA's node coordinates, are its
near-null space.  Defaults (each overridable under the prefix,
``-<prefix>pc_gamg_threshold`` ...): one smoothing step of the prolongator,
threshold 0.01, a coarse grid of about :data:`~.hierarchy.COARSE_MAX_DOFS`
equations, Chebyshev(2)/Jacobi smoothing with CG eigenvalue estimates.
"""

from ..runtime import events as timing
from .assembly import ElementBlockAssembly
from .hierarchy import COARSE_MAX_DOFS
from .multigrid import MAX_IT, RTOL, SMOOTHING, hierarchy_info, plain_csr_kernels, tune_operator
from .system import GridSystem


class GAMGSystem(GridSystem):
    """K(E) u = f by CG + PCGAMG (see the module docstring)."""

    solver = "gamg"

    def _build_operator(self):
        PETSc = self.PETSc
        self.da.setMatType("aij")
        K = self.da.createMatrix()
        K.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)
        tune_operator(K)
        (exs, exe), (eys, eye) = self.da_elem.getRanges()
        self._blocks = ElementBlockAssembly(PETSc, self.loadcase, self.local_edofs[:, 0::2] // 2,
                                            ((eys, eye), (exs, exe)), self.loadcase.fixed_dofs(), self.ke)
        self._near_null = PETSc.NullSpace().createRigidBody(self.da.getCoordinates())
        K.setNearNullSpace(self._near_null)
        return K

    def _configure(self, ksp):
        PETSc = self.PETSc
        ksp.setType(PETSc.KSP.Type.CG)
        ksp.setTolerances(rtol=RTOL, max_it=MAX_IT)
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
        ksp.setInitialGuessNonzero(True)  # warm start from the previous displacements
        ksp.getPC().setType(PETSc.PC.Type.GAMG)
        return {"pc_gamg_type": "agg", "pc_gamg_agg_nsmooths": 1, "pc_gamg_threshold": 0.01,
                "pc_gamg_coarse_eq_limit": COARSE_MAX_DOFS, **SMOOTHING["chebyshev"]}

    def assemble(self, moduli):
        with timing.timed(timing.ASSEMBLY):
            self._blocks.assemble(self.K, moduli)

    def _after_setup(self, first):
        if first:
            plain_csr_kernels(self.ksp)
            self.hierarchy = hierarchy_info(self.ksp)

    def close(self):
        super().close()
        if getattr(self, "_near_null", None) is not None:
            self._near_null.destroy()
            self._near_null = None
