"""summary.json from running sums (report.RunningSummary) and results.jsonl assembled by the ranks.

A run never holds its rows: each rank adds the rows it scores to a running
summary, the ranks' summaries are merged, and each rank copies its own lines
into the sorted results file (io.records.ResultsLog.assemble).
"""

import json
import pickle
import random
import shutil

from conftest import EXAMPLE_RESULTS
from sphyr_hpc.scoring.diagnosis import tally
from sphyr_hpc.scoring.summary import RunningSummary, summarise
from sphyr_hpc.score import main


def _rows(seed, n=400):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        row = {"model": f"m{rng.randint(0, 3)}", "subject": f"s{rng.randint(0, 2)}", "index": i}
        kind = rng.random()
        if kind < 0.1:
            row.update(error="broken", completion_status=rng.choice(["missing", "unreadable", None]))
        else:
            for key in ("topology_score", "structural_efficiency", "material_efficiency",
                        "compliance_efficiency_vs_ground_truth", "volume_ratio"):
                row[key] = rng.choice([None, rng.random() * 10 ** rng.randint(-20, 3)])
            row.update(load_carrying=rng.random() < 0.7, valid_output_grid=rng.random() < 0.8,
                       exact_match=rng.random() < 0.2, beats_yardstick=rng.random() < 0.1,
                       failure=rng.choice(["sound", "no_grid", "floating_material", "weaker_than_yardstick"]))
        rows.append(row)
    return rows


def test_merged_running_summaries_equal_the_summary_of_all_rows_in_any_order_and_split():
    rows = _rows(1)
    whole = summarise(rows)
    for seed in range(5):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        parts = [RunningSummary() for _ in range(seed + 2)]
        for i, row in enumerate(shuffled):
            parts[i % len(parts)].add(row)
        merged = pickle.loads(pickle.dumps(parts[0]))  # as comm.gather hands them over
        for part in parts[1:]:
            merged.merge(pickle.loads(pickle.dumps(part)))
        assert merged.result() == whole  # exactly: sums are exact, so order cannot change a digit
        assert (merged.records, merged.scored) == (len(rows), sum("error" not in r for r in rows))


def test_means_are_exact_sums_rounded_once():
    # 1e16 + 1 + 1 - 1e16 summed left to right loses both ones; the exact sum is 2.
    rows = [{"model": "m", "subject": "s", "index": i, "volume_ratio": v} for i, v in enumerate([1e16, 1.0, 1.0, -1e16])]
    assert summarise(rows)["m"]["s"]["volume_ratio"] == 2.0 / 4


def test_failure_tallies_count_scored_and_unanswered_rows_and_merge_like_one():
    rows = _rows(2)
    overall = summarise(rows)["failures"]["all models"]
    assert overall == tally(rows)
    unanswered = sum(1 for r in rows if r.get("completion_status") in ("missing", "unreadable"))
    assert overall["scored"] == sum(1 for r in rows if "error" not in r)
    assert overall["counts"]["unanswered"] == unanswered > 0
    assert overall["records"] == overall["scored"] + unanswered  # a broken sample's record is in no tally


def test_duplicate_record_keys_keep_one_row_in_results_and_summary(tmp_path):
    """Two input folders holding the same model folder: one row per (model, subject, index), counted once."""
    for copy in ("a", "b"):
        (tmp_path / copy / "baseline-empty").mkdir(parents=True)
        shutil.copy(EXAMPLE_RESULTS / "baseline-empty" / "full_easy.json",
                    tmp_path / copy / "baseline-empty" / "full_easy_results.json")
    out = tmp_path / "out"
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out), "--quiet", "--no-report"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    records = len(json.loads((EXAMPLE_RESULTS / "baseline-empty" / "full_easy.json").read_text()))
    assert [r["index"] for r in rows] == list(range(records))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["baseline-empty"]["full_easy"]["count"] == records
    assert json.loads((out / "run.json").read_text())["records"] == records
