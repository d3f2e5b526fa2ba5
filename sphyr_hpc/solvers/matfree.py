"""The large-grid stiffness applied from the element moduli: a PETSc shell matrix, no stored K.

``y = K(E) x`` on a rank's owned nodes is a sum over the (up to 4) elements
around each node of ``E_e K0 x_e`` (``q4_apply.c``, built by the install:
:mod:`sphyr_hpc.runtime.native`).  One product reads x's owned values in place,
the element moduli around the owned nodes and writes y: about 40 bytes a node
against ~190 for K's upper 2x2 blocks in SBAIJ, and nothing is stored but the
moduli box and the diagonal.  The neighbours' values it needs (the ring of
nodes around the owned box) come by a PETSc scatter of those values alone into
a halo buffer, not by ``DMGlobalToLocal``'s copy of the whole ghosted vector.
Dirichlet DOFs are imposed as the assembled K imposes them (identity rows and
columns): x's fixed DOFs count as 0 in the sum and ``y = x`` there.

It serves geometric multigrid's finest level (CG's operator, Chebyshev's
products, PCMG's residual; Jacobi reads :meth:`FineOperator.getDiagonal`); the
coarse operators come from the moduli as before
(:mod:`sphyr_hpc.solvers.grid_galerkin`).
"""


import numpy as np
import scipy.sparse as sp

from ..runtime.native import native_function
from .assembly import _POS, ModuliBox
from .fused import (ChebyshevSmoother, FusedOperator, lanczos_extremes, operator_of, ring_plan,
                    ring_pointers)
from .stencil import STENCIL

def kernel():
    """The compiled ``q4_apply`` (raises :class:`~sphyr_hpc.runtime.native.NativeUnavailable`)."""
    return native_function("q4_apply")


def modal_constants(ke):
    """(c11, c12, c33, hu, hv): the unit element matrix ``ke`` (8x8, :data:`~.assembly._POS` node
    order) in the modes 1, x, y, xy of each displacement component (nodes at x, y = +-1/2), the
    numbers ``q4_apply.c`` applies it by.  Raises ValueError for a matrix of another structure."""
    V = np.array([[1.0, c - 0.5, r - 0.5, (c - 0.5) * (r - 0.5)] for r, c in _POS])
    modes = np.zeros((8, 8))  # DOF 2a + d from mode 4d + m
    for d in (0, 1):
        modes[d::2, 4 * d:4 * d + 4] = V
    scale = np.linalg.inv(modes.T @ modes)
    k = scale @ modes.T @ np.asarray(ke, dtype=float) @ modes @ scale
    c11, c12, c33, hu, hv = k[1, 1], k[1, 6], k[2, 2], k[3, 3], k[7, 7]
    structured = np.zeros((8, 8))
    structured[1, 1] = structured[6, 6] = c11
    structured[1, 6] = structured[6, 1] = c12
    structured[2:3, [2, 5]] = structured[5:6, [2, 5]] = c33
    structured[3, 3], structured[7, 7] = hu, hv
    if not np.allclose(modes @ structured @ modes.T, ke, rtol=0.0, atol=1e-12 * np.abs(ke).max()) \
            or not np.isclose(k[6, 6], c11, rtol=1e-12):
        raise ValueError("the element matrix is not a square plane-stress Q4 element's (q4_apply.c needs its modes)")
    return np.array([c11, c12, c33, hu, hv])


def kernels():
    """The compiled ``chebyshev_step``, ``q4_diagonal`` and ``q4_energies`` (raises
    :class:`~sphyr_hpc.runtime.native.NativeUnavailable`)."""
    return native_function("chebyshev_step"), native_function("q4_diagonal"), native_function("q4_energies")


def stencil_nonzeros(shape, storage="aij"):
    """Nonzeros K of a (nely, nelx) grid stores in ``storage``: 4 a pair of nodes in each other's
    3x3 (AIJ, BAIJ); SBAIJ keeps the upper pairs and the whole diagonal 2x2 blocks."""
    nely, nelx = shape
    pairs = (3 * (nelx + 1) - 2) * (3 * (nely + 1) - 2)
    if storage.endswith("sbaij") or storage == STENCIL:
        return 2 * (pairs + (nelx + 1) * (nely + 1))
    return 4 * pairs


def _halo_plan(PETSc, da, fixed_local):
    """The ring of nodes around the owned box (:func:`~.fused.ring_plan`, 2 DOFs a node): the
    buffer, its scatter and vector, the buffer's fixed DOFs and the grid (rows, columns) of its
    nodes."""
    halo, halo_vec, scatter, slots, (rows, cols) = ring_plan(PETSc, da, 2)
    (gxs, gxe), (gys, gye) = da.getGhostRanges()
    local = 2 * ((rows[slots] - gys) * (gxe - gxs) + (cols[slots] - gxs))
    local = np.stack([local, local + 1], axis=1).ravel()
    dofs = np.stack([2 * slots, 2 * slots + 1], axis=1).ravel()
    return halo, scatter, halo_vec, dofs[fixed_local[local]], (rows, cols)


class FineOperator(FusedOperator):
    """The shell matrix's context (petsc4py's ``Mat.createPython``) for a system's nodal DMDA.

    :meth:`assemble` takes the element moduli (the rank's slab), :meth:`mult` and
    :meth:`getDiagonal` are what PETSc calls; :attr:`mat` is the shell matrix.
    """

    values = None  # no stored K

    def __init__(self, PETSc, da, da_elem, shape, fixed_local, ke, comm, storage="aij"):
        """``storage``: the format :attr:`nnz` counts in (the coarser levels', for the operator
        complexity)."""
        self._apply = kernel()
        self._step, self._diagonal_of, self._energies = kernels()
        (oxs, oxe), (oys, oye) = da.getRanges()
        self._init_fused((oys, oye, oxs, oxe), da.getSizes()[0])
        (gxs, gxe), (gys, gye) = da.getGhostRanges()
        self._box = ny, nx = (oye - oys, oxe - oxs)
        self._halo, self._halo_scatter, self._halo_vec, fixed_halo, halo_nodes = _halo_plan(
            PETSc, da, fixed_local)
        self._fixed_halo = fixed_halo
        self._modes = (PETSc.InsertMode.INSERT_VALUES, PETSc.ScatterMode.FORWARD)
        owned = np.zeros((gye - gys, gxe - gxs, 2), dtype=bool)
        owned[oys - gys:oye - gys, oxs - gxs:oxe - gxs] = True
        self._fixed_owned = np.flatnonzero(fixed_local[owned.ravel()])
        self._ke = np.ascontiguousarray(ke, dtype=float)
        self._element_modes = modal_constants(self._ke)
        (exs, exe), (eys, eye) = da_elem.getRanges()
        if eys < gys or exs < gxs or eye >= gye or exe >= gxe:
            raise RuntimeError("an element of this rank's slab has a node outside its ghosted nodes")
        self._slab = (eye - eys, exe - exs, gxe - gxs, eys - gys, exs - gxs)
        self._fixed_columns = self._fixed_column_plan((oys, oye, oxs, oxe), halo_nodes, da.getSizes())
        self._fixed_values = None
        self._moduli = ModuliBox(da, da_elem, shape)
        self._E = None
        self._diagonal = np.zeros(2 * self._box[0] * self._box[1])
        self._inverse_diagonal = np.zeros_like(self._diagonal)
        self._work = np.zeros(native_function("q4_work_size")(nx))
        self.nnz = stencil_nonzeros(shape, storage)
        # What one product reads of the operator, all ranks: the moduli (sphyr_hpc.optimiser.measure).
        self.stored_bytes = 8.0 * comm.tompi4py().allreduce(self._moduli.box_array.size)
        n_owned = self._diagonal.size
        self.mat = PETSc.Mat().createPython([(n_owned, PETSc.DECIDE), (n_owned, PETSc.DECIDE)], context=self,
                                            comm=comm)
        self.mat.setUp()

    def _fixed_column_plan(self, owned, halo_nodes, nodes):
        """K's entries in the columns of the fixed DOFs, rows of this rank's owned DOFs: the rows (owned
        DOFs) they fall in, and per term (position in those rows, column, element in the moduli box,
        K0 entry), the columns indexing ``x[fixed owned]`` then ``halo[fixed halo]``.  A product from
        x as it is subtracts them (:meth:`mult`)."""
        oys, oye, oxs, oxe = owned
        n_x, n_y = nodes
        nx = oxe - oxs
        owned_rows, owned_cols = np.divmod(self._fixed_owned // 2, nx)
        halo_rows, halo_cols = halo_nodes
        fr = np.concatenate([owned_rows + oys, halo_rows[self._fixed_halo // 2]])
        fc = np.concatenate([owned_cols + oxs, halo_cols[self._fixed_halo // 2]])
        fd = np.concatenate([self._fixed_owned % 2, self._fixed_halo % 2])
        terms = []
        for b, (br, bc) in enumerate(_POS):  # the fixed node is local node b of an element
            er, ec = fr - br, fc - bc
            inside = (er >= 0) & (er < n_y - 1) & (ec >= 0) & (ec < n_x - 1)
            for a, (ar, ac) in enumerate(_POS):  # ... which adds to its local node a's rows
                nr, nc = er + ar, ec + ac
                column = np.flatnonzero(inside & (nr >= oys) & (nr < oye) & (nc >= oxs) & (nc < oxe))
                node = (nr[column] - oys) * nx + (nc[column] - oxs)
                element = (er[column] - oys + 1) * (nx + 1) + (ec[column] - oxs + 1)
                for d in (0, 1):
                    terms.append((2 * node + d, column, element, self._ke[2 * a + d, 2 * b + fd[column]]))
        row, column, element, entry = (np.concatenate(parts) for parts in zip(*terms))
        rows, position = np.unique(row, return_inverse=True)
        return rows, position, column, element, entry

    def assemble(self, moduli):
        """Take new element moduli (this rank's slab): :attr:`mat` is K of them from now on."""
        self._E = E = self._moduli.box(moduli)
        ny, nx = self._box
        self._diagonal_of(ny, nx, E.ctypes.data, E.shape[1], self._ke.ctypes.data, self._diagonal.ctypes.data,
                          self._inverse_diagonal.ctypes.data)
        self._diagonal[self._fixed_owned] = 1.0
        self._inverse_diagonal[self._fixed_owned] = 1.0
        rows, row, column, element, entry = self._fixed_columns
        self._fixed_values = sp.csr_matrix((E.ravel()[element] * entry, (row, column)),
                                           shape=(rows.size, self._fixed_owned.size + self._fixed_halo.size))
        self.version += 1
        self.mat.assemble()  # a new state: what PETSc caches of the operator is stale

    def _fetch_halo(self, x, zero_fixed):
        """x's ring of neighbours scattered into the halo buffer (its fixed DOFs zeroed if asked):
        the kernels' (top, bottom, left, right) arrays."""
        self._halo_scatter.scatter(x, self._halo_vec, *self._modes)
        if zero_fixed:
            self._halo[self._fixed_halo] = 0.0
        ny, nx = self._box
        return ring_pointers(self._halo, nx, ny, 2)

    def _chebyshev_step(self, x, xa, ba, d, c_d, c_r, d_is_x=False):
        """``d = c_d d + c_r D^-1 (b - K x)``, ``x += d`` in place (K's identity rows at the fixed DOFs);
        ``d_is_x``: d's values are x's (the first step's, which left d unwritten)."""
        halo = self._fetch_halo(x, zero_fixed=True)
        ny, nx = self._box
        E = self._E
        fixed = self._fixed_owned
        kept_x = xa[fixed]
        kept_d = kept_x if d_is_x else d[fixed]  # both copies (fancy indexing)
        xa[fixed] = 0.0  # fixed DOFs count as 0 in the sums; their own rows are K's identity rows
        self._step(ny, nx, xa.ctypes.data, *halo, E.ctypes.data, E.shape[1], self._element_modes.ctypes.data,
                   ba.ctypes.data, self._inverse_diagonal.ctypes.data, d.ctypes.data, c_d, c_r, int(d_is_x),
                   self._work.ctypes.data)
        d[fixed] = c_d * kept_d + c_r * (ba[fixed] - kept_x)
        xa[fixed] = kept_x + d[fixed]

    def mult(self, mat, x, y):
        """y = K x for PETSc, x only read (MatMult may hold it locked for reading): the product of
        x as it is, less K's entries in the fixed DOFs' columns times their values."""
        halo = self._fetch_halo(x, zero_fixed=False)
        ny, nx = self._box
        E = self._E
        xa = x.getArray(readonly=True)
        with y as ya:
            self._apply(ny, nx, xa.ctypes.data, *halo, E.ctypes.data, E.shape[1], self._element_modes.ctypes.data,
                        ya.ctypes.data, 0, self._work.ctypes.data)
            fixed_x = np.concatenate([xa[self._fixed_owned], self._halo[self._fixed_halo]])
            ya[self._fixed_columns[0]] -= self._fixed_values @ fixed_x
            ya[self._fixed_owned] = xa[self._fixed_owned]

    def _product_dot(self, x, y):
        """y = K x for vectors of this operator's own (x's fixed DOFs zeroed for the sum and put
        back); returns this rank's part of x . y."""
        halo = self._fetch_halo(x, zero_fixed=True)
        ny, nx = self._box
        E = self._E
        fixed = self._fixed_owned
        with x as xa, y as ya:
            kept = xa[fixed]
            xa[fixed] = 0.0
            try:
                dot = self._apply(ny, nx, xa.ctypes.data, *halo, E.ctypes.data, E.shape[1],
                                  self._element_modes.ctypes.data, ya.ctypes.data, 1, self._work.ctypes.data)
            finally:
                xa[fixed] = kept
            ya[fixed] = kept
        return dot + float(kept @ kept)  # y = x on the fixed DOFs

    @property
    def nbytes(self):
        """What this operator holds on this rank: the moduli box, the diagonal and its inverse."""
        return float(self._moduli.box_array.nbytes + self._diagonal.nbytes + self._inverse_diagonal.nbytes)

    def energies(self, u_local):
        """u_e^T K0 u_e of every element of this rank's slab (row-major), from the ghosted local
        displacements ``u_local`` (the system DMDA's local vector), in one C pass."""
        u = np.ascontiguousarray(u_local, dtype=float)
        ny, nx, gnx, r0, c0 = self._slab
        out = np.empty(ny * nx)
        self._energies(ny, nx, u.ctypes.data, gnx, r0, c0, self._element_modes.ctypes.data, out.ctypes.data)
        return out

    def close(self):
        self._destroy_cg_vectors()
        self._moduli.close()
        for name in ("_halo_scatter", "_halo_vec", "mat"):
            obj = getattr(self, name)
            if obj is not None:
                obj.destroy()
                setattr(self, name, None)


__all__ = ["ChebyshevSmoother", "FineOperator", "kernel", "lanczos_extremes", "operator_of", "stencil_nonzeros"]
