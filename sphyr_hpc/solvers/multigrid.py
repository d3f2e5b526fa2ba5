"""CG + geometric multigrid on the grid's own hierarchy: the solver of large grids.

:class:`MultigridMethod`, the part of a :class:`~.system.GridSystem` that solves
by multigrid, makes the grid's :class:`~.plan.MultigridPlan` (a pure function of
the grid, the ranks, the smoother kind and whether the compiled kernels load:
:func:`~.plan.make_plan`) and builds what each planned level says;
:meth:`~MultigridMethod.configure` gives the levels to PETSc's PCMG and returns
the plan's option defaults, which the system inserts before it calls
``setFromOptions`` once, last, so the command line wins on every level (the
cycle included).  No option is read to choose what is built.

What a level can be (the plan's words):

* ``matrix-free``: the finest level applied from the element moduli in C, no
  stored K (:class:`~.matfree.FineOperator`, a MATPYTHON);
* ``stencil``: a coarse level held as symmetric node stencils applied in C
  (:class:`~.stencil.StencilOperator`);
* ``sbaij``/``aij``: a PETSc matrix on the level's DMDA (the finest assembled in
  2x2 element blocks, :class:`StoredLevel`); ``aij-in-place``: the finest on one
  rank with K's CSR values written in place (:class:`~.direct.InPlaceElements`);
* the coarsest level is AIJ and factored (LU; PCREDUNDANT on several ranks).

Every level, the finest and each coarser one, is an object of one small
interface: its ``mat``, ``assemble(moduli)``, ``nbytes`` (what it holds) and
``close()``.  The coarser levels' operators are summed from the moduli
(:class:`~.grid_galerkin.GridGalerkin` on a coarse DMDA a level, a level deeper
than :data:`~.grid_galerkin.DIRECT_DEPTH` from the one above it, or
:class:`~.galerkin.ElementGalerkin` on one rank in place); the coarsest is
factored by PCMG's coarse solve.  The smoothers are set on each
level's KSP in code as the plan says (the fused Chebyshev smoother,
:class:`~.fused.ChebyshevSmoother`, a KSPPYTHON; PETSc's Chebyshev/Jacobi; SOR as
option defaults), and so are the cycles (W below a V on the finest level).

Every default is overridable under the system's options prefix, e.g.
``-sphyr_mg_levels_ksp_max_it 3``, ``-sphyr_pc_mg_cycle_type v`` (every level,
the finest included), ``-sphyr_mg_levels_5_ksp_type chebyshev
-sphyr_mg_levels_5_pc_type jacobi`` (PETSc's own Chebyshev on level 5).  The
level count is the plan's: ``max_levels`` caps it, and
``-<prefix>pc_mg_levels`` other than the plan's count is an error.

Dirichlet DOFs are identity rows and columns of A (:mod:`.system`), so A stays
SPD and CG applies; their Galerkin contribution ``P^T I P`` only adds positive
stiffness to coarse nodes next to supports.
"""

import sys

import numpy as np

from ..runtime.native import NativeUnavailable
from ..runtime.petsc import OptionsError
from . import hierarchy
from . import plan as mgplan
from .assembly import ElementBlockAssembly
from .direct import InPlaceElements, MatLevel
from .fused import ChebyshevSmoother
from .hierarchy import MAX_LEVELS, interpolation_csr
from .transfer import GridTransfer

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
SMOOTHERS = mgplan.SMOOTHERS
# The smoothing option defaults of each kind (for GAMG's levels too).
SMOOTHING = {"chebyshev": {"mg_levels_ksp_type": "chebyshev", "mg_levels_pc_type": "jacobi",
                           **mgplan.SMOOTHING[mgplan.CHEBYSHEV]},
             "sor": mgplan.SMOOTHING[mgplan.SOR]}
_FALLBACK_SAID = []  # the no-kernels warning is printed once a process


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


def kernels_available(comm, prefix):
    """Whether every rank loads the compiled kernels (one warning line on rank 0 where not)."""
    from . import matfree

    try:
        matfree.kernel()
        reason = None
    except NativeUnavailable as err:
        reason = str(err)
    # Every rank the same operators (their set-up is collective), also where one rank's load failed.
    reason = next((r for r in comm.tompi4py().allgather(reason) if r), None)
    if reason is None:
        return True
    if not _FALLBACK_SAID and comm.getRank() == 0:
        print(f"sphyr_hpc: warning: {reason}; the multigrid operators are stored as PETSc matrices "
              f"(slower, more memory)", file=sys.stderr)
    _FALLBACK_SAID.append(True)
    return False


class StoredLevel(MatLevel):
    """The finest level as a PETSc matrix on the system's nodal DMDA (``storage``: SBAIJ or AIJ),
    assembled from the element moduli in 2x2 element blocks (:class:`~.assembly.ElementBlockAssembly`)."""

    values = None  # not assembled in place

    def __init__(self, system, storage):
        PETSc = system.PETSc
        system.da.setMatType(storage)
        self.mat = system.da.createMatrix()
        self.mat.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)
        tune_operator(self.mat)
        (exs, exe), (eys, eye) = system.da_elem.getRanges()
        self._blocks = ElementBlockAssembly(PETSc, system.loadcase, system.local_edofs[:, 0::2] // 2,
                                            ((eys, eye), (exs, exe)), system.loadcase.fixed_dofs(), system.ke)

    def assemble(self, moduli):
        self._blocks.assemble(self.mat, moduli)


def finest_level(system, plan):
    """The operator of ``plan``'s finest level for ``system``."""
    storage = plan.finest.storage
    if storage == mgplan.MATRIX_FREE:
        from .matfree import FineOperator

        return FineOperator(system.PETSc, system.da, system.da_elem, system.loadcase.shape, system.fixed_local,
                            system.ke, system.comm, mgplan.STENCIL)
    if storage == mgplan.IN_PLACE:
        fine = InPlaceElements(system)
        fine.mat.setOption(fine.mat.Option.USE_INODES, USE_INODES)
        return fine
    return StoredLevel(system, storage)


class MultigridMethod:
    """CG + geometric multigrid on the grid's plan (see the module docstring): the part of a
    :class:`~.system.GridSystem` that solves by multigrid.

    ``smoother``: ``"chebyshev"`` (the large grids) or ``"sor"`` (stored operators, Gauss-Seidel:
    the yardstick's SIMP runs); ``coarse_max_dofs``: the coarsest grid's size target (None:
    :data:`~.hierarchy.COARSE_MAX_DOFS`); ``max_levels``: a cap on the level count;
    ``matrix_free``: False for the plan without the compiled kernels (every operator a PETSc matrix,
    what runs where the kernels are not installed), None for the kernels where they load.

    Made, it makes the plan and every level: ``fine`` (K), ``coarse`` (the coarser levels' operators,
    assembled with K) and the transfers (``interpolations``: PETSc's matrices, coarsest pair first);
    :meth:`configure` gives them to PCMG with the plan's smoothers and cycles.
    """

    name = "mg"
    iterative = True

    def __init__(self, system, smoother="chebyshev", coarse_max_dofs=None, matrix_free=None, max_levels=MAX_LEVELS):
        if smoother not in SMOOTHERS:
            raise ValueError(f"unknown smoother {smoother!r}: expected one of {', '.join(SMOOTHERS)}")
        self.PETSc, self.prefix, self._ranks = system.PETSc, system.prefix, system.comm.getSize()
        coarse_max_dofs = coarse_max_dofs if coarse_max_dofs is not None else hierarchy.COARSE_MAX_DOFS
        kernels = smoother == mgplan.CHEBYSHEV and matrix_free is not False and kernels_available(system.comm,
                                                                                                  system.prefix)
        self.plan = mgplan.make_plan(system.loadcase.shape, self._ranks, smoother, kernels,
                                     system.da.getOwnershipRanges(), coarse_max_dofs, max_levels)
        self.levels = list(self.plan.hierarchy)
        self.matrix_free = self.plan.finest.storage == mgplan.MATRIX_FREE
        self.coarse, self.transfers, self.interpolations = None, [], []
        self.fine = finest_level(system, self.plan)
        check_fine_numbering(system, self.levels[0])
        if len(self.levels) > 1:
            self.coarse = coarse_levels(system, self.plan)
            self.transfers = transfers(system, self.plan, self.coarse)
            self.interpolations = [getattr(owner, "mat", owner) for owner in self.transfers]
        self.mg_cycle, self.mg_finest_cycle = mgplan.CYCLE, mgplan.FINEST_CYCLE

    def configure(self, ksp):
        """CG on PCMG with the plan's levels, smoothers and cycles (PCLU/PCREDUNDANT for one level)."""
        PETSc = self.PETSc
        ksp.setType(PETSc.KSP.Type.CG)
        ksp.setTolerances(rtol=RTOL, max_it=MAX_IT)
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
        ksp.setInitialGuessNonzero(True)  # warm start from the previous displacements
        pc = ksp.getPC()
        if self.coarse is None:
            # Small enough for the coarse solve itself (PCMG would smooth a 1-level "hierarchy").
            pc.setType(PETSc.PC.Type.LU if self._ranks == 1 else PETSc.PC.Type.REDUNDANT)
            return self.plan.options
        pc.setType(PETSc.PC.Type.MG)
        pc.setMGLevels(len(self.plan.levels))
        for number, level in enumerate(reversed(self.coarse)):  # coarsest first, as PCMG numbers them
            (pc.getMGCoarseSolve() if number == 0 else pc.getMGSmoother(number)).setOperators(level.mat)
        for level, P in enumerate(self.interpolations, start=1):
            pc.setMGInterpolation(level, P)
        set_smoothers(PETSc, pc, self.plan)
        return self.plan.options

    def options_read(self, ksp, options):
        """The level count is the plan's; the cycles in force, for the reports (PETSc has no getter)."""
        pc = ksp.getPC()
        if pc.getType() == "mg" and pc.getMGLevels() != len(self.levels):
            # setFromOptions took -pc_mg_levels as given: PCMG would set up levels that have no operators.
            raise OptionsError(f"-{self.prefix}pc_mg_levels {pc.getMGLevels()}: this grid's multigrid plan has "
                               f"{len(self.levels)} levels (at most {len(self.levels)}); the level count is "
                               f"the plan's (max_levels), leave the option out")
        cycle = options.getString("pc_mg_cycle_type", "").lower()  # it sets every level
        self.mg_cycle = cycle or mgplan.CYCLE
        self.mg_finest_cycle = cycle or mgplan.FINEST_CYCLE

    def set_up(self, ksp, first):
        """The fused smoothers' eigenvalue estimates for the current K."""
        set_up_fused_smoothers(ksp)

    def assemble(self, moduli, ksp):
        """Every level for the moduli; ``ksp``'s coarser levels told that their operators changed."""
        self.fine.assemble(moduli)
        if self.coarse is not None:
            for level in self.coarse:  # finest first: a deep level follows from the one above
                level.assemble(moduli)
            renew_coarse_smoothers(ksp)

    def close(self):
        for owner in self.transfers:
            if isinstance(owner, GridTransfer):
                owner.close()  # its scatter and its matrix
            else:
                owner.destroy()
        self.interpolations = self.transfers = ()
        for level in [*(self.coarse or ()), self.fine]:
            if level is not None:
                level.close()
        self.coarse = self.fine = None


def coarse_levels(system, plan):
    """The operators of levels 1.. (second finest first) from the moduli, one object a level, as the
    plan says."""
    if plan.coarse_operators == "element":
        from .galerkin import element_galerkin_levels

        return element_galerkin_levels(system.PETSc, plan.hierarchy, system.local_edofs, system.fixed_local,
                                       system.ke, use_inodes=USE_INODES)
    from .grid_galerkin import grid_galerkin_levels

    return grid_galerkin_levels(system.PETSc, system, plan.hierarchy, plan.coarse_storages, tune=tune_operator)


def transfers(system, plan, coarse):
    """The interpolations, coarsest pair first, as the plan says: applied from the grids in C
    (a :class:`~.transfer.GridTransfer` onto the coarse level's DMDA, its ``mat``) or stored as AIJ
    (the matrix)."""
    grids = plan.hierarchy
    out = []
    for depth, (planned, fine, coarse_grid) in enumerate(zip(plan.levels, grids[:-1], grids[1:])):
        if planned.transfer == mgplan.GRID:
            out.append(GridTransfer(system.PETSc, fine, coarse_grid, coarse[depth].dm, hierarchy.axis_weights))
        else:
            out.append(stored_interpolation(system, fine, coarse_grid))
    return out[::-1]


def set_smoothers(PETSc, pc, plan):
    """Each smoothed level's KSP as ``plan`` says, set in code before ``setFromOptions`` (which may
    change any of it): the cycles (W, a V on the finest level), the fused Chebyshev smoother
    (a KSPPYTHON) or PETSc's Chebyshev, both with PCJACOBI; SOR comes from the plan's option defaults."""
    cycles = PETSc.PC.MGCycleType
    pc.setMGCycleType(getattr(cycles, mgplan.CYCLE.upper()))
    pc.setMGCycleTypeOnLevel(plan.finest.number, getattr(cycles, plan.finest.cycle.upper()))
    for level in plan.levels[:-1]:
        smoother = pc.getMGSmoother(level.number)
        if level.smoother == mgplan.FUSED:
            smoother.setType(PETSc.KSP.Type.PYTHON)
            smoother.setPythonContext(ChebyshevSmoother())
            smoother.getPC().setType(PETSc.PC.Type.JACOBI)  # applied by the fused steps; PETSc's if the type changes
            # A KSPPYTHON declares no support for PCMG's norm type NONE; it computes no norm either way.
            smoother.setNormType(PETSc.KSP.NormType.PRECONDITIONED)
        elif level.smoother == mgplan.CHEBYSHEV:
            smoother.setType(PETSc.KSP.Type.CHEBYSHEV)
            smoother.getPC().setType(PETSc.PC.Type.JACOBI)


def check_fine_numbering(system, level):
    """The DMDA's global numbering equals :meth:`Level.global_dof0` on this rank's ghosted nodes."""
    (gxs, gxe), (gys, gye) = system.da.getGhostRanges()
    jj, ii = np.meshgrid(np.arange(gys, gye), np.arange(gxs, gxe), indexing="ij")
    expected = level.global_dof0(ii.ravel(), jj.ravel())
    got = np.asarray(system.da.getLGMap().getIndices()).reshape(-1, 2)[:, 0]
    if not np.array_equal(expected, got):
        raise RuntimeError("DMDA global numbering differs from the multigrid hierarchy's")


def stored_interpolation(system, fine, coarse):
    """P from ``coarse`` to ``fine`` (:class:`~.hierarchy.Level`) as a PETSc AIJ matrix (:func:`interpolation_csr`)."""
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


def renew_coarse_smoothers(ksp):
    """Mark the set-up of every coarser level's KSP of ``ksp``'s PCMG stale (KSPSetOperators with its own
    operators), so that the next set-up redoes it for their new values (Chebyshev's eigenvalue
    estimates, the coarse factorisation).

    PCMG does so itself for the finest level and for operators it computes (Galerkin products); the
    operators from the moduli are updated in place, where a KSP set up before would keep the
    Chebyshev interval of the first design.
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


__all__ = ["MultigridMethod", "StoredLevel", "kernels_available", "set_smoothers"]
