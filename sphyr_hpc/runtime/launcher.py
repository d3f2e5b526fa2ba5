"""The launcher that started a rank: its end noticed (:func:`watched`), and a command's exit status
handed to ``bin/mpirun`` instead of OpenMPI's "non-zero status" banner (:func:`exit_status`).

**The launcher's end.**  Open MPI starts every rank in a process group of its
own, so a ``kill -9`` of mpirun's process group (a user killing a hung run, a
scheduler that kills only the launcher) leaves the ranks running, writing and
holding the output folder's lock, until OpenMPI's client notices the lost
connection and ends them with status 195, no cleanup and no word (about 1 s
after the kill on an idle node; 30-40 s has been seen).  Inside :func:`watched` a daemon
thread looks every :data:`WATCH_SECONDS` at this process's parent: when the
launcher that started it (its parent when the block began: mpirun, orted,
slurmstepd) is gone, the process is orphaned and its parent changes.  The main
thread is then interrupted as by SIGTERM (:func:`~.process.launcher_gone`),
which ends the command on its documented interrupt path (the records written
are kept, the output folder is unlocked, status 143); a main thread that has not
ended :data:`STOP_SECONDS` later (inside a long call) is ended by the thread
itself with the same status.  A look costs one ``getppid`` system call and a
thread wake-up (``benchmarks/launcher_watch.py`` measures it on a scoring run and a
2048x1024 optimisation against no watching).

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
``bin/mpirun`` exits with it.  The file holds 0 too: a signal that reaches ``bin/mpirun`` once the
command has ended, while mpirun closes down (where OpenMPI 4.1's mpirun can die of a segmentation
fault when signalled), is then not passed on.  Anything else is left alone: a process under
plain ``mpirun``, ``srun`` or no launcher, a process a rank started (a test,
a subprocess), a command called in-process (``main()`` returns its status).
"""

import os
import signal
import threading
from contextlib import contextmanager

from .process import LAUNCHER_VARIABLES, ended_together, launcher_gone, own_process, world_rank

# How often the watchdog looks at the parent, and how long after the launcher's end it lets the main
# thread take the interrupt path before it ends the process itself: within 2 s of the launcher's end.
WATCH_SECONDS = 0.25
STOP_SECONDS = 1.0

STATUS_FILE_VARIABLE = "SPHYR_HPC_STATUS_FILE"
LAUNCHERS = ("mpirun", "mpiexec", "orterun", "prterun")  # prterun: Open MPI 5's mpirun is a link to it


def _name(pid):
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return "the launcher"


def _watch(parent, name, stop):
    while not stop.wait(WATCH_SECONDS):
        if os.getppid() != parent:
            launcher_gone(name)
            if not stop.wait(STOP_SECONDS):
                os._exit(128 + signal.SIGTERM)
            return


@contextmanager
def watched():
    """The block's process interrupted when the launcher that started it ends (see the module's
    docstring).  Nothing is watched in a process no launcher started (no rank variables) or one
    already orphaned."""
    parent = os.getppid()
    if not any(name in os.environ for name in LAUNCHER_VARIABLES) or parent == 1:
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(target=_watch, args=(parent, _name(parent), stop), daemon=True,
                              name="sphyr_hpc launcher watch")
    thread.start()
    try:
        yield
    finally:
        stop.set()


def _started_by_mpirun():
    try:
        with open(f"/proc/{os.getppid()}/comm", encoding="utf-8") as handle:
            return handle.read().strip() in LAUNCHERS
    except OSError:
        return False


def run_as_process(main):
    """What ``python -m sphyr_hpc.<command>`` and the console script ``sphyr-<command>`` run: ``main()``
    as this process's own command (once it has ended, signals are ignored while the process closes
    down: :func:`~.process.own_process`), and the status it exits with (:func:`exit_status`)."""
    own_process()
    return exit_status(main())


def exit_status(status):
    """The status this process exits with (see the module's docstring): ``status``, or 0 once it is
    written for ``bin/mpirun``.  A rank that ended an interrupt together with the others
    (:func:`~.process.ended_together`) exits here, through MPI_Finalize only."""
    code = _handed(status)
    if ended_together():
        import sys

        from mpi4py import MPI

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass
        MPI.Finalize()
        os._exit(code)
    return code


def _handed(status):
    path = os.environ.get(STATUS_FILE_VARIABLE)
    if not path or "OMPI_COMM_WORLD_SIZE" not in os.environ or not _started_by_mpirun():
        return status
    if world_rank() == 0:
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(f"{int(status)}\n")
        except OSError:
            return status  # the banner then, but the right status
    return 0
