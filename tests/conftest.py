"""Shared fixtures: the repository on sys.path and the parity fixtures' location."""

import atexit
import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import pytest

# No test reads or writes the user's yardstick store ($XDG_CACHE_HOME/sphyr_hpc, docs/store.md): the
# whole session, and every process it starts, caches in a folder of its own, removed at the end.
# Matplotlib keeps the font cache it would have used (rebuilding it costs every session seconds).
os.environ.setdefault("MPLCONFIGDIR", str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                          / "matplotlib"))
TEST_CACHE = tempfile.mkdtemp(prefix="sphyr_hpc-test-cache-")
os.environ["XDG_CACHE_HOME"] = TEST_CACHE
# And no test reads a yardstick another test stored unless it names a store (tests/test_store*.py do):
# a test comparing two runs (1 and 2 ranks, a sample split in pieces) must compute both.
os.environ["SPHYR_HPC_STORE"] = "none"
atexit.register(shutil.rmtree, TEST_CACHE, ignore_errors=True)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Inspect AI's mockllm/model counts each prompt's tokens with tiktoken's o200k_base encoding, which
# tiktoken downloads on first use: the tests' `inspect` runs read the copy bin/setup --test keeps
# (TIKTOKEN_CACHE is tiktoken's cache folder; O200K the encoding's file in it, named by its cache key).
TIKTOKEN_CACHE = ROOT / ".venv" / "share" / "tiktoken"
O200K = "fb374d419588a4632f3f557e76b4b70aebbca790"
if (TIKTOKEN_CACHE / O200K).is_file():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE))


def inspect_or_skip():
    """``inspect_ai``, or the module's tests skipped with the command that installs it (the constraints
    file of this Debian release, as bin/setup --test uses it)."""
    release = next((line.split("=", 1)[1].strip('"') for line in Path("/etc/os-release").read_text().splitlines()
                    if line.startswith("VERSION_ID=")), "12") if Path("/etc/os-release").is_file() else "12"
    return pytest.importorskip(
        "inspect_ai", reason=f"inspect-ai is not installed: .venv/bin/python -m pip install -c "
                             f"constraints/debian{release}.txt --no-build-isolation -e '.[inspect]' "
                             f"(bin/setup --test installs it)")


def needs_o200k():
    """Skip a test of the ``inspect`` command where mockllm/model's token count would download
    tiktoken's o200k_base (it is in no ``TIKTOKEN_CACHE_DIR``)."""
    if not (Path(os.environ.get("TIKTOKEN_CACHE_DIR", "/nonexistent")) / O200K).is_file():
        pytest.skip("mockllm/model counts tokens with tiktoken's o200k_base, which is not in a TIKTOKEN_CACHE_DIR "
                    "(bin/setup --test puts it in .venv/share/tiktoken) and would be downloaded")

# A suite started with SIGINT ignored (a background job of a script, where the shell ignores it)
# would hand that on to every process it starts, and the interrupt tests' Ctrl-C would do nothing.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

EXAMPLE_RESULTS = ROOT / "examples" / "results"
DATA = Path(__file__).resolve().parent / "data"


def pytest_configure(config):
    config.addinivalue_line("markers", "mpi: needs at least 2 MPI ranks (run under mpirun -n 2)")
    config.addinivalue_line("markers", "blas: its claim could change with the BLAS kernel's rounding (bin/test runs "
                                       "these again under a second OpenBLAS kernel; conftest.BLAS_INDEPENDENT)")


# The BLAS rule (bin/test's second pass runs the tests marked ``blas``, under an OpenBLAS kernel of the
# other rounding class: with or without fused multiply-add).  A test depends on the BLAS kernel when it
# compares numbers two different computations made (a published or hand-derived value, an independent
# implementation, 1 rank against 2, a batch against one by one, a printed number in the docs) or takes a
# discrete decision (a verdict, a threshold, a bound that prunes) from numbers that went through BLAS or
# LAPACK: NumPy's and SciPy's products and factorisations, PETSc's dense kernels.  The last digits of
# those change with the kernel; the claims must not.  Every test is marked ``blas`` except those of the
# modules below (``file``) and the single tests (``file::test``), whose claims are about something else,
# each named with what it checks.  A module not listed is in the second pass: a new one is until it is
# listed here with its reason.
BLAS_INDEPENDENT = {
    "test_docs.py": "the docs' text and the paths they name",
    "test_layers.py": "imports between layers and module sizes",
    "test_usage_errors.py": "usage errors end with one line, exit 2, before any work",
    "test_install.py": "the package as pip install . leaves it: files, entry points, no compiler",
    "test_environment.py": "the environment a command sets (one BLAS thread), not what it computes",
    "test_examples.py": "the examples run as printed and write their pictures (their numbers: the tests of "
                        "what they call)",
    "test_readme.py": "the README's commands run as printed",
    "test_harness_docs.py": "docs/harness.md's blocks run as printed",
    "test_output_lock.py": "the output folder's lock and its processes",
    "test_interrupts.py": "signals end a run the one way: messages, exit statuses, files",
    "test_lm_eval_task.py": "the lm-eval task's files and functions, compared with the same scorer's output",
    "test_prompts.py": "the prompts' text, byte for byte",
    "test_report_html.py": "report.html's counts and that Chromium draws it",
    "test_hostile_input.py": "bad input costs only itself and buys no unbounded work",
    "test_fuzz.py": "every mutated record is answered exactly once",
    "test_completion_formats.py": "the same answers in other file formats give the same rows (one code path)",
    "test_unmatched_completions.py": "lines naming no record are not scored",
    "test_checkpoint.py": "a resumed run takes the uninterrupted run's steps: one code path, bit for bit",
    "test_store.py": "records with and without the store are byte-identical: one code path",
    "test_memory.py": "memory estimates against measured peaks, and the refusal",
    "test_inspect.py": "the Inspect AI task gives score's numbers: the same scorer in both",
    "test_fields.py::test_paraview_draws_the_design_as_printed": "ParaView's readers see the values written",
    "test_fields.py::test_paraview_reads_every_step_of_a_history": "ParaView's readers see every step written",
    "test_fields.py::test_a_run_that_dies_leaves_a_history_paraview_opens": "ParaView opens what a dying run left",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name not in BLAS_INDEPENDENT and \
                f"{item.path.name}::{getattr(item, 'originalname', item.name)}" not in BLAS_INDEPENDENT:
            item.add_marker(pytest.mark.blas)


@pytest.fixture(scope="session")
def example_results():
    return EXAMPLE_RESULTS


@pytest.fixture(scope="session")
def bundled_scored(tmp_path_factory):
    """The output folder of one ``score`` run of the bundled examples (examples/results: 144 records), in
    process, with its report: ``python -m sphyr_hpc.score examples/results --out OUT --quiet``.  Every test
    that reads it only reads it (a test that writes copies what it needs to its own folder)."""
    from sphyr_hpc.score import main

    out = tmp_path_factory.mktemp("bundled") / "out"
    assert main([str(EXAMPLE_RESULTS), "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(autouse=True)
def _barrier_after_each_mpi_test(request):
    """Every rank finishes a test marked ``mpi`` before any starts the next."""
    yield
    if request.node.get_closest_marker("mpi") is not None:
        from mpi4py import MPI

        MPI.COMM_WORLD.Barrier()


def cantilever(nely, nelx):
    """Supports on the whole left column, load on the right cell of the middle row."""
    from sphyr_hpc.core import loadcase

    supports = tuple((r, 0) for r in range(nely))
    return loadcase.LoadCase(nely, nelx, ((nely // 2, nelx - 1),), supports)


def two_ranks_marker(test_file):
    """A decorator marking a test ``mpi`` and skipping it on fewer than 2 ranks, its reason the command that
    runs the MPI tests of ``test_file`` (a path under tests/)."""
    from mpi4py import MPI

    marks = [pytest.mark.mpi, pytest.mark.skipif(MPI.COMM_WORLD.size < 2, reason="needs 2 MPI ranks: "
                                                 f"mpirun -n 2 python -m pytest -m mpi {test_file}")]

    def mark(test):
        for each in marks:
            test = each(test)
        return test

    return mark


def collective(compute):
    """Run ``compute()`` on every rank of COMM_WORLD; return every rank's result.

    An exception on one rank is caught and reported on all ranks (after the
    allgather), so no rank goes on to the next collective alone.
    """
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    try:
        outcome = (True, compute())
    except Exception:  # noqa: BLE001 - reported below on every rank
        outcome = (False, f"rank {world.rank}:\n{traceback.format_exc()}")
    outcomes = world.allgather(outcome)
    failures = [payload for ok, payload in outcomes if not ok]
    if failures:
        pytest.fail("\n".join(failures))
    return [payload for _, payload in outcomes]


def children(pid):
    """The process ids ``pid`` has started, from any of its threads (none once it has ended)."""
    started = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return started
    for task in tasks:
        try:
            started += [int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return started


def run_in_process(main, argv, cwd=ROOT):
    """A command's ``main(argv)`` (what ``python -m sphyr_hpc.<command>`` runs) in this process, from the
    folder ``cwd``, as a ``subprocess.CompletedProcess``: its exit status and what it printed to
    ``sys.stdout`` and ``sys.stderr``.  For tests of what a command prints and writes, where a process of
    its own would add only its start-up; not for what only a process shows (signals, exit statuses under
    bin/mpirun, PETSc's own printing)."""
    argv = [str(arg) for arg in argv]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(argv)
    return subprocess.CompletedProcess(argv, status, stdout.getvalue(), stderr.getvalue())


def console_script(name):
    """The path of the console script ``sphyr-<name>`` beside this Python (else on PATH), or None."""
    return shutil.which(f"sphyr-{name}", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def process_name(pid):
    """A process's name, or None once it has ended (bin/mpirun's short-lived children end between
    the listing of its children and this read)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def running(pids):
    """Those of ``pids`` that still run (not ended, not zombies)."""
    alive = []
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                alive.append(pid)
        except OSError:
            pass
    return alive
