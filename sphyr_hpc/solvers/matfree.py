"""The large-grid stiffness applied from the element moduli: a PETSc shell matrix, no stored K.

``y = K(E) x`` on a rank's owned nodes is a sum over the (up to 4) elements
around each node of ``E_e K0 x_e`` (``q4_apply.c``, compiled on first use by
:mod:`sphyr_hpc.runtime.native`).  One product reads x's ghosted local copy,
the element moduli around the owned nodes and writes y: about 48 bytes a node
against ~190 for K's upper 2x2 blocks in SBAIJ, and nothing is stored but the
moduli box and the diagonal.  Dirichlet DOFs are imposed as the assembled K
imposes them (identity rows and columns): x's fixed DOFs count as 0 in the
sum and ``y = x`` there.

It serves geometric multigrid's finest level (CG's operator, Chebyshev's
products, PCMG's residual; Jacobi reads :meth:`FineOperator.getDiagonal`); the
coarse operators come from the moduli as before
(:mod:`sphyr_hpc.solvers.grid_galerkin`).
"""

import ctypes
from pathlib import Path

import numpy as np

from ..runtime import native
from .assembly import _POS, ModuliBox

SOURCE = Path(__file__).with_name("q4_apply.c")


def kernel():
    """The compiled ``q4_apply`` (raises :class:`~sphyr_hpc.runtime.native.NativeUnavailable`)."""
    function = native.load(SOURCE).q4_apply
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    function.argtypes = [size, size, pointer, size, pointer, size, pointer, pointer]
    function.restype = None
    return function


def operator_of(A):
    """The :class:`FineOperator` behind ``A`` when ``A`` is one's shell matrix, else None."""
    if A.getType() != "python":
        return None
    context = A.getPythonContext()
    return context if isinstance(context, FineOperator) else None


def stencil_nonzeros(shape, storage="aij"):
    """Nonzeros K of a (nely, nelx) grid stores in ``storage``: 4 a pair of nodes in each other's
    3x3 (AIJ, BAIJ); SBAIJ keeps the upper pairs and the whole diagonal 2x2 blocks."""
    nely, nelx = shape
    pairs = (3 * (nelx + 1) - 2) * (3 * (nely + 1) - 2)
    if storage.endswith("sbaij"):
        return 2 * (pairs + (nelx + 1) * (nely + 1))
    return 4 * pairs


class FineOperator:
    """The shell matrix's context (petsc4py's ``Mat.createPython``) for a system's nodal DMDA.

    :meth:`assemble` takes the element moduli (the rank's slab), :meth:`mult` and
    :meth:`getDiagonal` are what PETSc calls; :attr:`mat` is the shell matrix.
    """

    def __init__(self, PETSc, da, da_elem, shape, fixed_local, ke, comm, storage="aij"):
        """``storage``: the format :attr:`nnz` counts in (the coarser levels', for the operator
        complexity)."""
        self._apply = kernel()
        (oxs, oxe), (oys, oye) = da.getRanges()
        (gxs, gxe), (gys, gye) = da.getGhostRanges()
        self._box = (oye - oys, oxe - oxs)
        self._x_stride = 2 * (gxe - gxs)
        n_local = 2 * (gxe - gxs) * (gye - gys)
        # x's ghosted copy inside a zero margin: the kernel reads one node row and one node beyond
        # the owned box, which lies outside the ghosted array on the grid's edges.
        margin = self._x_stride + 4
        self._x_buffer = np.zeros(n_local + 2 * margin)
        self._x_first = margin + 2 * ((oys - gys) * (gxe - gxs) + (oxs - gxs))
        self._da = da
        self._x_local = da.createLocalVec()
        self._x_local.placeArray(self._x_buffer[margin:margin + n_local])
        self._fixed_ghosted = margin + np.flatnonzero(fixed_local)
        owned = np.zeros((gye - gys, gxe - gxs, 2), dtype=bool)
        owned[oys - gys:oye - gys, oxs - gxs:oxe - gxs] = True
        self._fixed_owned = np.flatnonzero(fixed_local[owned.ravel()])
        self._ke = np.ascontiguousarray(ke, dtype=float)
        self._moduli = ModuliBox(da, da_elem, shape)
        self._E = None
        self._diagonal = np.zeros(2 * self._box[0] * self._box[1])
        self.nnz = stencil_nonzeros(shape, storage)
        # Moduli one product reads, all ranks (the model of sphyr_hpc.optimiser.measure).
        self.moduli_count = comm.tompi4py().allreduce(self._moduli.box_array.size)
        n_owned = self._diagonal.size
        self.mat = PETSc.Mat().createPython([(n_owned, PETSc.DECIDE), (n_owned, PETSc.DECIDE)], context=self,
                                            comm=comm)
        self.mat.setUp()

    def assemble(self, K, moduli):
        """Take new element moduli (this rank's slab): ``K`` (:attr:`mat`) is K of them from now on."""
        self._E = self._moduli.box(moduli)
        ny, nx = self._box
        diagonal = self._diagonal.reshape(ny, nx, 2)
        diagonal[...] = 0.0
        for a, (ar, ac) in enumerate(_POS):
            E = self._E[1 - ar:ny + 1 - ar, 1 - ac:nx + 1 - ac]
            for d in (0, 1):
                diagonal[:, :, d] += E * self._ke[2 * a + d, 2 * a + d]
        self._diagonal[self._fixed_owned] = 1.0
        self.mat.assemble()  # a new state: what PETSc caches of the operator is stale

    def mult(self, mat, x, y):
        self._da.globalToLocal(x, self._x_local)
        buffer = self._x_buffer
        buffer[self._fixed_ghosted] = 0.0
        ny, nx = self._box
        E = self._E
        with x as xa, y as ya:
            self._apply(ny, nx, buffer.ctypes.data + 8 * self._x_first, self._x_stride,
                        E.ctypes.data, E.shape[1], self._ke.ctypes.data, ya.ctypes.data)
            ya[self._fixed_owned] = xa[self._fixed_owned]

    def getDiagonal(self, mat, d):
        with d as da:
            da[:] = self._diagonal

    def close(self):
        self._moduli.close()
        if self._x_local is not None:
            self._x_local.resetArray()  # the buffer is ours
            self._x_local.destroy()
            self._x_local = None
        if self.mat is not None:
            self.mat.destroy()
            self.mat = None


__all__ = ["FineOperator", "kernel", "operator_of", "stencil_nonzeros"]
