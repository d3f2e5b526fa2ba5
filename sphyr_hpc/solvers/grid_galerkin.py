"""Galerkin coarse operators from the element moduli on any number of ranks, on coarse DMDAs.

On the nested grids of :mod:`sphyr_hpc.solvers.multigrid` every coarse
operator is a sum of 8x8 *coarse element matrices*: with ``K = sum_e E_e K_e
+ sum_{fixed i} e_i e_i^T`` (``K_e`` the unit element matrix with its fixed
rows and columns dropped) and P bilinear, ``P^T K P`` is the sum over the
coarse elements C of ``G_C = sum_{children c} Q_c^T G_c Q_c``, where ``Q_c``
(8x8) interpolates C's corner DOFs to its child's and the children are the
elements of the level below (1 or 2 along each axis).  So the levels follow
one another element by element:

* level 1 from the moduli: ``G_C = sum_c E_c T_slot`` with ``T_slot =
  Q^T K0 Q`` the same for every child in the same position of a parent of the
  same shape (one multiply-add a child position over the whole grid), plus,
  for the few elements with a fixed DOF, ``E_c Q^T (K_c - K0) Q`` and the
  identity rows ``Q^T D_c Q`` (each fixed DOF counted by one element);
* level l+1 from level l: ``G_parent += G_child @ kron(Q, Q)`` (a 64x64 map a
  child position and parent shape: one BLAS product over the grid); level 2
  takes the level-1 elements of the main runs from their children's moduli,
  ``slots @ (T @ kron(Q, Q))`` (a 4x64 map: a sixteenth of the products), and
  adds the rest (odd last rows and columns, fixed-DOF terms) element by element.

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
from .stencil import STENCIL, StencilOperator

# Level 1 is computed this many coarse element rows at a time (see GridGalerkin.update).
BAND_ROWS = 32


def _product(children, kron, shape, width=64):
    """``children @ kron`` for a strided (rows, cols, width) view, as one BLAS product on a contiguous copy."""
    return (np.ascontiguousarray(children).reshape(-1, width) @ kron).reshape(shape)


def _band(parent_slice, child_slice, a, b):
    """The part of a (parent rows, child rows) pair with parent rows in [a, b), band-relative
    parents: (parent slice - a, child slice), or None."""
    start, stop = max(parent_slice.start, a), min(parent_slice.stop, b)
    if start >= stop:
        return None
    step = child_slice.step
    c0 = child_slice.start + step * (start - parent_slice.start)
    return slice(start - a, stop - a), slice(c0, c0 + step * (stop - start - 1) + 1, step)


def _child_band(parent_slice, child_slice, a, b):
    """The part of a (parent rows, child rows) pair whose child rows lie in [a, b): (parent
    slice, child slice - a), or None."""
    step = child_slice.step
    n = parent_slice.stop - parent_slice.start
    first = max(0, -(-(a - child_slice.start) // step))  # first k with start + k*step >= a
    last = min(n, -(-(b - child_slice.start) // step))   # first k with start + k*step >= b
    if first >= last:
        return None
    c0 = child_slice.start + step * first - a
    return (slice(parent_slice.start + first, parent_slice.start + last),
            slice(c0, c0 + step * (last - first - 1) + 1, step))


def _q_matrix(wy, wx):
    """Q (8x8): a child's DOFs from its parent's, for 1-D weights ``wy``/``wx`` (child corner x parent corner)."""
    q = np.zeros((8, 8))
    for a, (ar, ac) in enumerate(_POS):
        for b, (br, bc) in enumerate(_POS):
            w = wy[ar, br] * wx[ac, bc]
            q[2 * a, 2 * b] = q[2 * a + 1, 2 * b + 1] = w
    return q


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
        """For a child box [c0, c1): the parent box and, per (run, slot), (parent slice, child slice, weights)."""
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
                            self.weights[ra][s], (rb - ra, ra), s))
        return (p0, p1), ops


class GridGalerkin:
    """The coarse operators of ``levels`` (finest first) of ``system``, updated from the moduli.

    :attr:`mats` are the PETSc matrices of levels 1.. (second finest first: a
    :class:`~.stencil.StencilOperator`'s shell matrix where ``mat_types[l - 1]`` is
    :data:`STENCIL`, that operator in :attr:`operators`); ``mat_types[l - 1]`` the storage of
    level l.  Owns the matrices and the
    coarse DMDAs (:meth:`close`).
    """

    def __init__(self, PETSc, system, levels, mat_types, tune=None):
        self.PETSc = PETSc
        nely, nelx = system.loadcase.shape
        da = system.da
        (exs, exe), (eys, eye) = system.da_elem.getRanges()
        self._slab_shape = (eye - eys, exe - exs)
        self.dms, self.mats, self.G, self._rows, self._steps = [], [], [], [], []
        self.operators, self._first = [], []  # per level: its StencilOperator or None; its box's first element
        box = ((eys, eye), (exs, exe))
        fine = levels[0]
        for depth, level in enumerate(levels[1:], start=1):
            child = levels[depth - 1]
            ay = _Axis(child.y_pos, level.y_pos)
            ax = _Axis(child.x_pos, level.x_pos)
            (py, opy), (px, opx) = ay.slices(*box[0]), ax.slices(*box[1])
            ops = [(sy, cy, sx, cx, _q_matrix(wy, wx)) for sy, cy, wy, _, _ in opy for sx, cx, wx, _, _ in opx]
            if depth == 1:
                k0 = system.ke
                # The longest run of each axis: its parents (almost all) get one (n x 4) @ (4 x 64) product.
                main_y = max((r for _, _, _, r, _ in opy), default=None)
                main_x = max((r for _, _, _, r, _ in opx), default=None)
                self._main = []
                rest = []
                for (sy, cy, wy, ry, ty), (sx, cx, wx, rx, tx) in ((a, b) for a in opy for b in opx):
                    table = (_q_matrix(wy, wx).T @ k0 @ _q_matrix(wy, wx)).ravel()
                    if ry == main_y and rx == main_x:
                        self._main.append((sy, cy, sx, cx, 2 * ty + tx, table))
                    else:
                        rest.append((sy, cy, sx, cx, table))
                self._main_table = np.zeros((4, 64))
                for *_, slot, table in self._main:
                    self._main_table[slot] = table
                ops = rest
                self._fixed = self._fixed_corrections(system, fine, ay, ax, box, py, px)
            else:
                ops = [(sy, cy, sx, cx, np.kron(q, q)) for sy, cy, sx, cx, q in ops]
            self._steps.append(ops)
            box = (py, px)
            shape = (py[1] - py[0], px[1] - px[0])
            if depth == 1:
                self._level1_shape = shape
                self.G.append(None)  # held a band at a time (update)
            else:
                self.G.append(np.zeros(shape + (64,)))
            dm = PETSc.DMDA().create(
                dim=2, dof=2, sizes=(level.nelx + 1, level.nely + 1), proc_sizes=da.getProcSizes(),
                ownership_ranges=(np.diff(level.x_starts).tolist(), np.diff(level.y_starts).tolist()),
                stencil_width=1, stencil_type=PETSc.DMDA.StencilType.BOX, comm=system.comm)
            if mat_types[depth - 1] == STENCIL:
                op = StencilOperator(PETSc, dm, stencil_nonzeros((level.nely, level.nelx), "sbaij"))
                A = op.mat
            else:
                op = None
                dm.setMatType(mat_types[depth - 1])
                A = dm.createMatrix()
                if tune is not None:
                    tune(A)
            self.dms.append(dm)
            self.mats.append(A)
            self.operators.append(op)
            self._first.append((py[0], px[0]))
            self._rows.append(self._element_nodes(dm, py, px))
        if len(self.mats) > 1:
            self._plan_level2()

    def _plan_level2(self):
        """How level 2 follows from the children moduli of level 1 (see :meth:`update`).

        A level-1 element of the main runs without a fixed-DOF term is ``slots @ main_table``, so its
        part of level 2 is ``slots @ (main_table @ kron)``: a (n x 4) @ (4 x 64) product instead of
        (n x 64) @ (64 x 64).  The others (odd last rows and columns, elements with a fixed DOF) add
        what their element matrices have beyond that, one by one: ``_special`` lists them (level-1
        index, level-2 parent, step).
        """
        ny, nx = self._level1_shape
        main = np.zeros((ny, nx), dtype=bool)
        for sy, _, sx, _, _, _ in self._main:
            main[sy, sx] = True
        special = ~main
        if self._fixed is not None:
            special.reshape(-1)[self._fixed[0]] = True
        nx2 = self.G[1].shape[1]
        parent = np.full(ny * nx, -1, dtype=np.int64)
        step = np.full(ny * nx, -1, dtype=np.int64)
        index = np.arange(ny * nx).reshape(ny, nx)
        parents = np.arange(self.G[1].shape[0] * nx2).reshape(-1, nx2)
        self._slot_kron = []
        for k, (sy, cy, sx, cx, kron) in enumerate(self._steps[1]):
            parent[index[cy, cx].ravel()] = parents[sy, sx].ravel()
            step[index[cy, cx].ravel()] = k
            self._slot_kron.append(self._main_table @ kron)
        where = np.flatnonzero(special.ravel() & (parent >= 0))
        self._special = (where, parent[where], step[where])

    @staticmethod
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

    @staticmethod
    def _fixed_corrections(system, fine, ay, ax, box, py, px):
        """(parent, child, A, B): level-1 terms of the slab's elements with a fixed DOF,
        ``G[parent] += E[child] A + B`` (A: K_c minus K0 projected, B: the identity rows it counts)."""
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
        ke = system.ke
        parents, children, As, Bs = [], [], [], []
        for er, ec in sorted(touched):
            pyi, pxi = int(ay.parent_of(er)), int(ax.parent_of(ec))
            wy = ay.weights[pyi][er - ay.first[pyi]]
            wx = ax.weights[pxi][ec - ax.first[pxi]]
            q = _q_matrix(wy, wx)
            dofs = [2 * (er + ar) * (nelx + 1) + 2 * (ec + ac) + d for ar, ac in _POS for d in (0, 1)]
            free = ~fixed.reshape(-1)[dofs]
            k_el = ke * (free[:, None] & free[None, :])
            diag = np.zeros((8, 8))
            for k in counted.get((er, ec), ()):
                diag[k, k] = 1.0
            parents.append((pyi - py[0]) * (px[1] - px[0]) + (pxi - px[0]))
            children.append((er - ey0) * (ex1 - ex0) + (ec - ex0))
            As.append((q.T @ (k_el - ke) @ q).ravel())
            Bs.append((q.T @ diag @ q).ravel())
        if not parents:
            return None
        return (np.asarray(parents), np.asarray(children), np.asarray(As), np.asarray(Bs))

    def update(self, moduli):
        """Every coarse operator for the element moduli of this rank's slab (collective).

        Level 1, the largest, is computed and added into its matrix a band of
        :data:`BAND_ROWS` coarse element rows at a time (each band's part of
        level 2 added on the way), so only a band of its element matrices is
        ever held; the coarser levels are held whole (a quarter and less).
        """
        PETSc = self.PETSc
        add = PETSc.InsertMode.ADD_VALUES
        moduli = np.asarray(moduli, dtype=float).reshape(self._slab_shape)
        for G in self.G[1:]:
            G.fill(0.0)
        A1, rows1, op1 = self.mats[0], self._rows[0], self.operators[0]
        ny, nx = self._level1_shape
        if op1 is not None:
            op1.begin()
        else:
            A1.zeroEntries()
        for a in range(0, ny, BAND_ROWS):
            b = min(a + BAND_ROWS, ny)
            slots = np.zeros((b - a, nx, 4))  # the main parents' children's moduli, by position
            for sy, cy, sx, cx, slot, _ in self._main:
                sub = _band(sy, cy, a, b)
                if sub is not None:
                    psl, csl = sub
                    slots[psl, sx, slot] = moduli[csl, cx]
            band = (slots.reshape(-1, 4) @ self._main_table).reshape(b - a, nx, 64)
            for sy, cy, sx, cx, table in self._steps[0]:  # the other parents (last rows and columns)
                sub = _band(sy, cy, a, b)
                if sub is not None:
                    psl, csl = sub
                    band[psl, sx] += moduli[csl, cx][:, :, None] * table
            if self._fixed is not None:
                parents, children, fa, fb = self._fixed
                inside = (parents >= a * nx) & (parents < b * nx)
                np.add.at(band.reshape(-1, 64), parents[inside] - a * nx,
                          moduli.reshape(-1)[children[inside]][:, None] * fa[inside] + fb[inside])
            if op1 is not None:
                op1.add_elements(band, self._first[0][0] + a, self._first[0][1])
            else:
                A1.setValuesBlockedLocalRCV(rows1[a * nx:b * nx], rows1[a * nx:b * nx], band.reshape(-1, 64),
                                            addv=add)
            if len(self.mats) > 1:  # this band's part of level 2 (its children rows a..b of level 1)
                self._level2_band(band, slots, a, b)
            del band, slots
        if op1 is not None:
            op1.finish()
        else:
            A1.assemble()
        for depth in range(1, len(self.mats)):
            G, A, rows, op = self.G[depth], self.mats[depth], self._rows[depth], self.operators[depth]
            if depth >= 2:
                for sy, cy, sx, cx, kron in self._steps[depth]:
                    G[sy, sx] += _product(self.G[depth - 1][cy, cx], kron, G[sy, sx].shape)
            if op is not None:
                op.begin()
                op.add_elements(G, *self._first[depth])
                op.finish()
            else:
                A.zeroEntries()
                A.setValuesBlockedLocalRCV(rows, rows, G.reshape(-1, 64), addv=add)
                A.assemble()

    def _level2_band(self, band, slots, a, b):
        """Add level-1 rows a..b (``band``, their children's moduli ``slots``) into level 2 (_plan_level2)."""
        G1 = self.G[1]
        for (sy, cy, sx, cx, _), slot_kron in zip(self._steps[1], self._slot_kron):
            sub = _child_band(sy, cy, a, b)
            if sub is not None:
                psl, csl = sub
                G1[psl, sx] += _product(slots[csl, cx], slot_kron, G1[psl, sx].shape, width=4)
        where, parents, steps = self._special
        nx = band.shape[1]
        lo, hi = np.searchsorted(where, (a * nx, b * nx))
        if hi > lo:
            rows = where[lo:hi] - a * nx
            beyond = band.reshape(-1, 64)[rows] - slots.reshape(-1, 4)[rows] @ self._main_table
            for k in np.unique(steps[lo:hi]):
                mine = steps[lo:hi] == k
                np.add.at(G1.reshape(-1, 64), parents[lo:hi][mine], beyond[mine] @ self._steps[1][k][4])

    def close(self):
        for op in self.operators:
            if op is not None:
                op.close()
        for op, A in zip(self.operators, self.mats):
            if op is None:
                A.destroy()
        for dm in self.dms:
            dm.destroy()
        self.mats, self.dms, self.G, self.operators = [], [], [], []
