"""What every command line shares: its parser, usage errors and how they are printed.

Conventions (STYLE): every option's default is shown in ``--help``
(``ArgumentDefaultsHelpFormatter``); a usage error is one line on stderr,
printed once (by rank 0 under ``mpirun``: every rank parses the same
arguments), exit status 2, never a traceback.  Commands parse and check their
arguments before importing mpi4py or PETSc, so ``--help`` and usage errors
work without them.
"""

import argparse
import os
import sys

USAGE_STATUS = 2


class UsageError(Exception):
    """A mistake on the command line: one line on stderr from rank 0, exit status 2."""


class Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown (argparse's formatter); descriptions and epilogs kept as written.

    An option without a value (a flag, or None) has nothing to show; a help
    text that already names its default is left alone.
    """

    def _get_help_string(self, action):
        if action.default in (None, False, [], ()) or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are :class:`UsageError` (printed by :func:`report_usage_error`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(message)


def world_rank():
    """This process's rank from the launcher's environment (mpi4py may not be importable yet)."""
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def report_usage_error(prog, err, rank=None):
    """Print ``prog: error: err`` once (rank 0) and return the usage status."""
    if (world_rank() if rank is None else rank) == 0:
        print(f"{prog}: error: {err}", file=sys.stderr, flush=True)
    return USAGE_STATUS
