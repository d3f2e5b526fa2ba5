"""The Inspect task on a dataset folder, and a run whose samples all failed (issue: a maintainer's second day)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from conftest import ROOT, needs_o200k  # noqa: E402

V2_20 = ROOT / "examples" / "data" / "v2_20"
FULL_EASY = ROOT / "examples" / "data" / "v1" / "full_easy.jsonl"


def _inspect(cwd, dataset, limit, env=None):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    return subprocess.run([str(Path(sys.executable).with_name("inspect")), "eval", "sphyr_hpc/sphyr", "--model",
                           "mockllm/model", "--limit", str(limit), "--log-dir", "logs", "-T", f"dataset={dataset}",
                           "-T", "store=none", "--display", "none"], cwd=cwd,
                          env={**base, "PWD": str(cwd), **(env or {})}, capture_output=True, text=True, timeout=600)


def _score_log(cwd):
    return subprocess.run([sys.executable, "-m", "sphyr_hpc.score", "--inspect-log", "logs", "--out", "out", "--quiet",
                           "--no-report", "--no-store"], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_a_dataset_folder_is_every_subject_in_it_with_sample_ids_unique_over_subjects():
    from sphyr_hpc.inspect.task import sphyr

    task = sphyr(dataset=str(V2_20), store="none")
    records = sum(1 for f in V2_20.glob("*.jsonl") for line in f.read_text().splitlines() if line.strip())
    ids = [sample.id for sample in task.dataset]
    assert len(ids) == records == len(set(ids)) == 41
    assert ids[0] == "10_random_cell_easy-0"
    assert {sample.metadata["dataset"] for sample in task.dataset} == {f.name for f in V2_20.glob("*.jsonl")}


def test_a_folder_without_datasets_is_named(tmp_path):
    from sphyr_hpc.inspect.task import dataset_path

    with pytest.raises(ValueError, match="holds no dataset"):
        dataset_path(str(tmp_path))


def test_an_inspect_run_of_a_folder_scores_each_sample_against_its_own_subject(tmp_path):
    needs_o200k()
    run = _inspect(tmp_path, V2_20, 4)
    assert run.returncode == 0, run.stderr[-2000:]
    scored = _score_log(tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 41  # every record of every subject, each once
    answered = [(r["subject"], r["index"]) for r in rows if "error" not in r]
    assert answered == [("10_random_cell_easy", 0), ("10_random_cell_easy", 1), ("10_random_cell_easy", 2),
                        ("10_random_cell_hard", 0)], scored.stdout[-1000:]


def test_an_inspect_run_whose_samples_all_failed_says_so_last_and_exits_1(tmp_path):
    # tiktoken cannot fetch o200k_base (an empty cache, a proxy that answers nothing): every sample fails,
    # as it does on a machine without network.
    empty = tmp_path / "tiktoken"
    empty.mkdir()
    env = {"TIKTOKEN_CACHE_DIR": str(empty), "HTTPS_PROXY": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    run = _inspect(tmp_path, FULL_EASY, 3, env)
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode == 1, run.stderr[-2000:]
    assert last.startswith("sphyr_hpc/sphyr: ") and "no model answered (the first error: " in last, last
    scored = _score_log(tmp_path)
    assert scored.returncode == 1
    assert "of them are samples that failed in Inspect, not answers (the first error: " in scored.stderr, scored.stderr
