"""``python benchmarks/_unwatched.py sphyr_hpc.COMMAND ARGS``: the command with the launcher's
watchdog switched off (``launcher.watched`` replaced by a block that watches nothing), to time the
watchdog's cost (benchmarks/launcher_watch.py).  Not a way to run the package."""

import contextlib
import runpy
import sys

from sphyr_hpc import cli
from sphyr_hpc.runtime import launcher

launcher.watched = cli.watched = contextlib.nullcontext
module, sys.argv = sys.argv[1], [sys.argv[1]] + sys.argv[2:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
