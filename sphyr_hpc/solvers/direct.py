"""The direct solver's pieces: the factorised block copy of K, the PC set-up, solves with the factor.

On one rank, small systems factorise ``P``, a copy of K's upper triangle in
2x2 node blocks (SBAIJ, natural order) whose values are gathered from K's
after every assembly (:class:`BlockCopy`); see
:mod:`sphyr_hpc.solvers.elasticity` for when.  :func:`configure_direct` sets
the KSP to ``preonly`` + Cholesky (one rank) or MUMPS LU (several);
:func:`factor_solve` reuses the last factorisation for many right-hand sides.
"""

import numpy as np

from .assembly import upper_block_plan


class BlockCopy:
    """``P``, K's upper triangle in 2x2 blocks, and the gather that refills it from K's values.

    ``values``: K's CSR values followed by one 0 (what P's block entries outside
    K's pattern read), the array an in-place assembly writes.  ``values_of``
    gives PETSc's own array of P's values where it is reachable
    (:func:`~sphyr_hpc.runtime.petsc.seqsbaij_values`): refilled in place there
    (each block column by column), else through ``MatSetValuesBlocked`` (blocks
    row by row).
    """

    def __init__(self, PETSc, assembly, values, comm, values_of):
        self.PETSc = PETSc
        indptr, indices, gather = upper_block_plan(assembly.indptr, assembly.indices, bs=2)
        self.source = values
        self.csr = (indptr.astype(PETSc.IntType), indices.astype(PETSc.IntType))
        n = assembly.indptr.size - 1
        self.P = PETSc.Mat().createSBAIJ((n, n), bsize=2, csr=(*self.csr, values[gather]), comm=comm)
        self.P.assemble()
        self.values = values_of(self.P, gather.size)
        self.in_place = self.values is not None
        if self.in_place:
            self.gather = gather.reshape(-1, 2, 2).transpose(0, 2, 1).ravel()
        else:
            self.gather, self.values = gather, values[gather]

    def refill(self):
        """P's values from K's current ones; a new state, so the PC refactorises."""
        np.take(self.source, self.gather, out=self.values)
        if not self.in_place:
            self.P.setValuesBlockedCSR(*self.csr, self.values, addv=self.PETSc.InsertMode.INSERT_VALUES)
        self.P.assemble()

    def close(self):
        """Drop the view of P's memory (P itself is destroyed by its system)."""
        self.values = None


def configure_direct(PETSc, ksp, ranks, blocks):
    """``preonly`` + Cholesky on one rank (of the block copy, natural order, where ``blocks``), MUMPS LU on several."""
    ksp.setType(PETSc.KSP.Type.PREONLY)
    pc = ksp.getPC()
    if ranks > 1:
        pc.setType(PETSc.PC.Type.LU)
        pc.setFactorSolverType(PETSc.Mat.SolverType.MUMPS)
    else:
        # K is SPD (symmetric Dirichlet rows): Cholesky, of P in block natural order where
        # there is one, else of K with nested dissection, PETSc's fastest AIJ factorisation
        # at 882 DOFs, 15% ahead of LU (benchmarks/factorisation.py).
        pc.setType(PETSc.PC.Type.CHOLESKY)
        pc.setFactorOrdering(PETSc.Mat.OrderingType.NATURAL if blocks else PETSc.Mat.OrderingType.ND)


def factor_solve(PETSc, ksp, rhs):
    """K^{-1} rhs (columns) with the factorisation of ``ksp``'s last set-up (one rank).

    One ``MatMatSolve`` for all the columns (PETSc's dense matrices are
    column-major: the numpy array goes in Fortran order, no copy of PETSc's).
    """
    factor = ksp.getPC().getFactorMatrix()
    n, m = rhs.shape
    B = PETSc.Mat().createDense((n, m), array=np.asfortranarray(rhs, dtype=float), comm=PETSc.COMM_SELF)
    X = PETSc.Mat().createDense((n, m), comm=PETSc.COMM_SELF)
    X.setUp()
    factor.matSolve(B, X)
    out = X.getDenseArray().copy()
    B.destroy()
    X.destroy()
    return out
