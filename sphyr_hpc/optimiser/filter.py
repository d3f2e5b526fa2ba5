"""The density filter as a parallel PETSc Mat (docs/scoring.md, "SIMP run"), and the sensitivity filter.

H has weight ``R - dist(e, f)`` for every cell f within ``ceil(R) - 1`` rows
and columns of e with a positive weight; ``Hs`` are its row sums.  R = 1.2
keeps the cell itself (1.2) and its 4 edge neighbours (0.2 each).  Rows and
columns live on the element DMDA of an
:class:`~sphyr_hpc.solvers.system.GridSystem`, so ``H x`` is a
parallel MatMult and no field is ever gathered.
"""

import math

import numpy as np

from ..runtime import native

FILTER_RADIUS = 1.2


def _stencil_kernel():
    """The compiled ``filter_stencil`` (the stencil kind's sum in one pass), or None without the
    compiled kernels (the numpy passes, the same sums)."""
    try:
        return native.native_function("filter_stencil")
    except native.NativeUnavailable:
        return None


def filter_reach(radius):
    return max(int(math.ceil(radius)) - 1, 0)


FILTER_TYPES = ("matrix", "stencil")
# What is filtered: the densities (the 88-line code's ft = 2) or the sensitivities (its ft = 1).
FILTERS = ("density", "sensitivity")
SENSITIVITY_GUARD = 1e-3  # the 88-line code's max(1e-3, x) in its sensitivity filter


def filter_sensitivity(density_filter, design, dc):
    """The 88-line code's sensitivity filter (``ft = 1``) on a slab: ``H (x dc) / Hs / max(1e-3, x)``.

    ``density_filter`` supplies H and Hs (the same weights ``R - dist`` as the density filter);
    the design is not filtered (its physical densities are the design).
    """
    return density_filter.apply(design * dc) / np.maximum(SENSITIVITY_GUARD, design)


class DensityFilter:
    """``apply(x) = (H x) / Hs`` and the chain rule ``H^T (d * free / Hs)`` on slabs.

    ``kind="matrix"`` (the default) stores H as a PETSc Mat on the element
    DMDA; ``kind="stencil"`` (the large-grid driver's)
    stores nothing: H is the same few weights at every cell (0 outside the
    grid), so ``H x`` is the weighted sum of the shifted ghosted slab, one pass
    an offset, and ``H^T = H`` (the weights are symmetric).  The same terms as
    the matrix's rows, added in another order: equal up to rounding.  At
    2048x1024 elements on 2 ranks the matrix is ~115 MB a rank.
    """

    def __init__(self, system, radius=FILTER_RADIUS, kind="matrix"):
        self.system = system
        self.radius = float(radius)
        da = system.da_elem
        reach = filter_reach(self.radius)
        if reach > da.getStencilWidth():
            raise ValueError(f"filter radius {radius} needs an element halo of {reach}")
        if kind not in FILTER_TYPES:
            raise ValueError(f"unknown filter type {kind!r}: expected one of {', '.join(FILTER_TYPES)}")
        self.kind = kind
        self.H = None
        if kind == "stencil":
            self._setup_stencil(da, reach)
            return
        nely, nelx = system.loadcase.shape
        (xs, xe), (ys, ye) = da.getRanges()
        (gxs, gxe), (gys, gye) = da.getGhostRanges()
        gxm = gxe - gxs
        n_ghost = gxm * (gye - gys)
        # Offsets with a positive weight, in increasing local column order; every (row,
        # column) pair occurs once, so the CSR is built directly (no sort, int32 indices).
        offsets = [(dr, dc, self.radius - math.hypot(dr, dc))
                   for dr in range(-reach, reach + 1) for dc in range(-reach, reach + 1)]
        offsets = [(dr, dc, w) for dr, dc, w in offsets if w > 0.0]
        PETSc = system.PETSc
        er, ec = np.meshgrid(np.arange(ys, ye), np.arange(xs, xe), indexing="ij")
        er, ec = er.ravel(), ec.ravel()
        inside = np.empty((er.size, len(offsets)), dtype=bool)
        cols = np.empty((er.size, len(offsets)), dtype=PETSc.IntType)
        for k, (dr, dc, _) in enumerate(offsets):
            nr, nc = er + dr, ec + dc
            inside[:, k] = (nr >= 0) & (nr < nely) & (nc >= 0) & (nc < nelx)
            cols[:, k] = (nr - gys) * gxm + (nc - gxs)
        counts = np.zeros(n_ghost, dtype=np.int64)
        counts[(er - gys) * gxm + (ec - gxs)] = inside.sum(axis=1)
        indptr = np.zeros(n_ghost + 1, dtype=PETSc.IntType)
        np.cumsum(counts, out=indptr[1:])
        indices = cols[inside]
        data = np.broadcast_to(np.array([w for _, _, w in offsets]), inside.shape)[inside]
        del inside, cols, er, ec
        self.H = da.createMatrix()
        self.H.setValuesLocalCSR(indptr, indices, data, addv=PETSc.InsertMode.INSERT_VALUES)
        self.H.assemble()
        self._x = da.createGlobalVec()
        self._y = self._x.duplicate()
        self._x.set(1.0)
        self.H.mult(self._x, self._y)
        self.Hs = self._y.array_r.copy()
        self._cells = self._cells_key = None

    def on_cells(self, cells):
        """One rank: ``(H[cells], H[cells, cells]^T, Hs[cells])`` as SciPy CSR, cached for the last ``cells``.

        The rows keep PETSc's column order, so ``H[cells] @ x`` adds the same
        terms in the same order as the MatMult of :meth:`apply`, and so does
        the transpose for :meth:`chain` restricted to ``cells``.
        """
        import scipy.sparse as sp

        if self.system.comm.getSize() != 1:
            raise RuntimeError("DensityFilter.on_cells() is for one rank")
        key = np.asarray(cells).tobytes()
        if self._cells_key != key:
            indptr, indices, data = self.H.getValuesCSR()
            n = self.Hs.size
            rows = sp.csr_matrix((data, indices, indptr), shape=(n, n))[cells]
            chain = rows[:, cells].T.tocsr()
            chain.sort_indices()
            self._cells, self._cells_key = (rows, chain, self.Hs[cells]), key
        return self._cells

    def _setup_stencil(self, da, reach):
        (xs, xe), (ys, ye) = da.getRanges()
        (gxs, gxe), (gys, gye) = da.getGhostRanges()
        self._reach = reach
        self._offsets = [(dr, dc, self.radius - math.hypot(dr, dc))
                         for dr in range(-reach, reach + 1) for dc in range(-reach, reach + 1)
                         if self.radius - math.hypot(dr, dc) > 0.0]
        self._shape = (ye - ys, xe - xs)
        self._ghost_shape = (gye - gys, gxe - gxs)
        # The ghosted box (cut to the reach) inside the padded one (zeros outside the grid).
        r0, r1 = max(gys, ys - reach), min(gye, ye + reach)
        c0, c1 = max(gxs, xs - reach), min(gxe, xe + reach)
        self._inner = (slice(r0 - (ys - reach), r1 - (ys - reach)), slice(c0 - (xs - reach), c1 - (xs - reach)))
        self._ghost_cut = (slice(r0 - gys, r1 - gys), slice(c0 - gxs, c1 - gxs))
        self._padded = np.zeros((ye - ys + 2 * reach, xe - xs + 2 * reach))
        self._kernel = _stencil_kernel()
        self._terms = (np.array([dr for dr, _, _ in self._offsets], dtype=np.int64),
                       np.array([dc for _, dc, _ in self._offsets], dtype=np.int64),
                       np.array([w for _, _, w in self._offsets], dtype=float))
        self._x = da.createGlobalVec()
        self._local = da.createLocalVec()
        self._y = None
        self.Hs = self._stencil(np.ones(self._x.getLocalSize()))

    def _stencil(self, x):
        """H x for a slab x (stencil kind)."""
        self._x.array[:] = x
        self.system.da_elem.globalToLocal(self._x, self._local)
        self._padded[self._inner] = self._local.array_r.reshape(self._ghost_shape)[self._ghost_cut]
        ny, nx = self._shape
        r = self._reach
        if self._kernel is not None:  # the same sums in one pass
            out = np.empty(ny * nx)
            dr, dc, w = self._terms
            self._kernel(ny, nx, r, self._padded.ctypes.data, w.size, dr.ctypes.data, dc.ctypes.data, w.ctypes.data,
                         out.ctypes.data)
            return out
        out = np.zeros(self._shape)
        scaled = np.empty(self._shape)
        for dr, dc, w in self._offsets:
            np.multiply(self._padded[r + dr:r + dr + ny, r + dc:r + dc + nx], w, out=scaled)
            out += scaled
        return out.reshape(-1)

    def apply(self, x):
        """(H x) / Hs for a slab x."""
        if self.H is None:
            return self._stencil(x) / self.Hs
        self._x.array[:] = x
        self.H.mult(self._x, self._y)
        return self._y.array_r / self.Hs

    def chain(self, d, free):
        """H^T (d * free / Hs) for a slab sensitivity d and 0/1 free mask."""
        if self.H is None:
            return self._stencil(d * free / self.Hs)
        self._x.array[:] = d * free / self.Hs
        self.H.multTranspose(self._x, self._y)
        return self._y.array_r.copy()

    def close(self):
        for obj in (self.H, self._x, self._y, getattr(self, "_local", None)):
            if obj is not None:
                obj.destroy()
