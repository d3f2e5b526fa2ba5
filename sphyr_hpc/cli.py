"""The one runner every command line starts through (:func:`main`), and what it shares.

A command module (``score.py``, ``certify.py``, ...) describes itself as a
:class:`Command` (its parser, the outputs it will write, the job it runs) and
its ``main(argv=None)`` is ``cli.main(COMMAND, argv)``.  The runner then does,
in this order and the same way for every command:

0. the process's environment for the run (:func:`~sphyr_hpc.runtime.process.command_environment`:
   one BLAS thread, OpenMPI's ob1 PML without a launcher), before NumPy or MPI is loaded;
1. PETSc's options (single dash, ``-sphyr_...``) split from the command's own;
2. the arguments parsed and checked: a usage error is one line on stderr,
   printed once (by rank 0 under ``mpirun``: every rank parses the same
   arguments), exit status 2, never a traceback, and nothing has been
   computed or written yet;
3. the system packages required (mpi4py, petsc4py, h5py for HDF5 fields),
   then every output path checked writable (:func:`check_writable`: a usage
   error naming the path);
4. MPI started, the command's collective check before PETSc starts (``preflight``:
   ``optimize``'s memory estimate against the node's), PETSc's options inserted and
   checked (a small solve with them in a probe process,
   :func:`~sphyr_hpc.solvers.probe.check_options`), the job run;
5. one interrupt path: SIGINT or SIGTERM on any rank, at any point (one that
   comes during 2-4 is taken once they are done on every rank; a command with
   ``safe_points`` takes it only at those, every rank at once), or the end
   of the launcher that started the ranks (:func:`~sphyr_hpc.runtime.launcher.watched`),
   prints the same message once and ends every rank with 130 or 143
   (:func:`~sphyr_hpc.runtime.process.end_interrupted`); one abort path: an
   unexpected exception on any rank aborts them all with status 3 (one rank:
   the traceback, status 1).

Conventions (STYLE): every option's default is shown in ``--help``
(``ArgumentDefaultsHelpFormatter``).  Arguments are parsed and checked before
mpi4py or PETSc is imported, so ``--help`` and usage errors work without them.
"""

import argparse
import difflib
import os
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from .io.limits import positive_int  # noqa: F401  (the commands' argparse type, one definition)
from .runtime.launcher import watched
from .runtime.petsc import OptionsError, command_options, release_garbage, require, split_petsc_args
from .runtime.process import (USAGE_STATUS, UsageError, command_ended, command_environment, end_interrupted,
                              end_unexpected, interrupt_point, interrupts, share_interrupts, signals_deferred,
                              stdout_to_a_reader_that_may_go, swallowed_interrupt, world_rank)

__all__ = ["Command", "Context", "Formatter", "Output", "Parser", "UsageError", "main", "positive_int",
           "report_usage_error", "world_rank", "USAGE_STATUS"]


class Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown (argparse's formatter); descriptions and epilogs kept as written.

    Shown only where it is true and says something: not for a flag (its
    default is "off", whatever argparse stores: a ``store_false`` flag's True,
    or a flag sharing its destination with another), not for a required
    option, not for None or an empty list (nothing to show), and not twice (a
    help text that names its default itself, where it depends on the input:
    "(default: from the file name)").  Text is plain: the reStructuredText
    double backquotes of the docstrings the descriptions come from are dropped.
    """

    FLAGS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
             argparse._CountAction)

    def _get_help_string(self, action):
        if (action.default in (None, False, [], ()) or isinstance(action, self.FLAGS) or action.required
                or "(default" in (action.help or "")):
            return action.help
        return super()._get_help_string(action)

    def _fill_text(self, text, width, indent):
        return super()._fill_text(text.replace("``", ""), width, indent)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are :class:`UsageError` (printed by :func:`report_usage_error`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(message + self._did_you_mean(message))

    def _did_you_mean(self, message):
        """`` (did you mean --dataset?)`` for an unrecognised option close to one of this parser's."""
        if not message.startswith("unrecognized arguments: "):
            return ""
        known = [o for o in self._option_string_actions if o.startswith("--")]
        guesses = []
        for token in message[len("unrecognized arguments: "):].split():
            if token.startswith("--"):
                close = difflib.get_close_matches(token.partition("=")[0], known, n=1, cutoff=0.75)
                guesses += [f"{token.partition('=')[0]}: did you mean {close[0]}?"] if close else []
        return f" ({'; '.join(guesses)})" if guesses else ""


def report_usage_error(prog, err, rank=None):
    """Print ``prog: error: err`` once (rank 0) and return the usage status."""
    if (world_rank() if rank is None else rank) == 0:
        print(f"{prog}: error: {err}", file=sys.stderr, flush=True)
    return USAGE_STATUS


# -- outputs checked before any work -------------------------------------------------------------
@dataclass(frozen=True)
class Output:
    """A path a command will write: a folder (created now if missing) or a file."""

    path: str
    folder: bool = False


def check_writable(output):
    """Raise :class:`UsageError` naming ``output`` if this process cannot write it.

    Tried, not guessed from permission bits (root passes every ``access()``
    check; /proc and read-only mounts refuse anyway), and without leaving a
    trace: a temporary file is made and removed in the folder (or, for a
    folder or file that does not exist yet, in its nearest existing parent,
    where it would be created); an existing file is opened for appending,
    which changes nothing.
    """
    path = Path(output.path)
    where = None
    try:
        if path.exists():
            if output.folder and not path.is_dir():
                raise UsageError(f"cannot write {path}: it is a file, not a folder")
            if not output.folder and path.is_dir():
                raise UsageError(f"cannot write {path}: it is a folder, not a file")
            if not output.folder:
                open(path, "ab").close()
        where = path if output.folder and path.is_dir() else path.absolute().parent
        while not where.exists():
            where = where.parent
        if not where.is_dir():
            raise UsageError(f"cannot write {path}: {where} is a file, not a folder")
        handle, name = tempfile.mkstemp(dir=where, prefix=".sphyr_hpc-check-")
        os.close(handle)
        os.unlink(name)
    except OSError as err:
        tried = f" (a new file in {where})" if where is not None and where != path else ""
        raise UsageError(f"cannot write {path}: {err.strerror or err}{tried}") from None


# -- the runner ----------------------------------------------------------------------------------
@dataclass
class Context:
    """What the runner hands a job: the MPI communicator (None without MPI) and PETSc's arguments."""

    comm: object = None
    petsc_args: list = field(default_factory=list)


def _nothing(args):
    return ()


@dataclass
class Command:
    """One command line: how to parse it, what it writes, the job it runs.

    ``run(args, context)`` returns the exit status (the same on every rank).
    ``check(args)`` raises :class:`UsageError` for what the parser cannot see
    (a missing input file); ``outputs(args)`` lists the :class:`Output` paths.
    ``mpi=False``: no MPI nor PETSc in this process; ``split_petsc`` (PETSc's
    options split off, for processes it starts) and ``requires`` (mpi4py and
    petsc4py checked) then default to False too.
    ``probe``: check the PETSc options with a tiny solve before the job.
    ``preflight(args, comm)``: a collective check once MPI has started and before PETSc does (an
    estimate of the memory the job needs against what the node has): :class:`UsageError` on every rank.
    ``interrupt_note(args)``: appended to the interrupt message (where the work done so far is).
    ``safe_points``: the job takes signals only at its safe points
    (:func:`~sphyr_hpc.runtime.process.interrupt_point`, every rank at once: a collective
    computation's) and at its end, never inside a collective or a PETSc call.
    """

    prog: str
    build_parser: Callable
    run: Callable
    outputs: Callable = _nothing
    check: Optional[Callable] = None
    mpi: bool = True
    split_petsc: Optional[bool] = None
    requires: Optional[bool] = None
    probe: bool = True
    preflight: Optional[Callable] = None
    h5py: Callable = lambda args: False
    interrupt_note: Callable = lambda args: ""
    abort_note: str = ""
    safe_points: bool = False

    def __post_init__(self):
        if self.split_petsc is None:
            self.split_petsc = self.mpi
        if self.requires is None:
            self.requires = self.mpi


def _parse(command, argv):
    """(args, PETSc's arguments); :class:`UsageError` for anything wrong before the work starts."""
    petsc_args = []
    if command.split_petsc:
        argv, petsc_args = split_petsc_args(argv)
    try:
        args = command.build_parser().parse_args(argv)
    except UsageError as err:
        raise UsageError(f"{err} (see --help)") from None
    if command.check is not None:
        command.check(args)
    return args, petsc_args


def main(command, argv=None):
    """Run ``command`` on ``argv`` (default ``sys.argv[1:]``) and return its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    context, args = Context(), None
    with command_environment(), interrupts(), ExitStack() as watch:
        try:
            # Entered inside the try, kept until its handlers have run: a signal while the launcher
            # watch starts (SIGINT a moment after the ranks began) takes the interrupt path as well.
            watch.enter_context(watched())
            watch.enter_context(stdout_to_a_reader_that_may_go())
            with ExitStack() as stack:
                # The start, from the arguments to PETSc's options checked, is made whole on every
                # rank before a signal is taken: a rank that left it for the interrupt path would leave
                # another inside one of its blocking collectives (MPI's start, the interrupt
                # communicator's, the preflight's, PETSc's start, the options probe's), where no
                # signal handler runs, waiting for it until MPI_Abort.  It takes a fraction of a
                # second, a few seconds with solver options (their probe solve).
                with signals_deferred():
                    args, context.petsc_args = _parse(command, argv)
                    if command.requires:
                        require(command.prog, h5py=command.h5py(args))
                    for output in command.outputs(args):
                        check_writable(output)
                    if command.mpi:
                        from mpi4py import MPI

                        context.comm = MPI.COMM_WORLD
                        share_interrupts(context.comm)
                        if command.preflight is not None:
                            command.preflight(args, context.comm)
                        stack.enter_context(command_options(context.petsc_args))
                        if command.probe:
                            from .solvers.probe import check_options

                            check_options(comm=context.comm)
                    if command.safe_points:
                        # The start's end is the job's first safe point, in the same deferred block: a
                        # signal that reached one rank during the start ends every rank here together
                        # (raised at the block's end on that rank alone, it left the other inside the
                        # job's first collective until MPI_Abort: the stress benchmark's banners).
                        interrupt_point(context.comm)
                        status = command.run(args, context)
                        interrupt_point(context.comm)
                if not command.safe_points:
                    status = command.run(args, context)
                command_ended()
                release_garbage()  # (after command_ended: no signal cuts its collective short)
                return status
        except (UsageError, OptionsError) as err:
            return report_usage_error(command.prog, err, context.comm.rank if context.comm else None)
        except (KeyboardInterrupt, Exception) as err:
            # An interrupt, or another error after a signal whose Interrupted something caught (see
            # swallowed_interrupt), ends as interrupted; anything else is unexpected.
            interrupt = err if isinstance(err, KeyboardInterrupt) else swallowed_interrupt()
            if interrupt is None:
                end_unexpected(command.prog, context.comm, command.abort_note)
            else:
                note = command.interrupt_note(args) if args is not None else ""
                status = end_interrupted(command.prog, interrupt, context.comm, note)
                if context.comm is None or context.comm.size == 1:  # (ranks that end together skip PETSc's end)
                    release_garbage()
                return status
