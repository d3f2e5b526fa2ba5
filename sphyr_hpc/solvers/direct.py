"""The direct solver: K assembled from its elements and factorised (the scorer's grids).

K's CSR structure in the rank's local DOF numbering and the map from element
moduli to its values are computed once (:class:`~.assembly.ElementAssembly`),
so a new modulus field is one sparse product summed in element order, as the
published scorer sums it.  On one rank the local numbering is PETSc's and K is
built on those CSR arrays (``MatCreateSeqAIJWithArrays``): assembling writes
its values in place (:class:`InPlaceElements`, also what the yardstick's
one-rank multigrid assembles, :mod:`.multigrid`).

The KSP is ``preonly`` + Cholesky with nested dissection on one rank (K is
SPD: symmetric Dirichlet rows; PETSc's fastest AIJ factorisation at 882 DOFs,
15% ahead of LU, ``benchmarks/factorisation.py``).  On several ranks K is gathered
to rank 0 and factorised there the same way (PCTELESCOPE, options under
``-<prefix>telescope_``), so that a run gives the same bits every time: MUMPS's
parallel LU does not (its parallel factorisation schedules its work as it goes:
designs 6.6e-6 apart between two 60-iteration runs of 240x80 on 2 ranks, 1.9e-6
with its sequential analysis and AMD ordering, ``-mat_mumps_icntl_28 1
-mat_mumps_icntl_7 2``).  What it costs: ``benchmarks/results/direct_default.md``.
``-<prefix>pc_type lu -<prefix>pc_factor_mat_solver_type mumps`` chooses MUMPS.
:meth:`DirectSystem.factor_solve` reuses the last factorisation for many
right-hand sides (the swap polish's screen).
"""

import numpy as np

from ..runtime import events as timing
from .assembly import ElementAssembly
from .system import GridSystem


class InPlaceElements:
    """K of a system from its element moduli through :class:`~.assembly.ElementAssembly`: in place on
    one rank in natural order (``values``: K's own CSR values), else into the DMDA's AIJ matrix."""

    def __init__(self, system):
        PETSc = system.PETSc
        self.PETSc = PETSc
        fixed_owned = system.owned_local_dofs[system.fixed_local[system.owned_local_dofs]]
        self.assembly = ElementAssembly(system.local_edofs, system.fixed_local, fixed_owned, system.ke,
                                        system.n_local_dofs, index_type=PETSc.IntType)
        self.nnz = self.assembly.nnz
        self.values = None
        if system.comm.getSize() == 1 and np.array_equal(system.local_natural_dofs, np.arange(system.n_local_dofs)):
            self.values = self.assembly.diagonal.copy()
            self.K = PETSc.Mat().createAIJWithArrays(
                (system.n_local_dofs, system.n_local_dofs),
                (self.assembly.indptr, self.assembly.indices, self.values), comm=system.comm)
        else:
            self.K = system.da.createMatrix()
            self.K.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)

    def assemble(self, moduli):
        if self.values is not None:
            self.assembly.values(moduli, out=self.values)  # K's own values, in place
            self.K.assemble()  # a new state (refactorise) and stale cached data dropped (SOR's diagonal)
            return
        self.K.zeroEntries()
        self.K.setValuesLocalCSR(self.assembly.indptr, self.assembly.indices, self.assembly.values(moduli),
                                 addv=self.PETSc.InsertMode.ADD_VALUES)
        self.K.assemble()


class DirectSystem(GridSystem):
    """K(E) u = f solved by a factorisation (see the module docstring)."""

    solver = "direct"
    iterative = False

    def _build_operator(self):
        self._elements = InPlaceElements(self)
        self._values = self._elements.values
        return self._elements.K

    def _configure(self, ksp):
        PETSc = self.PETSc
        ksp.setType(PETSc.KSP.Type.PREONLY)
        pc = ksp.getPC()
        if self.comm.getSize() > 1:
            # K gathered to rank 0 and factorised there as on one rank (MUMPS's parallel LU is not
            # the same from one run to the next: see the module's docstring).
            pc.setType(PETSc.PC.Type.TELESCOPE)
            return {"pc_telescope_reduction_factor": self.comm.getSize(), "telescope_ksp_type": "preonly",
                    "telescope_pc_type": "cholesky", "telescope_pc_factor_mat_ordering_type": "nd"}
        pc.setType(PETSc.PC.Type.CHOLESKY)
        pc.setFactorOrdering(PETSc.Mat.OrderingType.ND)
        return {}

    def assemble(self, moduli):
        with timing.timed(timing.ASSEMBLY):
            self._elements.assemble(moduli)

    # -- what a condensation needs (one rank, assembled in place) --------------------------------
    def stiffness_pattern(self):
        """(indptr, indices) of K's CSR structure in natural DOF order (one rank, :attr:`in_place`)."""
        self._require_in_place()
        return self._elements.assembly.indptr, self._elements.assembly.indices

    def stiffness_values(self, moduli):
        """K's CSR values for element moduli, a new array in :meth:`stiffness_pattern`'s order."""
        self._require_in_place()
        return self._elements.assembly.values(moduli)

    def factor_solve(self, rhs):
        """K^{-1} rhs (natural order, columns) with the factorisation of the last solve (one rank).

        One ``MatMatSolve`` for all the columns (PETSc's dense matrices are
        column-major: the numpy array goes in Fortran order, no copy of PETSc's).
        """
        self._require_in_place()
        PETSc = self.PETSc
        factor = self.ksp.getPC().getFactorMatrix()
        n, m = rhs.shape
        B = PETSc.Mat().createDense((n, m), array=np.asfortranarray(rhs, dtype=float), comm=PETSc.COMM_SELF)
        X = PETSc.Mat().createDense((n, m), comm=PETSc.COMM_SELF)
        X.setUp()
        factor.matSolve(B, X)
        out = X.getDenseArray().copy()
        B.destroy()
        X.destroy()
        return out

    def _require_in_place(self):
        if self._values is None:
            raise RuntimeError("only a one-rank direct system (assembled in place) offers this")
