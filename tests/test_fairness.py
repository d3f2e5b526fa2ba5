"""Means that cannot be gamed: unanswered and unreadable completions count 0, broken samples count for no one."""

import json

import pytest

from conftest import ROOT
from sphyr_hpc.scoring.summary import format_leaderboard, leaderboard, summarise
from sphyr_hpc.score import main

FULL_EASY = ROOT / "examples" / "data" / "v1" / "full_easy.jsonl"
MY_MODEL = ROOT / "examples" / "completions" / "my-model.jsonl"


def _score(tmp_path, *completions, dataset=FULL_EASY):
    out = tmp_path / "out"
    status = main(["--dataset", str(dataset), "--completions", *map(str, completions), "--out", str(out), "--quiet"])
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    return status, rows, summary


def test_partial_completions_mean_is_the_answered_sum_over_every_dataset_record(tmp_path, capsys):
    status, rows, summary = _score(tmp_path, MY_MODEL)
    dataset_records = len(FULL_EASY.read_text().splitlines())
    answered = [r for r in rows if "error" not in r]
    missing = [r for r in rows if r.get("completion_status") == "missing"]
    entry = summary["my-model"]["full_easy"]
    assert (dataset_records, len(answered), len(missing)) == (29, 6, 23)
    assert entry["topology_score"] == pytest.approx(sum(r["topology_score"] for r in answered) / dataset_records,
                                                    abs=1e-15)
    # Not the mean over the six answered records, which would rank a selective model higher.
    assert entry["topology_score"] < sum(r["topology_score"] for r in answered) / len(answered)
    assert (entry["missing"], entry["unreadable"], entry["excluded"]) == (23, 0, 0)
    assert entry["coverage"] == pytest.approx(6 / 29)
    board = leaderboard(summary)
    assert board[0]["coverage"] == pytest.approx(6 / 29)
    assert any("coverage" in line for line in format_leaderboard(board))
    printed = capsys.readouterr().out
    assert "20.7%" in printed  # the printed leaderboard's coverage column
    assert status == 1  # unanswered records are reported, not silently dropped


def test_unreadable_completion_counts_zero_and_a_broken_sample_counts_for_no_model(tmp_path):
    records = [json.loads(line) for line in FULL_EASY.read_text().splitlines()[:3]]
    broken = dict(records[2], ground_truth=17)  # the sample itself is broken
    dataset = tmp_path / "data" / "toy_easy.jsonl"
    dataset.parent.mkdir()
    dataset.write_text("".join(json.dumps(r) + "\n" for r in records[:2] + [broken]))
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text("".join(json.dumps({"index": r["index"], "completion": r["ground_truth"]}) + "\n"
                            for r in records))
    bad.write_text(json.dumps({"index": 0, "completion": records[0]["ground_truth"]}) + "\n"
                   + json.dumps({"index": 1, "completion": {"not": "a grid"}}) + "\n"
                   + json.dumps({"index": 2, "completion": records[2]["ground_truth"]}) + "\n")
    status, rows, summary = _score(tmp_path, good, bad, dataset=dataset)
    by_key = {(r["model"], r["index"]): r for r in rows}
    assert by_key[("bad", 1)]["completion_status"] == "unreadable"
    assert "completion_status" not in by_key[("good", 2)] and "ground_truth" in by_key[("good", 2)]["error"]
    good_entry, bad_entry = summary["good"]["toy_easy"], summary["bad"]["toy_easy"]
    # The broken sample is out of both models' means; the unreadable completion is a 0 in bad's.
    assert (good_entry["excluded"], bad_entry["excluded"], bad_entry["unreadable"]) == (1, 1, 1)
    assert good_entry["topology_score"] == pytest.approx(
        (by_key[("good", 0)]["topology_score"] + by_key[("good", 1)]["topology_score"]) / 2, abs=1e-15)
    assert bad_entry["topology_score"] == pytest.approx(by_key[("bad", 0)]["topology_score"] / 2)
    assert (good_entry["coverage"], bad_entry["coverage"]) == (1.0, 0.5)
    assert status == 1


def test_summary_of_rows_without_completion_status_keeps_excluding_errors():
    rows = [{"model": "m", "subject": "s", "index": 0, "topology_score": 1.0},
            {"model": "m", "subject": "s", "index": 1, "error": "broken sample"},
            {"model": "m", "subject": "s", "index": 2, "error": "no completion", "completion_status": "missing"}]
    entry = summarise(rows)["m"]["s"]
    assert entry["topology_score"] == 0.5 and entry["excluded"] == 1 and entry["missing"] == 1
    assert entry["coverage"] == 0.5


def test_the_summary_written_equals_the_summary_of_the_full_results(tmp_path):
    """score summarises from the running sums of each rank (report.RunningSummary): the same as from the rows written."""
    _, rows, summary = _score(tmp_path, MY_MODEL)
    assert json.loads(json.dumps(summarise(rows))) == summary
