"""The package as ``pip install .`` leaves it: every command runs from site-packages, with no C compiler.

A clean copy of the repository (its tracked files as the working tree holds them, none of its build
products) is installed, not editable, into a new venv that sees the system's petsc4py and mpi4py.
Every command then runs its bundled example from a folder outside the repository, with a PATH that
holds no C compiler and an empty cache and home: the kernels must come compiled with the install
(sphyr_hpc/runtime/native.py), never from a compiler at run time.  Then, with the extension module
removed, optimize falls back with one warning line.  About a minute and a half.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, needs_o200k

# What the runs call by name: bin/mpirun's tools and Open MPI's (its launcher wants ssh on PATH even on
# one node; Open MPI 5's mpirun is prterun, with prted).  No compiler, no python: the venv's python is called by its path.
TOOLS = ("bash", "env", "id", "mktemp", "cat", "rm", "pgrep", "mpirun", "mpiexec", "orterun", "orted", "prterun", "prted", "ssh")
COMPILERS = ("cc", "gcc", "c99", "clang", "x86_64-linux-gnu-gcc")
OPTIMIZE = ("-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", "600x200", "--iterations", "5")  # 241k DOFs: mg
SLOW = 600  # seconds any one step may take


def _copy_of_the_repository(target):
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=SLOW)
    for name in filter(None, listed.stdout.decode("utf-8").split("\0")):
        source, copy = ROOT / name, target / name
        if not os.path.lexists(source):  # deleted in the working tree
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)


def _run(argv, env, cwd):
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=SLOW)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}: exit status {done.returncode}\n" \
                                 f"{done.stderr[-3000:]}\n{done.stdout[-2000:]}"
    return done


def _compliance(done):
    return float(re.search(r"stopped after \d+ iterations: compliance (\S+)", done.stdout).group(1))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of the venv, the installed package's folder, the environment, a working folder)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the repository's git checkout (git ls-files) to copy it")
    top = tmp_path_factory.mktemp("install")
    source, venv, tools, work = top / "source", top / "venv", top / "bin", top / "work"
    for folder in (source, tools, work, top / "home", top / "cache"):
        folder.mkdir()
    _copy_of_the_repository(source)
    # From the test's venv: the new one's base is the system python, whose packages it sees.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=SLOW)
    python = venv / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-warn-script-location",
          "."], dict(os.environ), source)
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            (tools / tool).symlink_to(found)
    # os.environ (this process's, not the C-level environment its MPI singleton filled), without what
    # points into the repository or the test session's store.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPHYR_HPC_STORE")}
    env.update(PATH=str(tools), HOME=str(top / "home"), XDG_CACHE_HOME=str(top / "cache"),
               CC=str(top / "no-compiler" / "cc"))
    assert not any(shutil.which(c, path=env["PATH"]) for c in COMPILERS)
    package = Path(_run([python, "-c", "import sphyr_hpc; print(sphyr_hpc.__file__)"], env, work).stdout.strip()).parent
    assert venv in package.parents  # the installed copy, not the repository
    return python, package, env, work


def test_the_installed_package_has_its_compiled_kernels_and_runs_every_command(installed):
    python, package, env, work = installed
    loaded = _run([python, "-c", "from sphyr_hpc.runtime import native; print(native.library().__file__)"], env, work)
    assert Path(loaded.stdout.strip()).parent == package / "runtime"
    examples = package / "_examples"
    runs = [
        ["-m", "sphyr_hpc.score", "--out", "score"],  # the bundled results
        ["-m", "sphyr_hpc.report", "score"],
        ["-m", "sphyr_hpc.parity", "score/results.jsonl", examples / "results"],
        ["-m", "sphyr_hpc.validate", "--dataset", examples / "data" / "v1" / "full_easy.jsonl", "--samples", "2"],
        ["-m", "sphyr_hpc.certify", "--dataset", examples / "data" / "v1" / "3_random_row_easy.jsonl", "--samples", "1",
         "--node-budget", "200", "--out", "certify", "--quiet"],
        ["-m", "sphyr_hpc.generate", "--dataset", examples / "data" / "v1" / "full_easy.jsonl", "--index", "3",
         "--upscale", "4", "--out", "sample.json"],
        ["-m", "sphyr_hpc.store", "list"],
        ["-m", "sphyr_hpc.scaling", "--sizes", "64x32,128x64", "--ranks", "1,2", "--iterations", "2",
         "--design-iterations", "0", "--json", "scaling/scaling.json", "--quiet"],  # plain mpirun, from PATH
    ]
    for argv in runs:
        _run([python, *argv], env, work)
    assert (work / "score" / "report.html").is_file() and (work / "scaling" / "scaling.md").is_file()
    assert "entries: 0 " not in _run([python, "-m", "sphyr_hpc.store", "list"], env, work).stdout
    one = _run([python, *OPTIMIZE], env, work)
    two = _run([ROOT / "bin" / "mpirun", "-n", "2", python, *OPTIMIZE], env, work)
    for done in (one, two):  # the finest level applied by the kernels: no fallback said
        assert "warning" not in done.stderr, done.stderr
    assert _compliance(two) == pytest.approx(_compliance(one), rel=1e-6)


def test_without_its_extension_module_optimize_says_so_once_and_finishes(installed):
    python, package, env, work = installed
    (module,) = (package / "runtime").glob("_kernels.*")
    aside = module.with_name(module.name + ".removed")
    module.rename(aside)
    try:
        done = _run([python, *OPTIMIZE], env, work)
    finally:
        aside.rename(module)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("sphyr_hpc: warning: the compiled kernels (sphyr_hpc.runtime._kernels) are not "
                               "installed") and "the multigrid operators are stored as PETSc matrices" in lines[0]
    assert "stopped after 5 iterations" in done.stdout


def test_the_installed_packages_inspect_task_runs_by_its_registry_name(installed):
    """``inspect eval sphyr_hpc/sphyr`` finds the task of a non-editable install through its entry point
    (setup.cfg), from a folder outside the repository, with an absolute dataset path."""
    inspect_ai = pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (bin/setup --test installs it)")
    needs_o200k()
    python, package, env, work = installed
    # inspect-ai and its dependencies from the test's venv, for this test only (a path file of the new venv)
    (site,) = {Path(p) for p in python.parent.parent.glob("lib/python3*/site-packages")}
    reach = site / "inspect_ai_of_the_tests.pth"
    reach.write_text(str(Path(inspect_ai.__file__).parent.parent) + "\n")
    try:
        _run([python, "-m", "inspect_ai", "eval", "sphyr_hpc/sphyr", "--model", "mockllm/model", "--limit", "2",
              "--log-dir", "inspect-logs", "-T", f"dataset={package / '_examples' / 'data' / 'v1' / 'full_easy.jsonl'}",
              "-T", "store=none", "--display", "none"], env, work)
        (log,) = (work / "inspect-logs").glob("*.eval")
        task = _run([python, "-c", "import sys; from inspect_ai.log import read_eval_log; log = read_eval_log(sys.argv[1]); "
                     "import sphyr_hpc.inspect._registry as r; print(log.status, log.eval.task, len(log.samples), r.__file__)",
                     log], env, work)
    finally:
        reach.unlink()
    assert task.stdout.split() == ["success", "sphyr_hpc/sphyr", "2", str(package / "inspect" / "_registry.py")]
