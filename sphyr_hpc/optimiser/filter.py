"""The density filter as a parallel PETSc Mat (SPEC section 5).

H has weight ``R - dist(e, f)`` for every cell f within ``ceil(R) - 1`` rows
and columns of e with a positive weight; ``Hs`` are its row sums.  R = 1.2
keeps the cell itself (1.2) and its 4 edge neighbours (0.2 each).  Rows and
columns live on the element DMDA of an
:class:`~sphyr_hpc.solvers.elasticity.ElasticitySystem`, so ``H x`` is a
parallel MatMult and no field is ever gathered.
"""

import math

import numpy as np

from ..solvers.elasticity import _csr_plan

FILTER_RADIUS = 1.2


def filter_reach(radius):
    return max(int(math.ceil(radius)) - 1, 0)


class DensityFilter:
    """``apply(x) = (H x) / Hs`` and the chain rule ``H^T (d * free / Hs)`` on slabs."""

    def __init__(self, system, radius=FILTER_RADIUS):
        self.system = system
        self.radius = float(radius)
        da = system.da_elem
        reach = filter_reach(self.radius)
        if reach > da.getStencilWidth():
            raise ValueError(f"filter radius {radius} needs an element halo of {reach}")
        nely, nelx = system.loadcase.shape
        (xs, xe), (ys, ye) = da.getRanges()
        (gxs, gxe), (gys, gye) = da.getGhostRanges()
        gxm = gxe - gxs
        n_ghost = gxm * (gye - gys)
        rows, cols, vals = [], [], []
        er, ec = np.meshgrid(np.arange(ys, ye), np.arange(xs, xe), indexing="ij")
        er, ec = er.ravel(), ec.ravel()
        for dr in range(-reach, reach + 1):
            for dc in range(-reach, reach + 1):
                weight = self.radius - math.hypot(dr, dc)
                if weight <= 0.0:
                    continue
                nr, nc = er + dr, ec + dc
                ok = (nr >= 0) & (nr < nely) & (nc >= 0) & (nc < nelx)
                rows.append((er[ok] - gys) * gxm + (ec[ok] - gxs))
                cols.append((nr[ok] - gys) * gxm + (nc[ok] - gxs))
                vals.append(np.full(int(ok.sum()), weight))
        indptr, indices, inverse, nnz = _csr_plan(np.concatenate(rows), np.concatenate(cols), n_ghost)
        data = np.bincount(inverse, weights=np.concatenate(vals), minlength=nnz)
        PETSc = system.PETSc
        self.H = da.createMatrix()
        self.H.setValuesLocalCSR(indptr.astype(PETSc.IntType), indices.astype(PETSc.IntType), data,
                                 addv=PETSc.InsertMode.INSERT_VALUES)
        self.H.assemble()
        self._x = da.createGlobalVec()
        self._y = self._x.duplicate()
        self._x.set(1.0)
        self.H.mult(self._x, self._y)
        self.Hs = self._y.array_r.copy()

    def apply(self, x):
        """(H x) / Hs for a slab x."""
        self._x.array[:] = x
        self.H.mult(self._x, self._y)
        return self._y.array_r / self.Hs

    def chain(self, d, free):
        """H^T (d * free / Hs) for a slab sensitivity d and 0/1 free mask."""
        self._x.array[:] = d * free / self.Hs
        self.H.multTranspose(self._x, self._y)
        return self._y.array_r.copy()

    def close(self):
        for obj in (self.H, self._x, self._y):
            obj.destroy()
