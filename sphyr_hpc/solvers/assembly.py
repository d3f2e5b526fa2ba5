"""Assembling K(E) from element moduli: one module for every system.

K is linear in the element moduli: every entry is a sum of ``E_e K0[a, b]``
over the elements that couple its two DOFs.  Two layouts of that sum:

* :class:`ElementAssembly` (the direct solver; the scorer's small grids):
  the CSR structure of a rank's element contributions in its *local*
  (ghosted) DOF numbering, computed once, and the sparse map A from element
  moduli to CSR values, so assembling a new modulus field is one product
  ``A @ moduli`` with every entry summed in element order, as the published
  scorer sums it.  A holds 64 (value, index) pairs per element (200 MB at 1M
  DOFs).  :func:`element_map` builds that map for any layout of the entries
  (also the dense condensed block of :mod:`sphyr_hpc.solvers.condensed`).
* :class:`StencilAssembly` (CG + multigrid/GAMG; large grids): every owned
  node's row is its 3x3-node stencil, 2 x 18 entries, and the entry coupling
  node n with neighbour n + o is ``sum_a E(element at n - pos(a)) * K0[a, a + o]``
  over the (up to 4) elements around n.  The values of a block of node rows
  are one (nodes x 4) @ (4 x 36) product of the 4 shifted element-moduli
  arrays with a constant table (:func:`stencil_table`), in the CSR order of
  the DMDA matrix, set with one ``MatSetValuesLocal`` call per block of
  ``ASSEMBLY_BLOCK_NODES`` nodes.  Only owned rows are computed (the element
  halo comes from the element DMDA), so nothing is sent between ranks.
  Column indices are a constant offset pattern; only the nodes on the grid's
  edge store theirs (neighbours outside the grid point at the row's own
  diagonal with a zero value, ``ADD_VALUES``).  At 1M DOFs this needs no index
  map of its own and 2.4 MB of values at a time.

* :class:`StorageAssembly` (geometric multigrid, SBAIJ K: the default there):
  the same stencils, only their upper 2x2 blocks, written into the storage of
  K's local diagonal block in its own order (numpy only; no insertion, no
  search, nothing summed by PETSc); :class:`ElementBlockAssembly` adds element
  matrices in 2x2 blocks instead (``-<prefix>mat_assembly blocks``).

Dirichlet conditions are imposed symmetrically either way: every
contribution in a fixed row or column is dropped and the fixed diagonal is 1,
so the operator stays SPD and CG/multigrid apply.
"""

import numpy as np
import scipy.sparse as sp

from . import csr

# Stencil assembly computes the values of about this many nodes at a time (2.4 MB a block).
ASSEMBLY_BLOCK_NODES = 8192

# Local node a of an element sits at (row, column) offset _POS[a] from its top-left node.
_POS = ((0, 0), (0, 1), (1, 1), (1, 0))
# Neighbour offsets (drow, dcol) of a node's stencil, in increasing local DOF order.
_OFFSETS = tuple((dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1))


def csr_plan(rows, cols, n_rows):
    """CSR pattern of summed (row, col) pairs and the map from pairs to entries.

    Returns ``(indptr, indices, inverse, nnz)``: ``inverse[k]`` is the entry
    pair k is summed into.
    """
    keys = rows.astype(np.int64) * n_rows + cols.astype(np.int64)
    unique, inverse = np.unique(keys, return_inverse=True)
    u_rows, u_cols = np.divmod(unique, n_rows)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(u_rows, minlength=n_rows), out=indptr[1:])
    return indptr, u_cols, inverse, unique.size


def upper_block_plan(indptr, indices, bs=2):
    """The upper block triangle of a CSR pattern cut into ``bs x bs`` blocks (PETSc's SBAIJ layout).

    Returns ``(block_indptr, block_indices, gather)``: the block CSR structure
    (block rows, the columns of their blocks on or above the diagonal, in
    increasing order) and, for every value of those blocks (each block
    row-major), the CSR entry it is: ``gather[k] = len(indices)`` (one past the
    last entry) where the pattern has no such entry, so
    ``np.append(values, 0.0)[gather]`` are the block values.  Diagonal blocks
    are whole, as SBAIJ stores them.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    n = indptr.size - 1
    if n % bs:
        raise ValueError(f"{n} rows do not split into blocks of {bs}")
    rows = np.repeat(np.arange(n), np.diff(indptr))
    block_rows, block_cols = rows // bs, indices // bs
    upper = np.flatnonzero(block_rows <= block_cols)
    # The blocks are the summed (block row, block column) pairs of the entries above the diagonal.
    block_indptr, block_indices, block_of, n_blocks = csr_plan(block_rows[upper], block_cols[upper], n // bs)
    slot = block_of * bs * bs + (rows[upper] % bs) * bs + indices[upper] % bs
    gather = np.full(n_blocks * bs * bs, indices.size, dtype=np.int64)
    gather[slot] = upper
    return block_indptr, block_indices, gather


def element_map(entries, ke, n_entries):
    """Sparse (n_entries x n_elements) map from element moduli to summed matrix entries.

    ``entries`` is (n_elements, 8, 8) or (n_elements, 64): the entry that
    ``E_e ke[a, b]`` is summed into, -1 where it is dropped (a Dirichlet row or
    column, or a DOF outside the block).  CSR rows of the map list their
    elements in increasing order, so ``map @ moduli`` sums every entry in
    element order.
    """
    entries = np.asarray(entries).reshape(-1, 64)
    n_elem = entries.shape[0]
    keep = (entries >= 0).ravel()
    return sp.csr_matrix((np.tile(ke.ravel(), n_elem)[keep],
                          (entries.ravel()[keep], np.repeat(np.arange(n_elem), 64)[keep])),
                         shape=(n_entries, n_elem))


class ElementAssembly:
    """K's CSR structure in local DOF numbering and the map from element moduli to its values.

    ``local_edofs`` (n_elements, 8) are the elements' local DOFs, ``fixed``
    marks fixed local DOFs, ``fixed_diagonal`` lists the fixed DOFs whose
    diagonal this rank sets to 1 (the owned ones).
    """

    def __init__(self, local_edofs, fixed, fixed_diagonal, ke, n_dofs, index_type=np.int32):
        rows = np.repeat(local_edofs, 8, axis=1).ravel()
        cols = np.tile(local_edofs, (1, 8)).ravel()
        all_rows = np.concatenate([rows, fixed_diagonal])
        all_cols = np.concatenate([cols, fixed_diagonal])
        indptr, indices, inverse, nnz = csr_plan(all_rows, all_cols, n_dofs)
        self.n_dofs = n_dofs
        self.nnz = nnz
        self.indptr = indptr.astype(index_type)
        self.indices = indices.astype(index_type)
        n_elem_entries = rows.size
        # Fixed rows and columns keep no element contribution (entry -1 is dropped).
        self.map = element_map(np.where(fixed[rows] | fixed[cols], -1, inverse[:n_elem_entries]), ke, nnz)
        self.diagonal = np.bincount(inverse[n_elem_entries:], minlength=nnz).astype(float)

    def values(self, moduli, out=None):
        """K's CSR values for element moduli (into ``out`` if given)."""
        if type(moduli) is not np.ndarray or moduli.dtype != np.float64 or not moduli.flags.c_contiguous:
            moduli = np.ascontiguousarray(moduli, dtype=float)
        if out is None:
            out = self.diagonal.copy()
        else:
            # The Dirichlet diagonal and the element sums never share an entry, so starting
            # from it and adding the product is the product plus it, to the bit.
            out[...] = self.diagonal
        return csr.matvec(self.map, moduli, out=out)


def stencil_table(ke):
    """(4, 36) table: column (d, o, d2) of row a is K0[2a+d, 2b+d2], b the node at offset o of a.

    The value of row (node n, DOF d), neighbour o, DOF d2 is the sum over a of
    E(element having n as its local node a) * table[a, (d, o, d2)].
    """
    table = np.zeros((4, 2, len(_OFFSETS), 2))
    for a, (ar, ac) in enumerate(_POS):
        for o, (dr, dc) in enumerate(_OFFSETS):
            target = (ar + dr, ac + dc)
            if target in _POS:
                b = _POS.index(target)
                table[a, :, o, :] = ke[2 * a:2 * a + 2, 2 * b:2 * b + 2]
    return table.reshape(4, -1)


class StencilAssembly:
    """Owned node rows of K as 3x3-node stencils, assembled block by block (see the module docstring).

    ``da`` is the nodal DMDA, ``da_elem`` the element DMDA whose halo covers
    the elements around the owned nodes, ``fixed`` marks fixed local DOFs.
    Owns two element vectors (its :class:`ModuliBox`), destroyed in :meth:`close`.
    """

    def __init__(self, PETSc, da, da_elem, shape, fixed, ke):
        self.PETSc = PETSc
        nely, nelx = shape
        (oxs, oxe), (oys, oye) = da.getRanges()
        (gxs, gxe), (gys, gye) = da.getGhostRanges()
        gxm = gxe - gxs
        ny, nx = oye - oys, oxe - oxs
        n_nodes = ny * nx
        n_cols = 2 * len(_OFFSETS)
        jj, ii = np.meshgrid(np.arange(oys, oye, dtype=np.int32), np.arange(oxs, oxe, dtype=np.int32),
                             indexing="ij")
        jj, ii = jj.ravel(), ii.ravel()
        own = 2 * ((jj - gys) * gxm + (ii - gxs))  # local x DOF of every owned node, row-major
        # Columns of row (node, d): neighbour o's DOF d2, i.e. own + 2 * (dr * gxm + dc) + d2,
        # or the row itself where the neighbour is outside the grid (its value is 0 there).
        # Only the exceptions (nodes on the grid's edge) are stored; see _columns.
        pattern = np.array([[2 * (dr * gxm + dc) + d2 for (dr, dc) in _OFFSETS for d2 in (0, 1)]] * 2,
                           dtype=PETSc.IntType).reshape(-1)
        edge = np.flatnonzero((jj == 0) | (jj == nely) | (ii == 0) | (ii == nelx))
        edge_cols = np.empty((edge.size, 2, len(_OFFSETS), 2), dtype=PETSc.IntType)
        zero = np.zeros((n_nodes, 2, len(_OFFSETS), 2), dtype=bool)
        for o, (dr, dc) in enumerate(_OFFSETS):
            nj, ni = jj + dr, ii + dc
            inside = (nj >= 0) & (nj <= nely) & (ni >= 0) & (ni <= nelx)
            neighbour = np.where(inside, 2 * ((nj - gys) * gxm + (ni - gxs)), own)
            for d2 in (0, 1):
                zero[:, :, o, d2] = (inside & fixed[neighbour + d2])[:, None]
                edge_cols[:, 0, o, d2] = np.where(inside, neighbour + d2, own)[edge]
                edge_cols[:, 1, o, d2] = np.where(inside, neighbour + d2, own + 1)[edge]
            del nj, ni, inside, neighbour
        # Dirichlet: zero fixed rows and fixed (in-grid) columns, 1 on the fixed diagonals.
        row_fixed = np.stack([fixed[own], fixed[own + 1]], axis=1)  # (nodes, d)
        zero |= row_fixed[:, :, None, None]
        centre = _OFFSETS.index((0, 0))
        self._zero_entries = np.flatnonzero(zero.ravel())
        del zero
        unit = np.flatnonzero(row_fixed.ravel())  # fixed rows, numbered node * 2 + d
        self._unit_entries = unit * (len(_OFFSETS) * 2) + centre * 2 + unit % 2
        self._own = own.astype(PETSc.IntType)
        self._pattern = pattern
        self._edge = edge
        self._edge_cols = edge_cols.reshape(edge.size, -1)
        self._rows = np.stack([own, own + 1], axis=1).reshape(-1).astype(PETSc.IntType)  # local row of each row
        self._stencil = stencil_table(ke)
        self._n_cols = n_cols
        self._node_box = (ny, nx)
        # Assembly runs over blocks of node rows, so only a block of values is ever held.
        self._block_rows = max(1, ASSEMBLY_BLOCK_NODES // max(nx, 1))
        self._moduli = ModuliBox(da, da_elem, shape)
        self.nnz = n_nodes * 2 * n_cols

    def assemble(self, K, moduli):
        """Set K (a DMDA matrix) to the stiffness of the element moduli (this rank's slab)."""
        box = self._moduli.box(moduli)
        ny, nx = self._node_box
        n_cols = self._n_cols
        per_row = 2 * n_cols  # values of one node: 2 rows of 18
        insert = self.PETSc.InsertMode.ADD_VALUES
        K.zeroEntries()
        shifted = np.empty((min(self._block_rows, ny), nx, 4))
        for j0 in range(0, ny, self._block_rows):
            j1 = min(j0 + self._block_rows, ny)
            block = shifted[:j1 - j0]
            # Node (j, i) is local node a of the element at (j, i) - _POS[a]; box row = element row + 1.
            for a, (ar, ac) in enumerate(_POS):
                block[:, :, a] = box[j0 + 1 - ar:j1 + 1 - ar, 1 - ac:nx + 1 - ac]
            values = (block.reshape(-1, 4) @ self._stencil).reshape(-1)
            first, last = j0 * nx * per_row, j1 * nx * per_row
            lo = np.searchsorted(self._zero_entries, first)
            hi = np.searchsorted(self._zero_entries, last)
            values[self._zero_entries[lo:hi] - first] = 0.0
            lo = np.searchsorted(self._unit_entries, first)
            hi = np.searchsorted(self._unit_entries, last)
            values[self._unit_entries[lo:hi] - first] = 1.0
            rows = self._rows[2 * j0 * nx:2 * j1 * nx]
            indptr = np.arange(0, rows.size * n_cols + 1, n_cols, dtype=self.PETSc.IntType)
            cols = self._columns(j0 * nx, j1 * nx)
            K.setValuesLocalIJV(indptr, cols, values, addv=insert, rowmap=rows)
        K.assemble()

    def _columns(self, n0, n1):
        """Local column indices of the rows of owned nodes n0..n1-1 (row-major, 36 a node)."""
        cols = self._own[n0:n1, None] + self._pattern[None, :]
        lo, hi = np.searchsorted(self._edge, (n0, n1))
        cols[self._edge[lo:hi] - n0] = self._edge_cols[lo:hi]
        return cols.reshape(-1)

    def close(self):
        self._moduli.close()


# Element-block assembly sets this many elements' 8x8 matrices at a time (4 MB of values).
BLOCK_ELEMENTS = 8192


class ElementBlockAssembly:
    """K as the sum of its elements' 8x8 matrices, added in 2x2 node blocks (``MatSetValuesBlockedLocal``).

    Every element of this rank's slab adds ``E_e K0`` at its 4 nodes (ghosted
    local node numbers of the nodal DMDA), :data:`BLOCK_ELEMENTS` at a time;
    rows owned by a neighbour go through PETSc's stash.  Elements touching a
    fixed DOF add ``E_e K_e`` (fixed rows and columns dropped) instead, and
    each fixed DOF's diagonal 1 is added by one element (the one below and
    right of its node, moved inside the grid): the symmetric Dirichlet
    conditions of :class:`StencilAssembly`, the same matrix up to rounding
    (sums in another order).  One search a 2x2 block instead of one an entry:
    ~1.5x faster than the stencil rows into SBAIJ (1024x512 elements, one rank).
    """

    def __init__(self, PETSc, loadcase, element_nodes, slab, fixed_dofs, ke):
        self.PETSc = PETSc
        nely, nelx = loadcase.shape
        self._nodes = np.ascontiguousarray(element_nodes, dtype=PETSc.IntType)
        (ey0, ey1), (ex0, ex1) = slab
        self._ke = ke.ravel().copy()
        fixed = np.zeros(2 * (nely + 1) * (nelx + 1), dtype=bool)
        fixed[fixed_dofs] = True
        fixed = fixed.reshape(nely + 1, nelx + 1, 2)
        special = {}
        for r, c, d in zip(*np.nonzero(fixed)):
            for ar, ac in _POS:  # every slab element touching the fixed DOF
                er, ec = r - ar, c - ac
                if ey0 <= er < ey1 and ex0 <= ec < ex1:
                    special.setdefault((er, ec), [])
            er, ec = min(r, nely - 1), min(c, nelx - 1)  # the element that adds its diagonal 1
            if ey0 <= er < ey1 and ex0 <= ec < ex1:
                special.setdefault((er, ec), []).append(2 * _POS.index((r - er, c - ec)) + d)
        index, scale, constant = [], [], []
        for (er, ec), diagonal in sorted(special.items()):
            dofs = [((er + ar) * (nelx + 1) + ec + ac) * 2 + d for ar, ac in _POS for d in (0, 1)]
            free = ~fixed.reshape(-1)[dofs]
            index.append((er - ey0) * (ex1 - ex0) + (ec - ex0))
            scale.append((ke * (free[:, None] & free[None, :])).ravel())
            unit = np.zeros((8, 8))
            unit[diagonal, diagonal] = 1.0
            constant.append(unit.ravel())
        self._special = np.asarray(index, dtype=np.int64)
        self._scale = np.asarray(scale).reshape(-1, 64)
        self._constant = np.asarray(constant).reshape(-1, 64)
        self.nnz = None

    def assemble(self, K, moduli):
        """Set K (a DMDA matrix, block size 2) to the stiffness of the element moduli (this rank's slab)."""
        moduli = np.asarray(moduli, dtype=float).reshape(-1)
        add = self.PETSc.InsertMode.ADD_VALUES
        K.zeroEntries()
        n = moduli.size
        for a in range(0, n, BLOCK_ELEMENTS):
            b = min(a + BLOCK_ELEMENTS, n)
            values = np.multiply.outer(moduli[a:b], self._ke)
            lo, hi = np.searchsorted(self._special, (a, b))
            if hi > lo:
                rows = self._special[lo:hi]
                values[rows - a] = moduli[rows][:, None] * self._scale[lo:hi] + self._constant[lo:hi]
            K.setValuesBlockedLocalRCV(self._nodes[a:b], self._nodes[a:b], values, addv=add)
        K.assemble()

    def close(self):
        pass


# The upper block triangle of a node's 3x3 stencil inside a rank's box, in increasing column order.
_UPPER = ((0, 0), (0, 1), (1, -1), (1, 0), (1, 1))


class StorageAssembly:
    """K's values written straight into PETSc's SBAIJ storage, node row by node row (no insertions).

    The rows of a block of owned nodes are the upper 2x2 blocks of their
    3x3-node stencils (``(nodes x 4) @ (4 x 20)`` of the shifted element
    moduli, as :class:`StencilAssembly`), computed in the order the local
    diagonal block of K (``MatGetDiagonalBlock``, SeqSBAIJ) stores them: block
    rows of the owned nodes, their blocks in increasing column order, each
    block column by column.  ``values_of(A, size)`` is that storage as a NumPy
    view (:func:`sphyr_hpc.runtime.petsc.seqsbaij_values`); the structure is
    checked against the stencil's once.  Blocks coupling an owned node with a
    higher-numbered node of another rank (a column of nodes or rows on a box
    edge) are set with ``MatSetValuesBlockedLocal`` (``INSERT_VALUES``: every
    value is whole, the element halo covers them).  Nothing is zeroed or
    summed by PETSc.  Dirichlet rows and columns as in :class:`StencilAssembly`.
    """

    def __init__(self, PETSc, K, da, da_elem, shape, fixed, ke, values_of):
        self.PETSc = PETSc
        nely, nelx = shape
        (oxs, oxe), (oys, oye) = da.getRanges()
        (gxs, gxe), (gys, gye) = da.getGhostRanges()
        gxm = gxe - gxs
        ny, nx = oye - oys, oxe - oxs
        self._diag = K.getDiagonalBlock()
        indptr, indices = self._diag.getRowIJ(symmetric=False, compressed=True)
        jj, ii = (a.ravel() for a in np.meshgrid(np.arange(oys, oye), np.arange(oxs, oxe), indexing="ij"))
        local = (jj - oys) * nx + (ii - oxs)
        present = np.stack([(jj + dr < oye) & (ii + dc >= oxs) & (ii + dc < oxe) for dr, dc in _UPPER], axis=1)
        expected = np.stack([local + dr * nx + dc for dr, dc in _UPPER], axis=1)[present]
        counts = present.sum(axis=1)
        if (indptr.size != local.size + 1 or not np.array_equal(np.diff(indptr), counts)
                or not np.array_equal(indices, expected)):
            raise RuntimeError("K's local SBAIJ structure is not the 3x3-node stencil's")
        self._values = values_of(self._diag, 4 * int(indices.size))
        if self._values is None:
            raise RuntimeError("K's SBAIJ values cannot be reached")
        self._indptr = np.asarray(indptr, dtype=np.int64)
        self._present = present
        full = stencil_table(ke).reshape(4, 2, len(_OFFSETS), 2)  # (a, d, o, d2)
        upper = [_OFFSETS.index(o) for o in _UPPER]
        self._table = np.ascontiguousarray(full[:, :, upper, :].transpose(0, 2, 3, 1)).reshape(4, -1)  # (a, o, d2, d)
        self._stencil_blocks = full.transpose(0, 2, 1, 3)  # (a, o, d, d2)
        own = 2 * ((jj - gys) * gxm + (ii - gxs))
        row_fixed = np.stack([fixed[own], fixed[own + 1]], axis=1)
        zero = np.zeros((local.size, len(_UPPER), 2, 2), dtype=bool)  # (node, o, d2, d)
        for o, (dr, dc) in enumerate(_UPPER):
            inside = (jj + dr <= nely) & (ii + dc >= 0) & (ii + dc <= nelx)
            neighbour = np.where(inside, own + 2 * (dr * gxm + dc), own)
            zero[:, o] = row_fixed[:, None, :] | (inside[:, None] & np.stack([fixed[neighbour], fixed[neighbour + 1]],
                                                                             axis=1))[:, :, None]
        self._zero = np.flatnonzero(zero.ravel())
        del zero
        unit = np.flatnonzero(row_fixed.ravel())  # node * 2 + d
        self._unit = (unit // 2) * 4 * len(_UPPER) + (unit % 2) * 3  # block o=0, entry (d, d)
        self._edge = self._edge_blocks(da, nely, nelx, jj, ii, own, fixed, gxm, gxs, gys)
        self._block_rows = max(1, ASSEMBLY_BLOCK_NODES // max(nx, 1))
        self._node_box = (ny, nx)
        self._moduli = ModuliBox(da, da_elem, shape)
        self.nnz = int(indices.size) * 4

    def _edge_blocks(self, da, nely, nelx, jj, ii, own, fixed, gxm, gxs, gys):
        """Owned node, neighbour offset, local rows, columns and Dirichlet masks of the blocks K stores
        outside the local diagonal block (higher-numbered nodes of other ranks)."""
        (oxs, oxe), (oys, oye) = da.getRanges()
        g = np.asarray(da.getLGMap().getBlockIndices())
        nodes, offsets = [], []
        for o, (dr, dc) in enumerate(_OFFSETS):
            nj, ni = jj + dr, ii + dc
            outside = (nj >= 0) & (nj <= nely) & (ni >= 0) & (ni <= nelx) & ~(
                (nj >= oys) & (nj < oye) & (ni >= oxs) & (ni < oxe))
            k = np.flatnonzero(outside)
            higher = g[(nj[k] - gys) * gxm + (ni[k] - gxs)] > g[own[k] // 2]
            nodes.append(k[higher])
            offsets.append(np.full(int(higher.sum()), o))
        nodes, offsets = np.concatenate(nodes), np.concatenate(offsets)
        dr = np.array([_OFFSETS[o][0] for o in offsets], dtype=np.int64).reshape(-1)
        dc = np.array([_OFFSETS[o][1] for o in offsets], dtype=np.int64).reshape(-1)
        rows = own[nodes] // 2
        cols = rows + dr * gxm + dc
        # Dirichlet: (d, d2) kept unless row DOF d or column DOF d2 is fixed (row-major, as
        # MatSetValuesBlocked takes a block).
        mask = np.stack([fixed[2 * rows], fixed[2 * rows + 1]], axis=1)[:, :, None] | \
            np.stack([fixed[2 * cols], fixed[2 * cols + 1]], axis=1)[:, None, :]
        return (nodes, offsets, rows.astype(self.PETSc.IntType).reshape(-1, 1),
                cols.astype(self.PETSc.IntType).reshape(-1, 1), ~mask)

    def assemble(self, K, moduli):
        """Set K (the DMDA's SBAIJ matrix) to the stiffness of the element moduli (this rank's slab)."""
        box = self._moduli.box(moduli)
        ny, nx = self._node_box
        per_node = 4 * len(_UPPER)
        # Buffers for a block of rows, reused: a new temporary of a MB or more is new pages every time.
        rows = min(self._block_rows, ny)
        shifted = np.empty((rows * nx, 4))
        computed = np.empty((rows * nx, per_node))
        for j0 in range(0, ny, self._block_rows):
            j1 = min(j0 + self._block_rows, ny)
            n0, n1 = j0 * nx, j1 * nx
            block = shifted[:n1 - n0].reshape(j1 - j0, nx, 4)
            for a, (ar, ac) in enumerate(_POS):
                block[:, :, a] = box[j0 + 1 - ar:j1 + 1 - ar, 1 - ac:nx + 1 - ac]
            values = np.matmul(shifted[:n1 - n0], self._table, out=computed[:n1 - n0]).reshape(-1)
            first, last = n0 * per_node, n1 * per_node
            for entries, value in ((self._zero, 0.0), (self._unit, 1.0)):
                lo, hi = np.searchsorted(entries, (first, last))
                values[entries[lo:hi] - first] = value
            # The blocks K stores, in its order, straight into its storage.
            np.compress(self._present[n0:n1].reshape(-1), values.reshape(-1, 4), axis=0,
                        out=self._values[4 * self._indptr[n0]:4 * self._indptr[n1]].reshape(-1, 4))
        nodes, offsets, rows, cols, keep = self._edge
        if nodes.size:
            j, i = np.divmod(nodes, nx)
            shifted = np.stack([box[j + 1 - ar, i + 1 - ac] for ar, ac in _POS], axis=1)
            table = self._stencil_blocks[:, offsets].transpose(1, 0, 2, 3)  # (block, a, d, d2)
            values = np.einsum("na,naij->nij", shifted, table) * keep
            K.setValuesBlockedLocalRCV(rows, cols, values.reshape(-1, 4), addv=self.PETSc.InsertMode.INSERT_VALUES)
        K.assemble()

    def close(self):
        self._moduli.close()
        if self._diag is not None:
            self._diag.destroy()
            self._diag = None


class ModuliBox:
    """The element moduli around a rank's owned nodes: its slab and the element DMDA's halo, in a
    (nodes y + 1, nodes x + 1) box (elements oys-1 .. oye-1 x oxs-1 .. oxe-1; outside the grid 0)."""

    def __init__(self, da, da_elem, shape):
        nely, nelx = shape
        (oxs, oxe), (oys, oye) = da.getRanges()
        self.box_array = np.zeros((oye - oys + 1, oxe - oxs + 1))
        (exs, exe), (eys, eye) = da_elem.getGhostRanges()
        r0, r1 = max(oys - 1, 0), min(oye, nely)
        c0, c1 = max(oxs - 1, 0), min(oxe, nelx)
        if r0 < eys or r1 > eye or c0 < exs or c1 > exe:
            raise RuntimeError("element halo does not cover the elements around the owned nodes")
        self._dst = (slice(r0 - (oys - 1), r1 - (oys - 1)), slice(c0 - (oxs - 1), c1 - (oxs - 1)))
        self._src = (slice(r0 - eys, r1 - eys), slice(c0 - exs, c1 - exs))
        self._da_elem = da_elem
        self._global = da_elem.createGlobalVec()
        self._local = da_elem.createLocalVec()
        self._ghost_shape = (eye - eys, exe - exs)

    def box(self, moduli):
        self._global.array[:] = moduli
        self._da_elem.globalToLocal(self._global, self._local)
        self.box_array[self._dst] = self._local.array_r.reshape(self._ghost_shape)[self._src]
        return self.box_array

    def close(self):
        for name in ("_global", "_local"):
            vec = getattr(self, name, None)
            if vec is not None:
                vec.destroy()
                setattr(self, name, None)
