"""``python -m sphyr_hpc.store``: list, check or prune a yardstick store (docs/store.md).

Usage::

    python -m sphyr_hpc.store list  [--store DIR]
    mpirun -n N python -m sphyr_hpc.store check [--store DIR] [--samples K] [--seed S]
    python -m sphyr_hpc.store prune [--store DIR] [--dry-run]

``list`` says what the store holds: entries, size, algorithm versions, grid
sizes, the datasets its yardsticks were computed for, damaged entries and
writers' temporary files.  ``check`` recomputes K random entries of this
algorithm version (over the ranks) and compares each with what is stored
under the parity rule of a yardstick's compliance (docs/scoring.md, "Parity");
on the machine that wrote them they agree bit for bit.  ``prune`` removes
entries of other algorithm versions, damaged entries and temporary files left
by writers that died.  The store is the one ``score``, ``validate`` and
``certify`` use by default (``$XDG_CACHE_HOME/sphyr_hpc``, else
``~/.cache/sphyr_hpc``) or ``--store DIR``.

Exit status: 0; 1 when ``list`` finds damaged entries or ``check`` finds an
entry that disagrees or is damaged; 2 on a usage error.
"""

import sys

from . import cli
from .cli import Parser, positive_int

PROG = "python -m sphyr_hpc.store"


def build_parser():
    import os

    from .io.yardstick_store import STORE_ENV, default_location

    parser = Parser(prog=PROG, description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="action", required=True, metavar="{list,check,prune}",
                                    parser_class=Parser)
    made = {name: actions.add_parser(name, help=text, formatter_class=cli.Formatter, description=text)
            for name, text in (("list", "what the store holds"),
                               ("check", "recompute a random sample of entries and compare them"),
                               ("prune", "remove entries of other algorithm versions, damaged entries and "
                                         "stale temporary files"))}
    for sub in made.values():
        sub.add_argument("--store", metavar="DIR", default=os.environ.get(STORE_ENV) or str(default_location()),
                         help=f"the store's folder (${STORE_ENV} when set, else the cache folder's)")
    made["check"].add_argument("--samples", type=positive_int, default=20, metavar="K", help="entries to recompute")
    made["check"].add_argument("--seed", type=int, default=0, help="seed of the random sample")
    made["prune"].add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    return parser


def _run(args, context):
    from .io.yardstick_store import YardstickStore
    from .jobs import store as job

    store = YardstickStore(args.store)
    if args.action == "check":
        return job.check_store(store, args.samples, args.seed, context.comm)
    return job.list_store(store) if args.action == "list" else job.prune_store(store, args.dry_run)


def _check(args):
    """A --store that is a file, or a folder named that does not exist, is a usage error (the default
    store not made yet holds 0 entries: no run has written it)."""
    import os
    from pathlib import Path

    from .io.yardstick_store import STORE_ENV, default_location

    path = Path(args.store)
    if path.is_file():
        raise cli.UsageError(f"--store {args.store} is a file; --store names a store's folder")
    named = args.store not in (os.environ.get(STORE_ENV), str(default_location()))
    if named and not path.exists():
        raise cli.UsageError(f"no such store folder: {args.store} (a store is the folder a score run with "
                             f"--store DIR wrote; the default one is {default_location()})")


# ``check`` recomputes yardsticks over MPI ranks with PETSc; ``list`` and ``prune`` read files only.
COMMAND = cli.Command(prog=PROG, build_parser=build_parser, run=_run, check=_check, probe=False)
FILES_ONLY = cli.Command(prog=PROG, build_parser=build_parser, run=_run, check=_check, mpi=False)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    return cli.main(COMMAND if "check" in argv else FILES_ONLY, argv)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
