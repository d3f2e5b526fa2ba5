"""CG + geometric multigrid on the grid's own hierarchy: the solver of large grids.

The hierarchy (levels, coarsening, bilinear interpolation) is
:mod:`sphyr_hpc.solvers.hierarchy`; this module puts it into PETSc's PCMG.
:class:`MultigridSystem` builds one of two operator sets, chosen by what the
system is for, never by an option:

* **from the kernels** (the default with Chebyshev smoothing where the compiled
  kernels are installed, :mod:`sphyr_hpc.runtime.native`): the finest level
  applied from the element moduli with no stored K (:mod:`.matfree`, a
  MATPYTHON), the coarse operators summed from the moduli on coarse DMDAs
  (:mod:`.grid_galerkin`: no ``MatPtAP``, no intermediate products held), the
  levels of :data:`STENCIL_MIN_DOFS` DOFs a rank and more held as symmetric
  node stencils applied in C (:mod:`.stencil`), the smaller ones as SBAIJ,
  the coarsest as AIJ for its LU; the interpolations into levels of
  :data:`STENCIL_MIN_DOFS` a rank and more applied from the grids in C
  (:mod:`.transfer`), the smaller ones stored as AIJ; Chebyshev/Jacobi
  smoothing fused into one pass a step on the finest and the stencil levels
  (:class:`~.fused.ChebyshevSmoother`, a KSPPYTHON).
* **stored** (Gauss-Seidel smoothing, ``smoother="sor"``: the yardstick's
  SIMP runs, :mod:`.sizing`; and Chebyshev where the kernels are not
  installed, after one warning line): every operator a PETSc matrix, K
  assembled in place on one rank with the coarse operators from the moduli
  (:mod:`.galerkin`), else K in 2x2 element blocks (:mod:`.assembly`) and the
  coarse operators on coarse DMDAs; SBAIJ with Chebyshev (the upper block
  triangle moves 0.47x the bytes of AIJ a MatMult), AIJ with SOR (PETSc 3.18's
  SOR on SBAIJ with 2x2 blocks crashes); interpolations stored as AIJ.

Defaults (each overridable under the system's options prefix, e.g.
``-sphyr_mg_levels_ksp_max_it 3``, ``-sphyr_pc_mg_cycle_type v``): CG to a
relative residual of :data:`RTOL`; W-cycles below a V on the finest level
(:data:`FINEST_CYCLE`), Chebyshev(2)/Jacobi smoothing with eigenvalue
estimates (10 CG steps) recomputed for every new operator, LU on the coarsest
level (``redundant`` LU on several ranks).  A level's fused smoother is a
default like any other: ``-sphyr_mg_levels_5_ksp_type chebyshev`` gives PETSc's
own KSPCHEBYSHEV with PCJACOBI on level 5.
``-<prefix>pc_mg_levels N`` caps the number of levels (PCMG's option, read
when the hierarchy is built).

Dirichlet DOFs are identity rows and columns of A (:mod:`.system`), so A stays
SPD and CG applies; their Galerkin contribution ``P^T I P`` only adds positive
stiffness to coarse nodes next to supports.
"""

import sys
from dataclasses import dataclass

import numpy as np

from ..core import discretisation as fe
from ..runtime import events as timing
from ..runtime.native import NativeUnavailable
from ..runtime.petsc import OptionsError, inserted_options
from . import hierarchy as grids
from .assembly import ElementBlockAssembly
from .direct import InPlaceElements
from .fused import ChebyshevSmoother, operator_of
from .hierarchy import MAX_LEVELS, Level, interpolation_csr
from .stencil import STENCIL
from .system import GridSystem

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
# Stored storage of the smoothed levels with Chebyshev (SBAIJ: 5 of 9 blocks, one index a block)
# and with SOR (AIJ); the coarsest level is factorised (LU, redundant on several ranks): AIJ.
MAT_TYPE = "sbaij"
SOR_MAT_TYPE = "aij"
COARSE_MAT_TYPE = "aij"
# The finest level's own cycle (every other level's is ``-<prefix>pc_mg_cycle_type``, W by default):
# a V there visits the next level once a cycle instead of twice.  With the finest level applied from
# the moduli the coarser levels are most of a cycle's time: 2048x1024 on 2 ranks, 6.75 MG-CG
# iterations a solve instead of 6.25 and 3.44 s an iteration instead of 4.02
# (benchmarks/results/large_grids_finest_cycle.md).
FINEST_CYCLE = "v"
# A level smaller than this a rank stays SBAIJ and its interpolation AIJ: its smoothing is visited
# many times a cycle and is short, where a Python smoother's call can cost more than PETSc's.
# 2048x1024 on 2 ranks, the 4290-DOF level (16 visits a cycle): 0.46 s over 6 solves as SBAIJ
# (PETSc's parallel SBAIJ product exchanges twice), 0.17 s as stencils.
STENCIL_MIN_DOFS = 2000
SMOOTHERS = ("chebyshev", "sor")
# The smoothing of each kind, as option defaults.  Chebyshev: the operators are SPD, so Lanczos
# (CG) estimates the extreme eigenvalues with 10 MatMults and no Gram-Schmidt (PETSc's default is
# GMRES).  SOR: a forward Gauss-Seidel sweep on the way down and a backward one on the way up (so
# the cycle stays symmetric, as CG needs), no eigenvalue estimates (benchmarks/results/solver_crossover.md).
# The sweeps are local (each rank's own rows, block Jacobi between ranks): on one rank the very
# sweeps of a global one (the same bits), and the only kind MPIAIJ has: a global sweep on several
# ranks is a PETSc error in every solve ("Parallel SOR not supported"), after which PETSc 3.18's
# KSPDestroy of the hierarchy frees a level vector twice (a segmentation fault on closing).
SMOOTHING = {
    "chebyshev": {"mg_levels_ksp_type": "chebyshev", "mg_levels_pc_type": "jacobi", "mg_levels_ksp_max_it": 2,
                  "mg_levels_esteig_ksp_type": "cg"},
    "sor": {"mg_levels_ksp_type": "richardson", "mg_levels_ksp_max_it": 1,
            "mg_levels_pc_type": "sor", "mg_levels_pc_sor_local_forward": True,
            "pc_mg_distinct_smoothup": True,
            "mg_levels_up_ksp_type": "richardson", "mg_levels_up_ksp_max_it": 1,
            "mg_levels_up_pc_type": "sor", "mg_levels_up_pc_sor_local_backward": True},
}
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


@dataclass
class MultigridSetup:
    """What :class:`MultigridSystem` built for PCMG: ``levels`` (finest first), ``interpolations`` (its
    PETSc interpolation matrices, coarsest pair first) and ``coarse`` (the coarse operators, updated
    with K), owned by this object and destroyed by :meth:`close` (the system closes it)."""

    levels: list
    interpolations: list = ()
    coarse: object = None

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


class MultigridSystem(GridSystem):
    """K(E) u = f by CG + geometric multigrid (see the module docstring).

    ``smoother``: ``"chebyshev"`` (the large grids) or ``"sor"`` (stored
    operators, Gauss-Seidel: the yardstick's SIMP runs); ``coarse_max_dofs``:
    the coarsest grid's size target (None: :data:`~.hierarchy.COARSE_MAX_DOFS`);
    ``matrix_free``: False for the stored operators with Chebyshev too (what
    runs where the kernels are not installed), None for the kernels where they
    load.
    """

    solver = "mg"

    def __init__(self, loadcase, comm=None, prefix="sphyr_", nu=fe.NU, element_halo=1, options=None,
                 smoother="chebyshev", coarse_max_dofs=None, matrix_free=None):
        if smoother not in SMOOTHERS:
            raise ValueError(f"unknown smoother {smoother!r}: expected one of {', '.join(SMOOTHERS)}")
        self.smoother = smoother
        self.coarse_max_dofs = coarse_max_dofs if coarse_max_dofs is not None else grids.COARSE_MAX_DOFS
        self._matrix_free = matrix_free
        self._fine = self._elements = self._blocks = None
        super().__init__(loadcase, comm=comm, prefix=prefix, nu=nu, element_halo=element_halo, options=options)

    # -- the operators --------------------------------------------------------------------------
    def _build_operator(self):
        PETSc = self.PETSc
        nely, nelx = self.loadcase.shape
        lx, ly = self.da.getOwnershipRanges()
        # The cap as PCMG will read it: the command line over the caller's options.
        with inserted_options(self.prefix, self._options) as options:
            max_levels = options.getInt("pc_mg_levels", MAX_LEVELS) if options.hasName("pc_mg_levels") else MAX_LEVELS
        self.levels = grids.hierarchy(nelx, nely, lx, ly, coarse_max_dofs=self.coarse_max_dofs,
                                      max_levels=max_levels)
        wanted = self._matrix_free is not False and self.smoother == "chebyshev" and len(self.levels) > 1
        self.matrix_free = wanted and kernels_available(self.comm, self.prefix)
        if self.matrix_free:
            from .matfree import FineOperator

            self._fine = FineOperator(PETSc, self.da, self.da_elem, self.loadcase.shape, self.fixed_local, self.ke,
                                      self.comm, STENCIL)
            return self._fine.mat
        if self.smoother == "sor" and self.comm.getSize() == 1:
            self._elements = InPlaceElements(self)  # one sparse product; node rows cost 4x more
            self._values = self._elements.values
            return self._elements.K
        self.da.setMatType(MAT_TYPE if self.smoother == "chebyshev" else SOR_MAT_TYPE)
        K = self.da.createMatrix()
        K.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)
        tune_operator(K)
        (exs, exe), (eys, eye) = self.da_elem.getRanges()
        self._blocks = ElementBlockAssembly(PETSc, self.loadcase, self.local_edofs[:, 0::2] // 2,
                                            ((eys, eye), (exs, exe)), self.loadcase.fixed_dofs(), self.ke)
        return K

    def _configure(self, ksp):
        PETSc = self.PETSc
        ksp.setType(PETSc.KSP.Type.CG)
        ksp.setTolerances(rtol=RTOL, max_it=MAX_IT)
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
        ksp.setInitialGuessNonzero(True)  # warm start from the previous displacements
        pc = ksp.getPC()
        levels = self.levels
        check_fine_numbering(self, levels[0])
        if len(levels) == 1:
            # Small enough for the coarse solver itself (PCMG would smooth a 1-level "hierarchy").
            # SBAIJ holds one triangle: Cholesky (PETSc's LU takes no SBAIJ).
            pc.setType(PETSc.PC.Type.CHOLESKY if "sbaij" in self.K.getType() else PETSc.PC.Type.LU)
            if self.comm.getSize() > 1:
                pc.setFactorSolverType(PETSc.Mat.SolverType.MUMPS)
            self.multigrid = MultigridSetup(levels)
            return {}
        pc.setType(PETSc.PC.Type.MG)
        pc.setMGLevels(len(levels))
        if self._elements is not None:
            # One rank, K assembled in place: the coarse operators from the element moduli too.
            from .galerkin import ElementGalerkin

            coarse = ElementGalerkin(PETSc, levels, self.local_edofs, self.fixed_local, self.ke, use_inodes=USE_INODES)
        else:
            from .grid_galerkin import GridGalerkin

            coarse = GridGalerkin(PETSc, self, levels, self._level_types(), tune=tune_operator)
        for level, A in enumerate(reversed(coarse.mats)):  # coarsest first, as PCMG numbers them
            (pc.getMGCoarseSolve() if level == 0 else pc.getMGSmoother(level)).setOperators(A)
        interpolations = self._interpolations(getattr(coarse, "dms", None))
        for level, P in enumerate(interpolations, start=1):
            pc.setMGInterpolation(level, P)
        self.multigrid = MultigridSetup(levels, interpolations, coarse)
        return {
            "pc_mg_galerkin": "none",  # the coarse operators come from the moduli (set above)
            # W-cycles: on converged SIMP designs (0/1 with voids) 8-11 CG iterations from
            # 128x64 to 1024x512 instead of 17-19 with V-cycles, and faster overall
            # (benchmarks/results/large_grids.md).
            "pc_mg_cycle_type": "w",
            **SMOOTHING[self.smoother],
            **self._fused_defaults(len(levels) - 1, _stencil_levels(coarse)),
            "mg_coarse_ksp_type": "preonly",
            "mg_coarse_pc_type": "lu" if self.comm.getSize() == 1 else "redundant",
        }

    def _level_types(self):
        """The storage of levels 1.. (second finest first): node stencils from the kernels where a level
        has :data:`STENCIL_MIN_DOFS` DOFs a rank or more, else SBAIJ (AIJ with SOR); the coarsest AIJ."""
        stored = MAT_TYPE if self.smoother == "chebyshev" else SOR_MAT_TYPE
        smallest = self.comm.getSize() * STENCIL_MIN_DOFS
        types = [STENCIL if self.matrix_free and level.n_dofs >= smallest else stored for level in self.levels[1:-1]]
        return types + [COARSE_MAT_TYPE]

    def _interpolations(self, coarse_dms):
        """The interpolations, coarsest pair first: from the grids in C (:mod:`.transfer`) into a level
        of :data:`STENCIL_MIN_DOFS` DOFs a rank or more where the operators come from the kernels,
        stored as AIJ otherwise (below that a Python call costs more than PETSc's product: 2048x1024 on
        2 ranks, 16770 DOFs into 4290 slower, 66306 into 16770 faster)."""
        from .transfer import GridTransfer

        smallest = self.comm.getSize() * STENCIL_MIN_DOFS
        out = []
        for depth, (fine, coarse) in enumerate(zip(self.levels[:-1], self.levels[1:])):
            if self.matrix_free and coarse_dms is not None and coarse.n_dofs >= smallest:
                out.append(GridTransfer(self.PETSc, fine, coarse, coarse_dms[depth], grids.axis_weights).mat)
            else:
                out.append(stored_interpolation(self, fine, coarse))
        return out[::-1]

    def _fused_defaults(self, finest, stencil_levels):
        """Options making PCMG levels smooth with :class:`~.fused.ChebyshevSmoother` (a KSPPYTHON): the
        finest level and the stencil levels where the operators come from the kernels, but where the
        command line chose other smoothing for every level or for that level."""
        if not self.matrix_free:
            return {}
        opts = self.PETSc.Options(self.prefix)
        chosen = {name: opts.getString(name, default).lower()
                  for name, default in (("mg_levels_ksp_type", "chebyshev"), ("mg_levels_pc_type", "jacobi"))}
        if chosen != {"mg_levels_ksp_type": "chebyshev", "mg_levels_pc_type": "jacobi"}:
            return {}
        defaults = {}
        for level in [finest, *stencil_levels]:
            if opts.hasName(f"mg_levels_{level}_ksp_type") or opts.hasName(f"mg_levels_{level}_pc_type"):
                continue  # the command line chose this level's smoothing
            defaults.update({
                f"mg_levels_{level}_ksp_type": "python",
                f"mg_levels_{level}_ksp_python_type": "sphyr_hpc.solvers.fused.ChebyshevSmoother",
                f"mg_levels_{level}_pc_type": "none",
                # A KSPPYTHON declares no support for PCMG's norm type NONE; it computes no norm either way.
                f"mg_levels_{level}_ksp_norm_type": "preconditioned"})
        return defaults

    def _after_options(self, ksp, options):
        # The multigrid cycle in force: for reports.
        self.mg_cycle = options.getString("pc_mg_cycle_type", "v").lower()
        self.mg_finest_cycle = self.mg_cycle
        pc = ksp.getPC()
        if pc.getType() == "mg" and pc.getMGLevels() != len(self.levels):
            # More levels than the grid coarsens to (setFromOptions took -pc_mg_levels as given):
            # PCMG would set up levels that have no interpolation.
            raise OptionsError(f"-{self.prefix}pc_mg_levels {pc.getMGLevels()}: this grid coarsens to "
                               f"{len(self.levels)} levels at most; give at most {len(self.levels)}")
        if pc.getType() == "mg" and pc.getMGLevels() > 1:
            pc.setMGCycleTypeOnLevel(pc.getMGLevels() - 1, getattr(self.PETSc.PC.MGCycleType, FINEST_CYCLE.upper()))
            self.mg_finest_cycle = FINEST_CYCLE

    def _after_setup(self, first):
        set_up_fused_smoothers(self.ksp)
        if first:
            plain_csr_kernels(self.ksp)
            self.hierarchy = hierarchy_info(self.ksp)

    # -- assembly and what the solution gives ---------------------------------------------------
    def assemble(self, moduli):
        with timing.timed(timing.ASSEMBLY):
            if self._fine is not None:
                self._fine.assemble(self.K, moduli)
            elif self._elements is not None:
                self._elements.assemble(moduli)
            else:
                self._blocks.assemble(self.K, moduli)
            if self.multigrid is not None and self.multigrid.coarse is not None:
                self.multigrid.coarse.update(moduli)
                renew_coarse_smoothers(self.ksp)

    def unit_energies(self):
        """u_e^T K0 u_e of every element of this rank's slab (from the element modes in C where the
        finest level is applied from the moduli)."""
        if self._fine is not None:
            return self._fine.energies(self.local_displacements())
        return super().unit_energies()

    def _owned_objects(self):
        return (self.multigrid, self._fine, self._blocks)

    def close(self):
        super().close()
        self.multigrid = self._fine = self._blocks = self._elements = None


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


def _stencil_levels(coarse):
    """PCMG numbers of the levels of a :class:`~.grid_galerkin.GridGalerkin` held as node stencils."""
    operators = getattr(coarse, "operators", None) or []
    n = len(operators)  # operators[k] (second finest first) is PCMG level n - 1 - k (the coarsest 0)
    return [n - 1 - k for k, op in enumerate(operators) if op is not None]


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


__all__ = ["Level", "MultigridSetup", "MultigridSystem", "hierarchy_info", "kernels_available"]
