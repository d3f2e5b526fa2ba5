"""CG + multigrid for large systems: geometric multigrid on the DMDA hierarchy, or GAMG.

Geometric multigrid (``solver="mg"``, the default for large systems)
---------------------------------------------------------------------
Levels.  Level 0 is the coarsest, as in PCMG.  Going down one level keeps
every other node along each axis and the last one (:func:`coarse_nodes`): an
even number of intervals halves exactly, as DMDA coarsening does; an odd
number n becomes (n+1)/2 intervals, the last one half as wide.  The grids stay
nested (every coarse node is a fine node), so the Galerkin operators keep the
3x3-node stencil and the operator complexity stays near 4/3.  An axis shorter
than 2 * :data:`MIN_ELEMENTS` is not coarsened.  Coarsening stops when the
coarse grid has at most :data:`COARSE_MAX_DOFS` DOFs (its LU costs
milliseconds), at :data:`MAX_LEVELS` levels, or when a coarse grid would leave
a rank without nodes.  300x100 elements gets 4 levels (150x50, 75x25, 38x13),
1000x500 gets 6 (down to 32x16, 1122 DOFs).

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
two displacement components are interpolated independently.  Where the
coarse levels come from the moduli, P into a level of STENCIL_MIN_DOFS a rank
or more is applied in C from the grids (:mod:`sphyr_hpc.solvers.transfer`, no
stored matrix; ``-<prefix>mg_interpolation_mat_type aij`` stores it), the
smaller ones as AIJ.

Partition.  Coarse levels keep the fine DMDA's process grid; a coarse node
belongs to the rank that owns its position on the fine grid, so P has almost
all of its entries in the diagonal block.  Numbering is PETSc's DMDA global
numbering on every level (rank by rank in process-grid order, x fastest,
the 2 DOFs interleaved); on the fine level it is checked against the DMDA's own
local-to-global map.

Operators and smoothing (defaults; every one can be overridden under the
system's options prefix, e.g. ``-sphyr_mg_levels_ksp_max_it 3``): Galerkin
coarse operators ``P^T A P`` recomputed whenever ``A`` changes, assembled from
the element moduli on coarse DMDAs on any number of ranks
(:mod:`sphyr_hpc.solvers.grid_galerkin`; a one-rank system assembled in place
uses :mod:`sphyr_hpc.solvers.galerkin`), the finest level applied from the
moduli with no stored K (:mod:`sphyr_hpc.solvers.matfree`;
``-<prefix>mat_type sbaij`` stores it), the levels below it held as symmetric
node stencils applied in C (:mod:`sphyr_hpc.solvers.stencil`; those under
STENCIL_MIN_DOFS a rank, and every level where K is stored, as SBAIJ;
``-<prefix>mg_levels_mat_type sbaij`` for all), the coarsest as AIJ
(``-<prefix>mg_coarse_mat_type``); Chebyshev smoothing fused into one pass a
step on the finest and the stencil levels (:mod:`sphyr_hpc.solvers.fused`;
``-<prefix>mg_finest_smoother petsc``, ``-<prefix>mg_levels_smoother petsc``);
``-<prefix>pc_mg_galerkin both`` gives PCMG's own products on AIJ instead,
as before.  W-cycles below a V on the finest level (:data:`FINEST_CYCLE`),
Chebyshev(2)/Jacobi smoothing with eigenvalue estimates (10 CG steps)
recomputed for every new operator, LU on the coarsest level (``redundant`` LU
on several ranks).  ``-<prefix>pc_mg_levels N`` caps the number of levels
and ``-<prefix>mg_coarse_max_dofs N`` sets the coarse-grid size target.

Memory: with ``-<prefix>pc_mg_galerkin both`` PETSc keeps the intermediate
products of ``P^T A P`` for reuse (on 2 ranks at 1024x512 elements ~200 MB a
rank, peak 740 MB a rank); the operators from the moduli hold none (peak
528 MB a rank there, SBAIJ, before the other memory changes of the same
branch).

GAMG (``solver="gamg"``)
------------------------
Smoothed aggregation on the assembled matrix (block size 2) with the three
plane rigid-body modes, from the DMDA's node coordinates, as near-null space.

Dirichlet DOFs are identity rows and columns of A (see
:mod:`sphyr_hpc.solvers.elasticity`), so A stays SPD and CG applies; their
Galerkin contribution ``P^T I P`` only adds positive stiffness to coarse nodes
next to supports.
"""

from dataclasses import dataclass

import numpy as np

from .fused import ChebyshevSmoother, operator_of
from .stencil import STENCIL

MAX_LEVELS = 12
# The coarsest grid is factorised (LU) at every set-up: ~2-4k DOFs costs milliseconds.
COARSE_MAX_DOFS = 3000
MIN_ELEMENTS = 2
# Relative residual reduction of the CG solve.  The residual check of docs/scoring.md is
# ||K u - f|| <= 1e-6 * max(||f||, 1) and ||f|| < 1 for a unit load spread
# over more than one node, so 1e-6 * ||f|| always passes it.
RTOL = 1e-6
# A solve that needs this many iterations has stalled: SolverError, not a number.
MAX_IT = 500
# PETSc's "inode" AIJ kernels treat the 2 rows of a node as one block.  In the
# Debian PETSc 3.18 build (-O2, generic x86-64) its MatMult is 1.6x (1M DOFs)
# to 4.7x (66k DOFs, in cache) slower than the plain CSR kernel on these
# matrices (benchmarks/results/large_grids.md), so the multigrid operators use
# the plain one.  The scorer's direct solves keep PETSc's default.
USE_INODES = False
# Storage of the large-grid operators (``-<prefix>mat_type``; levels ``-<prefix>mg_levels_mat_type``,
# coarsest ``-<prefix>mg_coarse_mat_type``): the upper block triangle in 2x2 node blocks moves
# 0.47x the bytes of AIJ per MatMult (5 of 9 blocks, one index a block).  The coarsest level is
# factorised (LU, redundant on several ranks), which wants AIJ.
MAT_TYPE = "sbaij"
COARSE_MAT_TYPE = "aij"
# The finest level's own cycle (``-<prefix>mg_finest_cycle_type``; every other level's is
# ``-<prefix>pc_mg_cycle_type``, W by default): a V there visits the next level once a cycle
# instead of twice.  With the finest level applied from the moduli (matfree) the coarser levels
# are most of a cycle's time: 2048x1024 on 2 ranks, 6.75 MG-CG iterations a solve instead of 6.25
# and 3.44 s an iteration instead of 4.02 (benchmarks/results/large_grids_finest_cycle.md).
FINEST_CYCLE = "v"
# The finest level's smoother with the matrix-free operator (``-<prefix>mg_finest_smoother``):
# "fused", matfree.ChebyshevSmoother (the Chebyshev step in one pass), or "petsc", KSPCHEBYSHEV
# with PCJACOBI as on the other levels.
FINEST_SMOOTHER = "fused"
# The storage of the levels between the finest and the coarsest when the finest is applied from the
# moduli (``-<prefix>mg_levels_mat_type``): symmetric node stencils applied in C (:mod:`.stencil`),
# 19 numbers a node and no index, where PETSc's SBAIJ product is bound by its arithmetic.  Their
# smoother (``-<prefix>mg_levels_smoother``): "fused" as on the finest level, or "petsc".
LEVELS_MAT_TYPE = STENCIL
LEVELS_SMOOTHER = "fused"
# A level smaller than this a rank stays SBAIJ (``-<prefix>mg_stencil_min_dofs``): its smoothing is
# visited many times a cycle and is short, where a Python smoother's call can cost more than PETSc's.
# 2048x1024 on 2 ranks, the 4290-DOF level (16 visits a cycle): 0.46 s over 6 solves as SBAIJ
# (PETSc's parallel SBAIJ product exchanges twice), 0.17 s as stencils.
STENCIL_MIN_DOFS = 2000
# The interpolations between the levels (``-<prefix>mg_interpolation_mat_type``) where the coarse levels come
# from the moduli: "shell", bilinear from the grids in C (:mod:`.transfer`; no stored P), or "aij", stored.
INTERPOLATION_MAT_TYPE = "shell"


def tune_operator(A):
    """Options of a multigrid operator: its off-process entries a subset of the first assembly's;
    by its storage, AIJ the plain CSR kernel (USE_INODES), SBAIJ keeps the upper triangle of what is
    set (lower-triangle entries are dropped, not errors)."""
    kind = A.getType()
    # Element assembly adds the same off-process entries every time: PETSc may keep the first
    # assembly's communication pattern instead of a new two-sided rendezvous at every one.
    A.setOption(A.Option.SUBSET_OFF_PROC_ENTRIES, True)
    if kind.endswith("sbaij"):
        A.setOption(A.Option.IGNORE_LOWER_TRIANGULAR, True)
    elif kind in ("aij", "seqaij", "mpiaij"):
        A.setOption(A.Option.USE_INODES, USE_INODES)


# -- the hierarchy (pure numpy: no PETSc needed) ------------------------------------------------
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


def hierarchy(nelx, nely, x_counts=None, y_counts=None, coarse_max_dofs=COARSE_MAX_DOFS,
              max_levels=MAX_LEVELS):
    """The levels of the geometric hierarchy, finest first.

    ``x_counts``/``y_counts`` are the fine DMDA's nodes per process column/row
    (``DMDAGetOwnershipRanges``); default one process.
    """
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


def mg_levels(nelx, nely, max_levels=MAX_LEVELS, coarse_max_dofs=COARSE_MAX_DOFS):
    """Number of multigrid levels of a nelx x nely element grid (one process)."""
    return len(hierarchy(nelx, nely, coarse_max_dofs=coarse_max_dofs, max_levels=max_levels))


def _axis_weights(fine_pos, coarse_pos):
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
    ci, wx0, wx1 = _axis_weights(fine.x_pos[xs:xe], coarse.x_pos)
    cj, wy0, wy1 = _axis_weights(fine.y_pos[ys:ye], coarse.y_pos)
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


# -- PETSc set-up -----------------------------------------------------------------------------
def _option_int(PETSc, prefix, name, default):
    opts = PETSc.Options(prefix)
    return opts.getInt(name, default) if opts.hasName(name) else default


def fine_level(system):
    lx, ly = system.da.getOwnershipRanges()
    nely, nelx = system.loadcase.shape
    return Level(tuple(range(nelx + 1)), tuple(range(nely + 1)), _starts(lx), _starts(ly))


def check_fine_numbering(system, level):
    """The DMDA's global numbering equals :meth:`Level.global_dof0` on this rank's ghosted nodes."""
    (gxs, gxe), (gys, gye) = system.da.getGhostRanges()
    jj, ii = np.meshgrid(np.arange(gys, gye), np.arange(gxs, gxe), indexing="ij")
    expected = level.global_dof0(ii.ravel(), jj.ravel())
    got = np.asarray(system.da.getLGMap().getIndices()).reshape(-1, 2)[:, 0]
    if not np.array_equal(expected, got):
        raise RuntimeError("DMDA global numbering differs from the multigrid hierarchy's")


def build_interpolations(system, levels):
    """PETSc AIJ interpolations, coarse -> fine, one per pair of levels (coarsest pair first)."""
    return [stored_interpolation(system, fine, coarse) for fine, coarse in zip(levels[:-1], levels[1:])][::-1]


def stored_interpolation(system, fine, coarse):
    """P from ``coarse`` to ``fine`` as a PETSc AIJ matrix (:func:`interpolation_csr`)."""
    PETSc = system.PETSc
    rank = system.comm.getRank()
    indptr, cols, vals = interpolation_csr(fine, coarse, rank)
    (fxs, fxe), (fys, fye) = fine.rank_box(rank)
    (cxs, cxe), (cys, cye) = coarse.rank_box(rank)
    rows_local = 2 * (fxe - fxs) * (fye - fys)
    cols_local = 2 * (cxe - cxs) * (cye - cys)
    P = PETSc.Mat().createAIJ(
        size=((rows_local, fine.n_dofs), (cols_local, coarse.n_dofs)),
        csr=(indptr.astype(PETSc.IntType), cols.astype(PETSc.IntType), vals), comm=system.comm,
    )
    P.setOption(PETSc.Mat.Option.USE_INODES, USE_INODES)
    P.assemble()
    return P


@dataclass
class MultigridSetup:
    """What :func:`configure_mg` / :func:`configure_gamg` built for a system.

    ``defaults``: options to put in the database before ``setFromOptions``;
    ``levels``: the geometric hierarchy (finest first), ``interpolations``: its
    PETSc interpolation matrices (coarsest pair first), owned by this object
    and destroyed by :meth:`close` (the system closes it).
    """

    defaults: dict
    levels: list = None
    interpolations: list = ()
    coarse: object = None  # galerkin.ElementGalerkin: the coarse operators, assembled with K

    def close(self):
        for P in self.interpolations:
            if P.getType() == "python":
                P.getPythonContext().close()  # a GridTransfer: its scatter and the matrix
            else:
                P.destroy()
        self.interpolations = ()
        if self.coarse is not None:
            self.coarse.close()
            self.coarse = None


def plan_levels(system):
    """The hierarchy of ``system`` (finest first) under its options (levels, coarse-grid size)."""
    PETSc, prefix = system.PETSc, system.prefix
    nely, nelx = system.loadcase.shape
    max_levels = _option_int(PETSc, prefix, "pc_mg_levels", MAX_LEVELS)
    coarse_max = _option_int(PETSc, prefix, "mg_coarse_max_dofs", COARSE_MAX_DOFS)
    lx, ly = system.da.getOwnershipRanges()
    return hierarchy(nelx, nely, lx, ly, coarse_max_dofs=coarse_max, max_levels=max_levels)


def configure_mg(ksp, system):
    """CG + PCMG on ``ksp``; returns the :class:`MultigridSetup` (defaults to set before setFromOptions)."""
    PETSc = system.PETSc
    ksp.setType(PETSc.KSP.Type.CG)
    ksp.setTolerances(rtol=RTOL, max_it=MAX_IT)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    pc = ksp.getPC()
    pc.setType(PETSc.PC.Type.MG)
    prefix = system.prefix
    check_fine_numbering(system, fine_level(system))
    levels = plan_levels(system)
    if len(levels) == 1:
        # Small enough for the coarse solver itself (PCMG would smooth a 1-level "hierarchy").
        # SBAIJ holds one triangle: Cholesky (PETSc's LU takes no SBAIJ).
        pc.setType(PETSc.PC.Type.CHOLESKY if "sbaij" in system.K.getType() else PETSc.PC.Type.LU)
        if system.comm.getSize() > 1:
            pc.setFactorSolverType(PETSc.Mat.SolverType.MUMPS)
        return MultigridSetup({}, levels)
    pc.setMGLevels(len(levels))
    coarse = None
    from_moduli = not PETSc.Options(prefix).hasName("pc_mg_galerkin")
    if from_moduli and not system.in_place:
        # Any number of ranks: coarse element matrices level by level, on coarse DMDAs (no PtAP).
        from .grid_galerkin import GridGalerkin

        opts = PETSc.Options(prefix)
        assembled = system.K.getType().replace("mpi", "").replace("seq", "")
        own = operator_of(system.K) is not None  # the finest level applied by our kernels: so can the others
        smoothed = opts.getString("mg_levels_mat_type", LEVELS_MAT_TYPE if own else assembled)
        if smoothed == STENCIL and not own:
            raise ValueError(f"-{prefix}mg_levels_mat_type stencil: needs the finest level applied from the moduli "
                             f"(-{prefix}mat_type shell)")
        coarsest = opts.getString("mg_coarse_mat_type", COARSE_MAT_TYPE)
        types = [_level_storage(smoothed, level, system.comm.getSize(), opts) for level in levels[1:-1]] + [coarsest]
        coarse = GridGalerkin(PETSc, system, levels, types, tune=tune_operator)
        for level, A in enumerate(reversed(coarse.mats)):  # coarsest first, as PCMG numbers them
            (pc.getMGCoarseSolve() if level == 0 else pc.getMGSmoother(level)).setOperators(A)
    elif from_moduli:
        # One rank, K assembled in place: the coarse operators from the element moduli too.
        from .galerkin import ElementGalerkin

        coarse = ElementGalerkin(PETSc, levels, system.local_edofs, system.fixed_local, system.ke,
                                 use_inodes=USE_INODES)
        for level, A in enumerate(reversed(coarse.mats)):  # coarsest first, as PCMG numbers them
            (pc.getMGCoarseSolve() if level == 0 else pc.getMGSmoother(level)).setOperators(A)
    interpolations = _interpolations(system, levels, getattr(coarse, "dms", None))
    for level, P in enumerate(interpolations, start=1):
        pc.setMGInterpolation(level, P)
    return MultigridSetup(levels=levels, interpolations=interpolations, coarse=coarse, defaults={
        **fused_smoother_defaults(PETSc, system, len(levels) - 1, _stencil_levels(coarse)),
        "pc_mg_galerkin": "none" if coarse is not None else "both",
        # W-cycles: on converged SIMP designs (0/1 with voids) 8-11 CG iterations from
        # 128x64 to 1024x512 instead of 17-19 with V-cycles, and faster overall
        # (benchmarks/results/large_grids.md).
        "pc_mg_cycle_type": "w",
        "mg_levels_ksp_type": "chebyshev",
        "mg_levels_pc_type": "jacobi",
        "mg_levels_ksp_max_it": 2,
        # The operators are SPD: Lanczos (CG) estimates the extreme eigenvalues for
        # Chebyshev with 10 MatMults and no Gram-Schmidt (PETSc's default is GMRES).
        "mg_levels_esteig_ksp_type": "cg",
        "mg_coarse_ksp_type": "preonly",
        "mg_coarse_pc_type": "lu" if system.comm.getSize() == 1 else "redundant",
    })


def _interpolations(system, levels, coarse_dms):
    """The interpolations, coarsest pair first: where the coarse levels have DMDAs (:mod:`.grid_galerkin`)
    and ``-<prefix>mg_interpolation_mat_type`` is ``shell`` (INTERPOLATION_MAT_TYPE), those into a coarse
    level of at least ``-<prefix>mg_stencil_min_dofs`` DOFs a rank applied in C from the grids
    (:mod:`.transfer`), the others stored as AIJ (:func:`stored_interpolation`): below that a Python
    call costs more than PETSc's product (2048x1024 on 2 ranks: 16770 DOFs into 4290 slower, 66306 into
    16770 faster)."""
    PETSc = system.PETSc
    opts = PETSc.Options(system.prefix)
    kind = opts.getString("mg_interpolation_mat_type", INTERPOLATION_MAT_TYPE).lower()
    if kind not in ("shell", "aij"):
        raise ValueError(f"-{system.prefix}mg_interpolation_mat_type {kind}: expected shell or aij")
    from ..runtime.native import NativeUnavailable
    from .transfer import GridTransfer

    smallest = system.comm.getSize() * opts.getInt("mg_stencil_min_dofs", STENCIL_MIN_DOFS)
    out = []
    for depth, (fine, coarse) in enumerate(zip(levels[:-1], levels[1:])):
        P = None
        if kind == "shell" and coarse_dms is not None and coarse.n_dofs >= smallest:
            try:
                P = GridTransfer(PETSc, fine, coarse, coarse_dms[depth], _axis_weights).mat
            except NativeUnavailable:  # said once by the finest level's fallback
                P = None
        out.append(P if P is not None else stored_interpolation(system, fine, coarse))
    return out[::-1]


def _level_storage(chosen, level, ranks, opts):
    """A level's storage: ``chosen``, but SBAIJ (MAT_TYPE) for a stencil level with fewer than
    ``-<prefix>mg_stencil_min_dofs`` (STENCIL_MIN_DOFS) DOFs a rank."""
    if chosen != STENCIL:
        return chosen
    dofs = 2 * (level.nelx + 1) * (level.nely + 1)
    return STENCIL if dofs >= ranks * opts.getInt("mg_stencil_min_dofs", STENCIL_MIN_DOFS) else MAT_TYPE


def _stencil_levels(coarse):
    """PCMG numbers of the levels of a :class:`~.grid_galerkin.GridGalerkin` held as node stencils."""
    operators = getattr(coarse, "operators", None) or []
    n = len(operators)  # operators[k] (second finest first) is PCMG level n - 1 - k (the coarsest 0)
    return [n - 1 - k for k, op in enumerate(operators) if op is not None]


def _smoother_choice(opts, prefix, name, default):
    choice = opts.getString(name, default).lower()
    if choice not in ("fused", "petsc"):
        raise ValueError(f"-{prefix}{name} {choice}: expected fused or petsc")
    return choice == "fused"


def fused_smoother_defaults(PETSc, system, finest, stencil_levels=()):
    """Options making PCMG levels smooth with :class:`~.fused.ChebyshevSmoother` (a KSPPYTHON) where
    the levels' smoother is left at Chebyshev with Jacobi: level ``finest`` when applied from the
    moduli and ``-<prefix>mg_finest_smoother fused`` (FINEST_SMOOTHER), the ``stencil_levels`` (held
    as node stencils) when ``-<prefix>mg_levels_smoother fused`` (LEVELS_SMOOTHER).  ``petsc`` keeps
    PETSc's KSPCHEBYSHEV there."""
    opts = PETSc.Options(system.prefix)
    levels = []
    finest_fused = _smoother_choice(opts, system.prefix, "mg_finest_smoother", FINEST_SMOOTHER)
    if finest_fused and operator_of(system.K) is not None:
        levels.append(finest)
    if _smoother_choice(opts, system.prefix, "mg_levels_smoother", LEVELS_SMOOTHER):
        levels.extend(stencil_levels)
    chosen = {name: opts.getString(name, default).lower()
              for name, default in (("mg_levels_ksp_type", "chebyshev"), ("mg_levels_pc_type", "jacobi"))}
    if chosen != {"mg_levels_ksp_type": "chebyshev", "mg_levels_pc_type": "jacobi"}:
        return {}
    defaults = {}
    for level in levels:
        defaults.update({
            f"mg_levels_{level}_ksp_type": "python",
            f"mg_levels_{level}_ksp_python_type": "sphyr_hpc.solvers.fused.ChebyshevSmoother",
            f"mg_levels_{level}_pc_type": "none",
            # A KSPPYTHON declares no support for PCMG's norm type NONE; it computes no norm either way.
            f"mg_levels_{level}_ksp_norm_type": "preconditioned"})
    return defaults


def renew_coarse_smoothers(ksp):
    """Mark the set-up of every coarser level's KSP of ``ksp``'s PCMG stale (KSPSetOperators with its own
    operators), so that the next set-up redoes it for their new values (Chebyshev's eigenvalue
    estimates, the coarse factorisation).

    PCMG does so itself for the finest level and for operators it computes (Galerkin products); the
    operators from the moduli (:mod:`.grid_galerkin`) are updated in place, where a KSP set up
    before would keep the Chebyshev interval of the first design.
    """
    pc = ksp.getPC()
    if pc.getType() != "mg":
        return
    for level in range(pc.getMGLevels() - 1):
        smoother = pc.getMGCoarseSolve() if level == 0 else pc.getMGSmoother(level)
        smoother.setOperators(*smoother.getOperators())


def fused_smoothers(ksp):
    """(level's KSP, :class:`~.fused.ChebyshevSmoother`) of every PCMG level of ``ksp`` smoothed by one."""
    pc = ksp.getPC()
    if pc.getType() != "mg":
        return []
    found = []
    for level in range(1, pc.getMGLevels()):
        smoother = pc.getMGSmoother(level)
        if smoother.getType() == "python" and isinstance(smoother.getPythonContext(), ChebyshevSmoother):
            found.append((smoother, smoother.getPythonContext()))
    return found


def set_up_fused_smoothers(ksp):
    """The eigenvalue estimates of ``ksp``'s fused smoothers for the current K, now (in the set-up, as
    KSPCHEBYSHEV's own, which PCMG redoes for a new finest operator; a KSPPYTHON is set up once)."""
    for smoother, context in fused_smoothers(ksp):
        context.setUp(smoother)


def set_finest_cycle(PETSc, ksp, prefix):
    """The finest level's cycle (FINEST_CYCLE) on a PCMG ``ksp`` after ``setFromOptions`` (which sets
    every level's); returns it, or None without PCMG levels to cycle."""
    pc = ksp.getPC()
    if pc.getType() != "mg" or pc.getMGLevels() < 2:
        return None
    cycle = PETSc.Options(prefix).getString("mg_finest_cycle_type", FINEST_CYCLE).lower()
    if cycle not in ("v", "w"):
        raise ValueError(f"-{prefix}mg_finest_cycle_type {cycle}: expected v or w")
    kind = PETSc.PC.MGCycleType.V if cycle == "v" else PETSc.PC.MGCycleType.W
    pc.setMGCycleTypeOnLevel(pc.getMGLevels() - 1, kind)
    return cycle


def level_visits(depth, cycle, finest_cycle=None):
    """Visits of the level ``depth`` below the finest in one cycle: every level above it recurses
    once (V) or twice (W), the finest by ``finest_cycle`` (default: ``cycle``)."""
    if depth == 0:
        return 1
    per = {"v": 1, "w": 2}
    return per[finest_cycle or cycle] * per[cycle] ** (depth - 1)


def plain_csr_kernels(ksp):
    """Switch the operators of every multigrid level to the plain CSR kernels (see USE_INODES).

    The Galerkin operators are created by the first set-up; later numeric
    products keep the setting.  The coarsest operator is left alone: its LU
    factorisation was set up with the inode structure, and it is only factored.
    """
    pc = ksp.getPC()
    if pc.getType() not in ("mg", "gamg"):
        return
    for level in range(1, pc.getMGLevels()):
        A = pc.getMGSmoother(level).getOperators()[0]
        if A.getType() in ("aij", "seqaij", "mpiaij"):
            A.setOption(A.Option.USE_INODES, USE_INODES)
            A.assemble()


def rigid_body_modes(system):
    """The 3 plane rigid-body modes (2 translations, 1 rotation) as a near-null space."""
    PETSc = system.PETSc
    coords = system.da.getCoordinates()
    return PETSc.NullSpace().createRigidBody(coords)


def configure_gamg(ksp, system):
    """CG + smoothed-aggregation GAMG with the rigid-body near-null space."""
    PETSc = system.PETSc
    ksp.setType(PETSc.KSP.Type.CG)
    ksp.setTolerances(rtol=RTOL, max_it=MAX_IT)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.getPC().setType(PETSc.PC.Type.GAMG)
    return MultigridSetup({
        "pc_gamg_type": "agg",
        "pc_gamg_agg_nsmooths": 1,
        "pc_gamg_threshold": 0.01,
        "pc_gamg_coarse_eq_limit": COARSE_MAX_DOFS,
        "mg_levels_ksp_type": "chebyshev",
        "mg_levels_pc_type": "jacobi",
        "mg_levels_ksp_max_it": 2,
        "mg_levels_esteig_ksp_type": "cg",
    })


def hierarchy_info(ksp):
    """Levels of a PCMG/PCGAMG preconditioner after set-up, finest first.

    Returns a list of dicts (``level``, ``rows``, ``nonzeros``) and the operator
    complexity (sum of nonzeros over the fine level's), or None for another
    preconditioner.  Collective.
    """
    pc = ksp.getPC()
    if pc.getType() not in ("mg", "gamg"):
        return None
    n = pc.getMGLevels()
    rows = []
    for level in range(n - 1, -1, -1):
        smoother = pc.getMGCoarseSolve() if level == 0 else pc.getMGSmoother(level)
        A = smoother.getOperators()[0]
        fine = operator_of(A)  # applied from the moduli: the nonzeros it stands for
        nonzeros = fine.nnz if fine is not None else int(A.getInfo(A.InfoType.GLOBAL_SUM)["nz_used"])
        rows.append({"level": level, "rows": A.getSize()[0], "nonzeros": nonzeros})
    complexity = sum(r["nonzeros"] for r in rows) / rows[0]["nonzeros"] if rows and rows[0]["nonzeros"] else None
    return rows, complexity


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


__all__ = ["Level", "MultigridSetup", "hierarchy", "mg_levels", "interpolation_csr", "configure_mg", "configure_gamg",
           "hierarchy_info", "format_hierarchy", "describe_levels", "rigid_body_modes"]
