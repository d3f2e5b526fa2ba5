"""Import PETSc the one way the whole package does it.

Order matters (STYLE): ``mpi4py.MPI`` first, then ``petsc4py.init(argv)`` so the
PETSc options database sees the command line, then ``from petsc4py import
PETSc``.  Every module that needs PETSc calls :func:`petsc` instead of
importing it directly.

Finding petsc4py is the package's business, not the user's: Debian ships it
under ``/usr/lib/petscdir/<version>/<arch>-real/lib/python3/dist-packages``
and only puts it on ``sys.path`` when ``PETSC_DIR`` is set or the ``-dev``
package is installed.  If a plain ``import petsc4py`` fails we look there
(``$PETSC_DIR`` first, then the newest real-scalar build) and append that
folder to ``sys.path``; the environment is left as it is (petsc4py's own
``petsc.cfg`` names its PETSc).

mpi4py, petsc4py and h5py (best an MPI build) are not installed by pip: PyPI's
petsc4py compiles PETSc from source and its h5py has no MPI.  Every command
calls :func:`require` after parsing its arguments (so ``--help`` works
without them): a missing one is named with the two supported ways to get it,
exit status 2, no traceback.
"""

import gc
import glob
import importlib
import os
import sys
from contextlib import contextmanager

from .process import USAGE_STATUS

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
            sys.path.append(site)
            return
    raise ImportError(
        "petsc4py not found: install python3-petsc4py (Debian) or petsc4py "
        "(conda-forge), or set PETSC_DIR to a PETSc build that has it"
    )


INSTALL_ROUTES = (
    "  Debian 12 or 13 / Ubuntu: bin/setup (apt-get installs python3-mpi4py python3-petsc4py python3-h5py-mpi "
    "openmpi-bin, then a .venv that sees them)\n"
    "  anywhere else: conda env create -f environment.yml && conda activate sphyr_hpc && pip install --no-deps ."
)


def missing_requirements(h5py=False):
    """The system packages this process cannot import (names as in conda-forge)."""
    missing = []
    try:
        importlib.import_module("mpi4py")
    except ImportError:
        missing.append("mpi4py")
    try:
        _locate_petsc4py()
    except ImportError:
        missing.append("petsc4py")
    if h5py:
        try:
            importlib.import_module("h5py")  # an MPI build writes in parallel; any build works
        except ImportError:
            missing.append("h5py")
    return missing


def require(command, h5py=False):
    """Exit with status 2 and a message naming what is missing and how to install it, or return."""
    missing = missing_requirements(h5py)
    if missing:
        print(f"{command}: needs {', '.join(missing)}, which pip does not install (PyPI's petsc4py builds "
              f"PETSc from source, its h5py has no MPI). Install them with one of:\n{INSTALL_ROUTES}",
              file=sys.stderr)
        sys.exit(USAGE_STATUS)


_PETSc = None


def petsc(argv=None):
    """The initialised ``petsc4py.PETSc`` module.

    ``argv`` (a program name, then PETSc options) feeds the options database the first
    time; later calls return the same module.  The default is the program's name alone: the
    rest of ``sys.argv`` belongs to the program that imported sphyr_hpc (pytest's
    ``-q``), not to PETSc, which would hold it as options no solver reads (and
    PETSc 3.22 lists every such option when it finalises).  ``PETSC_OPTIONS`` still applies.
    """
    global _PETSc
    if _PETSc is None:
        from mpi4py import MPI  # noqa: F401  (MPI must be initialised before PETSc)

        _locate_petsc4py()
        import petsc4py

        if argv is None:  # python -c's argv[0] is "-c", which petsc4py would take for an option
            argv = [sys.argv[0] if sys.argv and not sys.argv[0].startswith("-") else sys.executable]
        # Without PETSc's signal handlers (-no_signal_handler): the process's signals stay Python's.
        # PETSc's handler took a write to a pipe whose reader has gone (`score | head`) for a crash
        # ("Caught signal number 13 Broken Pipe", MPI_Abort), and its finalisation set SIGTERM and
        # ten more back to their defaults, where a command that has ended ignores them while its
        # process closes down (sphyr_hpc.runtime.process.own_process).
        petsc4py.init([argv[0], "-no_signal_handler", *argv[1:]])
        from petsc4py import PETSc

        _PETSc = PETSc
        return_freed_memory()
    return _PETSc


def release_garbage():
    """Destroy now, while Python runs, every PETSc object that Python has let go of (collective on
    PETSC_COMM_WORLD, then PETSC_COMM_SELF; nothing before PETSc has started).

    petsc4py hands an object that Python frees to PETSc's garbage, which PetscFinalize empties: after
    the interpreter has ended, when the object has a Python context (a shell matrix's, a Python
    smoother's) and its destroy calls into it, a segmentation fault (``PetscFinalize ->
    PetscGarbageCleanup -> KSPDestroy -> KSPReset -> petsc4py -> PyThreadState_New``: an optimisation
    interrupted on one rank).  A collection first frees what only cycles keep (a context holding its
    own matrix).  Every command calls this at its end (``cli.main``), on every rank."""
    if _PETSc is None:
        return
    gc.collect()
    _PETSc.garbage_cleanup()


# glibc's mallopt parameters (malloc.h).
_M_MMAP_THRESHOLD, _M_MMAP_MAX = -3, -4
# Arrays of at least this many bytes get pages of their own, given back to the system when freed;
# smaller ones come from the heap and are reused.  32 MB: the temporaries of a SIMP iteration (a
# rank's element fields at 2048x1024 elements on 2 ranks are 8 MB, the assembly's blocks 1-8 MB)
# are reused instead of new, zeroed pages every time (a 1 MB threshold gives each of them new
# pages: at 2048x1024 on 2 ranks assembly 1.18 -> 0.73 s and update 0.55 -> 0.43 s an iteration
# with 32 MB, for 35 MB more peak memory a rank).
MMAP_THRESHOLD = 32 << 20


# glibc's default M_MMAP_MAX (blocks it may map on pages of their own at once).
GLIBC_MMAP_MAX = 65536


def _malloc_to_manage():
    """glibc (ctypes), whose malloc sphyr_hpc tunes; None elsewhere."""
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def return_freed_memory():
    """Let freed large arrays go back to the system again (glibc; a no-op elsewhere).

    After MPI and PETSc start, glibc's malloc no longer maps large blocks on
    their own pages (M_MMAP_MAX is 0: Open MPI's memory hooks ask for it), so
    every temporary of a set-up stays in the heap and in the process's
    resident memory for good: at 1024x512 elements on one rank, 150 MB for the
    interpolations' temporaries alone.  This restores glibc's default (65536
    mappings) with a fixed threshold, :data:`MMAP_THRESHOLD`.
    """
    libc = _malloc_to_manage()
    if libc is not None:
        libc.mallopt(_M_MMAP_MAX, GLIBC_MMAP_MAX)
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


@contextmanager
def large_arrays_reused():
    """Inside: freed arrays of any size stay in the heap and are reused (glibc; a no-op elsewhere);
    after: large ones get their own pages again and the heap is trimmed.

    glibc maps a block of 32 MB or more (its largest threshold) on pages of its own and gives them
    back when it is freed, so each such temporary of a SIMP iteration is new pages, faulted in and
    zeroed: a rank's cell arrays reach that size at 4M cells a rank (4096x2048 on 2 ranks), where the
    update took 1.40 s an iteration so and 0.58 s with the arrays reused (the same peak memory,
    3651 MB a rank).  The SIMP loop's temporaries have the same sizes every iteration, so the heap's
    free blocks fit the next ones.
    """
    libc = _malloc_to_manage()
    if libc is None:
        yield
        return
    libc.mallopt(_M_MMAP_MAX, 0)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_MAX, GLIBC_MMAP_MAX)
        trim_memory()


def trim_memory():
    """Give the heap's free memory back to the system now (glibc's ``malloc_trim``; a no-op elsewhere).

    Small objects (Python's, PETSc's per-solve ones) freed by the thousand leave free pages inside
    the heap, below :data:`MMAP_THRESHOLD`, that glibc keeps: after a 60-model scoring run about
    100 MB a rank.  A command calls this between phases, so the next phase's peak is its own and
    not stacked on the last one's leftovers.  (No ``gc.collect()``: a full collection walks every
    record a run holds, ~0.3 s at 24,660 records, and frees almost nothing the trim needs.)
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


# -- the options database of one command --------------------------------------------------------
PREFIX = "sphyr_"
# Per-solve viewers that a command shows itself, once per distinct solver, instead of PETSc's
# once per KSPSolve (thousands of identical views for a scoring run).
ONCE_VIEWERS = ("ksp_view",)


def is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def split_petsc_args(argv):
    """(ours, PETSc's): single-dash options and the value that follows go to PETSc."""
    ours, theirs = [], []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-") and not arg.startswith("--") and arg != "-h" and len(arg) > 1 and not is_number(arg):
            theirs.append(arg)
            if i + 1 < len(argv) and (not argv[i + 1].startswith("-") or is_number(argv[i + 1])):
                theirs.append(argv[i + 1])
                i += 1
        else:
            ours.append(arg)
        i += 1
    return ours, theirs


class OptionsError(ValueError):
    """A PETSc option under the prefix that no solver read, or a value PETSc rejects (usage errors)."""


class _Viewers:
    """Which ONCE_VIEWERS the command line asked for, and which solvers were already shown."""

    requested = ()
    shown = set()


def explain_petsc_error(err):
    """One line from a PETSc.Error: its last message lines, which name what PETSc rejected."""
    lines = [line.split("] ", 1)[-1].strip() for line in str(err).splitlines()]
    lines = [line for line in lines if line and not line.startswith("error code") and "() at " not in line]
    return "; ".join(reversed(lines[-2:])) or f"PETSc error {getattr(err, 'ierr', '?')}"


def unknown_options_message(unused):
    return (f"unknown PETSc option{'s' if len(unused) > 1 else ''} {' '.join(unused)}: no solver read "
            f"{'them' if len(unused) > 1 else 'it'} (misspelled, or not used by this solver; "
            f"add -help to list the options each solver reads)")


@contextmanager
def viewers_hidden():
    """The once-per-solver viewers are not shown inside the block (a probe solve is not the user's)."""
    viewers, _Viewers.requested = _Viewers.requested, ()
    try:
        yield
    finally:
        _Viewers.requested = viewers


def view_once(ksp):
    """Show ``ksp`` if the command line asked for a viewer and no solver like it was shown yet.

    Like means: the same KSP and PC types, factorisation package and size.
    """
    if "ksp_view" not in _Viewers.requested:
        return
    pc = ksp.getPC()
    try:
        package = pc.getFactorSolverType()
    except petsc().Error:
        package = None
    signature = (ksp.getType(), pc.getType(), package, ksp.getOperators()[0].getSize())
    if signature not in _Viewers.shown:
        _Viewers.shown.add(signature)
        ksp.view()


@contextmanager
def inserted_options(prefix, defaults):
    """``defaults`` ({name: value}, names without ``-`` and prefix) in the options database under
    ``prefix`` for the duration of the block, except where the user has set them.

    A solver's defaults that PETSc reads only from the database (multigrid level
    smoothers, GAMG, the Chebyshev eigenvalue estimate) go in around the calls that
    read them and out afterwards, so they never leak into another solver; an option
    the user gave is never touched.  :class:`command_options` does the same for a
    command line's options.
    """
    opts = petsc().Options(prefix)
    added = [name for name in defaults if not opts.hasName(name)]
    for name in added:
        opts.setValue(name, defaults[name])
    try:
        yield opts
    finally:
        for name in added:
            opts.delValue(name)


class command_options:
    """The PETSc options of one command run: inserted on entry, removed on exit (STYLE).

    ``args`` are the command line's single-dash options.  Per-solve viewers
    (``-<prefix>ksp_view``) are taken out of the database and shown by
    :func:`view_once`, once per distinct solver.
    """

    def __init__(self, args, prefix=PREFIX):
        self.args, self.prefix = list(args), prefix
        self.inserted = []

    def __enter__(self):
        fresh = _PETSc is None
        # A first initialisation sees the options itself (-log_view must be known from the start).
        self.petsc = petsc([sys.argv[0]] + self.args)
        opts = self.petsc.Options()
        before = set() if fresh else set(opts.getAll())
        if self.args and not fresh:
            try:
                opts.insertString(" ".join(self.args))
            except petsc().Error as err:
                raise OptionsError(f"PETSc could not read the options: {explain_petsc_error(err)}") from None
        # Removed on exit: what this run added, except PETSc's own options of a first initialisation,
        # which PetscFinalize still reads (-log_view).
        self.inserted = [name for name in opts.getAll()
                         if name not in before and (not fresh or name.startswith(self.prefix))]
        requested = []
        for viewer in ONCE_VIEWERS:
            if opts.hasName(self.prefix + viewer):
                requested.append(viewer)
                opts.delValue(self.prefix + viewer)
        _Viewers.requested, _Viewers.shown = tuple(requested), set()
        return self

    def __exit__(self, *exc):
        opts = petsc().Options()
        for name in self.inserted:
            if opts.hasName(name):
                opts.delValue(name)
        _Viewers.requested, _Viewers.shown = (), set()
        return False
