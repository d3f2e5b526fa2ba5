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
:meth:`~.system.GridSystem.factor_solve` reuses the last factorisation for many
right-hand sides (the swap polish's screen).
"""

import numpy as np

from .assembly import ElementAssembly


def matrix_nbytes(A):
    """The bytes a PETSc matrix holds on all ranks (MatGetInfo's memory)."""
    return float(A.getInfo(A.InfoType.GLOBAL_SUM)["memory"])


class MatLevel:
    """What a level operator that owns its PETSc matrix ``mat`` has in common: its bytes, its close."""

    mat = None

    @property
    def nbytes(self):
        return matrix_nbytes(self.mat)

    def close(self):
        if self.mat is not None:
            self.mat.destroy()
            self.mat = None


class InPlaceElements(MatLevel):
    """K of a system from its element moduli through :class:`~.assembly.ElementAssembly`: in place on
    one rank in natural order (``values``: K's own CSR values), else into the DMDA's AIJ matrix
    (``values`` None).  A level operator (``mat``, ``assemble``, ``nbytes``, ``close``)."""

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
            self.mat = PETSc.Mat().createAIJWithArrays(
                (system.n_local_dofs, system.n_local_dofs),
                (self.assembly.indptr, self.assembly.indices, self.values), comm=system.comm)
        else:
            self.mat = system.da.createMatrix()
            self.mat.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)

    def assemble(self, moduli):
        if self.values is not None:
            self.assembly.values(moduli, out=self.values)  # K's own values, in place
            self.mat.assemble()  # a new state (refactorise) and stale cached data dropped (SOR's diagonal)
            return
        self.mat.zeroEntries()
        self.mat.setValuesLocalCSR(self.assembly.indptr, self.assembly.indices, self.assembly.values(moduli),
                                 addv=self.PETSc.InsertMode.ADD_VALUES)
        self.mat.assemble()


class DirectMethod:
    """A factorisation (see the module docstring): the part of a :class:`~.system.GridSystem` that
    solves directly, K its :class:`InPlaceElements`."""

    name = "direct"
    iterative = False

    def __init__(self, system):
        self.PETSc = system.PETSc
        self.fine = InPlaceElements(system)
        self._ranks = system.comm.getSize()

    def configure(self, ksp):
        PETSc = self.PETSc
        ksp.setType(PETSc.KSP.Type.PREONLY)
        pc = ksp.getPC()
        if self._ranks > 1:
            # K gathered to rank 0 and factorised there as on one rank (MUMPS's parallel LU is not
            # the same from one run to the next: see the module's docstring).
            pc.setType(PETSc.PC.Type.TELESCOPE)
            return {"pc_telescope_reduction_factor": self._ranks, "telescope_ksp_type": "preonly",
                    "telescope_pc_type": "cholesky", "telescope_pc_factor_mat_ordering_type": "nd"}
        pc.setType(PETSc.PC.Type.CHOLESKY)
        pc.setFactorOrdering(PETSc.Mat.OrderingType.ND)
        return {}

    def options_read(self, ksp, options):
        """Nothing to check."""

    def set_up(self, ksp, first):
        """Nothing beyond PETSc's factorisation."""

    def assemble(self, moduli, ksp):
        self.fine.assemble(moduli)

    def close(self):
        self.fine.close()
