"""The score command over MPI ranks: rank-count invariance, resume after a kill,
abort on an unexpected error, summaries, and bad dataset/completions input.

The multi-rank runs start ``bin/mpirun`` themselves (so this file runs in the
serial pass of bin/test) on a subset of the example results: 28 records of 3
subjects and 2 models.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import EXAMPLE_RESULTS, ROOT, children, process_name, running
from sphyr_hpc.scoring.summary import leaderboard, summarise
from sphyr_hpc.score import main

SUBJECTS = ("full_easy", "1_random_cell_easy", "10_random_cell_hard")
MPIRUN = str(ROOT / "bin" / "mpirun")


def _subset(tmp_path):
    root = tmp_path / "results"
    for model in ("baseline-empty", "baseline-random"):
        (root / model).mkdir(parents=True)
        for subject in SUBJECTS:
            shutil.copy(EXAMPLE_RESULTS / model / f"{subject}.json", root / model / f"{subject}_results.json")
    return root


def _rows(out):
    return [json.loads(line) for line in (Path(out) / "results.jsonl").read_text().splitlines()]


def _by_key(rows):
    return {(r["model"], r["subject"], r["index"]): r for r in rows}


def _env(**extra):
    # os.environ, not the C-level environment: once this process has initialised
    # MPI as a singleton, OpenMPI's own variables there would capture a child mpirun.
    return dict(os.environ, **extra)


def _session_members(sid):
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[3]) == sid:  # state, and field 6: the session id
                pids.append(int(entry.name))
    return pids


def _kill_session(sid):
    """SIGKILL every process of a session: mpirun gives its ranks process groups of their own."""
    for pid in _session_members(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.time() + 30
    while [p for p in _session_members(sid) if p != sid] and time.time() < deadline:
        time.sleep(0.05)


def _mpirun(n, *args, timeout=600):
    cmd = [MPIRUN, "-n", str(n), sys.executable, "-m", "sphyr_hpc.score", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=_env())


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The subset scored in-process on 1 rank."""
    tmp = tmp_path_factory.mktemp("reference")
    root = _subset(tmp)
    assert main([str(root), "--out", str(tmp / "out"), "--quiet"]) == 0
    return root, _rows(tmp / "out")


def test_reference_run_scores_every_record_once(reference):
    root, rows = reference
    assert len(rows) == 28 == len(_by_key(rows))
    assert not any("error" in r for r in rows)


@pytest.mark.parametrize("ranks", [2, 4])
def test_results_do_not_depend_on_the_number_of_ranks(reference, tmp_path, ranks):
    root, rows = reference
    done = _mpirun(ranks, str(root), "--out", str(tmp_path / "out"), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"on {ranks} rank(s)" in done.stdout
    # Exact by construction: every record is scored whole on one rank's own serial system, whatever the ranks.
    assert _by_key(_rows(tmp_path / "out")) == _by_key(rows)
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (run["ranks"], run["records"], run["errors"]) == (ranks, len(rows), 0)
    assert 0.0 < run["seconds"]["scoring"] < run["seconds"]["process"]
    # the report, drawn from the ranks' merged data with its model pages shared out, is the one-rank report
    mine, theirs = tmp_path / "out", root.parent / "out"
    pages = sorted(p.relative_to(theirs) for p in [theirs / "report.html", *(theirs / "report").iterdir()])
    assert pages == sorted(p.relative_to(mine) for p in [mine / "report.html", *(mine / "report").iterdir()])
    stamp = re.compile(rb"Generated [^<]*")
    for page in pages:
        assert stamp.sub(b"", (mine / page).read_bytes()) == stamp.sub(b"", (theirs / page).read_bytes()), page


def test_results_and_summary_files_are_byte_identical_on_one_and_two_ranks(reference, tmp_path):
    """Each rank copies its own lines into results.jsonl and sums its own rows exactly: the files cannot tell."""
    root, _ = reference
    done = _mpirun(2, str(root), "--out", str(tmp_path / "out"), "--quiet", "--no-report")
    assert done.returncode == 0, done.stderr[-2000:]
    # Exact by construction: records as above; the summary's sums are exact integers (report.py), rounded once.
    for name in ("results.jsonl", "summary.json"):
        assert (tmp_path / "out" / name).read_bytes() == (root.parent / "out" / name).read_bytes(), name
    assert not list((tmp_path / "out").glob(".results.jsonl.*"))  # no temporary file left behind


def test_killed_run_resumes_to_each_record_exactly_once(reference, tmp_path):
    root, rows = reference
    out = tmp_path / "out"
    proc = subprocess.Popen([MPIRUN, "-n", "2", sys.executable, "-m", "sphyr_hpc.score", str(root),
                             "--out", str(out), "--quiet"], cwd=ROOT, start_new_session=True, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 6:
            break
        time.sleep(0.05)
    _kill_session(proc.pid)  # mpirun and every rank at once
    proc.wait(timeout=60)
    written = log.read_text().splitlines()
    assert 6 <= len(written) < 28, "the kill should land mid-run"
    time.sleep(1.0)
    assert log.read_text().splitlines() == written, "a rank survived the kill"
    with open(log, "a") as handle:  # a line cut short by the kill
        handle.write('{"model": "baseline-random", "subject": "full_ea')
    resumed = _mpirun(2, str(root), "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming:" in resumed.stderr
    final = _rows(out)
    assert len(final) == len(_by_key(final)) == 28
    assert _by_key(final) == _by_key(rows)


def test_a_kill_of_mpiruns_process_group_stops_the_ranks_and_resume_at_once_finishes_the_run(reference, tmp_path):
    """kill -9 of mpirun's process group only (a user killing a hung launcher, a scheduler that kills
    the launcher): Open MPI's ranks live in process groups of their own, so they must notice the end of
    their launcher themselves, stop on the interrupt path and free the folder for a --resume started
    at once; it then holds every record of the uninterrupted run once, in parity with it (SPEC 11)."""
    from sphyr_hpc.parity import differences

    root, rows = reference
    out = tmp_path / "out"
    script = subprocess.Popen([MPIRUN, "-n", "2", sys.executable, "-m", "sphyr_hpc.score", str(root), "--out",
                               str(out), "--quiet", "--no-store"], cwd=ROOT, start_new_session=True, env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "results.jsonl"
    mpirun, ranks = None, []
    deadline = time.time() + 300
    while time.time() < deadline and script.poll() is None:
        if mpirun is None:
            mpirun = next((c for c in children(script.pid) if process_name(c) == "mpirun"), None)
        else:
            ranks = children(mpirun) or ranks
        if len(ranks) == 2 and log.exists() and len(log.read_text().splitlines()) >= 6:
            break
        time.sleep(0.01)
    assert len(ranks) == 2 and os.getpgid(ranks[0]) != os.getpgid(mpirun), "Open MPI's ranks have groups of their own"
    os.killpg(os.getpgid(mpirun), signal.SIGKILL)
    assert len(log.read_text().splitlines()) < len(rows), "the kill should land mid-run"
    resumed = _mpirun(2, str(root), "--out", str(out), "--resume", "--no-store")
    script.wait(timeout=60)
    assert not running(ranks), "a rank of the killed run outlived the --resume"
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "another run is writing" not in resumed.stderr
    final = _rows(out)
    assert len(final) == len(_by_key(final)) == len(rows)  # every record, none twice
    reference_rows = _by_key(rows)
    assert {key: differences(row, reference_rows[key]) for key, row in _by_key(final).items()} == {
        key: [] for key in reference_rows}


def test_unexpected_error_on_one_rank_aborts_the_job_and_resume_finishes_it(reference, tmp_path):
    root, rows = reference
    out = tmp_path / "out"
    script = ROOT / "tests" / "scripts" / "score_with_fault.py"
    cmd = [MPIRUN, "-n", "2", sys.executable, str(script), str(root), "--out", str(out), "--quiet"]
    env = _env(PYTHONPATH=str(ROOT))
    failed = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert failed.returncode != 0
    assert "injected failure for the abort test" in failed.stderr
    assert "unexpected error on rank 1; aborting all 2 ranks" in failed.stderr
    partial = _rows(out)  # every line written is a whole record
    assert len(partial) < 28
    assert main([str(root), "--out", str(out), "--resume", "--quiet"]) == 0
    assert _by_key(_rows(out)) == _by_key(rows)


def test_summary_means_equal_a_hand_computation(reference, tmp_path):
    root, rows = reference
    assert main([str(root), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    for model in ("baseline-empty", "baseline-random"):
        for subject in SUBJECTS:
            mine = [r for r in rows if r["model"] == model and r["subject"] == subject]
            entry = summary[model][subject]
            assert entry["count"] == len(mine) and entry["errors"] == 0
            for key in ("topology_score", "structural_efficiency", "material_efficiency",
                        "compliance_efficiency_vs_ground_truth", "load_carrying", "volume_ratio"):
                by_hand = sum(float(r[key] or 0) for r in mine) / len(mine)
                assert entry[key] == pytest.approx(by_hand, rel=1e-12, abs=1e-15)
    board = leaderboard(summary)
    for entry in board:
        by_hand = sum(summary[entry["model"]][s]["topology_score"] for s in SUBJECTS) / len(SUBJECTS)
        assert entry["topology_score"] == pytest.approx(by_hand, rel=1e-12)
    assert board[0]["topology_score"] >= board[1]["topology_score"]
    assert (tmp_path / "out" / "leaderboard.png").stat().st_size > 1000


def test_summary_counts_errors_and_treats_null_as_zero():
    rows = [
        {"model": "m", "subject": "s", "index": 0, "topology_score": 0.5, "structural_efficiency": None,
         "material_efficiency": 1.0, "compliance_efficiency_vs_ground_truth": 0.25, "load_carrying": True,
         "volume_ratio": 2.0},
        {"model": "m", "subject": "s", "index": 1, "topology_score": 0.0, "structural_efficiency": 0.0,
         "material_efficiency": 0.0, "compliance_efficiency_vs_ground_truth": 0.0, "load_carrying": False,
         "volume_ratio": 1.0},
        {"model": "m", "subject": "s", "index": 2, "error": "broken"},
    ]
    entry = summarise(rows)["m"]["s"]
    assert entry["count"] == 3 and entry["errors"] == 1
    assert entry["topology_score"] == 0.25 and entry["structural_efficiency"] == 0.0
    assert entry["load_carrying"] == 0.5 and entry["volume_ratio"] == 1.5


def _dataset(tmp_path, lines):
    path = tmp_path / "data" / "toy_easy.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_dataset_and_completions_input_with_bad_lines(tmp_path, capsys):
    records = [json.loads(line) for line in (ROOT / "tests" / "data" / "v1_sample.jsonl").read_text().splitlines()]
    dataset = _dataset(tmp_path, [json.dumps(r) for r in records] + ['{"index": 7, "ground_truth": [["L"]'])
    completions = tmp_path / "runs" / "my-model.jsonl"
    completions.parent.mkdir()
    gt_text = "\n".join(" ".join(row) for row in records[0]["ground_truth"])
    completions.write_text("\n".join([
        json.dumps({"index": 0, "completion": "Answer:\n```\n" + gt_text + "\n```"}),
        json.dumps({"index": 1, "completion": 12}),               # wrong type
        "this line is not JSON",                                 # broken line
        json.dumps({"index": 5, "completion": gt_text}),         # not in the dataset
        json.dumps([1, 2, 3]),                                   # a list where an object belongs
    ]) + "\n")
    status = main(["--dataset", str(dataset), "--completions", str(completions), "--out", str(tmp_path / "out"),
                   "--quiet"])
    err = capsys.readouterr().err
    rows = _by_key(_rows(tmp_path / "out"))
    assert status == 1
    assert rows[("my-model", "toy_easy", 0)]["exact_match"] is True
    assert rows[("my-model", "toy_easy", 0)]["compliance_efficiency_vs_ground_truth"] == 1.0  # c / c of one analysis
    assert "completion" in rows[("my-model", "toy_easy", 1)]["error"]
    assert "has no completion" in rows[("my-model", "toy_easy", 2)]["error"]
    assert ("my-model", "toy_easy", 5) not in rows  # answers no dataset record: a line not scored, not a record
    assert f"not scored: {completions}:4: index 5 is not in {dataset}" in err
    assert f"{completions}:3: not valid JSON" in err
    assert f"{completions}:5: a record must be a JSON object" in err
    assert f"{dataset}:4: not valid JSON" in err


def test_progress_bar_on_stderr_unless_quiet(reference, tmp_path):
    root, _ = reference
    one = root / "baseline-empty" / "10_random_cell_hard_results.json"
    loud = _mpirun(1, str(one), "--out", str(tmp_path / "a"))
    quiet = _mpirun(1, str(one), "--out", str(tmp_path / "b"), "--quiet")
    assert loud.returncode == quiet.returncode == 0
    # Steps: 4 records and the 6 SIMP runs of each of their 4 yardsticks.
    assert "28/28" in loud.stderr and "step/s" in loud.stderr
    assert "step/s" not in quiet.stderr


def test_a_second_run_on_the_same_output_is_refused_while_the_first_holds_it(tmp_path, capsys):
    import fcntl

    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".sphyr_hpc.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        status = main([str(EXAMPLE_RESULTS / "baseline-empty"), "--out", str(out), "--resume", "--quiet"])
    assert status == 2
    assert "another run is writing to" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists()


def test_an_output_folder_without_file_locks_is_scored_with_a_warning(tmp_path, capsys, monkeypatch):
    # Lustre without -o flock (and some NFS mounts) answer flock with ENOSYS/ENOLCK: on a cluster
    # that must not end the run, only lose the protection against a second run.
    import errno
    import fcntl

    def no_locks(handle, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    one = EXAMPLE_RESULTS / "baseline-empty" / "full_easy.json"
    assert main([str(one), "--out", str(tmp_path / "out"), "--quiet", "--no-report"]) == 0
    assert "without file locks (Function not implemented)" in capsys.readouterr().err
    assert len((tmp_path / "out" / "results.jsonl").read_text().splitlines()) == 5
