"""The geometric multigrid hierarchy of a grid: levels, coarsening, bilinear interpolation (pure numpy).

Levels.  Level 0 is the coarsest, as in PCMG.  Going down one level keeps
every other node along each axis and the last one (:func:`coarse_nodes`): an
even number of intervals halves exactly, as DMDA coarsening does; an odd
number n becomes (n+1)/2 intervals, the last one half as wide.  The grids stay
nested (every coarse node is a fine node), so the Galerkin operators keep the
3x3-node stencil and the operator complexity stays near 4/3.  An axis shorter
than 2 * :data:`MIN_ELEMENTS` is not coarsened.  Coarsening stops when the
coarse grid has at most ``coarse_max_dofs`` DOFs (:data:`COARSE_MAX_DOFS` by
default: its LU costs milliseconds), at ``max_levels`` levels, or when a
coarse grid would leave a rank without nodes.  300x100 elements gets 4 levels
(150x50, 75x25, 38x13), 1000x500 gets 6 (down to 32x16, 1122 DOFs).

Why the hierarchy is built here and not by ``DMCoarsen``: a non-periodic DMDA
coarsens ``n`` nodes to ``(n - 1) / 2 + 1`` and its Q1 interpolation needs
that ratio to be exact on every level, so an odd element count ends the
hierarchy (1000x500 would stop at 250x125 elements, a 63k-DOF coarse LU).
(Uniform coarse grids of ceil(n/2) elements are not nested for odd n; their
Galerkin operators grow to 5x5-node stencils, operator complexity ~1.9.)

Interpolation.  Bilinear (Q1) in the node positions: a fine node between
coarse nodes at positions p0 < p < p1 takes weights (p1 - p)/(p1 - p0) and
(p - p0)/(p1 - p0) along each axis.  On even levels this is exactly DMDA's Q1
interpolation (a fine node is a coarse node, or the mean of 2 or 4).  It
reproduces linear fields, so the rigid-body modes survive on every level.  The
two displacement components are interpolated independently.

Partition.  Coarse levels keep the fine DMDA's process grid; a coarse node
belongs to the rank that owns its position on the fine grid, so P has almost
all of its entries in the diagonal block.  Numbering is PETSc's DMDA global
numbering on every level (rank by rank in process-grid order, x fastest,
the 2 DOFs interleaved).
"""

from dataclasses import dataclass

import numpy as np

from ..core import discretisation as fe

MAX_LEVELS = 12
# The coarsest grid is factorised (LU) at every set-up: ~2-4k DOFs costs milliseconds.
COARSE_MAX_DOFS = 3000
MIN_ELEMENTS = 2


@dataclass(frozen=True)
class Level:
    """One grid of the hierarchy.

    ``x_pos``/``y_pos``: the node columns/rows of this level as node indices of
    the finest grid (the levels are nested: every coarse node is a fine node).
    ``x_starts``/``y_starts``: the first node (index into this level's nodes) of
    every process column/row, followed by the node count.
    """

    x_pos: tuple
    y_pos: tuple
    x_starts: tuple
    y_starts: tuple

    @property
    def nelx(self):
        return len(self.x_pos) - 1

    @property
    def nely(self):
        return len(self.y_pos) - 1

    @property
    def n_dofs(self):
        return 2 * len(self.x_pos) * len(self.y_pos)

    @property
    def proc_sizes(self):
        return len(self.x_starts) - 1, len(self.y_starts) - 1

    def rank_box(self, rank):
        """((xs, xe), (ys, ye)): the nodes ``rank`` owns, as indices into this level's nodes."""
        px, _ = self.proc_sizes
        pi, pj = rank % px, rank // px
        return (self.x_starts[pi], self.x_starts[pi + 1]), (self.y_starts[pj], self.y_starts[pj + 1])

    def global_dof0(self, i, j):
        """PETSc global number of the x DOF of node (row j, column i); the y DOF is +1."""
        xs = np.asarray(self.x_starts)
        ys = np.asarray(self.y_starts)
        px, _ = self.proc_sizes
        xm = np.diff(xs)
        ym = np.diff(ys)
        sizes = 2 * (ym[:, None] * xm[None, :]).ravel()  # rank = pj * px + pi
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        pi = np.searchsorted(xs, i, side="right") - 1
        pj = np.searchsorted(ys, j, side="right") - 1
        return offsets[pj * px + pi] + 2 * ((j - ys[pj]) * xm[pi] + (i - xs[pi]))


def _starts(counts):
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(counts)]))


def coarse_nodes(n):
    """Nodes (indices into 0..n) kept by coarsening an axis of n intervals.

    Every other node and the last one: n even gives n/2 intervals of 2 (the
    DMDA coarsening); n odd gives (n+1)/2 intervals, the last of them 1 wide,
    so the grids stay nested and the Galerkin operators keep the 3x3 stencil.
    An axis shorter than 2 * MIN_ELEMENTS is not coarsened.
    """
    if n < 2 * MIN_ELEMENTS:
        return np.arange(n + 1)
    return np.unique(np.concatenate([np.arange(0, n + 1, 2), [n]]))


def hierarchy(shape, ownership=None, coarse_max_dofs=COARSE_MAX_DOFS, max_levels=MAX_LEVELS):
    """The levels of the geometric hierarchy of a grid of cells ``shape`` (slowest axis first: (nely,
    nelx) in 2D), finest first.

    ``ownership``: the fine DMDA's nodes per process along each axis, x first
    (``DMDAGetOwnershipRanges``); default one process.
    """
    if fe.grid_dimension(shape) != 2:
        raise fe.not_in_3d("the multigrid hierarchy")
    nely, nelx = shape
    x_counts, y_counts = ownership if ownership is not None else (None, None)
    x_counts = [nelx + 1] if x_counts is None else list(x_counts)
    y_counts = [nely + 1] if y_counts is None else list(y_counts)
    levels = [Level(tuple(range(nelx + 1)), tuple(range(nely + 1)), _starts(x_counts), _starts(y_counts))]
    while len(levels) < max_levels:
        fine = levels[-1]
        if fine.n_dofs <= coarse_max_dofs:
            break
        kx, ky = coarse_nodes(fine.nelx), coarse_nodes(fine.nely)
        if kx.size == fine.nelx + 1 and ky.size == fine.nely + 1:
            break
        # A coarse node belongs to the process that owns it on the fine level.
        xs = tuple(int(v) for v in np.searchsorted(kx, fine.x_starts))
        ys = tuple(int(v) for v in np.searchsorted(ky, fine.y_starts))
        if min(np.diff(xs)) < 1 or min(np.diff(ys)) < 1:  # a rank would own no coarse node
            break
        levels.append(Level(tuple(np.asarray(fine.x_pos)[kx].tolist()), tuple(np.asarray(fine.y_pos)[ky].tolist()),
                            xs, ys))
    return levels


def mg_levels(shape, max_levels=MAX_LEVELS, coarse_max_dofs=COARSE_MAX_DOFS):
    """Number of multigrid levels of a grid of cells ``shape`` (slowest axis first; one process)."""
    return len(hierarchy(shape, coarse_max_dofs=coarse_max_dofs, max_levels=max_levels))


def axis_weights(fine_pos, coarse_pos):
    """For fine node positions: the left coarse node and the linear weights of it and the next."""
    fine_pos = np.asarray(fine_pos, dtype=float)
    coarse_pos = np.asarray(coarse_pos, dtype=float)
    k = np.clip(np.searchsorted(coarse_pos, fine_pos, side="right") - 1, 0, max(coarse_pos.size - 2, 0))
    if coarse_pos.size == 1:
        return k, np.ones_like(fine_pos), np.zeros_like(fine_pos)
    t = (fine_pos - coarse_pos[k]) / (coarse_pos[k + 1] - coarse_pos[k])
    return k, 1.0 - t, t


def interpolation_csr(fine, coarse, rank):
    """Rows of P (coarse -> fine) owned by ``rank``: local CSR with global coarse columns.

    Rows are the rank's fine DOFs in PETSc order (nodes row-major, x then y);
    weights are bilinear in the node positions, so linear fields (and the
    rigid-body modes) are interpolated exactly.
    """
    (xs, xe), (ys, ye) = fine.rank_box(rank)
    ci, wx0, wx1 = axis_weights(fine.x_pos[xs:xe], coarse.x_pos)
    cj, wy0, wy1 = axis_weights(fine.y_pos[ys:ye], coarse.y_pos)
    cols, weights = [], []
    for di, wx in ((0, wx0), (1, wx1)):
        for dj, wy in ((0, wy0), (1, wy1)):
            w = wy[:, None] * wx[None, :]
            ii, jj = np.meshgrid(np.minimum(ci + di, coarse.nelx), np.minimum(cj + dj, coarse.nely))
            cols.append(coarse.global_dof0(ii.ravel(), jj.ravel()))
            weights.append(w.ravel())
    cols = np.stack(cols, axis=1)  # (nodes, 4 corners); zero weights are dropped below
    weights = np.stack(weights, axis=1)
    cols2 = cols[:, None, :] + np.array([0, 1])[None, :, None]  # (nodes, dof, corner)
    weights2 = np.broadcast_to(weights[:, None, :], cols2.shape)
    keep = weights2 > 0.0
    indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=2).ravel())])
    return indptr, cols2[keep], weights2[keep]


def level_visits(depth, cycle, finest_cycle=None):
    """Visits of the level ``depth`` below the finest in one cycle: every level above it recurses
    once (V) or twice (W), the finest by ``finest_cycle`` (default: ``cycle``)."""
    if depth == 0:
        return 1
    per = {"v": 1, "w": 2}
    return per[finest_cycle or cycle] * per[cycle] ** (depth - 1)


def format_hierarchy(rows, complexity, levels=None):
    """Lines describing the hierarchy (levels, unknowns, nonzeros, operator complexity)."""
    lines = [f"multigrid: {len(rows)} levels, operator complexity {complexity:.3f}"]
    for i, r in enumerate(rows):
        grid = ""
        if levels is not None and i < len(levels):
            grid = f" ({levels[i].nelx}x{levels[i].nely} elements)"
        lines.append(f"  level {r['level']}: {r['rows']} unknowns{grid}, {r['nonzeros']} nonzeros")
    return lines


def describe_levels(levels):
    """'1024x512 > 512x256 > ...' for log lines."""
    return " > ".join(f"{lv.nelx}x{lv.nely}" for lv in levels)


__all__ = ["Level", "coarse_nodes", "describe_levels", "format_hierarchy", "hierarchy", "interpolation_csr",
           "level_visits", "mg_levels"]
