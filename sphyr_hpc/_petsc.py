"""Import PETSc the one way the whole package does it.

Order matters (STYLE): ``mpi4py.MPI`` first, then ``petsc4py.init(argv)`` so the
PETSc options database sees the command line, then ``from petsc4py import
PETSc``.  Every module that needs PETSc calls :func:`petsc` instead of
importing it directly.

Finding petsc4py is the package's business, not the user's: Debian ships it
under ``/usr/lib/petscdir/<version>/<arch>-real/lib/python3/dist-packages``
and only puts it on ``sys.path`` when ``PETSC_DIR`` is set or the ``-dev``
package is installed.  If a plain ``import petsc4py`` fails we look there,
prefer the newest real-scalar build, and set ``PETSC_DIR`` to match.
"""

import glob
import os
import sys

from mpi4py import MPI  # noqa: F401  (MPI must be initialised before PETSc)

_DEBIAN_PETSC_GLOB = "/usr/lib/petscdir/petsc*/*-real"


def _locate_petsc4py():
    try:
        import petsc4py  # noqa: F401
        return
    except ImportError:
        pass
    candidates = []
    if os.environ.get("PETSC_DIR"):
        candidates.append(os.environ["PETSC_DIR"])
    candidates += sorted(glob.glob(_DEBIAN_PETSC_GLOB), reverse=True)
    for petsc_dir in candidates:
        site = os.path.join(petsc_dir, "lib", "python3", "dist-packages")
        if os.path.isdir(os.path.join(site, "petsc4py")):
            os.environ.setdefault("PETSC_DIR", petsc_dir)
            sys.path.append(site)
            return
    raise ImportError(
        "petsc4py not found: install python3-petsc4py (Debian) or petsc4py "
        "(conda-forge), or set PETSC_DIR to a PETSc build that has it"
    )


_PETSc = None


def petsc(argv=None):
    """The initialised ``petsc4py.PETSc`` module.

    ``argv`` (default ``sys.argv``) feeds the options database the first time;
    later calls return the same module.
    """
    global _PETSc
    if _PETSc is None:
        _locate_petsc4py()
        import petsc4py

        petsc4py.init(sys.argv if argv is None else argv)
        from petsc4py import PETSc

        _PETSc = PETSc
    return _PETSc
