"""A newcomer's mistakes end in one line saying what and how to fix, exit status 2, never a traceback."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import EXAMPLE_RESULTS, ROOT
from sphyr_hpc import score
from sphyr_hpc.jobs import score_inputs
from sphyr_hpc.score import main

ONE_FILE = EXAMPLE_RESULTS / "baseline-empty" / "full_easy.json"
MPIRUN = str(ROOT / "bin" / "mpirun")


def _usage_error(capsys, *argv):
    """(stderr) of an in-process run that must be a usage error."""
    status = main([*map(str, argv), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


def _python(*args, code=None, timeout=300, cwd=ROOT):
    cmd = [sys.executable, *(("-c", code) if code else ("-m", "sphyr_hpc.score")), *map(str, args)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def test_out_naming_an_existing_file_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    err = _usage_error(capsys, ONE_FILE, "--out", tmp_path / "taken")
    assert "--out" in err and "is a file" in err


def test_fields_naming_an_existing_file_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    err = _usage_error(capsys, ONE_FILE, "--out", tmp_path / "out", "--fields", tmp_path / "taken")
    assert "--fields" in err and "is a file" in err
    assert not (tmp_path / "out").exists()


def test_out_inside_an_input_folder_is_refused(tmp_path, capsys):
    inputs = tmp_path / "results" / "model-a"
    inputs.mkdir(parents=True)
    (inputs / "full_easy_results.json").write_text(ONE_FILE.read_text())
    err = _usage_error(capsys, tmp_path / "results", "--out", tmp_path / "results" / "out")
    assert "inside the input folder" in err
    assert not (tmp_path / "results" / "out").exists()


def test_a_missing_path_is_named(tmp_path, capsys):
    err = _usage_error(capsys, tmp_path / "nowhere.json", "--out", tmp_path / "out")
    assert "no such file or folder" in err and "nowhere.json" in err


def test_resume_with_other_inputs_is_refused_naming_the_difference(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(ONE_FILE), "--out", str(out), "--quiet"]) == 0
    before = (out / "results.jsonl").read_text()
    capsys.readouterr()
    other = EXAMPLE_RESULTS / "baseline-random" / "full_easy.json"
    err = _usage_error(capsys, other, "--out", out, "--resume")
    assert "--resume" in err and "other inputs" in err and str(other) in err and str(ONE_FILE) in err
    assert (out / "results.jsonl").read_text() == before  # nothing merged
    # The same inputs resume (nothing left to score).
    assert main([str(ONE_FILE), "--out", str(out), "--resume", "--quiet"]) == 0
    assert json.loads((out / "run.json").read_text())["inputs"]["paths"] == [str(ONE_FILE)]


def test_unknown_petsc_option_under_the_prefix_is_a_usage_error(tmp_path, capsys):
    err = _usage_error(capsys, ONE_FILE, "--out", tmp_path / "out", "-sphyr_ksp_typo", "cg")
    assert "unknown PETSc option -sphyr_ksp_typo" in err


def test_invalid_petsc_value_is_a_usage_error(tmp_path, capsys):
    err = _usage_error(capsys, ONE_FILE, "--out", tmp_path / "out", "-sphyr_ksp_type", "nonsense")
    assert "KSP type nonsense" in err
    # The options of one run do not leak into the next (main() runs in-process here).
    assert main([str(ONE_FILE), "--out", str(tmp_path / "out"), "--quiet"]) == 0


def test_valid_petsc_options_are_accepted(tmp_path):
    assert main([str(ONE_FILE), "--out", str(tmp_path / "out"), "--quiet",
                 "-sphyr_pc_factor_mat_ordering_type", "rcm"]) == 0


def test_options_of_the_large_samples_multigrid_are_checked_too(tmp_path, capsys):
    # -sphyr_simp_* reach the multigrid system of large yardsticks (solvers/sizing.py), which a
    # 10x10 sample never builds: they are checked on a probe of that system.
    assert main([str(ONE_FILE), "--out", str(tmp_path / "ok"), "--quiet",
                 "-sphyr_simp_mg_levels_ksp_max_it", "2", "-sphyr_simp_pc_mg_cycle_type", "v"]) == 0
    err = _usage_error(capsys, ONE_FILE, "--out", tmp_path / "out", "-sphyr_simp_mg_levels_ksp_typo", "1")
    assert "unknown PETSc option -sphyr_simp_mg_levels_ksp_typo" in err


def test_ksp_view_is_shown_once_per_distinct_solver_not_per_solve(tmp_path):
    run = _python(ONE_FILE, "--out", tmp_path / "out", "--quiet", "-sphyr_ksp_view")
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("KSP Object: (sphyr_)") == 1  # 10x10 samples on one rank: one solver
    assert len(run.stdout.splitlines()) < 100


def test_usage_error_on_two_ranks_is_printed_once():
    run = subprocess.run([MPIRUN, "-n", "2", sys.executable, "-m", "sphyr_hpc.score", str(ONE_FILE),
                          "--out", "/nonexistent/never", "-sphyr_ksp_type", "nonsense", "--quiet"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert run.returncode == 2
    assert run.stderr.count("KSP type nonsense") == 1
    assert "Traceback" not in run.stderr


def test_missing_bundled_examples_name_the_options_to_use(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(score_inputs, "EXAMPLES", tmp_path / "not-installed")
    err = _usage_error(capsys, "--out", tmp_path / "out")
    assert "--dataset" in err and "bundled examples are not installed" in err


BLOCKED = ("import sys\n"
           "for name in ('mpi4py', 'petsc4py', 'h5py'):\n"
           "    sys.modules[name] = None  # as if not installed\n"
           "from sphyr_hpc.{module} import main\n"
           "sys.exit(main(sys.argv[1:]))\n")


V1_FULL_EASY = ROOT / "examples" / "data" / "v1" / "full_easy.jsonl"
ARGUMENTS = {
    "score": [],  # the bundled examples
    "optimize": ["--preset", "mbb", "--size", "30x10"],
    "validate": ["--dataset", V1_FULL_EASY],
    "scaling": ["--sizes", "30x10", "--json", "never.json"],
}


@pytest.mark.parametrize("module", sorted(ARGUMENTS))
def test_without_mpi4py_and_petsc4py_a_command_names_them_and_both_install_routes(module, tmp_path):
    run = _python(*ARGUMENTS[module], code=BLOCKED.format(module=module), cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert "mpi4py" in run.stderr and "petsc4py" in run.stderr
    assert "bin/setup" in run.stderr and "environment.yml" in run.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("module", ["score", "optimize", "validate", "scaling", "generate"])
def test_help_works_without_mpi4py_and_petsc4py_and_shows_defaults(module):
    run = _python("--help", code=BLOCKED.format(module=module))
    assert run.returncode == 0, run.stderr
    assert "usage:" in run.stdout and "(default:" in run.stdout


def test_sigterm_says_how_to_resume_and_resume_finishes(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "sphyr_hpc.score", str(EXAMPLE_RESULTS), "--out", str(out),
                             "--quiet"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = out / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (log.exists() and len(log.read_text().splitlines()) >= 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "Traceback" not in err
    assert "interrupted (SIGTERM)" in err and "--resume" in err
    written = len(log.read_text().splitlines())
    assert 3 <= written < 144
    assert main([str(EXAMPLE_RESULTS), "--out", str(out), "--resume", "--quiet"]) == 0
    assert len(log.read_text().splitlines()) == 144


@pytest.mark.parametrize("option, message", [
    (["-sphyr_ksp_typo", "cg"], "unknown PETSc option -sphyr_ksp_typo"),
    (["-sphyr_ksp_type", "nonsense"], "KSP type nonsense"),
    (["--iterations", "many"], "invalid int value"),
])
def test_optimize_usage_errors_are_one_line_and_status_2(option, message, capsys):
    from sphyr_hpc import optimize

    status = optimize.main(["--preset", "mbb", "--size", "30x10", "--iterations", "3", "--quiet", *option])
    err = capsys.readouterr().err
    assert status == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_optimize_says_where_it_wrote_and_what_its_final_compliance_is(tmp_path, capsys):
    from sphyr_hpc import optimize

    status = optimize.main(["--preset", "mbb", "--size", "30x10", "--iterations", "4", "--quiet",
                            "--json", str(tmp_path / "run.json"), "--fields", str(tmp_path / "fields")])
    printed = capsys.readouterr().out
    assert status == 0
    final = json.loads((tmp_path / "run.json").read_text())
    assert f"compliance {final['compliance']:.6e} (the final design, analysed at p = 3)" in printed
    assert f"-> {tmp_path / 'run.json'}" in printed
    xdmf = tmp_path / "fields" / "mbb_30x10.xdmf"
    assert xdmf.exists() and f"-> {xdmf}" in printed and "UpdatePipeline(time)" in printed


@pytest.mark.parametrize("option, kind", [("--fields", "file"), ("--json", "folder"), ("--png", "folder"),
                                          ("--save-density", "folder")])
def test_optimize_output_of_the_wrong_kind_is_a_usage_error(option, kind, tmp_path, capsys):
    from sphyr_hpc import optimize

    target = tmp_path / "taken"
    target.write_text("") if kind == "file" else target.mkdir()
    status = optimize.main(["--preset", "mbb", "--size", "30x10", "--iterations", "2", "--quiet", option, str(target)])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    assert f"{option} {target} is a {kind}" in err


# -- outputs that cannot be written: one line naming the path, exit status 2, before any work --------
UNWRITABLE = "/proc/sphyr_hpc_no_such_folder"  # /proc refuses new files, also to root
DATASET = ROOT / "examples" / "data" / "v1" / "full_easy.jsonl"
UNWRITABLE_OUTPUTS = {  # command: its arguments with an output no one can write
    "score": [str(ONE_FILE), "--out", UNWRITABLE, "--quiet"],
    "certify": ["--dataset", str(DATASET), "--samples", "1", "--out", UNWRITABLE, "--quiet"],
    "optimize": ["--preset", "mbb", "--size", "12x4", "--iterations", "2", "--png", UNWRITABLE + ".png"],
    "generate": ["--preset", "mbb", "--size", "12x4", "--out", UNWRITABLE + ".json"],
    "validate": None,  # writes nothing
}


def _unwritable_run(module, ranks):
    prefix = [MPIRUN, "-n", str(ranks)] if ranks > 1 else []
    cmd = prefix + [sys.executable, "-m", f"sphyr_hpc.{module}", *UNWRITABLE_OUTPUTS[module]]
    started = time.perf_counter()
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    return run, time.perf_counter() - started


@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("module", [m for m, argv in UNWRITABLE_OUTPUTS.items() if argv])
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2_before_any_work(module, ranks):
    run, seconds = _unwritable_run(module, ranks)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and "MPI_ABORT" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if f"sphyr_hpc.{module}" in line]
    assert len(lines) == 1 and "cannot write " + UNWRITABLE in lines[0], run.stderr
    assert "it " not in run.stdout and "->" not in run.stdout  # no iteration, nothing written
    assert seconds < 120  # the start-up only: certify alone searched for a minute before it failed


def test_an_unwritable_out_is_refused_in_process_too(capsys):
    err = _usage_error(capsys, ONE_FILE, "--out", UNWRITABLE)
    assert f"cannot write {UNWRITABLE}" in err


def test_an_output_check_leaves_no_trace(tmp_path):
    from sphyr_hpc.cli import Output, check_writable

    check_writable(Output(tmp_path / "new" / "folder", folder=True))
    check_writable(Output(tmp_path / "new" / "file.json"))
    (tmp_path / "kept.json").write_text("kept")
    check_writable(Output(tmp_path / "kept.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]
    assert (tmp_path / "kept.json").read_text() == "kept"
