"""Assembling K(E) from element moduli.

K is linear in the element moduli: every entry is a sum of ``E_e K0[a, b]``
over the elements that couple its two DOFs.  Two layouts of that sum:

* :class:`ElementAssembly` (the direct solver, the scorer's small grids, the
  yardstick's one-rank multigrid): the CSR structure of a rank's element
  contributions in its *local* (ghosted) DOF numbering, computed once, and the
  sparse map A from element moduli to CSR values, so assembling a new modulus
  field is one product ``A @ moduli`` with every entry summed in element order,
  as the published scorer sums it.  A holds 64 (value, index) pairs per element
  (200 MB at 1M DOFs).  :func:`element_map` builds that map for any layout of
  the entries (also the dense condensed block of :mod:`sphyr_hpc.solvers.condensed`).
* :class:`ElementBlockAssembly` (GAMG, and multigrid with stored operators on
  several ranks): the elements' 8x8 matrices added in 2x2 node blocks,
  ``MatSetValuesBlockedLocal``, nothing held but the elements next to a
  support.

Dirichlet conditions are imposed symmetrically either way: every
contribution in a fixed row or column is dropped and the fixed diagonal is 1,
so the operator stays SPD and CG/multigrid apply.  :class:`ModuliBox` is the
element moduli around a rank's owned nodes (what the operators applied from the
moduli read, :mod:`.matfree`).
"""

import numpy as np
import scipy.sparse as sp

from . import csr

# Local node a of an element sits at (row, column) offset _POS[a] from its top-left node.
_POS = ((0, 0), (0, 1), (1, 1), (1, 0))


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
    conditions of :class:`ElementAssembly`, the same matrix up to rounding
    (sums in another order).  One search a 2x2 block instead of one an entry.
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
