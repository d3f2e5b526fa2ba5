"""The multigrid plan: what every level of the geometric multigrid is, decided before PETSc is touched.

:func:`make_plan` is a pure function of the grid (its shape, hence its
dimension), the ranks and how the grid's nodes are split over them, the
smoother kind and whether the compiled kernels load.  It returns a frozen
:class:`MultigridPlan`: the levels (the hierarchy of :mod:`.hierarchy`), each
with its storage, the transfer into it from the next coarser level, its
smoother and its cycle.  :class:`~.multigrid.MultigridMethod` builds what the
plan says and nothing else; printed (``str(plan)``), the plan is the hierarchy
table a run logs.  No PETSc option is read here: what a user may change on the
command line (smoothing, cycles, the coarse solve) are PETSc options over the
plan's defaults (:attr:`MultigridPlan.options`); what would change the plan
itself (the level count) is an explicit argument (``max_levels``).

Every way a multigrid solve can go is one row of :func:`ways`:

========================  ==============  ==========================  ======================
smoother, kernels, ranks  finest level    coarser levels              transfers
========================  ==============  ==========================  ======================
chebyshev, kernels        matrix-free     stencil (>= 2000 DOFs a     grid (C) into stencil
                          (fused Cheb.)   rank, fused), else SBAIJ    levels, else AIJ
chebyshev, no kernels     SBAIJ           SBAIJ                       AIJ
sor, 1 rank               AIJ in place    AIJ (element Galerkin)      AIJ
sor, several ranks        AIJ             AIJ                         AIJ
one level                 AIJ, factored   --                          --
                          (in place: sor
                          on 1 rank)
========================  ==============  ==========================  ======================

The coarsest level is always AIJ and factored: LU on one rank, PCREDUNDANT
(every rank the same sequential LU of the gathered matrix) on several, so a
solve gives the same bits run after run on the same rank count.
"""

from dataclasses import dataclass

from ..core import discretisation as fe
from .hierarchy import COARSE_MAX_DOFS, MAX_LEVELS, hierarchy

# Storage of a level's operator.
MATRIX_FREE = "matrix-free"  # applied from the element moduli in C (matfree.FineOperator): the finest level only
IN_PLACE = "aij-in-place"    # AIJ whose CSR values are written in place (one rank, natural order)
STENCIL = "stencil"          # symmetric node stencils applied in C (stencil.StencilOperator)
SBAIJ = "sbaij"
AIJ = "aij"
# The transfer (interpolation) into a level from the next coarser one.
GRID = "grid"                # applied from the grids in C (transfer.GridTransfer)
STORED = "aij"               # a PETSc AIJ matrix (multigrid.stored_interpolation)
# A level's smoother (the coarsest level's solve).
FUSED = "fused-chebyshev"    # fused.ChebyshevSmoother, a KSPPYTHON: Chebyshev(2)/Jacobi in one pass a step
CHEBYSHEV = "chebyshev"      # PETSc's KSPCHEBYSHEV with PCJACOBI
SOR = "sor"                  # Richardson + local Gauss-Seidel, forward down and backward up
LU = "lu"                    # the coarsest level on one rank
REDUNDANT_LU = "redundant-lu"  # the coarsest level on several ranks
SMOOTHERS = (CHEBYSHEV, SOR)
# A level smaller than this a rank stays SBAIJ and its interpolation AIJ: its smoothing is visited
# many times a cycle and is short, where a Python smoother's call can cost more than PETSc's.
# 2048x1024 on 2 ranks, the 4290-DOF level (16 visits a cycle): 0.46 s over 6 solves as SBAIJ
# (PETSc's parallel SBAIJ product exchanges twice), 0.17 s as stencils.
STENCIL_MIN_DOFS = 2000
# W-cycles below the finest level, a V on it: on converged SIMP designs (0/1 with voids) W-cycles
# take 8-11 CG iterations from 128x64 to 1024x512 instead of 17-19 with V-cycles
# (benchmarks/results/large_grids.md); the finest level's V visits the next level once a cycle
# instead of twice, where the coarser levels are most of a cycle's time: 2048x1024 on 2 ranks, 6.75
# MG-CG iterations a solve instead of 6.25 and 3.44 s an iteration instead of 4.02
# (benchmarks/results/large_grids_finest_cycle.md).  ``-<prefix>pc_mg_cycle_type`` sets every
# level, the finest included.
CYCLE = "w"
FINEST_CYCLE = "v"
# The smoothing of each kind, as option defaults under the system's prefix (the command line wins).
# Chebyshev: the operators are SPD, so Lanczos (CG) estimates the extreme eigenvalues with 10 MatMults
# and no Gram-Schmidt (PETSc's default is GMRES).  SOR: a forward Gauss-Seidel sweep on the way down and
# a backward one on the way up (so the cycle stays symmetric, as CG needs), no eigenvalue estimates
# (benchmarks/results/solver_crossover.md).  The sweeps are local (each rank's own rows, block Jacobi
# between ranks): on one rank the very sweeps of a global one, and the only kind MPIAIJ has.
SMOOTHING = {
    CHEBYSHEV: {"mg_levels_ksp_max_it": 2, "mg_levels_esteig_ksp_type": "cg"},
    SOR: {"mg_levels_ksp_type": "richardson", "mg_levels_ksp_max_it": 1,
          "mg_levels_pc_type": "sor", "mg_levels_pc_sor_local_forward": True,
          "pc_mg_distinct_smoothup": True,
          "mg_levels_up_ksp_type": "richardson", "mg_levels_up_ksp_max_it": 1,
          "mg_levels_up_pc_type": "sor", "mg_levels_up_pc_sor_local_backward": True},
}


@dataclass(frozen=True)
class PlannedLevel:
    """One level of a :class:`MultigridPlan`: ``number`` as PCMG numbers it (0 the coarsest), ``grid``
    (the elements along each axis, x first), ``dofs``, ``storage``, ``transfer`` (into this level from
    the next coarser one; None on the coarsest), ``smoother`` and ``cycle`` (None on the coarsest)."""

    number: int
    grid: tuple
    dofs: int
    storage: str
    transfer: object
    smoother: str
    cycle: object


@dataclass(frozen=True)
class MultigridPlan:
    """The levels of one multigrid (finest first, :class:`PlannedLevel`) and what decided them.

    ``hierarchy`` holds the :class:`~.hierarchy.Level` grids (the same order) whose node positions and
    rank boxes the operators and transfers are built from; ``coarse_operators`` says where the coarser
    levels' operators come from: ``"grid"`` (a :class:`~.grid_galerkin.GridGalerkin` a level, coarse
    DMDAs), ``"element"`` (a :class:`~.galerkin.ElementGalerkin` a level, one rank in place) or None
    (one level).
    """

    dim: int
    shape: tuple
    ranks: int
    smoother: str
    kernels: bool
    levels: tuple
    hierarchy: tuple
    coarse_operators: object

    @property
    def finest(self):
        return self.levels[0]

    @property
    def coarse_storages(self):
        """The storage of levels 1.. (second finest first)."""
        return [level.storage for level in self.levels[1:]]

    @property
    def options(self):
        """The option defaults the plan inserts under the system's prefix (the command line wins)."""
        if len(self.levels) == 1:
            return {}
        return {"pc_mg_galerkin": "none",  # the coarse operators come from the moduli
                **SMOOTHING[self.smoother],
                "mg_coarse_ksp_type": "preonly",
                "mg_coarse_pc_type": "lu" if self.ranks == 1 else "redundant"}

    def rows(self):
        """The table's rows: one a level, finest first."""
        return [(lv.number, "x".join(map(str, lv.grid)), lv.dofs, lv.storage, lv.transfer or "-",
                 lv.smoother, lv.cycle or "-") for lv in self.levels]

    def __str__(self):
        head = ("level", "grid", "dofs", "storage", "transfer", "smoother", "cycle")
        rows = [tuple(map(str, row)) for row in self.rows()]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        line = lambda r: "  ".join(v.rjust(w) if i in (0, 2) else v.ljust(w)  # noqa: E731
                                   for i, (v, w) in enumerate(zip(r, widths))).rstrip()
        title = (f"multigrid plan: {len(self.levels)} levels, {self.dim}D {'x'.join(map(str, self.shape[::-1]))} "
                 f"elements, {self.ranks} rank{'s' if self.ranks > 1 else ''}, {self.smoother} smoothing, "
                 f"kernels {'loaded' if self.kernels else 'not loaded'}")
        return "\n".join([title, "  " + line(head), *("  " + line(r) for r in rows)])


def make_plan(shape, ranks=1, smoother=CHEBYSHEV, kernels=True, ownership=None,
              coarse_max_dofs=COARSE_MAX_DOFS, max_levels=MAX_LEVELS):
    """The :class:`MultigridPlan` of a grid of ``shape`` (cells along each axis, slowest first: (nely,
    nelx) in 2D) on ``ranks`` ranks.

    ``ownership``: the nodes each process owns along each axis, x first (``DMDAGetOwnershipRanges``;
    default one process along each axis, only right for one rank); ``kernels``: whether every rank
    loads the compiled kernels; ``coarse_max_dofs``: the coarsest level's size target; ``max_levels``:
    a cap on the level count (the one input that changes the levels; PCMG's ``-pc_mg_levels`` does
    not: a different count is an error, see :class:`~.multigrid.MultigridMethod`).
    """
    dim = fe.grid_dimension(shape)
    if dim != 2:
        raise fe.not_in_3d("the multigrid plan")
    if smoother not in SMOOTHERS:
        raise ValueError(f"unknown smoother {smoother!r}: expected one of {', '.join(SMOOTHERS)}")
    nely, nelx = shape
    if ownership is None and ranks > 1:
        raise ValueError("a plan on several ranks needs the nodes each process owns (ownership)")
    grids = tuple(hierarchy(shape, ownership, coarse_max_dofs=coarse_max_dofs, max_levels=max_levels))
    n = len(grids)
    factor = LU if ranks == 1 else REDUNDANT_LU
    in_place = smoother == SOR and ranks == 1
    if n == 1:
        only = PlannedLevel(0, (nelx, nely), grids[0].n_dofs, IN_PLACE if in_place else AIJ, None, factor, None)
        return MultigridPlan(dim, tuple(shape), ranks, smoother, bool(kernels), (only,), grids, None)
    from_kernels = smoother == CHEBYSHEV and bool(kernels)
    stored = SBAIJ if smoother == CHEBYSHEV else AIJ
    smoothing = CHEBYSHEV if smoother == CHEBYSHEV else SOR
    smallest = ranks * STENCIL_MIN_DOFS
    levels = []
    for depth, grid in enumerate(grids):
        number = n - 1 - depth
        large = from_kernels and grid.n_dofs >= smallest
        if depth == n - 1:
            storage, smoothed, cycle = AIJ, factor, None
        elif depth == 0:
            storage = MATRIX_FREE if from_kernels else IN_PLACE if in_place else stored
            smoothed, cycle = (FUSED if from_kernels else smoothing), FINEST_CYCLE
        else:
            storage = STENCIL if large else stored
            smoothed, cycle = (FUSED if large else smoothing), CYCLE
        transfer = None if depth == n - 1 else GRID if from_kernels and grids[depth + 1].n_dofs >= smallest else STORED
        levels.append(PlannedLevel(number, (grid.nelx, grid.nely), grid.n_dofs, storage, transfer, smoothed, cycle))
    return MultigridPlan(dim, tuple(shape), ranks, smoother, bool(kernels), tuple(levels), grids,
                         "element" if in_place else "grid")


def ways():
    """Every way a multigrid solve can go, one (description, plan) a way, on a grid that shows it
    (1024x512 on 2 ranks, 300x100 and 40x20 on one)."""
    two = ((513, 512), (513,))
    return [("chebyshev, kernels, 2 ranks", make_plan((512, 1024), 2, CHEBYSHEV, True, two)),
            ("chebyshev, no kernels, 1 rank", make_plan((100, 300), 1, CHEBYSHEV, False)),
            ("sor, 1 rank", make_plan((100, 300), 1, SOR, True)),
            ("sor, 2 ranks", make_plan((512, 1024), 2, SOR, True, two)),
            ("one level, 1 rank", make_plan((20, 40), 1, CHEBYSHEV, True))]


__all__ = ["MultigridPlan", "PlannedLevel", "make_plan", "ways"]
