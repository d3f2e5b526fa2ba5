"""Completions whose index names no dataset record are lines not scored, not records of the run."""

import json

from conftest import ROOT
from sphyr_hpc.score import main

FULL_EASY = ROOT / "examples" / "data" / "v1" / "full_easy.jsonl"


def test_indices_not_in_the_dataset_are_named_in_file_order_and_counted_as_lines_not_records(tmp_path, capsys):
    records = [json.loads(line) for line in FULL_EASY.read_text().splitlines()]
    completions = tmp_path / "bad_index.jsonl"
    completions.write_text("".join(json.dumps({"index": i, "completion": records[0]["ground_truth"]}) + "\n"
                                   for i in (999, -1, "abc")))
    out = tmp_path / "out"
    status = main(["--dataset", str(FULL_EASY), "--completions", str(completions), "--out", str(out), "--quiet",
                   "--no-report", "--no-store"])
    captured = capsys.readouterr()
    assert status == 1
    lines = [line for line in captured.err.splitlines() if "not scored:" in line]
    assert [line.split(f"{completions}:")[1].split(":")[0] for line in lines] == ["1", "2", "3"], captured.err
    assert "index 999 is not in" in lines[0] and "index -1 is not in" in lines[1] and '"abc"' in lines[2]
    assert ": error:" not in captured.err  # nothing fatal happened: the rest was scored
    assert f"{len(records)} records (0 scored, {len(records)} without a completion, 0 errors)" in captured.out
    assert "not scored: 3 of the inputs' files or lines" in captured.out
    summary = json.loads((out / "summary.json").read_text())["bad_index"]["full_easy"]
    assert (summary["count"], summary["missing"], summary["excluded"]) == (len(records), len(records), 0)
