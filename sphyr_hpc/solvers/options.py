"""PETSc's options database, the one way sphyr_hpc puts defaults into it.

Every solver setting is a default set in code that the command line can
override under the solver's prefix (``-sphyr_ksp_type cg``).  Settings that
PETSc reads only from the database (multigrid level smoothers, GAMG, the
Chebyshev eigenvalue estimate) are inserted with :func:`inserted_options`
around the calls that read them and removed afterwards, so they never leak
into another solver; an option the user gave is never touched.
"""

from contextlib import contextmanager

from .._petsc import petsc


@contextmanager
def inserted_options(prefix, defaults):
    """``defaults`` ({name: value}, names without ``-`` and prefix) in the database under ``prefix``
    for the duration of the block, except where the user has set them."""
    opts = petsc().Options(prefix)
    added = [name for name in defaults if not opts.hasName(name)]
    for name in added:
        opts.setValue(name, defaults[name])
    try:
        yield opts
    finally:
        for name in added:
            opts.delValue(name)
