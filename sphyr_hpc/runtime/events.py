"""PETSc log events of one optimisation iteration, and reading them back.

Four events split an iteration (they nest in nothing and do not overlap):

* ``sphyr_assembly``: K from the element moduli (:meth:`~sphyr_hpc.solvers.system.GridSystem.assemble`);
* ``sphyr_setup``: KSP/PC set-up for the new K (Galerkin products, smoother
  eigenvalue estimates, coarse or full factorisation);
* ``sphyr_solve``: the Krylov iterations (or the triangular solves);
* ``sphyr_update``: sensitivities, filter and the design update (OC, the 88-line code's OC or MMA).

One more counts rather than times: ``sphyr_bisection_pass``, one pass of the
optimality-criteria bisection over the free cells (inside ``sphyr_update``;
the steps a volume bound decides make none), read by :func:`count`.

Events are registered once per process (:func:`event`).  Their times are only
collected while PETSc logging is on (``PETSc.Log.begin()``, or ``-log_view``);
:func:`seconds` reads them, and is 0 otherwise.
"""

from .petsc import petsc

ASSEMBLY = "sphyr_assembly"
SETUP = "sphyr_setup"
SOLVE = "sphyr_solve"
UPDATE = "sphyr_update"
EVENTS = (ASSEMBLY, SETUP, SOLVE, UPDATE)
BISECTION_PASS = "sphyr_bisection_pass"

_registered = {}
_logging = []


def event(name):
    """The process's ``PETSc.Log.Event`` called ``name`` (registered on first use)."""
    if name not in _registered:
        _registered[name] = petsc().Log.Event(name)
    return _registered[name]


def timed(name):
    """``with timed(name):`` brackets a block with the event (PETSc's own context manager)."""
    return event(name)


def start_logging():
    """Turn PETSc's default logging on (once a process) so that the events collect times."""
    if not _logging:
        petsc().Log.begin()
        _logging.append(True)


def seconds(name):
    """Seconds spent in event ``name`` on this rank so far (needs :func:`start_logging`)."""
    return float(event(name).getPerfInfo().get("time", 0.0))


def count(name):
    """Times event ``name`` was entered on this rank so far (needs :func:`start_logging`)."""
    return int(event(name).getPerfInfo().get("count", 0))
