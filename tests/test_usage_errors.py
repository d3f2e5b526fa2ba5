"""A newcomer's mistakes end in one line saying what and how to fix, exit status 2, never a traceback."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import EXAMPLE_RESULTS, ROOT, run_in_process
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
    assert main([str(ONE_FILE), "--out", str(out), "--quiet", "--no-report"]) == 0
    before = (out / "results.jsonl").read_text()
    capsys.readouterr()
    other = EXAMPLE_RESULTS / "baseline-random" / "full_easy.json"
    err = _usage_error(capsys, other, "--out", out, "--resume")
    assert "--resume" in err and "other inputs" in err and str(other) in err and str(ONE_FILE) in err
    assert (out / "results.jsonl").read_text() == before  # nothing merged
    # The same inputs resume (nothing left to score).
    assert main([str(ONE_FILE), "--out", str(out), "--resume", "--quiet", "--no-report"]) == 0
    assert json.loads((out / "run.json").read_text())["inputs"]["paths"] == [str(ONE_FILE)]


def test_unknown_petsc_option_under_the_prefix_is_a_usage_error(tmp_path, capsys):
    err = _usage_error(capsys, ONE_FILE, "--out", tmp_path / "out", "-sphyr_ksp_typo", "cg")
    assert "unknown PETSc option -sphyr_ksp_typo" in err


def test_invalid_petsc_value_is_a_usage_error(tmp_path, capsys):
    err = _usage_error(capsys, ONE_FILE, "--out", tmp_path / "out", "-sphyr_ksp_type", "nonsense")
    assert "KSP type nonsense" in err
    # The options of one run do not leak into the next (main() runs in-process here).
    assert main([str(ONE_FILE), "--out", str(tmp_path / "out"), "--quiet", "--no-report"]) == 0


def test_valid_petsc_options_are_accepted(tmp_path):
    assert main([str(ONE_FILE), "--out", str(tmp_path / "out"), "--quiet", "--no-report",
                 "-sphyr_pc_factor_mat_ordering_type", "rcm"]) == 0


def test_options_of_the_large_samples_multigrid_are_checked_too(tmp_path, capsys):
    # -sphyr_simp_* reach the multigrid system of large yardsticks (solvers/sizing.py), which a
    # 10x10 sample never builds: they are checked on a probe of that system.
    assert main([str(ONE_FILE), "--out", str(tmp_path / "ok"), "--quiet", "--no-report",
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


# -- issue 25: a new user's first hour -------------------------------------------------------------
MY_MODEL = ROOT / "examples" / "completions" / "my-model.jsonl"
ROW_EASY = ROOT / "examples" / "data" / "v1" / "3_random_row_easy.jsonl"


def test_a_jsonl_file_given_as_path_says_to_use_dataset_and_completions(tmp_path, capsys):
    err = _usage_error(capsys, V1_FULL_EASY, "--out", tmp_path / "out")
    assert "is a JSONL file" in err and "--dataset" in err and "--completions" in err
    assert err.startswith("python -m sphyr_hpc.score: error: ")
    assert not (tmp_path / "out").exists()


def test_jsonl_content_in_a_json_file_gets_the_same_hint(tmp_path, capsys):
    named = tmp_path / "model" / "full_easy.json"
    named.parent.mkdir()
    named.write_text(V1_FULL_EASY.read_text())
    assert main([str(named), "--out", str(tmp_path / "out"), "--quiet", "--no-report"]) == 1
    err = capsys.readouterr().err
    assert "Extra data" in err and "--dataset D.jsonl --completions C.jsonl" in err


@pytest.mark.parametrize("module, argv, message", [
    ("score", ["nowhere.json"], "no such file or folder: nowhere.json"),
    ("validate", ["--dataset", "nowhere.jsonl"], "no such file or folder: nowhere.jsonl"),
    ("certify", ["--dataset", "nowhere.jsonl"], "no such file: nowhere.jsonl"),
    ("optimize", ["nowhere.json"], "no such file: nowhere.json"),
    ("generate", ["--grid", "nowhere.txt", "--out", "x.json"], "no such file: nowhere.txt"),
])
def test_a_missing_input_is_named_in_the_same_words_by_every_command(module, argv, message, tmp_path, capsys):
    import importlib

    status = importlib.import_module(f"sphyr_hpc.{module}").main(argv)
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    assert err.strip() == f"python -m sphyr_hpc.{module}: error: {message}", err


def _completions(tmp_path, completion):
    record = json.loads(V1_FULL_EASY.read_text().splitlines()[0])
    dataset = tmp_path / "full_easy.jsonl"
    dataset.write_text(json.dumps(record) + "\n")
    completions = tmp_path / "model.jsonl"
    completions.write_text(json.dumps({"index": record["index"], "completion": completion}) + "\n")
    return record, dataset, completions


@pytest.mark.parametrize("kind", ["json list text", "commas", "prose"])
def test_an_unread_completion_format_says_what_was_found_and_what_is_read(kind, tmp_path):
    record, dataset, completions = _completions(tmp_path, "")
    truth = record["ground_truth"]
    truth = [r.split() if isinstance(r, str) else r for r in truth]
    completion = {"json list text": json.dumps(truth), "commas": "\n".join(",".join(r) for r in truth),
                  "prose": "I cannot solve this."}[kind]
    completions.write_text(json.dumps({"index": record["index"], "completion": completion}) + "\n")
    assert main(["--dataset", str(dataset), "--completions", str(completions), "--out", str(tmp_path / "out"),
                 "--quiet", "--no-report"]) == 0
    row = json.loads((tmp_path / "out" / "results.jsonl").read_text())
    assert row["topology_score"] == 0 and row["failure"] == "no_grid"  # scores unchanged: the published rule
    reason = row["invalid_reason"]
    if kind == "prose":
        assert reason == "completion has no grid, ground truth is 10x10"
    else:
        assert reason.startswith("completion has no grid: found ")
        assert ("JSON text of a list of rows" if kind == "json list text" else "10 comma-separated rows") in reason
        assert "the scorer reads rows of L, S, V or numbers separated by spaces, one row per line" in reason


def test_unread_formats_in_the_python_api_get_the_same_reason():
    from sphyr_hpc import get_structural_metrics

    record = json.loads(V1_FULL_EASY.read_text().splitlines()[0])
    metrics = get_structural_metrics(json.dumps(record["ground_truth"]), record["ground_truth"], record["input_grid"])
    assert metrics.topology_score == 0 and "JSON text of a list of rows" in metrics.invalid_reason


def test_an_index_given_as_a_string_is_named_precisely(tmp_path):
    record, dataset, completions = _completions(tmp_path, "L L")
    completions.write_text(json.dumps({"index": str(record["index"]), "completion": "L L"}) + "\n")
    run = run_in_process(main, ["--dataset", dataset, "--completions", completions, "--out", tmp_path / "out",
                                "--quiet"])
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert (f"{completions}:1: 'index' is the string \"{record['index']}\", not an integer: "
            f"write \"index\": {record['index']}") in run.stderr


def test_unanswered_records_are_one_line_and_a_list_in_out(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--dataset", str(V1_FULL_EASY), "--completions", str(MY_MODEL), "--out", str(out),
                 "--quiet", "--no-report"]) == 1
    err = capsys.readouterr().err
    assert "has no completion" not in err  # no line per record
    assert err.strip().splitlines() == [
        f"python -m sphyr_hpc.score: 23 of 29 records have no completion (each counts 0 in its model's means); "
        f"their list is in {out / 'unanswered.txt'}"]
    listed = (out / "unanswered.txt").read_text().splitlines()
    assert listed[0] == "model\tsubject\tindex\twhere" and len(listed) == 24
    assert listed[1].startswith("my-model\tfull_easy\t6\t")
    # --resume keeps counting the earlier run's unanswered records.
    assert main(["--dataset", str(V1_FULL_EASY), "--completions", str(MY_MODEL), "--out", str(out),
                 "--quiet", "--no-report", "--resume"]) == 1
    assert "23 of 29 records have no completion" in capsys.readouterr().err
    assert len((out / "unanswered.txt").read_text().splitlines()) == 24


def test_an_exit_1_run_under_bin_mpirun_ends_with_its_own_summary_not_openmpis_banner(tmp_path):
    run = subprocess.run([MPIRUN, "-n", "2", sys.executable, "-m", "sphyr_hpc.score", "--dataset", str(V1_FULL_EASY),
                          "--completions", str(MY_MODEL), "--out", str(tmp_path / "out"), "--quiet", "--no-report"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert run.returncode == 1
    assert "Primary job" not in run.stderr and "mpirun detected" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("python -m sphyr_hpc.score: 23 of 29 records have no "
                                                           "completion")


def test_an_out_holding_earlier_results_is_refused_offering_resume_new_folder_or_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(ONE_FILE), "--out", str(out), "--quiet", "--no-report"]) == 0
    before = (out / "results.jsonl").read_text()
    capsys.readouterr()
    err = _usage_error(capsys, ONE_FILE, "--out", out)
    assert f"--out {out} already holds an earlier run's results (5 records" in err
    assert "--resume" in err and "--overwrite" in err and "new --out folder" in err
    assert (out / "results.jsonl").read_text() == before
    assert main([str(ONE_FILE), "--out", str(out), "--quiet", "--no-report", "--overwrite"]) == 0
    assert main([str(ONE_FILE), "--out", str(out), "--quiet", "--no-report", "--resume"]) == 0


def test_resume_of_a_finished_run_draws_no_empty_progress_bar(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(ONE_FILE), "--out", str(out), "--no-report", "--quiet"]) == 0
    capsys.readouterr()
    assert main([str(ONE_FILE), "--out", str(out), "--no-report", "--resume"]) == 0
    err = capsys.readouterr().err
    assert "step" not in err and "0/0" not in err


COMMANDS = ("score", "validate", "certify", "report", "optimize", "generate", "scaling", "parity")


@pytest.mark.parametrize("module", COMMANDS)
def test_help_is_plain_text_and_shows_only_defaults_that_are_true(module):
    import importlib

    text = importlib.import_module(f"sphyr_hpc.{module}").build_parser().format_help()
    assert "``" not in text
    for meaningless in ("(default: None)", "(default: True)", "(default: False)", "(default: [])"):
        assert meaningless not in text, meaningless
    for line in text.split("\n  -"):
        assert line.count("(default") <= 1, line
    if module in ("validate", "certify"):
        dataset = text.split("--dataset", 2)[2].split("\n  -")[0]
        assert "default" not in dataset  # required: nothing to default to


def test_validate_help_says_the_probe_level_comes_from_the_file_name():
    from sphyr_hpc import validate

    text = " ".join(validate.build_parser().format_help().split())
    assert "(default: hard when the file name without .jsonl ends with 'hard', else easy)" in text


def test_optimize_iteration_lines_show_the_total_and_an_eta(capsys):
    from sphyr_hpc import optimize

    assert optimize.main(["--preset", "mbb", "--size", "30x10", "--iterations", "4", "--tolerance", "0"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("it ")]
    assert len(lines) == 4 and lines[0].startswith("it    1/4 (ETA <= 0:0") and lines[-1].startswith("it    4/4")


def test_scaling_lines_count_the_runs_and_say_the_time_left():
    from sphyr_hpc.jobs.scaling import _Eta

    eta = _Eta([1.0, 1.0, 2.0])
    assert eta.step(0.0, 0.0).endswith("elapsed, about 0:00 left")
    assert "elapsed" in eta.step(0.5, 0.25) and eta.done == 2


def test_setup_installs_what_scoring_needs_and_the_tests_set_up_the_rest():
    setup = (ROOT / "bin" / "setup").read_text()
    scoring = setup.split("PACKAGES=(", 1)[1].split(")", 1)[0].split()
    tests = setup.split("TEST_PACKAGES=(", 1)[1].split(")", 1)[0].split()
    assert not {"paraview", "python3-paraview", "xvfb", "chromium", "python3-pytest"} & set(scoring)
    assert {"paraview", "python3-paraview", "xvfb", "chromium", "python3-pytest"} <= set(tests)
    assert {"python3-petsc4py", "python3-mpi4py", "openmpi-bin", "python3-scipy"} <= set(scoring)
    assert "bin/setup --test" in (ROOT / "bin" / "test").read_text()
    assert "bin/setup && bin/test" in (ROOT / ".ci" / "run").read_text()


def test_score_certified_says_how_many_records_had_a_certificate(tmp_path, capsys):
    from sphyr_hpc import certify

    assert certify.main(["--dataset", str(ROW_EASY), "--samples", "2", "--out", str(tmp_path / "cert"),
                         "--quiet"]) == 0
    completions = ROOT / "examples" / "completions" / "3_random_row_easy" / "my-model.jsonl"
    capsys.readouterr()
    assert main(["--dataset", str(ROW_EASY), "--completions", str(completions), "--certified",
                 str(tmp_path / "cert"), "--out", str(tmp_path / "out"), "--quiet", "--no-report"]) == 0
    err = capsys.readouterr().err
    assert (f"--certified {tmp_path / 'cert'}: 2 of 29 scored records had a certificate (certified_* fields); "
            f"the others' are null") in err


def test_the_readme_certify_example_certifies_its_samples(tmp_path):
    from sphyr_hpc import certify

    assert certify.main(["--dataset", str(ROW_EASY), "--samples", "6", "--node-budget", "2000",
                         "--out", str(tmp_path / "cert"), "--quiet"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "cert" / "certify.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["optimal"] * 6


def _fake_srun(tmp_path):
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/bash\nexec "$@"\n')  # one rank, no Slurm
    (bin_dir / "srun").chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SPHYR_HPC=str(ROOT),
                PYTHON=sys.executable)


def test_the_slurm_script_runs_as_printed_on_the_bundled_examples(tmp_path):
    env = _fake_srun(tmp_path)
    run = subprocess.run(["bash", str(ROOT / "examples" / "slurm_score.sh")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert len((tmp_path / "out-slurm" / "results.jsonl").read_text().splitlines()) == 144


def test_the_slurm_script_names_a_missing_results_folder(tmp_path):
    env = dict(_fake_srun(tmp_path), RESULTS=str(tmp_path / "nowhere"))
    run = subprocess.run(["bash", str(ROOT / "examples" / "slurm_score.sh")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env=env)
    assert run.returncode == 2
    assert run.stderr.strip() == (f"examples/slurm_score.sh: no such file or folder: RESULTS={tmp_path / 'nowhere'} "
                                  f"(give RESULTS=/path/to/result-folders)")


def test_validate_names_its_columns_as_score_does(capsys):
    from sphyr_hpc import validate

    assert validate.main(["--dataset", str(V1_FULL_EASY), "--samples", "1"]) == 0
    header = capsys.readouterr().out
    assert "struct" in header and "vol ratio" in header
    assert "stiffness" not in header and "volume " not in header


FULL_DISK = ("import errno, os, sys\n"
             "from sphyr_hpc.io import results_log\n"
             "append, written = results_log.ResultsLog.append, []\n"
             "def full_after_some(self, row, text=None):\n"
             "    if len(written) >= {after}:\n"
             "        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
             "    written.append(row)\n"
             "    return append(self, row, text)\n"
             "results_log.ResultsLog.append = full_after_some\n"
             "from sphyr_hpc.runtime.launcher import run_as_process\n"
             "from sphyr_hpc.score import main\n"
             "sys.exit(run_as_process(main))  # as python -m sphyr_hpc.score ends\n")


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_full_disk_mid_run_is_one_line_naming_the_folder_what_is_kept_and_resume(ranks, tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", FULL_DISK.format(after=5), str(EXAMPLE_RESULTS), "--out", str(out), "--quiet"]
    if ranks > 1:
        cmd = [MPIRUN, "-n", str(ranks), *cmd]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 4, run.stderr
    assert "Traceback" not in run.stderr and "MPI_ABORT" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    kept = len((out / "results.jsonl").read_text().splitlines())
    assert 5 <= kept <= 5 * ranks
    assert lines[0] == (f"python -m sphyr_hpc.score: cannot write to {out} (No space left on device); the {kept} "
                        f"records already in {out}/results.jsonl are kept: free some space (or fix the folder), "
                        f"then run the same command with --resume to finish")
    assert main([str(EXAMPLE_RESULTS), "--out", str(out), "--quiet", "--no-report", "--resume"]) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 144


def test_get_structural_metrics_says_what_no_input_grid_means():
    import warnings

    import sphyr_hpc

    doc = sphyr_hpc.get_structural_metrics.__doc__
    assert "input_grid=None" in doc and "every cell that is not" in doc and "0.821" in doc
    record = json.loads((ROOT / "examples" / "data" / "v1" / "1_random_cell_easy.jsonl").read_text().splitlines()[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        blind = sphyr_hpc.get_structural_metrics(record["ground_truth"], record["ground_truth"])
        masked = sphyr_hpc.get_structural_metrics(record["ground_truth"], record["ground_truth"], record["input_grid"])
    assert [str(w.message).split(":")[0] for w in caught] == ["get_structural_metrics(input_grid=None)"]
    assert round(blind.topology_score, 3) == 0.821 and round(masked.topology_score, 3) == 1.0


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


def test_bin_mpirun_still_shows_mpiruns_own_errors(tmp_path):
    run = subprocess.run([MPIRUN, "-n", "2", str(tmp_path / "no-such-program")], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env=dict(os.environ))
    assert run.returncode != 0
    assert "unable to launch the specified application" in run.stdout + run.stderr


FULL_EASY = ROOT / "examples" / "data" / "v1" / "full_easy.jsonl"


def _first_records(n=3):
    return [json.loads(line) for line in FULL_EASY.read_text().splitlines()[:n]]


def _answers(tmp_path, records):
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"index": r["index"], "completion": r["ground_truth"]}) + "\n"
                               for r in records))
    return answers


def test_a_dataset_written_as_a_json_array_is_one_line_before_any_work(tmp_path, capsys):
    records = _first_records()
    dataset = tmp_path / "array_dataset.json"
    dataset.write_text(json.dumps(records, indent=1))
    err = _usage_error(capsys, "--dataset", dataset, "--completions", _answers(tmp_path, records),
                       "--out", tmp_path / "out")
    assert f"--dataset {dataset} is a JSON array" in err and "one record a line" in err
    assert not (tmp_path / "out").exists()


def test_a_dataset_array_given_as_a_result_path_says_it_is_a_dataset(tmp_path, capsys):
    dataset = tmp_path / "array_dataset.json"
    dataset.write_text(json.dumps(_first_records()))
    err = _usage_error(capsys, dataset, "--out", tmp_path / "out")
    assert f"{dataset} holds dataset records" in err and "--dataset D.jsonl --completions C.jsonl" in err
    assert not (tmp_path / "out").exists()


def test_a_dataset_array_inside_a_result_folder_is_one_line_not_a_record_each(tmp_path, capsys):
    folder = tmp_path / "results" / "model-a"
    folder.mkdir(parents=True)
    (folder / "full_easy_results.json").write_text(json.dumps(_first_records()))
    (folder / "ok_results.json").write_text(ONE_FILE.read_text())
    status = main([str(tmp_path / "results"), "--out", str(tmp_path / "out"), "--quiet", "--no-report"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.count("holds dataset records") == 1 and "missing field" not in err
    rows = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(rows) == len(json.loads(ONE_FILE.read_text()))


def test_an_empty_completions_file_is_one_line_before_any_work(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    err = _usage_error(capsys, "--dataset", FULL_EASY, "--completions", empty, "--out", tmp_path / "out")
    assert f"--completions {empty} holds no completion" in err
    assert not (tmp_path / "out").exists()


def test_a_misspelt_option_is_answered_with_the_option_meant(tmp_path, capsys):
    err = _usage_error(capsys, "--datset", FULL_EASY, "--completions", tmp_path / "c.jsonl", "--out", tmp_path / "o")
    assert "unrecognized arguments: --datset" in err and "did you mean --dataset?" in err


def test_score_help_names_the_options_it_means_and_the_store_default_once(capsys):
    with pytest.raises(SystemExit):
        score.build_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    text = text[text.index("options:"):]
    report = text[text.index("--report, --no-report"):text.index("--certified DIR")]
    assert "DIR/" not in report and "OUT/report.html" in report and "(default: True)" not in report
    store = text[text.index("--store DIR "):text.index("--no-store ")]
    assert store.count("sphyr_hpc") == 2 and store.count("~/.cache/sphyr_hpc") == 1, store
