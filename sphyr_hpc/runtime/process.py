"""How a process of a command starts and ends: its environment, exit statuses, the launcher's rank,
interrupts, aborts.

Environment: a command runs inside :func:`command_environment`, which sets what
:data:`COMMAND_ENVIRONMENT` lists where the environment does not say otherwise;
importing sphyr_hpc (or calling its Python API) sets nothing.

Statuses (every command): 0 done, 1 some input could not be used, 2 usage
error (one line by rank 0, before any work), 3 unexpected error (every rank
is aborted), 128 + N ended by signal N (130 SIGINT, 143 SIGTERM: the shell's
convention).  SIGINT and SIGTERM raise :class:`Interrupted` in the main
thread, so the command leaves through one path whichever it was; so does the
end of the launcher that started this rank (:mod:`sphyr_hpc.runtime.launcher`
watches it), as SIGTERM.

Ending interrupted on several ranks (:func:`end_interrupted`): every rank that
is interrupted waits for the others on a communicator of its own
(:func:`share_interrupts`, a non-blocking barrier).  When every rank arrives
(the signal reached them all: Ctrl-C under ``bin/mpirun``, a batch system's
kill, a bare ``mpirun`` ending its ranks) rank 0 prints the one message and
every rank ends with 128 + the signal, without MPI_Abort and its banner.  A
rank that does not arrive in time (the signal reached one rank only, or a rank
is inside a long call) is ended by MPI_Abort, as before any rank knew.  A rank
interrupted before its command started MPI starts it then, and ends the same way.

Safe points (:func:`interrupt_point`): a collective computation (an optimisation, whose
iterations are collectives and PETSc calls from end to end) runs with its signals deferred
(:func:`signals_deferred`) and takes them at points of its own, every rank at once through one
allreduce: the ranks then leave through the same ``finally`` blocks, whose destroys are
collective too, and end together without waiting or MPI_Abort, also when the signal reached one
rank only.
"""

import functools
import gc
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from contextlib import contextmanager

PROCESS_STARTED = time.perf_counter()  # imported first thing by sphyr_hpc: before MPI and PETSc start
USAGE_STATUS = 2
ABORT_STATUS = 3
# A rank other than 0 that must abort the run (an interrupt the others did not join, a failed write)
# waits this long more than rank 0 first: when rank 0 aborts too, its abort ends the run first, so
# the message is printed once.
PEER_GRACE_SECONDS = 1.0
# How long an interrupted rank waits for the others to be interrupted too (end_interrupted): they
# are when the signal reached every rank, once each is back in Python from the call it was in, which
# on a loaded machine can take seconds (rank 0 drawing the report while the others wait: 3 s was
# too short for one 2-rank score at load 4, aborted with MPI_ABORT's banner).  It is the time a run
# whose rank cannot come back (inside a collective the others left) takes to be aborted.
PEERS_SECONDS = 10.0
# The same once the ranks have agreed on the interrupt at a safe point (interrupt_point): every rank is
# on its way, only what it writes first (a checkpoint, a design) between, however slow the machine.
AGREED_PEERS_SECONDS = 60.0
# An interrupt lost inside a callback is sent again this long after the hook that caught it returned
# (_redeliver).
REDELIVER_SECONDS = 0.001
# The warning (Future- or DeprecationWarning) with which NumPy before 1.25 turns any exception raised
# inside an elementwise comparison (``string_array == "S"``), an interrupt whose handler ran there too,
# into a scalar False: once a signal has arrived inside :func:`interrupts` it is an error instead
# (:func:`swallowed_interrupt`).
NUMPY_SWALLOWED = "elementwise comparison failed"


# What a command's process runs with, unless its environment already says.  One BLAS thread: MPI
# ranks fill the cores, and OpenBLAS's own threads on a 2-core machine double a 100x100
# Cholesky's time (measured).  NumPy reads these when it is first imported, so a command's module
# imports no NumPy before its ``main`` runs (tests/test_environment.py checks every command).
COMMAND_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
# A process that no launcher started (no rank variables) has no peers to reach: OpenMPI's ob1 PML
# skips the UCX probe, 0.2 s of every start here (bin/mpirun sets the same for its ranks).  Read
# when MPI starts, which a command does after it is set.
SINGLETON_ENVIRONMENT = {"OMPI_MCA_pml": "ob1"}
LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK")


@contextmanager
def command_environment():
    """:data:`COMMAND_ENVIRONMENT` (and, in a process no launcher started,
    :data:`SINGLETON_ENVIRONMENT`) in ``os.environ`` for the block, each where it is not set;
    afterwards those it set are removed again (a command called in-process leaves no trace)."""
    wanted = dict(COMMAND_ENVIRONMENT)
    if not any(name in os.environ for name in LAUNCHER_VARIABLES):
        wanted.update(SINGLETON_ENVIRONMENT)
    added = {name: value for name, value in wanted.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name, value in added.items():
            if os.environ.get(name) == value:
                del os.environ[name]


class _ReaderGone:
    """A command's ``sys.stdout`` (:func:`stdout_to_a_reader_that_may_go`)."""

    def __init__(self, stream):
        self._stream = stream

    def _done(self, method, *args):
        try:
            return getattr(self._stream, method)(*args)
        except BrokenPipeError:  # the reader is gone: from now on, and what is buffered, to /dev/null
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
            return getattr(self._stream, method)(*args)

    def write(self, text):
        return self._done("write", text)

    def flush(self):
        return self._done("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextmanager
def stdout_to_a_reader_that_may_go():
    """Inside the block, a pipe whose reader has gone (``score | head``) takes the rest of what the
    command prints to /dev/null instead of ending it: its files are all still written, its exit
    status is its own."""
    stream = sys.stdout
    sys.stdout = _ReaderGone(stream)
    try:
        yield
    finally:
        if isinstance(sys.stdout, _ReaderGone):
            sys.stdout = stream


class UsageError(Exception):
    """A mistake on the command line or in what it names: one line on stderr from rank 0, exit status 2."""


def _launched_size():
    """How many ranks the launcher started, from its environment (1 when no launcher says)."""
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


def world_rank():
    """This process's rank from the launcher's environment (mpi4py may not be importable yet)."""
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived (or the launcher ended: SIGTERM); ``signum`` says which."""

    def __init__(self, signum=signal.SIGINT):
        super().__init__(signum)
        self.signum = signal.Signals(signum)

    @property
    def status(self):
        return 128 + int(self.signum)


def interrupted(err):
    """An :class:`Interrupted` for any KeyboardInterrupt (Python's own one is SIGINT)."""
    return err if isinstance(err, Interrupted) else Interrupted(signal.SIGINT)


_held = {"depth": 0, "signum": None,  # signals_deferred: how deep, and the signal that arrived meanwhile
         "raised": None,  # the signal an Interrupted was raised for inside interrupts()
         "in_hook": False,  # _redeliver is running: the signal it sends again waits for its end
         "launcher_gone": None,  # the name of this rank's launcher once it has ended (launcher.py)
         "peers": None,  # the communicator interrupted ranks meet on (share_interrupts)
         "together": False,  # this rank ended an interrupt together with every other (end_interrupted)
         "own_process": False,  # the command is this process's own (own_process)
         "quiet_end": False,  # _quiet_end has set what a further signal does while the process ends
         "ended": False,  # the command has returned its status (command_ended)
         "agreed": False}  # every rank took the interrupt at one safe point together (interrupt_point)


def ended_together():
    """Whether this process ended interrupted together with every other rank (:func:`end_interrupted`):
    it then leaves through MPI_Finalize alone (:func:`sphyr_hpc.runtime.launcher.exit_status`), not
    PETSc's finalisation, whose collectives the ranks, interrupted at different points, would not match."""
    return _held["together"]


def launcher_gone(name):
    """From the launcher's watchdog thread: the launcher ``name`` that started this rank has ended.

    The main thread is interrupted as by SIGTERM (the batch system's signal for "stop"), so the
    command leaves through its one interrupt path (its records kept, its output folder unlocked); its
    standard output and error, pipes to the launcher that nobody reads any more, go to /dev/null, so
    that the last words of the process do not fail on them."""
    import stat

    _held["launcher_gone"] = name
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.dup2(devnull, fd)
        except OSError:
            pass
    os.close(devnull)
    os.kill(os.getpid(), signal.SIGTERM)


def share_interrupts(comm):
    """Prepare ``comm``'s ranks to end an interrupt together (collective, once MPI has started): a
    duplicate of it that only :func:`end_interrupted` uses.  Returns that duplicate.  Called where
    no interrupt can cut the Dup off: inside a command's start, whose signals wait for its end
    (``cli.main``), or on the interrupt path itself."""
    _held["peers"] = comm.Dup() if comm.size > 1 else None
    return _held["peers"]


def _unshare_interrupts():
    peers, _held["peers"] = _held["peers"], None
    if peers is not None:
        try:
            peers.Free()
        except Exception:  # noqa: BLE001  (MPI already finalised: nothing to free)
            pass


def _peers_interrupted(seconds):
    """True once every rank has called this (each ending interrupted), False after ``seconds``."""
    request = _held["peers"].Ibarrier()
    deadline = time.monotonic() + seconds
    while not request.Test():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def own_process():
    """This process runs one command and ends with it (``python -m sphyr_hpc.<command>``, a console
    script: :func:`sphyr_hpc.runtime.launcher.run_as_process`).  Once its command has returned
    (:func:`command_ended`), :func:`interrupts` leaves SIGINT and SIGTERM ignored instead of giving
    the previous handlers back: the work is done and the status decided, and a Ctrl-C that lands
    while the process closes down (MPI's and PETSc's finalisation) would only turn a finished run
    into a crash report (a rank ended by the signal, OpenMPI's "exited on signal" banner)."""
    _held["own_process"] = True


def command_ended():
    """The command inside :func:`interrupts` has returned its status: a signal from now on is
    ignored (it has nothing left to stop)."""
    _held["ended"] = True


def _raise(signum, frame):
    if _held["ended"] or _held["agreed"]:  # (agreed: every rank is already taking an interrupt together)
        return
    if _held["depth"]:
        _held["signum"] = _held["signum"] or signum
        return
    if _held["raised"] is None:  # from now on NumPy's swallowing of it raises (interrupts() undoes it)
        warnings.filterwarnings("error", message=NUMPY_SWALLOWED)
    _held["raised"] = signum
    raise Interrupted(signum)


def swallowed_interrupt():
    """An :class:`Interrupted` for the signal that raised one inside :func:`interrupts`, or None.

    Code that catches every exception can take an interrupt for its own failure: NumPy's ``==``
    between a string array and a string (before NumPy 1.25) turns any exception raised inside it, a
    KeyboardInterrupt too, into a scalar ``False`` with a warning, and the command would carry
    on as if no signal had come.  Once a signal has arrived that warning is an error
    (:data:`NUMPY_SWALLOWED`), and a command that ends in an unexpected error after a signal arrived
    ends as interrupted instead (``cli.main``, :func:`guarded`)."""
    return None if _held["raised"] is None else Interrupted(_held["raised"])


def _redeliver(previous_hook, unraisable):
    """``sys.unraisablehook`` inside :func:`interrupts`: an :class:`Interrupted` raised where Python
    cannot raise it (a weakref callback or ``__del__`` run by a deallocation, such as matplotlib's
    transform caches while a report is drawn; a C callback) would be printed as "Exception ignored"
    with a traceback and lost.  It is sent again instead, by another thread once this hook has
    returned (:func:`_send_again`; sent while the hook runs, its handler would run inside the hook,
    where it cannot raise either): the main thread raises it at its next bytecode outside such a
    callback."""
    err = unraisable.exc_value
    if not isinstance(err, Interrupted):
        previous_hook(unraisable)
    elif signal.getsignal(err.signum) is _raise:  # not once the command is already ending
        # Held while the thread starts: Python 3.13 runs the signal's handler again in the lock wait
        # of Thread.start, which would raise inside this hook and lose the signal; the one sent
        # again stands for it.
        _held["depth"] += 1
        _held["in_hook"] = True
        try:
            threading.Thread(target=_send_again, args=(err.signum,), daemon=True,
                             name="sphyr_hpc interrupt sent again").start()
        finally:
            _held["depth"] -= 1
            if _held["depth"] == 0:
                _held["signum"] = None
            _held["in_hook"] = False


def _send_again(signum):
    """The signal :func:`_redeliver` lost, sent once its hook has returned.  Waiting for the hook's
    end, not for a fixed delay: on a loaded machine the main thread can still be inside the hook,
    where the signal is held and then dropped, after any delay."""
    while _held["in_hook"]:
        time.sleep(REDELIVER_SECONDS)
    time.sleep(REDELIVER_SECONDS)
    os.kill(os.getpid(), signum)


@contextmanager
def interrupts():
    """SIGINT and SIGTERM raise :class:`Interrupted` inside the block (main thread only), also
    when they arrive inside a callback that cannot raise (:func:`_redeliver`)."""
    _held["raised"], _held["ended"], _held["agreed"], _held["quiet_end"] = None, False, False, False
    previous, previous_hook = {}, sys.unraisablehook
    sys.unraisablehook = functools.partial(_redeliver, previous_hook)
    try:
        with warnings.catch_warnings():  # the filter _raise adds ends with the block
            for s in (signal.SIGINT, signal.SIGTERM):  # (last: nothing of the start left to cut short)
                previous[s] = signal.signal(s, _raise)
            yield
    finally:
        closing = _held["own_process"] and _held["ended"]  # own_process: ignored while it closes down
        for s, handler in previous.items():
            if _held["own_process"] and _held["quiet_end"]:
                continue  # what _quiet_end set holds until the process has ended (MPI's end included)
            signal.signal(s, signal.SIG_IGN if closing else handler)
        _unshare_interrupts()
        sys.unraisablehook = previous_hook


def _quiet_end():
    """On the way out, a further SIGINT or SIGTERM (the launcher ending the ranks an abort left,
    a second Ctrl-C) ends this process at once, without a second message or a traceback.  Once
    every rank has taken the interrupt at one safe point (:func:`interrupt_point`) it is ignored
    instead: the ranks end together, and the copy of the signal that reaches a rank late (bin/mpirun
    hands it to one rank after the other) would only turn that rank's clean end into a death by
    signal and OpenMPI's banner."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN if _held["agreed"] else signal.SIG_DFL)
    _held["quiet_end"] = True


def _say_interrupted(prog, err, note):
    why = err.signum.name
    if _held["launcher_gone"]:
        why += f": {_held['launcher_gone']}, the launcher that started it, is gone"
    try:
        # One write of the whole line: Open MPI 5's output forwarding delivered the text of print()'s
        # two writes ("\n" + the text, then "\n") on stdout now and then, its newlines on stderr.
        sys.stderr.write(f"\n{prog}: interrupted ({why}){note}\n")
        sys.stderr.flush()
    except OSError:  # stderr itself gone with the launcher
        pass


def end_interrupted(prog, err, comm, note=""):
    """Print ``prog: interrupted (SIGxxx)...`` once and end every rank with 128 + signal.

    Returns the status on this rank.  With several ranks it first waits for the others (see the
    module's docstring): once every rank is here, rank 0 alone prints; a rank still missing after
    :data:`PEERS_SECONDS` (and :data:`PEER_GRACE_SECONDS` more on ranks other than 0) is aborted
    with the others.  Once the launcher is gone, MPI can neither abort nor finalise: the message
    (on stderr where it is still a file) and this process ends at once with the status.
    """
    err = interrupted(err)
    _quiet_end()
    if _held["launcher_gone"]:
        _say_interrupted(prog, err, note)
        os._exit(err.status)
    if comm is None and _launched_size() > 1:
        # Before MPI started, on one of several ranks: MPI is started now, so that the ranks end
        # together as they do later on (the launcher would end the others only once rank 0 exits
        # with a status of its own, and under bin/mpirun it hands its status over and exits 0).
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    if comm is None:
        _say_interrupted(prog, err, note)
        return err.status
    rank, size = comm.rank, comm.size
    if size > 1 and _held["peers"] is None:  # the duplicate every rank makes first, in cli.main or here
        share_interrupts(comm)
    if size > 1 and _held["peers"] is not None:
        waited = AGREED_PEERS_SECONDS if _held["agreed"] else PEERS_SECONDS
        if _peers_interrupted(waited + (PEER_GRACE_SECONDS if rank != 0 else 0.0)):
            _held["together"] = True
            if rank == 0:
                _say_interrupted(prog, err, note)
            return err.status
    elif rank != 0 and size > 1:
        time.sleep(PEER_GRACE_SECONDS)
    _say_interrupted(prog, err, note)
    if size > 1:
        comm.Abort(err.status)
    return err.status


def end_unexpected(prog, comm, note=""):
    """An unexpected exception on this rank: re-raised on one rank, else shown and every rank aborted."""
    if comm is None or comm.size == 1:
        raise  # noqa: PLE0704  (called from an except block: the traceback is the bug report)
    _quiet_end()
    traceback.print_exc(file=sys.stderr)
    print(f"{prog}: unexpected error on rank {comm.rank}; aborting all {comm.size} ranks{note}",
          file=sys.stderr, flush=True)
    comm.Abort(ABORT_STATUS)


def guarded(comm, compute, prog):
    """``compute()``; an unexpected exception on one of several ranks aborts them all (status 3)
    instead of leaving the others waiting (the abort path of :func:`end_unexpected`); after a signal
    whose :class:`Interrupted` something caught (:func:`swallowed_interrupt`) it raises that instead."""
    try:
        return compute()
    except Exception as err:
        if comm.size == 1:
            raise
        interrupt = swallowed_interrupt()
        if interrupt is not None:  # a signal that something caught: the command ends interrupted
            raise interrupt from err
        end_unexpected(prog, comm)
        raise


@contextmanager
def signals_deferred():
    """An interrupt that arrives inside the block is raised when the block ends (under :func:`interrupts`).

    For code that calls back into Python from C (threadpoolctl's library scan through
    ``dl_iterate_phdr``): an exception raised inside such a callback is only printed as
    "Exception ignored" and lost, instead of ending the command.
    """
    _held["depth"] += 1
    leaving = False
    try:
        yield
    except BaseException:
        leaving = True  # already on its way out (an interrupt taken inside): no second one raised
        raise
    finally:
        _held["depth"] -= 1
        if _held["depth"] == 0:  # an inner block leaves the signal to the outermost one
            signum, _held["signum"] = _held["signum"], None
            if signum is not None and not leaving:
                raise Interrupted(signum)


def interrupt_point(comm):
    """A safe point of a collective computation inside :func:`signals_deferred` (between two
    iterations of an optimisation: no collective half entered, every PETSc object whole): collective
    on ``comm`` (mpi4py; None: this process alone).  When a signal waits on any rank, every rank
    raises :class:`Interrupted` for it here, together; otherwise returns.

    The signal waits for the next such point (a SIMP iteration, a few seconds at most at the largest
    sizes), so that every rank leaves through the same ``finally`` blocks in the same order (their
    destroys are collective: MUMPS's clean-up, a DMDA's) and none is left inside a collective the
    others have left, which would hang both."""
    raise_agreed_interrupt(agreed_interrupt(comm))


def agreed_interrupt(comm):
    """The first half of :func:`interrupt_point` (collective): the signal waiting on any rank of
    ``comm`` (the largest number), or 0; taken, so that the block's end does not raise it again.
    For a point that has something to do before it raises (a checkpoint written)."""
    signum = int(_held["signum"] or 0)
    if comm is not None and comm.size > 1:
        from mpi4py import MPI

        signum = comm.allreduce(signum, op=MPI.MAX)
    if signum:
        _held["signum"] = None
        _held["agreed"] = True
    return signum


def raise_agreed_interrupt(signum):
    """The second half of :func:`interrupt_point`: :class:`Interrupted` for ``signum`` (0: nothing)."""
    if signum:
        raise Interrupted(signum)


@contextmanager
def heap_frozen():
    """The objects alive when the block starts left out of the garbage collector's scans until it
    ends (``gc.freeze``): a scoring run's inputs are read once and live to its end, and its full
    collections would scan them again and again (~0.2 s of a 24,660-record run)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
