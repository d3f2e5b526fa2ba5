"""Which solver a yardstick's SIMP runs use, chosen by the size of the load case.

A SIMP run solves K(E) u = f once per iteration with a new E, so a solver's
cost there is the assembly, the set-up for the new operator and one solve.
Measured side by side on full-mask SPhyR samples (``benchmarks/solver_crossover.py``,
``benchmarks/results/solver_crossover.md``):

* PETSc's own Cholesky with nested dissection (refactorised each iteration)
  is exact, but its cost grows as n^1.5 (0.8 ms of CPU at 20x20, 71 ms at 80x80);
* CG preconditioned by the geometric multigrid of
  :mod:`~sphyr_hpc.solvers.multigrid` with :func:`simp_system_arguments`
  (Gauss-Seidel V-cycles, a coarse grid of at most 300 DOFs; on one rank the
  coarse operators are assembled from the moduli, :mod:`~sphyr_hpc.solvers.galerkin`),
  started from the last two solutions of the same run, grows about linearly
  (0.4 ms at 20x20, 13 ms at 80x80 in the benchmark's early iterations, 4-7 CG
  iterations) and is the faster from 20x20 on.

A SIMP run whose multigrid solve stalls (:class:`~sphyr_hpc.solvers.base.SolverError`)
is run again on the exact solver (:mod:`sphyr_hpc.optimiser.yardstick`).
:data:`MG_MIN_DOFS` is that crossover.  Only the SIMP runs switch: candidate
compliances, the swap polish (whose screen needs a factorisation) and the
analyses stay on the exact direct solve, and a run's warm start never reaches
into another run (:meth:`~sphyr_hpc.solvers.base.LinearSystem.reset`), so a
yardstick does not depend on which rank computed which run, nor in what order.

Tolerance: CG stops at a relative residual of :data:`SIMP_RTOL`; the SIMP
designs it leads to differ from exact solves' by far less than the parity rules' 1e-6 (docs/scoring.md, "Parity")
(tests/test_sizes.py checks the upscaled parity fixtures on multigrid).  The
multigrid system's options prefix is :data:`SIMP_PREFIX`
(``-sphyr_simp_ksp_rtol 1e-10``, ``-sphyr_simp_pc_mg_cycle_type w``...).
"""

from ..runtime.petsc import petsc
from . import condensed

# DOFs from which a yardstick's SIMP runs use CG + multigrid: replaying whole SIMP runs, multigrid
# (SIMP_OPTIONS below) took 0.46-0.58x the Cholesky's time at 20x20 (882 DOFs), 0.30-0.34x at
# 30x30 and 0.21-0.33x at 40x40 (benchmarks/results/solver_crossover.md); at 10x10 (242 DOFs)
# the hierarchy would be the coarse LU alone.
MG_MIN_DOFS = 800
SIMP_PREFIX = "sphyr_simp_"
# Relative residual of the multigrid CG solves inside SIMP (relative to ||f||, so the warm start
# counts): 5-6 CG iterations at 80x80 instead of 8 at 1e-8, 1.5x faster per solve; compliances
# within ~4e-9 of the exact solve's and the SIMP designs' candidates hold the parity rules (tests/test_sizes.py).
# The residual rule of docs/scoring.md, "Finite elements", (||K u - f|| <= 1e-6 max(||f||, 1)) is checked after every solve as always.
SIMP_RTOL = 1e-6
# Smoothing: Gauss-Seidel (``smoother="sor"`` of :class:`~sphyr_hpc.solvers.multigrid.MultigridMethod`:
# a forward sweep on the way down, a backward one on the way up) instead of the Chebyshev(2)/Jacobi
# default, which re-estimates eigenvalues at every set-up (10 CG steps a level); V-cycles down to a
# coarse grid of at most SIMP_COARSE_MAX_DOFS (10x10 elements at 80x80), whose LU is redone at every
# set-up.  At 80x80: 4-5 CG iterations a solve, each much cheaper than a Chebyshev one, and no
# estimates (benchmarks/results/solver_crossover.md).
SIMP_COARSE_MAX_DOFS = 300
SIMP_OPTIONS = {"ksp_rtol": SIMP_RTOL, "pc_mg_cycle_type": "v"}


def simp_solver(n_dofs, mg_min_dofs=MG_MIN_DOFS):
    """``"direct"`` or ``"mg"`` for a SIMP run on a load case of ``n_dofs`` DOFs."""
    return "mg" if mg_min_dofs is not None and n_dofs >= mg_min_dofs else "direct"


def exact_system(condensed_systems, free):
    """What a yardstick solves exactly on: the condensed system where usable (one rank, shared with the
    analyses of the same mask: :class:`~sphyr_hpc.solvers.condensed.CondensedSystems`), else their base."""
    base = condensed_systems.base
    return condensed_systems.shared(free) if condensed.usable(base, free) else base


def uses_multigrid(system, exact, mg_min_dofs=MG_MIN_DOFS):
    """Whether a yardstick's SIMP runs on ``system`` solve on a multigrid system of their own
    (:func:`simp_system`) rather than on ``exact``: not when it is condensed, nor below the crossover."""
    return exact is system and simp_solver(system.loadcase.n_dofs, mg_min_dofs) == "mg"


def simp_system(system):
    """A new multigrid system of ``system``'s load case and communicator for a yardstick's SIMP runs
    (the caller keeps it and closes it)."""
    from .elasticity import elasticity_system

    comm = system.comm if system.comm is not None else petsc().COMM_SELF
    return elasticity_system(system.loadcase, comm=comm, prefix=SIMP_PREFIX, **simp_system_arguments())


def simp_system_arguments():
    """How :func:`simp_system` makes its multigrid system (``elasticity_system`` keywords but the
    prefix): also what ``solvers.probe.check_options`` probes the ``-sphyr_simp_`` options on."""
    return {"solver": "mg", "smoother": "sor", "coarse_max_dofs": SIMP_COARSE_MAX_DOFS, "options": SIMP_OPTIONS}
