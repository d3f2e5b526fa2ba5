"""The linear-elastic system of one load case, distributed with PETSc: which solver, by size.

:func:`elasticity_system` makes the system of a load case, a
:class:`~.system.GridSystem`, with the method that solves it: a
:class:`~.direct.DirectMethod` (factorisation) up to
:data:`DIRECT_SOLVER_MAX_DOFS` DOFs, a :class:`~.multigrid.MultigridMethod`
(CG + geometric multigrid) above, or the solver named (``"direct"``, ``"mg"``,
``"gamg"``: :class:`~.gamg.GAMGMethod`).  The DMDAs, vectors and solve they
share, what a method offers and who owns which PETSc handle are described in
:mod:`.system` (docs/scoring.md, "Finite elements", for the physics).
"""

import functools

from ..core import discretisation as fe
from .direct import DirectMethod
from .gamg import GAMGMethod
from .multigrid import MultigridMethod
from .system import GridSystem

# Above this many DOFs the default solver is CG + multigrid instead of a factorisation.
DIRECT_SOLVER_MAX_DOFS = 200_000
METHODS = {"direct": DirectMethod, "mg": MultigridMethod, "gamg": GAMGMethod}
SOLVERS = tuple(METHODS)


def default_solver(n_dofs):
    """The solver a load case of ``n_dofs`` DOFs gets when none is named."""
    return "direct" if n_dofs <= DIRECT_SOLVER_MAX_DOFS else "mg"


def elasticity_system(loadcase, comm=None, prefix="sphyr_", nu=fe.NU, solver=None, element_halo=1, options=None,
                      **solver_arguments):
    """The system of ``loadcase`` on ``comm`` with ``solver`` (None: by size, :func:`default_solver`).

    ``options``: option defaults {name: value} under ``prefix`` over the solver's own (the command
    line still wins); ``solver_arguments``: the method's own keywords (``smoother``,
    ``coarse_max_dofs`` ... of :class:`~.multigrid.MultigridMethod`).
    """
    solver = solver or default_solver(loadcase.n_dofs)
    if solver not in METHODS:
        raise ValueError(f"unknown solver {solver!r}: expected one of {', '.join(SOLVERS)}")
    method = functools.partial(METHODS[solver], **solver_arguments)
    return GridSystem(loadcase, method, comm=comm, prefix=prefix, nu=nu, element_halo=element_halo, options=options)
