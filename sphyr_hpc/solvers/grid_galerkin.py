"""Galerkin coarse operators from the element moduli on any number of ranks, on coarse DMDAs.

On the nested grids of :mod:`sphyr_hpc.solvers.multigrid` every coarse
operator is a sum of 8x8 *coarse element matrices*: with ``K = sum_e E_e K_e
+ sum_{fixed i} e_i e_i^T`` (``K_e`` the unit element matrix with its fixed
rows and columns dropped) and P bilinear, ``P^T K P`` is the sum over the
coarse elements C of ``G_C = sum_{children c} Q_c^T G_c Q_c``, where ``Q_c``
(8x8) interpolates C's corner DOFs to its child's and the children are the
elements of the level below (1 or 2 along each axis).  So a coarse element
matrix is a sum over the fine elements under it: ``G_C = sum_f Q_f^T (E_f K0 + F_f) Q_f``, with ``Q_f`` the composed
interpolation from C's corners to f's (the product of the steps' ``Q``; a
product of 2x2 weights along each axis) and ``F_f`` the few elements' terms
for fixed DOFs (``K_f - K0`` times E_f, and the identity rows, each fixed DOF
counted by one element).  ``Q_f^T K0 Q_f`` depends only on f's position in C
along each axis (one of 2^depth on a uniform grid), so

* the levels down to :data:`DIRECT_DEPTH` below the finest are summed straight
  from the moduli in C (:class:`~sphyr_hpc.solvers.stencil.ModuliSum`: per
  coarse element, each fine modulus times its position's table row), into the
  level's node stencils or its element matrices, and the fixed-DOF terms are
  added element by element; nothing of the size of a fine level is written;
* deeper levels follow from the level above: ``G_parent += G_child @ kron(Q,
  Q)`` (a 64x64 map a child position and parent shape: one BLAS product over
  the grid).

Each rank works on the elements of its own slab and the coarse elements above
them (a box per level; a coarse element astride two ranks is held by both,
each with the part its own children give), and adds its element matrices into
the level's node stencils (:class:`~sphyr_hpc.solvers.stencil.StencilOperator`,
the level held as ``"stencil"``: the ranks' parts summed by a scatter of the
ring of nodes around each box) or into the level's PETSc matrix with
``MatSetValuesBlockedLocal`` (``ADD_VALUES``; rows of a neighbour go through
PETSc's stash).  Nothing is held from a PETSc product:
no ``MatPtAP`` and its intermediate products.  Each level's matrix comes from
a coarse DMDA whose ownership is the hierarchy's (:meth:`Level.rank_box`), so
its numbering is the one the interpolations use, and its storage is the
DMDA's matrix type (AIJ, BAIJ or SBAIJ, block size 2).  The operators equal
``P^T A P`` up to rounding (``tests/test_large.py``).
"""

import numpy as np

from .assembly import _POS
from .matfree import stencil_nonzeros
from .stencil import STENCIL, ModuliSum, StencilOperator, upper_order

# The coarse levels down to this depth below the finest are summed straight from the moduli: a level d deep
# costs 36 multiply-adds a fine element (an element matrix's upper triangle) and a table of 4^d x 36 values;
# deeper ones follow from the level above (64x64 products a coarse element, a quarter of the elements).
DIRECT_DEPTH = 4
_ROW = np.array([r for r, _ in _POS])
_COL = np.array([c for _, c in _POS])


def _product(children, kron, shape):
    """``children @ kron`` for a strided (rows, cols, 64) view, as one BLAS product on a contiguous copy."""
    return (np.ascontiguousarray(children).reshape(-1, 64) @ kron).reshape(shape)


def _q_matrix(wy, wx):
    """Q (8x8): a fine element's DOFs from a coarse one's, for 1-D weights ``wy``/``wx`` (fine corner x
    coarse corner), over the broadcast leading axes of ``wy`` and ``wx``."""
    nodes = wy[..., _ROW[:, None], _ROW[None, :]] * wx[..., _COL[:, None], _COL[None, :]]
    return np.einsum("...ab,de->...adbe", nodes, np.eye(2)).reshape(nodes.shape[:-2] + (8, 8))


def _rounds(rows, cols):
    """Index arrays into listed terms for (rows, cols) targets, each naming a target at most once: round k
    holds every target's k-th term, so adding the rounds in turn adds each target's terms in their order
    (what ``np.add.at`` does, without its element-by-element loop)."""
    if rows.size == 0:
        return []
    _, target = np.unique(np.stack([rows, cols]), axis=1, return_inverse=True)
    order = np.argsort(target.reshape(-1), kind="stable")
    ordered = target.reshape(-1)[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    occurrence = np.empty(order.size, dtype=np.int64)
    occurrence[order] = np.arange(order.size) - np.repeat(first, np.diff(np.r_[first, order.size]))
    return [np.flatnonzero(occurrence == k) for k in range(int(occurrence.max()) + 1)]


class _Axis:
    """One axis of the step from a level (children) to the next (parents).

    ``first[p]``/``count[p]``: the children (element indices) of parent p;
    ``weights[p][s]``: 2x2 linear weights of child slot s's corners (rows)
    from the parent's corners (columns), from the node positions.
    """

    def __init__(self, child_pos, parent_pos):
        child_pos = np.asarray(child_pos, dtype=float)
        parent_pos = np.asarray(parent_pos, dtype=float)
        nodes = np.searchsorted(child_pos, parent_pos)  # parent nodes as child node indices
        self.first = nodes[:-1]
        self.count = np.diff(nodes)
        self.weights = []
        for p in range(self.first.size):
            left, right = parent_pos[p], parent_pos[p + 1]
            ws = []
            for s in range(self.count[p]):
                a, b = child_pos[self.first[p] + s], child_pos[self.first[p] + s + 1]
                ws.append(np.array([[right - a, a - left], [right - b, b - left]]) / (right - left))
            self.weights.append(ws)
        # Runs of consecutive parents alike (children count and weights): a slice each.
        signature = [(int(c), tuple(np.round(np.concatenate([w.ravel() for w in ws]), 12)))
                     for c, ws in zip(self.count, self.weights)]
        self.runs = []
        start = 0
        for p in range(1, len(signature) + 1):
            if p == len(signature) or signature[p] != signature[start]:
                self.runs.append((start, p))
                start = p

    def parent_of(self, child):
        return np.searchsorted(self.first, child, side="right") - 1

    def slices(self, c0, c1):
        """For a child box [c0, c1): per (run, slot), (parent slice relative to the parent box, child
        slice, weights)."""
        p0, p1 = int(self.parent_of(c0)), int(self.parent_of(c1 - 1)) + 1
        ops = []
        for ra, rb in self.runs:
            qa, qb = max(ra, p0), min(rb, p1)
            if qa >= qb:
                continue
            n = int(self.count[ra])
            for s in range(n):
                child = self.first[qa:qb] + s
                va = qa + int(np.searchsorted(child, c0))
                vb = qa + int(np.searchsorted(child, c1))
                if va >= vb:
                    continue
                start = int(self.first[va]) + s - c0
                ops.append((slice(va - p0, vb - p0), slice(start, start + n * (vb - va - 1) + 1, n),
                            self.weights[ra][s]))
        return ops


class _Chain:
    """One axis of a rank's slab, fine elements [e0, e1), seen from every coarser level.

    Per depth d (1 = the level below the finest): ``box[d]`` the level's elements above the slab,
    ``starts[d]`` (slab indices, one more than the box's elements) where each one's fine elements
    begin, ``types[d]`` a fine element's position class and ``weights[d][t]`` its composed 2x2
    weights (fine corner x coarse corner: the product of the steps' weights).
    """

    def __init__(self, axes, e0, e1):
        ancestor = np.arange(e0, e1)
        composed = np.broadcast_to(np.eye(2), (e1 - e0, 2, 2))
        self.box, self.starts, self.types, self.weights = [None], [None], [None], [None]
        for axis in axes:  # the steps, finest first
            table = np.zeros((axis.first.size, 2, 2, 2))
            for p, ws in enumerate(axis.weights):
                table[p, :len(ws)] = ws
            parent = axis.parent_of(ancestor)
            composed = composed @ table[parent, ancestor - axis.first[parent]]
            ancestor = parent
            p0, p1 = int(ancestor[0]), int(ancestor[-1]) + 1
            self.box.append((p0, p1))
            self.starts.append(np.searchsorted(ancestor, np.arange(p0, p1 + 1)))
            _, first, types = np.unique(np.round(composed.reshape(-1, 4), 12), axis=0, return_index=True,
                                        return_inverse=True)
            self.types.append(types.ravel())
            self.weights.append(composed[first])


def _projected(wy, wx, matrices):
    """``Q^T M Q`` flattened (64 values) for ``Q = _q_matrix(wy, wx)``, over the broadcast leading axes of
    the 2x2 weights ``wy``, ``wx`` and the 8x8 ``matrices``."""
    q = _q_matrix(wy, wx)
    return np.einsum("...ia,...ij,...jb->...ab", q, matrices, q).reshape(q.shape[:-2] + (64,))


def _element_nodes(dm, py, px):
    """(n, 4) ghosted local node of every corner (in _POS order) of the coarse elements of the box."""
    (gxs, gxe), (gys, gye) = dm.getGhostRanges()
    gxm = gxe - gxs
    ey, ex = np.meshgrid(np.arange(*py), np.arange(*px), indexing="ij")
    rows = np.stack([(ey.ravel() + ar - gys) * gxm + (ex.ravel() + ac - gxs) for ar, ac in _POS], axis=1)
    ry = ey.ravel()[:, None] + np.array([r for r, _ in _POS])
    rx = ex.ravel()[:, None] + np.array([c for _, c in _POS])
    if rows.size and (ry.min() < gys or ry.max() >= gye or rx.min() < gxs or rx.max() >= gxe):
        raise RuntimeError("a coarse element of this rank lies outside its coarse DMDA's ghost region")
    return rows.astype(dm.getLGMap().getIndices().dtype)

def _fixed_elements(system, box):
    """(rows, cols, A, B) of the slab's elements with a fixed DOF (slab indices): their terms beyond
    ``E K0`` are ``E A + B`` (A: their element matrix without the fixed rows and columns, minus K0; B:
    the identity rows they count), or None."""
    nely, nelx = system.loadcase.shape
    (ey0, ey1), (ex0, ex1) = box
    fixed = np.zeros(system.loadcase.n_dofs, dtype=bool)
    fixed[system.loadcase.fixed_dofs()] = True
    fixed = fixed.reshape(nely + 1, nelx + 1, 2)
    # Each fixed DOF's identity row is counted by one element: the one below and right of its
    # node, moved inside the grid.
    counted = {}
    for r, c, d in zip(*np.nonzero(fixed)):
        er, ec = min(r, nely - 1), min(c, nelx - 1)
        if ey0 <= er < ey1 and ex0 <= ec < ex1:
            a = _POS.index((r - er, c - ec))
            counted.setdefault((er, ec), []).append(2 * a + d)
    touched = set(counted)
    rows_with = np.nonzero(fixed.any(axis=2))
    for r, c in zip(*rows_with):
        for ar, ac in _POS:
            er, ec = r - ar, c - ac
            if ey0 <= er < ey1 and ex0 <= ec < ex1 and 0 <= er < nely and 0 <= ec < nelx:
                touched.add((er, ec))
    if not touched:
        return None
    ke = system.ke
    rows, cols, As, Bs = [], [], [], []
    for er, ec in sorted(touched):
        dofs = [2 * (er + ar) * (nelx + 1) + 2 * (ec + ac) + d for ar, ac in _POS for d in (0, 1)]
        free = ~fixed.reshape(-1)[dofs]
        diag = np.zeros((8, 8))
        for k in counted.get((er, ec), ()):
            diag[k, k] = 1.0
        rows.append(er - ey0)
        cols.append(ec - ex0)
        As.append(ke * (free[:, None] & free[None, :]) - ke)
        Bs.append(diag)
    return np.asarray(rows), np.asarray(cols), np.asarray(As), np.asarray(Bs)

def _fixed_terms(fixed, chain_y, chain_x, depth, columns):
    """The fixed-DOF elements' terms at ``depth``: (coarse rows, coarse columns, the fine elements'
    slab rows and columns, A and B projected to their coarse elements, the values ``columns``), or
    None."""
    if fixed is None:
        return None
    rows, cols, A, B = fixed
    wy = chain_y.weights[depth][chain_y.types[depth][rows]]
    wx = chain_x.weights[depth][chain_x.types[depth][cols]]
    coarse_rows = np.searchsorted(chain_y.starts[depth], rows, side="right") - 1 + chain_y.box[depth][0]
    coarse_cols = np.searchsorted(chain_x.starts[depth], cols, side="right") - 1 + chain_x.box[depth][0]
    return (coarse_rows, coarse_cols, rows, cols, _projected(wy, wx, A)[:, columns],
            _projected(wy, wx, B)[:, columns], _rounds(coarse_rows, coarse_cols))


def grid_galerkin_levels(PETSc, system, levels, mat_types, tune=None):
    """The operators of ``levels`` 1.. (second finest first; ``levels`` finest first) of ``system``,
    one :class:`GridGalerkin` a level, each on a coarse DMDA of its own; ``mat_types[l - 1]``: the
    storage of level l (:data:`STENCIL`: a :class:`~.stencil.StencilOperator`, else the DMDA's matrix
    type, tuned by ``tune``).  A level deeper than :data:`DIRECT_DEPTH` follows from the one above
    it: assemble them in order, finest first."""
    da = system.da
    (exs, exe), (eys, eye) = system.da_elem.getRanges()
    slab_shape = (eye - eys, exe - exs)
    axes_y = [_Axis(a.y_pos, b.y_pos) for a, b in zip(levels[:-1], levels[1:])]
    axes_x = [_Axis(a.x_pos, b.x_pos) for a, b in zip(levels[:-1], levels[1:])]
    chain_y, chain_x = _Chain(axes_y, eys, eye), _Chain(axes_x, exs, exe)
    fixed = _fixed_elements(system, ((eys, eye), (exs, exe)))
    upper = upper_order()
    out = []
    for depth, level in enumerate(levels[1:], start=1):
        py, px = chain_y.box[depth], chain_x.box[depth]
        shape = (py[1] - py[0], px[1] - px[0])
        stencil = mat_types[depth - 1] == STENCIL
        direct = depth <= DIRECT_DEPTH
        # Element matrices held where the level is a PETSc matrix or the next one follows from this one.
        held = not stencil or not direct or (len(levels) > depth + 1 and depth + 1 > DIRECT_DEPTH)
        G = np.zeros(shape + (64,)) if held else None
        sums = step = None
        if direct:
            wy, wx = chain_y.weights[depth], chain_x.weights[depth]
            table = _projected(wy[:, None], wx[None, :], system.ke)[..., upper]
            sums = (ModuliSum(chain_y.starts[depth], chain_x.starts[depth], chain_y.types[depth],
                              chain_x.types[depth], table),
                    _fixed_terms(fixed, chain_y, chain_x, depth, slice(None) if held else upper))
        else:
            box_y, box_x = chain_y.box[depth - 1], chain_x.box[depth - 1]
            opy, opx = axes_y[depth - 1].slices(*box_y), axes_x[depth - 1].slices(*box_x)
            step = [(sy, cy, sx, cx, np.kron(*[_q_matrix(wy, wx)] * 2)) for sy, cy, wy in opy for sx, cx, wx in opx]
        dm = PETSc.DMDA().create(
            dim=2, dof=2, sizes=(level.nelx + 1, level.nely + 1), proc_sizes=da.getProcSizes(),
            ownership_ranges=(np.diff(level.x_starts).tolist(), np.diff(level.y_starts).tolist()),
            stencil_width=1, stencil_type=PETSc.DMDA.StencilType.BOX, comm=system.comm)
        if stencil:
            op = StencilOperator(PETSc, dm, stencil_nonzeros((level.nely, level.nelx), "sbaij"))
            A = op.mat
        else:
            op = None
            dm.setMatType(mat_types[depth - 1])
            A = dm.createMatrix()
            if tune is not None:
                tune(A)
        out.append(GridGalerkin(PETSc, dm, A, op, G, (py[0], px[0]), _element_nodes(dm, py, px), sums, step,
                                out[-1] if out else None, slab_shape))
    return out


class GridGalerkin:
    """One coarse level's operator, from the element moduli of the rank's slab (made by
    :func:`grid_galerkin_levels`): ``mat`` (a :class:`~.stencil.StencilOperator`'s shell matrix, that
    operator ``operator``, or a PETSc matrix on ``dm``), ``G`` its coarse element matrices where held,
    summed from the moduli (``sums``) or from the level above's (``step``, ``finer``).  Owns its matrix
    (or operator) and its DMDA."""

    def __init__(self, PETSc, dm, mat, operator, G, first, rows, sums, step, finer, slab_shape):
        self.PETSc, self.dm, self.mat, self.operator, self.G = PETSc, dm, mat, operator, G
        self._first, self._rows, self._sums, self._step, self._finer = first, rows, sums, step, finer
        self._slab_shape = slab_shape

    @property
    def nbytes(self):
        """What the level holds on this rank: its element matrices, stencils or matrix."""
        held = self.G.nbytes if self.G is not None else 0
        held += self.operator.nbytes if self.operator is not None else self.mat.getInfo(self.mat.InfoType.LOCAL)["memory"]
        return float(held)

    def assemble(self, moduli):
        """The operator for the element moduli of this rank's slab (collective; the level above first)."""
        moduli = np.ascontiguousarray(moduli, dtype=float).reshape(self._slab_shape)
        G, op = self.G, self.operator
        if op is not None:
            op.begin()
        if self._sums is not None:
            self._sum_from_moduli(moduli)
        else:
            G.fill(0.0)
            for sy, cy, sx, cx, kron in self._step:
                G[sy, sx] += _product(self._finer.G[cy, cx], kron, G[sy, sx].shape)
        if op is not None:
            if G is not None:
                op.add_elements(G, *self._first)
            op.finish()
        else:
            self.mat.zeroEntries()
            self.mat.setValuesBlockedLocalRCV(self._rows, self._rows, G.reshape(-1, 64),
                                              addv=self.PETSc.InsertMode.ADD_VALUES)
            self.mat.assemble()

    def _sum_from_moduli(self, moduli):
        """Straight from the moduli: into the element matrices where they are held, else into the
        stencils; the fixed-DOF elements' terms added one by one."""
        moduli_sum, fixed = self._sums
        G, op, first = self.G, self.operator, self._first
        if G is not None:
            moduli_sum.elements(moduli, G)
        else:
            op.add_moduli_sum(moduli_sum, moduli, *first)
        if fixed is None:
            return
        coarse_rows, coarse_cols, rows, cols, A, B, rounds = fixed
        terms = moduli[rows, cols][:, None] * A + B
        if G is not None:  # np.add.at's sums, term by term in the same order, a round at a time
            for k in rounds:
                G[coarse_rows[k] - first[0], coarse_cols[k] - first[1]] += terms[k]
        else:
            op.add_listed(coarse_rows, coarse_cols, terms)

    def close(self):
        if self.operator is not None:
            self.operator.close()
        elif self.mat is not None:
            self.mat.destroy()
        if self.dm is not None:
            self.dm.destroy()
        self.mat = self.operator = self.dm = self.G = None
