"""A coarse multigrid operator stored as symmetric node stencils and applied in C.

The coarse operators of the nested grids (:mod:`sphyr_hpc.solvers.grid_galerkin`)
couple each node with the 3x3 nodes around it.  Stored as SBAIJ they are the
upper 2x2 blocks plus one column index a block, and PETSc 3.18's SBAIJ product
(indirect addressing, the transposed half scattered) runs at about 1.4 GFlop/s
a core, well below what memory allows.  Here a node keeps its diagonal block
and its four upper neighbours' blocks as 19 numbers (no index: the grid is the
structure, ``stencil_apply.c``), and the product, a fused Chebyshev step and
the eigenvalue estimate's product run in C.  The products read the stencils
repacked once an assembly for vectors of 8 nodes (``stencil_pack``: a row of
blocks, each value of a block's nodes side by side, the ring's row above and
columns beside included), so that a row's products are vector operations
with no edge cases: 2048x1024 on 2 ranks, a Chebyshev step of the 1025x513
level took 3.9 ms a rank node by node and 2.8 ms so.

Values: the coarse element matrices are added into the stencils of the rank's
owned nodes and of the ring of nodes around them (:meth:`StencilOperator.add_elements`;
a coarse element astride two ranks is held by both, each with its own children's
part).  A PETSc scatter of the ring alone then adds the ring's parts into their
owners' stencils (reverse, ``ADD_VALUES``) and brings the ring's whole stencils
back (forward): the transposed terms of the owned nodes beside the ring need
them.  A product reads x where it lies and its ring by the same kind of scatter
(:func:`~sphyr_hpc.solvers.fused.ring_plan`), as the finest level does.
"""

import numpy as np

from ..runtime.native import NativeUnavailable, native_function
from .fused import FusedOperator, ring_plan

# Numbers a node's stencil holds (stencil_apply.c): D's 3, then E, NW, N, NE's 2x2 blocks.
NS = 19
# The word naming this storage for a multigrid level (the plan's, :data:`~.plan.STENCIL`).
STENCIL = "stencil"


def kernels():
    """The compiled ``stencil_apply``, ``stencil_chebyshev_step``, ``stencil_diagonal``,
    ``stencil_add_elements``, ``stencil_add_listed``, ``stencil_pack``, ``stencil_packed_size`` and
    ``stencil_work_size`` (raises :class:`~sphyr_hpc.runtime.native.NativeUnavailable`)."""
    return tuple(map(native_function, ("stencil_apply", "stencil_chebyshev_step", "stencil_diagonal",
                                       "stencil_add_elements", "stencil_add_listed", "stencil_pack",
                                       "stencil_packed_size", "stencil_work_size")))


def from_moduli_kernel():
    """The compiled ``stencil_from_moduli`` (:class:`ModuliSum`)."""
    return native_function("stencil_from_moduli")


# The element's node pairs (a, b) whose block G[a][b] a stencil keeps (stencil_apply.c's PAIR), in its order.
PAIRS = ((0, 1), (3, 2), (1, 3), (0, 3), (1, 2), (0, 2))


def upper_order():
    """The 36 indices into a row-major 8x8 element matrix of the upper-triangle values a stencil takes, in
    the order ``stencil_add_listed`` and :meth:`StencilOperator.add_moduli_sum` take them: each local
    node's diagonal block (3 values), then the blocks of :data:`PAIRS` (4 each, row-major)."""
    order = [i for a in range(4) for i in (18 * a, 18 * a + 1, 18 * a + 9)]
    order += [8 * (2 * a + d) + 2 * b + e for a, b in PAIRS for d in (0, 1) for e in (0, 1)]
    return np.asarray(order, dtype=np.int64)


class ModuliSum:
    """Coarse element matrices straight from the fine moduli of a rank's slab: coarse element (cy, cx)
    of a box is the sum over its fine elements (i, j) of ``moduli[i, j] * table[ytype[i], xtype[j]]``,
    its fine elements the rows ``ystart[cy] <= i < ystart[cy + 1]`` and the columns likewise (slab
    indices).  ``table``: (types along y, types along x, 36), the upper triangles of symmetric 8x8
    matrices in :func:`upper_order`: written out whole (:meth:`elements`) or added into a
    :class:`StencilOperator` (:meth:`StencilOperator.add_moduli_sum`).
    """

    def __init__(self, ystart, xstart, ytype, xtype, table):
        try:
            self._kernel = from_moduli_kernel()
        except NativeUnavailable:  # no kernels installed: the element matrices by numpy
            self._kernel = None
        self.ystart, self.xstart = (np.ascontiguousarray(a, dtype=np.int64) for a in (ystart, xstart))
        self.ytype, self.xtype = (np.ascontiguousarray(a, dtype=np.int64) for a in (ytype, xtype))
        self.table = np.ascontiguousarray(table, dtype=float)
        if self.table.ndim != 3 or self.table.shape[2] != 36:
            raise ValueError("a ModuliSum's table holds the 36 values of upper_order an element")
        self.shape = (self.ystart.size - 1, self.xstart.size - 1)

    def _run(self, moduli, target, first, out):
        moduli = np.ascontiguousarray(moduli, dtype=float)
        if moduli.ndim != 2 or moduli.shape[0] < self.ystart[-1] or moduli.shape[1] < self.xstart[-1]:
            raise ValueError(f"moduli of shape {moduli.shape} do not cover the fine elements summed")
        ny, nx, s, s_ring = target
        self._kernel(*self.shape, self.ystart.ctypes.data, self.xstart.ctypes.data, self.ytype.ctypes.data,
                     self.xtype.ctypes.data, self.table.shape[1], moduli.ctypes.data, moduli.shape[1],
                     self.table.ctypes.data, ny, nx, first[0], first[1], s, s_ring, out)

    def elements(self, moduli, out):
        """The coarse element matrices into ``out`` ((rows, columns, 64), contiguous)."""
        if out.shape != self.shape + (64,) or not out.flags.c_contiguous:
            raise ValueError("elements need a contiguous (rows, columns, 64) out")
        if self._kernel is not None:
            self._run(moduli, (0, 0, 0, 0), (0, 0), out.ctypes.data)
            return
        order = upper_order()
        x0, x1 = self.xstart[0], self.xstart[-1]
        columns = self.table[:, self.xtype[x0:x1]]  # (types along y, fine columns, 36)
        for cy in range(self.shape[0]):
            rows = slice(self.ystart[cy], self.ystart[cy + 1])
            terms = np.einsum("ij,ijk->jk", moduli[rows, x0:x1], columns[self.ytype[rows]])
            upper = np.add.reduceat(terms, self.xstart[:-1] - x0, axis=0)
            out[cy][:, order] = upper
            out[cy][:, (order % 8) * 8 + order // 8] = upper


class StencilOperator(FusedOperator):
    """A coarse level's operator on its DMDA ``dm`` (2 DOFs a node, box stencil of width 1):
    the shell matrix :attr:`mat` (``mult``, ``getDiagonal``) and the fused smoother's kernels.

    Its values: :meth:`begin`, :meth:`add_elements` for every block of the rank's coarse element
    matrices, :meth:`finish` (collective).
    """

    def __init__(self, PETSc, dm, nnz):
        """``nnz``: the nonzeros the level stands for (the operator complexity counts them)."""
        (self._apply, self._step, self._diagonal_of, self._add, self._add_listed, self._pack, packed_size,
         work_size) = kernels()
        (oxs, oxe), (oys, oye) = dm.getRanges()
        self._init_fused((oys, oye, oxs, oxe), dm.getSizes()[0])
        self._box = ny, nx = oye - oys, oxe - oxs
        comm = dm.getComm()
        # The owned nodes' stencils (a vector of NS values a node on the level's ownership) and the ring's.
        self._stencils = np.zeros(NS * ny * nx)
        self._stencil_vec = PETSc.Vec().createWithArray(self._stencils, size=(self._stencils.size, PETSc.DECIDE),
                                                        comm=comm)
        self._s_ring, self._s_ring_vec, self._s_scatter, _, _ = ring_plan(PETSc, dm, NS)
        self._x_ring, self._x_ring_vec, self._x_scatter, _, _ = ring_plan(PETSc, dm, 2)
        self._forward = (PETSc.InsertMode.INSERT_VALUES, PETSc.ScatterMode.FORWARD)
        self._reverse = (PETSc.InsertMode.ADD_VALUES, PETSc.ScatterMode.REVERSE)
        self._diagonal = np.zeros(2 * ny * nx)
        self._inverse_diagonal = np.zeros_like(self._diagonal)
        # The stencils as the products read them (stencil_pack, once an assembly) and their row buffers.
        self._packed = np.zeros(packed_size(ny, nx))
        self._work = np.zeros(work_size(nx))
        self.nnz = nnz
        n_x, n_y = dm.getSizes()[:2]
        self.stored_bytes = 8.0 * NS * n_x * n_y
        n_owned = self._diagonal.size
        self.mat = PETSc.Mat().createPython([(n_owned, PETSc.DECIDE), (n_owned, PETSc.DECIDE)], context=self,
                                            comm=comm)
        self.mat.setUp()

    @property
    def nbytes(self):
        """What this operator holds on this rank: its stencils (as assembled and packed), the ring's and
        the diagonal and its inverse."""
        return float(sum(a.nbytes for a in (self._stencils, self._s_ring, self._packed, self._diagonal,
                                             self._inverse_diagonal)))

    def begin(self):
        """Start new values: every stencil zero."""
        self._stencils.fill(0.0)
        self._s_ring.fill(0.0)

    def add_elements(self, G, first_row, first_col):
        """Add the coarse element matrices ``G`` ((rows, columns, 64), 8x8 each in
        :data:`~.assembly._POS` node order) of the elements from (first_row, first_col) of the
        level's grid on: the owned nodes' stencils and the ring's (parts of the neighbours')."""
        G = np.ascontiguousarray(G, dtype=float)
        rows, cols = G.shape[:2]
        if rows == 0 or cols == 0:
            return
        r0, c0 = self._element_origin((rows, cols), first_row, first_col)
        self._add(rows, cols, G.ctypes.data, *self._box, r0, c0, self._stencils.ctypes.data, self._s_ring.ctypes.data)

    def add_moduli_sum(self, moduli_sum, moduli, first_row, first_col):
        """Add the coarse elements of a :class:`ModuliSum` (upper triangles) of ``moduli``, its box's first
        element (first_row, first_col) of the level's grid (as :meth:`add_elements`)."""
        r0, c0 = self._element_origin(moduli_sum.shape, first_row, first_col)
        if moduli_sum.shape[0] and moduli_sum.shape[1]:
            moduli_sum._run(moduli, (*self._box, self._stencils.ctypes.data, self._s_ring.ctypes.data), (r0, c0),
                            0)

    def add_listed(self, rows, cols, upper):
        """Add elements one by one: element k's first node (rows[k], cols[k]) of the level's grid, its
        upper triangle ``upper[k]`` (36 values of :func:`upper_order`)."""
        rc = np.ascontiguousarray(np.stack(self._element_origin((1, 1), np.asarray(rows), np.asarray(cols)), axis=1),
                                  dtype=np.int64)
        upper = np.ascontiguousarray(upper, dtype=float)
        self._add_listed(rc.shape[0], rc.ctypes.data, upper.ctypes.data, *self._box, self._stencils.ctypes.data,
                         self._s_ring.ctypes.data)

    def _element_origin(self, shape, first_row, first_col):
        """A block of ``shape`` coarse elements from (first_row, first_col) (numbers, or arrays of blocks):
        its first node in the owned box, checked to lie within the owned nodes and the ring."""
        oys, _, oxs, _ = self._owned_box
        ny, nx = self._box
        r0, c0 = first_row - oys, first_col - oxs
        if np.any(r0 < -1) or np.any(c0 < -1) or np.any(r0 + shape[0] > ny) or np.any(c0 + shape[1] > nx):
            raise RuntimeError("coarse elements outside this rank's nodes and the ring around them")
        return r0, c0

    def finish(self):
        """The ring's parts added into their owners' stencils and the ring's whole stencils
        fetched back (collective); the diagonal for Jacobi; a new state for PETSc."""
        self._s_scatter.scatter(self._s_ring_vec, self._stencil_vec, *self._reverse)
        self._s_scatter.scatter(self._stencil_vec, self._s_ring_vec, *self._forward)
        ny, nx = self._box
        self._diagonal_of(ny, nx, self._stencils.ctypes.data, self._diagonal.ctypes.data,
                          self._inverse_diagonal.ctypes.data)
        self._pack(ny, nx, self._stencils.ctypes.data, self._s_ring.ctypes.data, self._packed.ctypes.data)
        self.version += 1
        self.mat.assemble()  # a new state: what PETSc caches of the operator is stale

    def _fetch_ring(self, x):
        self._x_scatter.scatter(x, self._x_ring_vec, *self._forward)

    def _product(self, x, y, want_dot):
        """y = A x, x only read; with ``want_dot`` returns this rank's part of x . y."""
        self._fetch_ring(x)
        xa = x.getArray(readonly=True)
        with y as ya:
            return self._apply(*self._box, xa.ctypes.data, self._x_ring.ctypes.data, self._packed.ctypes.data,
                               ya.ctypes.data, want_dot, self._work.ctypes.data)

    def mult(self, mat, x, y):
        self._product(x, y, 0)

    def _product_dot(self, x, y):
        return self._product(x, y, 1)

    def _chebyshev_step(self, x, xa, ba, d, c_d, c_r, d_is_x=False):
        """``d = c_d d + c_r D^-1 (b - A x)``, ``x += d`` in place (the ring from before the step);
        ``d_is_x``: d's values are x's (the first step's, which left d unwritten)."""
        self._fetch_ring(x)
        self._step(*self._box, xa.ctypes.data, self._x_ring.ctypes.data, self._packed.ctypes.data, ba.ctypes.data,
                   self._inverse_diagonal.ctypes.data, d.ctypes.data, c_d, c_r, int(d_is_x), self._work.ctypes.data)

    def close(self):
        self._destroy_cg_vectors()
        for name in ("_stencil_vec", "_s_ring_vec", "_s_scatter", "_x_ring_vec", "_x_scatter", "mat"):
            obj = getattr(self, name)
            if obj is not None:
                obj.destroy()
                setattr(self, name, None)


__all__ = ["NS", "PAIRS", "STENCIL", "ModuliSum", "StencilOperator", "from_moduli_kernel", "kernels", "upper_order"]
