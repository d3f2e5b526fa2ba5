"""The multigrid's Galerkin coarse operators assembled from the element moduli (one rank).

PCMG's Galerkin option recomputes every coarse operator ``A_l = P^T A_{l+1} P``
with sparse matrix products whenever K changes: inside a SIMP run, once per
iteration, and at 80x80 elements those products cost more than the whole
multigrid solve.  On the nested grids of :mod:`sphyr_hpc.solvers.multigrid`
the same operators are a linear function of the element moduli, like K itself:

* every fine element lies inside one element of each coarser level (its
  *ancestor*), and the composed bilinear interpolations from that level to the
  fine grid are the bilinear interpolation from the ancestor's 4 corners, so
  ``Q_e`` (8 x 8: the ancestor's DOFs to the element's) is known in closed
  form and P_{0->l}^T (E_e K_e) P_{0->l} = E_e Q_e^T K_e Q_e lands on the
  ancestor's 8 DOFs;
* a fixed DOF's identity row adds ``p p^T`` (p its row of P_{0->l}), a
  constant.

So ``A_l``'s CSR values are a linear map of E plus a constant (``K_e`` is the
element matrix with its fixed rows and columns dropped, as assembled): for the
square ancestors away from supports, whose children all contribute the same
tables, one dense product (children's moduli) @ (table) and a scatter; for the
rest a sparse product with 64 entries per child.  The operators equal PCMG's
Galerkin products up to rounding (``tests/test_large.py``,
``test_coarse_operators_from_the_element_moduli_equal_the_galerkin_products``);
the system solved and its convergence test are unchanged.  Used by the
one-rank, in-place assembled multigrid systems (the scorer's large SIMP runs);
on several ranks the coarse operators come from the moduli on coarse DMDAs
(:mod:`.grid_galerkin`).
"""

import numpy as np
import scipy.sparse as sp

from . import csr
from .assembly import csr_plan


def _axis(fine_index, positions):
    """Ancestor interval of fine node or element ``fine_index`` on a coarse axis, and its width."""
    positions = np.asarray(positions)
    k = np.clip(np.searchsorted(positions, fine_index, side="right") - 1, 0, positions.size - 2)
    return k, positions[k], positions[k + 1] - positions[k]


def element_galerkin_levels(PETSc, levels, local_edofs, fixed, ke, use_inodes=False):
    """The operators of ``levels`` 1.. (second finest first; ``levels`` finest first) of a one-rank,
    natural-order system, one :class:`ElementGalerkin` a level.

    ``local_edofs``: (n_elements, 8) fine element DOFs (natural order),
    ``fixed``: fixed-DOF mask, ``ke``: the unit element matrix.
    """
    fine = levels[0]
    nx = fine.nelx + 1
    edofs = np.asarray(local_edofs, dtype=np.int64)
    node_r, node_c = np.divmod(edofs[:, 0::2] // 2, nx)          # (n_el, 4) fine node rows / columns
    top, left = node_r.min(axis=1), node_c.min(axis=1)           # the element's row and column
    corner_r, corner_c = node_r - top[:, None], node_c - left[:, None]  # local node offsets (0/1)
    # Element matrices as assembled: fixed rows and columns dropped.
    free = ~np.asarray(fixed, dtype=bool)[edofs]
    k_el = ke[None, :, :] * (free[:, :, None] & free[:, None, :])
    n_el = edofs.shape[0]
    out = []
    for level in levels[1:]:
        ky, y0, hy = _axis(top, level.y_pos)
        kx, x0, hx = _axis(left, level.x_pos)
        # Weights of the ancestor's corner b (offsets corner_r/c[b]) at fine node a: bilinear.
        eta = (node_r - y0[:, None]) / hy[:, None]
        xi = (node_c - x0[:, None]) / hx[:, None]
        wy = np.where(corner_r[:, None, :] == 1, eta[:, :, None], 1.0 - eta[:, :, None])
        wx = np.where(corner_c[:, None, :] == 1, xi[:, :, None], 1.0 - xi[:, :, None])
        w = wy * wx                                                # (n_el, fine node a, corner b)
        q = np.zeros((n_el, 8, 8))
        q[:, 0::2, 0::2] = w
        q[:, 1::2, 1::2] = w
        g = q.transpose(0, 2, 1) @ k_el @ q                        # Q_e^T K_e Q_e, batched
        # The ancestor's DOFs in the level's natural numbering (nodes row-major, x then y).
        cnx = len(level.x_pos)
        cnodes = (ky[:, None] + corner_r) * cnx + kx[:, None] + corner_c
        cdofs = np.empty((n_el, 8), dtype=np.int64)
        cdofs[:, 0::2], cdofs[:, 1::2] = 2 * cnodes, 2 * cnodes + 1
        n = level.n_dofs
        rows = np.repeat(cdofs, 8, axis=1).ravel()
        cols = np.tile(cdofs, (1, 8)).ravel()
        fixed_rows, fixed_cols, fixed_vals = _fixed_part(np.flatnonzero(fixed), nx, level)
        diag = np.arange(n)  # every diagonal entry exists (CG's smoother and LU need it)
        indptr, indices, inverse, nnz = csr_plan(np.concatenate([rows, fixed_rows, diag]),
                                                 np.concatenate([cols, fixed_cols, diag]), n)
        m = rows.size
        entries = inverse[:m].reshape(n_el, 64)
        ancestor = ky * (cnx - 1) + kx
        level_map = _level_map(entries, g.reshape(n_el, 64), ancestor, top - y0, left - x0, hy, hx,
                               free.all(axis=1), nnz)
        constant = np.bincount(inverse[m:m + fixed_vals.size], weights=fixed_vals, minlength=nnz)
        values = constant.copy()
        A = PETSc.Mat().createAIJWithArrays((n, n), (indptr.astype(PETSc.IntType), indices.astype(PETSc.IntType),
                                                     values), comm=PETSc.COMM_SELF)
        A.setOption(PETSc.Mat.Option.USE_INODES, use_inodes)
        out.append(ElementGalerkin(A, values, constant, level_map))
    return out


class ElementGalerkin:
    """One coarse level's operator from the element moduli (one rank): ``mat``, an AIJ matrix whose CSR
    ``values`` are written in place by :meth:`assemble` (made by :func:`element_galerkin_levels`)."""

    def __init__(self, mat, values, constant, level_map):
        self.mat, self.values, self._constant, self._map = mat, values, constant, level_map

    @property
    def nbytes(self):
        """What the level holds: its CSR matrix and the constant part of the map from the moduli."""
        return float(self.mat.getInfo(self.mat.InfoType.LOCAL)["memory"] + self._constant.nbytes)

    def assemble(self, moduli):
        """The operator for element moduli (natural order), written in place."""
        moduli = np.ascontiguousarray(moduli, dtype=float).ravel()
        regular, irregular = self._map
        np.copyto(self.values, self._constant)
        if regular is not None:
            children, table, scatter = regular
            csr.matvec(scatter, (moduli[children] @ table).ravel(), out=self.values)
        csr.matvec(irregular, moduli, out=self.values)
        self.mat.assemble()  # a new state: the level's smoother and the coarse LU set up again

    def close(self):
        if self.mat is not None:
            self.mat.destroy()
            self.mat = None


def _level_map(entries, g, ancestor, dy, dx, hy, hx, all_free, nnz):
    """(regular, irregular) parts of ``E -> A_l``'s values.

    A *regular* ancestor is square with sides of ``h`` fine elements and has no fixed DOF
    on its children: its element matrix is (its children's moduli, in (dy, dx) order) @ (a
    table shared by every regular ancestor), one small dense product for all of them, then
    summed into the CSR values; the other children go through a sparse ``B @ E`` (64 entries
    each).  Both together are ``P^T K P``'s element part.
    """
    n_el = entries.shape[0]
    h = int(hy.max()) if n_el else 1
    square = (hy == h) & (hx == h)
    bad = np.zeros(ancestor.max() + 1 if n_el else 0, dtype=bool)
    np.logical_or.at(bad, ancestor, ~(square & all_free))
    regular = ~bad[ancestor]
    reg = np.flatnonzero(regular)
    irr = np.flatnonzero(~regular)
    irregular = sp.csr_matrix((g[irr].ravel(), (entries[irr].ravel(), np.repeat(irr, 64))), shape=(nnz, n_el))
    if reg.size == 0:
        return None, irregular
    slot = dy[reg] * h + dx[reg]                           # child position within its ancestor
    ancestors, index = np.unique(ancestor[reg], return_inverse=True)
    children = np.empty((ancestors.size, h * h), dtype=np.int64)
    children[index, slot] = reg                           # fine element of every (ancestor, position)
    table = np.empty((h * h, 64))
    table[slot] = g[reg]                                   # the same for every regular ancestor
    first = np.empty(ancestors.size, dtype=np.int64)
    first[index] = reg                                     # any child: the ancestor's CSR entries
    scatter = sp.csr_matrix((np.ones(ancestors.size * 64), (entries[first].ravel(),
                                                            np.arange(ancestors.size * 64))),
                            shape=(nnz, ancestors.size * 64))
    return (children, table, scatter), irregular


def _fixed_part(fixed_dofs, nx, level):
    """(rows, cols, values) of sum over fixed fine DOFs i of p_i p_i^T on ``level``."""
    node = fixed_dofs // 2
    d = fixed_dofs % 2
    r, c = np.divmod(node, nx)
    ky, y0, hy = _axis(r, level.y_pos)
    kx, x0, hx = _axis(c, level.x_pos)
    eta, xi = (r - y0) / hy, (c - x0) / hx
    cnx = len(level.x_pos)
    corners = [((ky + dr) * cnx + kx + dc, (eta if dr else 1 - eta) * (xi if dc else 1 - xi))
               for dr in (0, 1) for dc in (0, 1)]
    rows, cols, vals = [], [], []
    for a_node, a_w in corners:
        for b_node, b_w in corners:
            keep = (a_w * b_w) != 0.0
            rows.append(2 * a_node[keep] + d[keep])
            cols.append(2 * b_node[keep] + d[keep])
            vals.append((a_w * b_w)[keep])
    return (np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64),
            np.concatenate(vals))
