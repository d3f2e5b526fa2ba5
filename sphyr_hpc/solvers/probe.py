"""The probe that checks a command's PETSc options by building and solving a tiny system.

PETSc rejects a bad value only when a solver is set up, and an option nobody
reads shows only after a solve; a command checks both before its work starts
(:func:`check_options`, called by :mod:`sphyr_hpc.cli`).
"""

import numpy as np

from ..core import loadcase
from ..runtime.petsc import (PREFIX, OptionsError, explain_petsc_error, petsc, unknown_options_message,
                             unused_options, viewers_hidden)
from . import sizing
from .elasticity import elasticity_system


def check_options(prefix=PREFIX):
    """Raise :class:`OptionsError` if the ``-<prefix>`` options would fail or go unread.

    A tiny SPhyR load case is solved with the options in force, on this
    process alone (as the scorer's solvers are): PETSc rejects a bad value
    then, and :func:`unused_options` lists what no solver read.
    """
    PETSc = petsc()
    probes = [(loadcase.from_grid([["L", "L"], ["1", "1"], ["S", "S"]]), {"prefix": prefix})]
    simp_prefix = prefix + sizing.SIMP_PREFIX[len(PREFIX):]
    if any(name.startswith(simp_prefix) for name in PETSc.Options().getAll()):
        # The large yardsticks' multigrid system reads these: probed on a load case just large
        # enough for two levels.
        n = int(np.ceil(np.sqrt(sizing.MG_MIN_DOFS / 2))) + 1
        grid = [["L"] * n] + [["1"] * n for _ in range(n - 2)] + [["S"] * n]
        probes.append((loadcase.from_grid(grid), dict(sizing.simp_system_arguments(), prefix=simp_prefix)))
    try:
        with viewers_hidden():
            for lc, arguments in probes:
                with elasticity_system(lc, comm=PETSc.COMM_SELF, **arguments) as system:
                    system.solve(system.slab_of(np.ones(lc.shape)))
    except PETSc.Error as err:
        raise OptionsError(f"PETSc rejected an option: {explain_petsc_error(err)}") from None
    unused = unused_options(prefix)
    if unused:
        raise OptionsError(unknown_options_message(unused))
