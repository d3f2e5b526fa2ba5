"""The bilinear transfers between two levels of the nested grids, applied in C.

PCMG moves every residual one level down (restriction, ``P^T r``) and every
correction one level up (interpolation, ``x += P e``).  Stored as AIJ, ``P``
is ~2.25 nonzeros a fine DOF at 12 bytes each, read twice a visit: on the
finest level of 2048x1024 elements that is more than the vectors it maps.
Here ``P`` is what the grids say it is (:func:`~sphyr_hpc.solvers.hierarchy.interpolation_csr`
builds the same one): a fine node between coarse rows ``cy``, ``cy + 1`` and
columns ``cx``, ``cx + 1`` takes their values with the products of the linear
weights along each axis, both of its DOFs alike.  The kernels
(``grid_prolong``, ``grid_restrict`` in ``stencil_apply.c``) read the weights
of a row and a column, the vectors, and nothing else; they go one axis at a
time (a coarse row interpolated along x once, then each fine row a weighted sum
of two such rows in one streaming pass; the transpose likewise).

On several ranks a fine node's coarse neighbours may belong to the rank before
it along an axis, or the one after (a coarse node belongs to the rank owning
its position on the fine grid): the coarse vector's ring of nodes around the
rank's box is fetched before an interpolation, and a restriction adds its
sums for the ring into their owners afterwards, by the ring scatter of the
stencil levels (:func:`~sphyr_hpc.solvers.fused.ring_plan`).
"""

import numpy as np

from ..runtime.native import native_function
from .fused import ring_plan


def kernels():
    """The compiled ``grid_prolong`` and ``grid_restrict`` (raises
    :class:`~sphyr_hpc.runtime.native.NativeUnavailable`)."""
    return native_function("grid_prolong"), native_function("grid_restrict")


def _axis(weights_of, fine_pos, coarse_pos, coarse_start):
    """(left coarse node relative to the rank's first, the two weights interleaved) of fine nodes."""
    left, w0, w1 = weights_of(fine_pos, coarse_pos)
    return (np.asarray(left, dtype=np.int64) - coarse_start,
            np.ascontiguousarray(np.stack([w0, w1], axis=1).ravel(), dtype=float))


class GridTransfer:
    """P from ``coarse`` to ``fine`` (:class:`~.hierarchy.Level`) on this rank as a shell matrix,
    :attr:`mat` (``mult``: P x, ``multAdd``, ``multTranspose``: P^T x), for the coarse level's DMDA
    ``coarse_dm`` (its ownership the hierarchy's).  ``weights_of(fine_pos, coarse_pos)``: a fine
    node's left coarse node and two weights (:func:`~.hierarchy.axis_weights`)."""

    stored_bytes = 0.0  # what a product reads beyond the vectors: a row's and a column's weights

    def __init__(self, PETSc, fine, coarse, coarse_dm, weights_of):
        self._prolong, self._restrict = kernels()
        comm = coarse_dm.getComm()
        rank = comm.getRank()
        (fxs, fxe), (fys, fye) = fine.rank_box(rank)
        (cxs, cxe), (cys, cye) = coarse_dm.getRanges()
        if ((cxs, cxe), (cys, cye)) != tuple(coarse.rank_box(rank)):
            raise RuntimeError("the coarse DMDA's ownership differs from the multigrid hierarchy's")
        self._cy, self._wy = _axis(weights_of, fine.y_pos[fys:fye], coarse.y_pos, cys)
        self._cx, self._wx = _axis(weights_of, fine.x_pos[fxs:fxe], coarse.x_pos, cxs)
        self._fine = (fye - fys, fxe - fxs)
        self._work = np.empty(4 * self._fine[1])  # two rows' buffers along the fine columns
        self._coarse = (cye - cys, cxe - cxs)
        self._ring, self._ring_vec, self._scatter, _, _ = ring_plan(PETSc, coarse_dm, 2)
        self._forward = (PETSc.InsertMode.INSERT_VALUES, PETSc.ScatterMode.FORWARD)
        self._reverse = (PETSc.InsertMode.ADD_VALUES, PETSc.ScatterMode.REVERSE)
        rows, cols = 2 * self._fine[0] * self._fine[1], 2 * self._coarse[0] * self._coarse[1]
        self.mat = PETSc.Mat().createPython([(rows, fine.n_dofs), (cols, coarse.n_dofs)], context=self, comm=comm)
        self.mat.setUp()

    def _axes(self):
        return (*self._fine, self._cy.ctypes.data, self._wy.ctypes.data, self._cx.ctypes.data, self._wx.ctypes.data,
                *self._coarse)

    def _interpolate(self, x, y, add):
        self._scatter.scatter(x, self._ring_vec, *self._forward)
        xa = x.getArray(readonly=True)
        with y as ya:
            self._prolong(*self._axes(), xa.ctypes.data, self._ring.ctypes.data, ya.ctypes.data, add,
                          self._work.ctypes.data)

    def mult(self, mat, x, y):
        self._interpolate(x, y, 0)

    def multAdd(self, mat, x, y, z):
        """z = y + P x (PCMG's interpolation: z is y)."""
        if z.handle != y.handle:
            y.copy(z)
        self._interpolate(x, z, 1)

    def multTranspose(self, mat, x, y):
        xa = x.getArray(readonly=True)
        with y as ya:
            self._restrict(*self._axes(), xa.ctypes.data, ya.ctypes.data, self._ring.ctypes.data,
                           self._work.ctypes.data)
        self._scatter.scatter(self._ring_vec, y, *self._reverse)

    def close(self):
        for name in ("_ring_vec", "_scatter", "mat"):
            obj = getattr(self, name)
            if obj is not None:
                obj.destroy()
                setattr(self, name, None)


__all__ = ["GridTransfer", "kernels"]
