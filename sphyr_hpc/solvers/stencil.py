"""A coarse multigrid operator stored as symmetric node stencils and applied in C.

The coarse operators of the nested grids (:mod:`sphyr_hpc.solvers.grid_galerkin`)
couple each node with the 3x3 nodes around it.  Stored as SBAIJ they are the
upper 2x2 blocks plus one column index a block, and PETSc 3.18's SBAIJ product
(indirect addressing, the transposed half scattered) runs at about 1.4 GFlop/s
a core, well below what memory allows.  Here a node keeps its diagonal block
and its four upper neighbours' blocks as 19 numbers (no index: the grid is the
structure, ``stencil_apply.c``), and the product, a fused Chebyshev step and
the eigenvalue estimate's product run in C at memory speed.

Values: the coarse element matrices are added into the stencils of the rank's
ghosted nodes (:meth:`StencilOperator.add_elements`; a coarse element astride
two ranks is held by both, each with its own children's part), then a DMDA of
19 DOFs a node on the level's grid sums the parts into the owners
(``DMLocalToGlobal`` with ``ADD_VALUES``) and gives every rank the stencils of
its ghost nodes back (``DMGlobalToLocal``): the transposed terms of the owned
nodes next to them need those.  A product copies x into the level's ghosted
vector (``DMGlobalToLocal``) and reads it there.
"""

import ctypes
from pathlib import Path

import numpy as np

from ..runtime import native
from .fused import FusedOperator

SOURCE = Path(__file__).with_name("stencil_apply.c")
# Numbers a node's stencil holds (stencil_apply.c): D's 3, then E, NW, N, NE's 2x2 blocks.
NS = 19


def kernels():
    """The compiled ``stencil_apply``, ``stencil_chebyshev_step``, ``stencil_diagonal`` and
    ``stencil_add_elements`` (raises :class:`~sphyr_hpc.runtime.native.NativeUnavailable`)."""
    library = native.load(SOURCE)
    pointer, size, real = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
    signatures = {
        "stencil_apply": (real, [size] * 6 + [pointer] * 3 + [size]),
        "stencil_chebyshev_step": (None, [size] * 6 + [pointer] * 6 + [real, real, pointer]),
        "stencil_diagonal": (None, [size] * 5 + [pointer] * 3),
        "stencil_add_elements": (None, [size, size, pointer, size, size, size, pointer]),
    }
    functions = []
    for name, (restype, argtypes) in signatures.items():
        function = getattr(library, name)
        function.restype, function.argtypes = restype, argtypes
        functions.append(function)
    return functions


class StencilOperator(FusedOperator):
    """A coarse level's operator on its DMDA ``dm`` (2 DOFs a node, box stencil of width 1):
    the shell matrix :attr:`mat` (``mult``, ``getDiagonal``) and the fused smoother's kernels.

    Its values: :meth:`begin`, :meth:`add_elements` for every block of the rank's coarse element
    matrices, :meth:`finish` (collective).
    """

    def __init__(self, PETSc, dm, nnz):
        """``nnz``: the nonzeros the level stands for (the operator complexity counts them)."""
        self._apply, self._step, self._diagonal_of, self._add = kernels()
        (oxs, oxe), (oys, oye) = dm.getRanges()
        (gxs, gxe), (gys, gye) = dm.getGhostRanges()
        self._init_fused((oys, oye, oxs, oxe), dm.getSizes()[0])
        self._origin = (gys, gxs)
        self._geometry = (gye - gys, gxe - gxs, oys - gys, oxs - gxs, oye - oys, oxe - oxs)
        self._dm = dm
        self._sdm = dm.duplicate(dof=NS)
        self._stencils = self._sdm.createLocalVec()
        self._summed = self._sdm.createGlobalVec()
        self._x_local = dm.createLocalVec()
        ny, nx = oye - oys, oxe - oxs
        self._diagonal = np.zeros(2 * ny * nx)
        self._inverse_diagonal = np.zeros_like(self._diagonal)
        self._work = np.zeros(2 * nx)
        self.nnz = nnz
        n_x, n_y = dm.getSizes()[:2]
        self.stored_bytes = 8.0 * NS * n_x * n_y
        comm = dm.getComm()
        n_owned = self._diagonal.size
        self.mat = PETSc.Mat().createPython([(n_owned, PETSc.DECIDE), (n_owned, PETSc.DECIDE)], context=self,
                                            comm=comm)
        self.mat.setUp()
        self._add_mode = PETSc.InsertMode.ADD_VALUES

    def begin(self):
        """Start new values: every stencil zero."""
        self._stencils.zeroEntries()

    def add_elements(self, G, first_row, first_col):
        """Add the coarse element matrices ``G`` ((rows, columns, 64), 8x8 each in
        :data:`~.assembly._POS` node order) of the elements from (first_row, first_col) of the
        level's grid on."""
        G = np.ascontiguousarray(G, dtype=float)
        rows, cols = G.shape[:2]
        if rows == 0 or cols == 0:
            return
        gys, gxs = self._origin
        gny, gnx = self._geometry[:2]
        if first_row < gys or first_col < gxs or first_row + rows >= gys + gny or first_col + cols >= gxs + gnx:
            raise RuntimeError("coarse elements outside this rank's ghosted nodes")
        with self._stencils as S:
            self._add(rows, cols, G.ctypes.data, gnx, first_row - gys, first_col - gxs, S.ctypes.data)

    def finish(self):
        """The parts summed on the owners and the ghost nodes' stencils fetched (collective); the
        diagonal for Jacobi; a new state for PETSc."""
        self._summed.zeroEntries()
        self._sdm.localToGlobal(self._stencils, self._summed, addv=self._add_mode)
        self._sdm.globalToLocal(self._summed, self._stencils)
        gny, gnx, oy, ox, ny, nx = self._geometry
        with self._stencils as S:
            self._diagonal_of(gnx, oy, ox, ny, nx, S.ctypes.data, self._diagonal.ctypes.data,
                              self._inverse_diagonal.ctypes.data)
        self.version += 1
        self.mat.assemble()  # a new state: what PETSc caches of the operator is stale

    def _product(self, x, y, want_dot):
        self._dm.globalToLocal(x, self._x_local)
        with self._x_local as xg, self._stencils as S, y as ya:
            return self._apply(*self._geometry, xg.ctypes.data, S.ctypes.data, ya.ctypes.data, want_dot)

    def mult(self, mat, x, y):
        self._product(x, y, 0)

    def _product_dot(self, x, y):
        return self._product(x, y, 1)

    def _chebyshev_step(self, x, xa, ba, d, c_d, c_r):
        """``d = c_d d + c_r D^-1 (b - A x)``, ``x += d``: the product from x's ghosted copy."""
        self._dm.globalToLocal(x, self._x_local)
        with self._x_local as xg, self._stencils as S:
            self._step(*self._geometry, xg.ctypes.data, S.ctypes.data, ba.ctypes.data,
                       self._inverse_diagonal.ctypes.data, d.ctypes.data, xa.ctypes.data, c_d, c_r,
                       self._work.ctypes.data)

    def getDiagonal(self, mat, d):
        with d as da:
            da[:] = self._diagonal

    def close(self):
        for name in ("_stencils", "_summed", "_x_local", "_sdm", "mat"):
            obj = getattr(self, name)
            if obj is not None:
                obj.destroy()
                setattr(self, name, None)


__all__ = ["NS", "StencilOperator", "kernels"]
