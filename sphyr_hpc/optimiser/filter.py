"""The density filter as a parallel PETSc Mat (docs/scoring.md, "SIMP run"), and the sensitivity filter.

H has weight ``R - dist(e, f)`` for every cell f within ``ceil(R) - 1`` cells
of e along every axis with a positive weight; ``Hs`` are its row sums.  R = 1.2
keeps the cell itself (1.2) and its edge neighbours (0.2 each: 4 in 2D).  Rows
and columns live on the element DMDA of an
:class:`~sphyr_hpc.solvers.system.GridSystem`, so ``H x`` is a
parallel MatMult and no field is ever gathered.

The grid's dimension is its load case's (``shape``, cells along each axis,
slowest first): the offsets, the matrix's rows and the stencil's passes are
written for any number of axes; only the compiled one-pass sum
(``filter_stencil.c``) is 2D, and a grid of another dimension takes the numpy
passes (the same sums).
"""

import itertools
import math

import numpy as np

from ..core import discretisation as fe
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
    """How many cells along each axis the filter of ``radius`` reaches (the element halo it needs)."""
    return max(int(math.ceil(radius)) - 1, 0)


def filter_offsets(radius, dim):
    """(offset, weight) of every cell the filter of ``radius`` weighs, on a grid of ``dim`` axes: ``offset``
    along the axes, slowest first, in increasing local order (the last axis fastest); ``weight`` ``radius -
    |offset|`` > 0."""
    reach = filter_reach(radius)
    offsets = [(offset, radius - math.hypot(*offset))
               for offset in itertools.product(range(-reach, reach + 1), repeat=dim)]
    return [(offset, w) for offset, w in offsets if w > 0.0]


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
    an offset, and ``H^T = H`` (the weights are symmetric).  Either on a grid of
    any dimension (``dim``, the load case's).  The same terms as
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
        shape = tuple(system.loadcase.shape)  # cells along each axis, slowest first
        self.dim = fe.grid_dimension(shape)
        # This rank's cells and its ghosted box along each axis, slowest first (PETSc lists x first).
        owned = da.getRanges()[::-1]
        ghosted = da.getGhostRanges()[::-1]
        self._offsets = filter_offsets(self.radius, self.dim)
        if kind == "stencil":
            self._setup_stencil(da, reach, owned, ghosted)
            return
        ghost_shape = [e - s for s, e in ghosted]
        strides = [int(np.prod(ghost_shape[a + 1:])) for a in range(self.dim)]  # the local (ghosted) numbering
        n_ghost = int(np.prod(ghost_shape))
        # Offsets with a positive weight, in increasing local column order; every (row,
        # column) pair occurs once, so the CSR is built directly (no sort, int32 indices).
        PETSc = system.PETSc
        cells = [c.ravel() for c in np.meshgrid(*[np.arange(s, e) for s, e in owned], indexing="ij")]
        inside = np.empty((cells[0].size, len(self._offsets)), dtype=bool)
        cols = np.empty((cells[0].size, len(self._offsets)), dtype=PETSc.IntType)
        for k, (offset, _) in enumerate(self._offsets):
            moved = [c + o for c, o in zip(cells, offset)]
            inside[:, k] = np.logical_and.reduce([(m >= 0) & (m < n) for m, n in zip(moved, shape)])
            cols[:, k] = sum((m - g[0]) * stride for m, g, stride in zip(moved, ghosted, strides))
        counts = np.zeros(n_ghost, dtype=np.int64)
        counts[sum((c - g[0]) * stride for c, g, stride in zip(cells, ghosted, strides))] = inside.sum(axis=1)
        indptr = np.zeros(n_ghost + 1, dtype=PETSc.IntType)
        np.cumsum(counts, out=indptr[1:])
        indices = cols[inside]
        data = np.broadcast_to(np.array([w for _, w in self._offsets]), inside.shape)[inside]
        del inside, cols, cells
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

    def _setup_stencil(self, da, reach, owned, ghosted):
        self._reach = reach
        self._shape = tuple(e - s for s, e in owned)
        self._ghost_shape = tuple(e - s for s, e in ghosted)
        # The ghosted box (cut to the reach) inside the padded one (zeros outside the grid), axis by axis.
        cut = [(max(g0, s - reach), min(g1, e + reach)) for (s, e), (g0, g1) in zip(owned, ghosted)]
        self._inner = tuple(slice(c0 - (s - reach), c1 - (s - reach)) for (c0, c1), (s, _) in zip(cut, owned))
        self._ghost_cut = tuple(slice(c0 - g0, c1 - g0) for (c0, c1), (g0, _) in zip(cut, ghosted))
        self._padded = np.zeros(tuple(n + 2 * reach for n in self._shape))
        # The compiled one-pass sum is 2D; another dimension takes the numpy passes (the same sums).
        self._kernel = _stencil_kernel() if self.dim == 2 else None
        self._terms = (np.array([o[0] for o, _ in self._offsets], dtype=np.int64),
                       np.array([o[1] for o, _ in self._offsets], dtype=np.int64),
                       np.array([w for _, w in self._offsets], dtype=float)) if self.dim == 2 else None
        self._x = da.createGlobalVec()
        self._local = da.createLocalVec()
        self._y = None
        self.Hs = self._stencil(np.ones(self._x.getLocalSize()))

    def _stencil(self, x):
        """H x for a slab x (stencil kind)."""
        self._x.array[:] = x
        self.system.da_elem.globalToLocal(self._x, self._local)
        self._padded[self._inner] = self._local.array_r.reshape(self._ghost_shape)[self._ghost_cut]
        r = self._reach
        if self._kernel is not None:  # the same sums in one pass
            ny, nx = self._shape
            out = np.empty(ny * nx)
            dr, dc, w = self._terms
            self._kernel(ny, nx, r, self._padded.ctypes.data, w.size, dr.ctypes.data, dc.ctypes.data, w.ctypes.data,
                         out.ctypes.data)
            return out
        out = np.zeros(self._shape)
        scaled = np.empty(self._shape)
        for offset, w in self._offsets:
            np.multiply(self._padded[tuple(slice(r + o, r + o + n) for o, n in zip(offset, self._shape))], w,
                        out=scaled)
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
