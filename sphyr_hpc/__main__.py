"""``python -m sphyr_hpc``: the commands, each ``python -m sphyr_hpc.<command>`` or ``sphyr-<command>``.

``python -m sphyr_hpc COMMAND [ARGS...]`` runs one of them too.
"""

import importlib
import sys

# (command, what it does); each is the module sphyr_hpc.<command> and the console script sphyr-<command>.
COMMANDS = (
    ("prompts", "SPhyR's prompt for every dataset record, one JSON line each"),
    ("score", "score SPhyR completions like the published scorer, over MPI ranks"),
    ("validate", "evidence that the metric ranks what it should: probes of dataset records"),
    ("certify", "how far the yardstick is from the best binary design, proven"),
    ("report", "report.html and its pictures from a score output folder"),
    ("optimize", "SIMP topology optimisation of one problem over all MPI ranks"),
    ("generate", "write problems at any size as grid files"),
    ("scaling", "SIMP iterations timed over grid sizes and rank counts"),
    ("parity", "check a scoring run against the published result files it scored"),
    ("store", "list, check or prune the yardstick store (yardsticks computed once, ever)"),
)


def usage():
    width = max(len(name) for name, _ in COMMANDS)
    lines = ["usage: python -m sphyr_hpc COMMAND [ARGS...]   (or python -m sphyr_hpc.COMMAND, sphyr-COMMAND)",
             "", "commands:"]
    lines += [f"  {name:{width}s}  {text}" for name, text in COMMANDS]
    lines += ["", "python -m sphyr_hpc.COMMAND --help describes one."]
    return "\n".join(lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    names = [name for name, _ in COMMANDS]
    if argv[0] not in names:
        from .cli import report_usage_error

        return report_usage_error("python -m sphyr_hpc", f"unknown command {argv[0]!r}: choose one of "
                                                         f"{', '.join(names)}")
    return importlib.import_module(f"sphyr_hpc.{argv[0]}").main(argv[1:])


def script():
    """The console script ``sphyr-<command>``: the command its name says, ended as ``python -m
    sphyr_hpc.<command>`` ends (:func:`~sphyr_hpc.runtime.launcher.run_as_process`: its status handed
    to ``bin/mpirun``, ranks interrupted together ending through MPI_Finalize)."""
    from pathlib import Path

    from .runtime.launcher import run_as_process

    command = Path(sys.argv[0]).name.removeprefix("sphyr-")
    return run_as_process(lambda: main([command, *sys.argv[1:]]))


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
