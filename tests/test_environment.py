"""The process environment: importing sphyr_hpc changes nothing; a command runs with one BLAS thread.

A command sets OPENBLAS_NUM_THREADS and OMP_NUM_THREADS (and, without a launcher,
OMPI_MCA_pml) where they are not set, for its run (sphyr_hpc.runtime.process.command_environment).
OpenBLAS reads its variable once, when NumPy is first imported, so the setting only works if no
command module imports NumPy before ``cli.main`` runs: checked here for every command, and by
the threads the BLAS library really runs with.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from sphyr_hpc import cli
from sphyr_hpc.__main__ import COMMANDS

SET_BY_COMMANDS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OMPI_MCA_pml")
LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def _clean_env(**extra):
    """This environment without what a command would set, nor a launcher's rank variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in SET_BY_COMMANDS + LAUNCHER_VARIABLES + ("PETSC_DIR",) and not k.startswith("PMIX_")}
    return dict(env, PYTHONPATH=str(ROOT), **extra)


def _python(code, *args, **env):
    run = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env=_clean_env(**env))
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip().splitlines()[-1]


API_CALL = """
import json, os, sys
import threadpoolctl  # imported by sphyr_hpc's condensed solver; it sets KMP_DUPLICATE_LIB_OK itself on import
before = dict(os.environ)
import sphyr_hpc
from sphyr_hpc import get_structural_metrics
metrics = get_structural_metrics("L L L\\n1 1 1\\nS S S", "L L L\\n1 1 1\\nS S S", "L L L\\nV V V\\nS S S")
after = dict(os.environ)
changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
print(json.dumps({"changed": changed, "score": metrics.topology_score, "petsc": "petsc4py" in sys.modules}))
"""


def test_importing_sphyr_hpc_and_scoring_through_its_api_leave_the_environment_as_it_was():
    seen = json.loads(_python(API_CALL))
    assert seen["petsc"] and seen["score"] > 0.99  # the API really ran: PETSc started, the answer scored
    assert seen["changed"] == []


@pytest.mark.parametrize("module", [f"sphyr_hpc.{name}" for name, _ in COMMANDS] + ["sphyr_hpc.__main__"])
def test_no_command_module_imports_numpy_before_its_main_runs(module):
    assert _python(f"import sys, {module}; print('numpy' in sys.modules)") == "False"


# ``python -m MODULE ARGS``, with the BLAS libraries' threads printed as the process exits.
AS_COMMAND = """
import atexit, json, runpy, sys
import threadpoolctl

def report():
    blas = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    print(json.dumps(blas), flush=True)

atexit.register(report)
module = sys.argv.pop(1)
if module == "numpy":
    import numpy
else:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
"""

RUNS = {
    "sphyr_hpc.generate": ["--preset", "mbb", "--size", "6x2", "--out", "{tmp}/mbb.json"],
    "sphyr_hpc.optimize": ["--preset", "mbb", "--size", "6x2", "--iterations", "1", "--quiet"],
}


def _blas_threads(module, tmp_path, **env):
    args = [a.format(tmp=tmp_path) for a in RUNS.get(module, [])]
    threads = json.loads(_python(AS_COMMAND, module, *args, **env))
    assert threads, "no BLAS library loaded"
    return threads


@pytest.mark.parametrize("module", sorted(RUNS))
def test_a_command_runs_with_one_blas_thread(module, tmp_path):
    assert set(_blas_threads(module, tmp_path)) == {1}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: BLAS runs one thread anyway")
def test_without_a_command_numpy_keeps_its_threads_and_a_setting_of_ones_own_wins(tmp_path):
    assert max(_blas_threads("numpy", tmp_path)) > 1  # what the command's setting changes
    assert set(_blas_threads("sphyr_hpc.generate", tmp_path, OPENBLAS_NUM_THREADS="2")) == {2}


def _environment_seen_by_a_command():
    seen = {}

    def run(args, context):
        seen.update(os.environ)
        return 0

    command = cli.Command(prog="env-test", build_parser=lambda: cli.Parser(prog="env-test"), run=run, mpi=False)
    assert cli.main(command, []) == 0
    return seen


def test_a_command_called_in_process_sets_the_environment_for_its_run_only(monkeypatch):
    for name in SET_BY_COMMANDS + LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    seen = _environment_seen_by_a_command()
    assert {name: seen.get(name) for name in SET_BY_COMMANDS} == {
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OMPI_MCA_pml": "ob1"}
    assert dict(os.environ) == before


def test_a_command_keeps_the_settings_it_finds_and_a_launchers_pml(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    monkeypatch.delenv("OMPI_MCA_pml", raising=False)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")  # as under mpirun: the launcher's settings stand
    seen = _environment_seen_by_a_command()
    assert seen["OPENBLAS_NUM_THREADS"] == "4" and "OMPI_MCA_pml" not in seen
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"


def test_bin_mpirun_started_by_a_process_that_has_started_mpi_runs_its_own_job():
    # MPI_Init puts the process's launcher variables (PMIX_*, OMPI_MCA_ess, ...) into its C
    # environment, which a child inherits: mpirun then ended at once with status 1 and no word.
    code = ("import subprocess, sys\n"
            "from mpi4py import MPI\n"
            "MPI.COMM_WORLD.Barrier()\n"
            "run = subprocess.run([sys.argv[1], '-n', '2', sys.executable, '-c',\n"
            "                      'from mpi4py import MPI; c = MPI.COMM_WORLD; c.rank or print(c.Get_size())'],\n"
            "                     capture_output=True, text=True, timeout=120)\n"
            "print(run.returncode, run.stdout.strip())\n")
    run = subprocess.run([sys.executable, "-c", code, str(ROOT / "bin" / "mpirun")], capture_output=True,
                         text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "0 2"
