"""The probe that checks a command's PETSc options by building and solving small systems.

PETSc rejects a bad value only when a solver is set up, and an option nobody
reads shows only after a solve; a command checks both before its work starts
(:func:`check_options`, called by :mod:`sphyr_hpc.cli` and by ``optimize``).

Which options were read is PETSc's own report, ``-options_left``: the probe
solves run in a child process (``python -m sphyr_hpc.solvers.probe``) with the
command's ``-<prefix>`` options and ``-options_left``, and PETSc's
``Option left: name:-...`` lines at the child's PetscFinalize name what no
solver read.  A run without ``-<prefix>`` options starts no child.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np

from ..core import loadcase
from ..runtime.petsc import (ONCE_VIEWERS, PREFIX, OptionsError, explain_petsc_error, petsc,
                             unknown_options_message, viewers_hidden)
from . import sizing
from .elasticity import elasticity_system

# The grids probed (rows, columns of cells): ``tiny``, a SPhyR load case as the scorer's direct
# solves see it; ``simp``, just large enough for the yardsticks' multigrid (sizing.MG_MIN_DOFS,
# two levels); ``multigrid``, three levels of the default multigrid (16,770 DOFs: a finest level
# and a stencil level on the compiled kernels over a stored coarse level).
GRIDS = {"tiny": (3, 2), "simp": (21, 21), "multigrid": (64, 128)}
# PETSc's -options_left report, one line an option (PetscOptionsLeft).
_LEFT = re.compile(r"^Option left: name:-(\S+)")
# Options of one multigrid level: a probe judges only the levels its hierarchy has.
_LEVEL = re.compile(r"mg_levels_(\d+)_")
# Judged by the run itself, on its own grid (the multigrid system refuses a level count other than
# its plan's): a probe grid has fewer levels.
_RUN_JUDGES = ("pc_mg_levels",)
# The child must start as an MPI process of its own, not as a rank of the command's job.
_LAUNCHER_PREFIXES = ("OMPI_", "PMIX_", "PMI_")
PROBE_SECONDS = 120


def _grid(kind):
    rows, columns = GRIDS[kind]
    return loadcase.from_grid([["L"] * columns] + [["1"] * columns for _ in range(rows - 2)] + [["S"] * columns])


def grid_for(solver):
    """The probe grid of an ``elasticity_system`` solver (``direct``, ``mg``, ``gamg``)."""
    return "tiny" if solver == "direct" else "multigrid"


def probes_of(prefix=PREFIX, options=()):
    """The (grid, ``elasticity_system`` keywords) a scoring command's options are probed on."""
    probes = [("tiny", {"prefix": prefix})]
    simp_prefix = prefix + sizing.SIMP_PREFIX[len(PREFIX):]
    if any(name.startswith(simp_prefix) for name in options):
        # The large yardsticks' multigrid system reads these: a 10x10 sample never builds it.
        probes.append(("simp", dict(sizing.simp_system_arguments(), prefix=simp_prefix)))
    return probes


def _solve(probes):
    """Solve each probe on this process; the levels of the multigrid hierarchies built."""
    PETSc = petsc()
    levels = 1
    with viewers_hidden():
        for kind, arguments in probes:
            lc = _grid(kind)
            with elasticity_system(lc, comm=PETSc.COMM_SELF, **arguments) as system:
                system.solve(system.slab_of(np.ones(lc.shape)))
                pc = system.ksp.getPC()
                if pc.getType() == "mg":
                    levels = max(levels, pc.getMGLevels())
    return levels


def _judged(name, prefix, levels):
    """Whether the probe can tell that no solver reads option ``name``."""
    if not name.startswith(prefix) or name[len(prefix):] in ONCE_VIEWERS:
        return False
    level = _LEVEL.search(name)
    return level is None or int(level.group(1)) < levels


def _child_environment():
    return {name: value for name, value in os.environ.items() if not name.startswith(_LAUNCHER_PREFIXES)}


def check_options(prefix=PREFIX, probes=None, comm=None):
    """Raise :class:`OptionsError` if the ``-<prefix>`` options would fail or go unread.

    ``probes``: (grid, ``elasticity_system`` keywords) pairs, default :func:`probes_of`; on
    ``comm`` (an mpi4py communicator) rank 0 probes and every rank raises the same error.
    """
    error = None
    if comm is None or comm.rank == 0:
        error = _probe(prefix, probes)
    if comm is not None:
        error = comm.bcast(error, root=0)
    if error:
        raise OptionsError(error)


def _probe(prefix, probes):
    """The one-line error of the options under ``prefix`` on ``probes``, or None."""
    options = {name: value for name, value in petsc().Options().getAll().items()
               if name.startswith(prefix) and name[len(prefix):] not in ONCE_VIEWERS
               and not name.endswith(_RUN_JUDGES)}
    if not options:
        return None
    probes = probes_of(prefix, options) if probes is None else probes
    argv = [sys.executable, "-m", __name__, json.dumps({"prefix": prefix, "probes": probes})]
    for name, value in sorted(options.items()):
        argv += [f"-{name}"] + ([value] if value else [])
    argv.append("-options_left")
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_SECONDS,
                             env=_child_environment(), cwd=os.getcwd())
    except subprocess.TimeoutExpired:
        return f"the probe of the PETSc options did not end within {PROBE_SECONDS} s"
    lines = run.stdout.splitlines()
    report = [json.loads(line) for line in lines if line.startswith("{")]
    if report and report[-1].get("rejected"):
        return f"PETSc rejected an option: {report[-1]['rejected']}"
    if run.returncode != 0 or not report:
        last = (run.stderr.strip().splitlines() or ["no message"])[-1]
        return f"the probe of the PETSc options failed (exit {run.returncode}): {last}"
    levels = report[-1]["levels"]
    unused = sorted(f"-{match.group(1)}" for match in map(_LEFT.match, lines)
                    if match and _judged(match.group(1), prefix, levels))
    return unknown_options_message(unused) if unused else None


def main(argv=None):
    """The child: solve the probes with the options of its command line, print one JSON line."""
    argv = sys.argv if argv is None else argv
    spec = json.loads(argv[1])
    PETSc = petsc([argv[0]] + argv[2:])
    try:
        levels = _solve([(kind, arguments) for kind, arguments in spec["probes"]])
    except PETSc.Error as err:
        print(json.dumps({"rejected": explain_petsc_error(err)}), flush=True)
        return 0
    except OptionsError as err:  # options that contradict each other (the fused smoother's PC)
        print(json.dumps({"rejected": str(err)}), flush=True)
        return 0
    print(json.dumps({"levels": levels}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
