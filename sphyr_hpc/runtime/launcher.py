"""A command's exit status handed to ``bin/mpirun`` instead of OpenMPI's "non-zero status" banner.

OpenMPI's mpirun prints "Primary job terminated normally, but 1 process
returned a non-zero exit code ... mpirun detected that one or more processes
exited with non-zero status" whenever a rank exits non-zero, which makes a
documented outcome (status 1: some record had no completion; 2: a usage
error; 4: an output could not be written) read like a crash, after the
command's own summary.  Its only switch, ``orte_execute_quiet``, also hides
mpirun's own errors (an executable it cannot start: nothing printed), so it
is not used.  Instead ``bin/mpirun`` names a file in
:data:`STATUS_FILE_VARIABLE`; a rank that mpirun started itself (its parent
process is mpirun) and that ends with a status the command returned (not an
abort, not a signal) has rank 0 write that status there and exits 0, and
``bin/mpirun`` exits with it.  Anything else is left alone: a process under
plain ``mpirun``, ``srun`` or no launcher, a process a rank started (a test,
a subprocess), a command called in-process (``main()`` returns its status).
"""

import os

from .process import world_rank

STATUS_FILE_VARIABLE = "SPHYR_HPC_STATUS_FILE"
LAUNCHERS = ("mpirun", "mpiexec", "orterun", "prterun")  # prterun: Open MPI 5's mpirun is a link to it


def _started_by_mpirun():
    try:
        with open(f"/proc/{os.getppid()}/comm", encoding="utf-8") as handle:
            return handle.read().strip() in LAUNCHERS
    except OSError:
        return False


def exit_status(status):
    """The status this process exits with (see the module's docstring): ``status``, or 0 once it is
    written for ``bin/mpirun``."""
    path = os.environ.get(STATUS_FILE_VARIABLE)
    if not status or not path or "OMPI_COMM_WORLD_SIZE" not in os.environ or not _started_by_mpirun():
        return status
    if world_rank() == 0:
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(f"{int(status)}\n")
        except OSError:
            return status  # the banner then, but the right status
    return 0
