"""What makes the report trustworthy: intervals, coverage, honest categories, grids with the mask, comparisons."""

import json
import math
import random

import pytest

from conftest import ROOT

from sphyr_hpc.jobs.report import run_title, write_comparison, write_report
from sphyr_hpc.reporting import grids
from sphyr_hpc.reporting.html import plural
from sphyr_hpc.report import main as report_main
from sphyr_hpc.scoring import uncertainty
from sphyr_hpc.scoring.diagnosis import tally
from sphyr_hpc.scoring.summary import format_leaderboard, leaderboard, summarise


def _row(model, subject, index, score, **extra):
    return dict({"model": model, "subject": subject, "index": index, "topology_score": score, "failure": "sound"},
                **extra)


# -- uncertainty -----------------------------------------------------------------------------------
def test_a_model_scoring_the_same_on_every_sample_has_an_interval_of_width_zero():
    rows = [_row("flat", s, i, 0.7) for s in ("a", "b") for i in range(13)]
    stats = summarise(rows)["uncertainty"]["models"]["flat"]
    assert stats["ci95"] == [0.7, 0.7] and stats["se"] == 0.0
    assert all(s["ci95"] == [0.7, 0.7] for s in stats["subjects"].values())


def test_the_difference_between_a_model_and_itself_is_exactly_zero():
    rng = random.Random(3)
    scores = {s: {i: rng.random() for i in range(17)} for s in ("a", "b", "c")}
    pair = uncertainty.paired(scores, scores)
    assert pair["difference"] == 0.0 and pair["ci95"] == [0.0, 0.0] and not pair["excludes_zero"]
    assert pair["samples"] == 51


def test_the_standard_error_is_the_hand_computed_one():
    # subject a: 0, 0.5, 1 -> mean 0.5, sample std 0.5, se 0.5 / sqrt(3);
    # subject b: 0.2, 0.4 -> mean 0.3, sample std sqrt(0.02), se sqrt(0.02) / sqrt(2) = 0.1;
    # overall: mean of the means 0.4, se sqrt(se_a^2 + se_b^2) / 2.
    stats = uncertainty.stratified({"a": [0.0, 0.5, 1.0], "b": [0.2, 0.4]})
    se_a = 0.5 / math.sqrt(3)
    assert stats["subjects"]["a"]["se"] == pytest.approx(se_a, rel=1e-12)
    assert stats["subjects"]["b"]["se"] == pytest.approx(0.1, rel=1e-12)
    assert stats["mean"] == pytest.approx(0.4) and stats["se"] == pytest.approx(math.sqrt(se_a ** 2 + 0.01) / 2)
    lo, hi = stats["ci95"]
    assert 0.0 <= lo < 0.4 < hi <= 0.75  # the bootstrap's interval holds the mean, within the values' range


def test_the_bootstrap_is_reproducible_and_does_not_depend_on_the_order_of_rows():
    rng = random.Random(5)
    rows = [_row(m, s, i, rng.random()) for m in ("x", "y") for s in ("a", "b") for i in range(20)]
    first = summarise(rows)["uncertainty"]
    rng.shuffle(rows)
    assert summarise(rows)["uncertainty"] == first


def test_a_clear_gap_excludes_zero_and_a_tiny_one_does_not():
    rng = random.Random(8)
    base = [rng.random() for _ in range(40)]
    rows = ([_row("low", "a", i, v) for i, v in enumerate(base)]
            + [_row("high", "a", i, min(1.0, v + 0.3)) for i, v in enumerate(base)]
            + [_row("close", "a", i, v + rng.uniform(-0.05, 0.05)) for i, v in enumerate(base)])
    summary = summarise(rows)
    board = leaderboard(summary)
    assert board[0]["model"] == "high" and board[2]["vs_next"] is None
    assert board[0]["vs_next"]["excludes_zero"] and board[0]["vs_next"]["difference"] > 0.2
    assert not board[1]["vs_next"]["excludes_zero"]
    lines = format_leaderboard(board)
    assert "95% interval" in lines[0] and "[" in lines[2]


# -- coverage, categories, plurals -------------------------------------------------------------------
def _my_model_rows():
    rows = [_row("my-model", "full_easy", i, 0.9) for i in range(6)]
    rows += [{"model": "my-model", "subject": "full_easy", "index": i, "error": "no completion",
              "completion_status": "missing"} for i in range(6, 28)]
    rows.append({"model": "my-model", "subject": "full_easy", "index": 28, "error": "not text",
                 "completion_status": "unreadable"})
    return rows


def test_unanswered_records_are_counted_as_such_beside_every_mean(tmp_path):
    rows = _my_model_rows()
    summary = summarise(rows)
    entry = summary["my-model"]["full_easy"]
    assert (entry["count"], entry["answered"], entry["missing"], entry["unreadable"]) == (29, 6, 22, 1)
    assert entry["coverage"] == pytest.approx(6 / 29) and entry["topology_score"] == pytest.approx(0.9 * 6 / 29)
    counts = summary["failures"]["models"]["my-model"]["counts"]
    assert counts["unanswered"] == 23 and counts["sound"] == 6
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_report(tmp_path)
    text = (tmp_path / "report.html").read_text()
    assert "1 model, 1 subject." in text and "1 models" not in text
    assert "6 answered and scored, 22 missing, 1 unreadable" in text and "errors" not in text
    assert "0.793 (23)" in text  # unanswered: its share and count among the categories


def test_plurals():
    assert [plural(n, "model") for n in (0, 1, 2)] == ["0 models", "1 model", "2 models"]
    assert plural(1200, "record") == "1,200 records"


def test_beating_the_yardstick_is_split_by_material():
    rows = [_row("m", "s", 0, 1.0, beats_yardstick=True, material_efficiency=1.0),
            _row("m", "s", 1, 1.0, beats_yardstick=True, material_efficiency=0.8, failure="overspent_material"),
            _row("m", "s", 2, 1.0, beats_yardstick=True, material_efficiency=0.9, failure="floating_material"),
            _row("m", "s", 3, 1.0, beats_yardstick=False, material_efficiency=0.5)]
    t = tally(rows)
    assert (t["beats_yardstick_within_budget"], t["beats_yardstick_with_more_material"], t["beats_yardstick"]) == (1, 2, 3)


def test_the_title_comes_from_the_run(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"inputs": {"dataset": "/x/full_easy.jsonl", "paths": []}}))
    assert run_title(tmp_path, ["my-model"]) == "SPhyR report: my-model on full_easy.jsonl"
    (tmp_path / "run.json").write_text(json.dumps({"inputs": {"dataset": None, "paths": ["/a/examples/results"]}}))
    assert run_title(tmp_path, ["a", "b"]) == "SPhyR report: 2 models (a, b) from examples/results"


def test_a_dropped_truncated_line_is_named(tmp_path, capsys):
    rows = _my_model_rows()
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (tmp_path / "results.jsonl").write_text(text + json.dumps(rows[0])[:40])  # a run killed mid-line
    assert report_main([str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"results.jsonl:{len(rows) + 1}: line left out of the report" in err


# -- grids -------------------------------------------------------------------------------------------
def test_masked_cells_are_outlined_in_every_panel_and_densities_share_one_scale():
    truth = ("L 1 0", "0.5 0.5 0", "S 1 0")
    masked = ("L V 0", "0.5 V 0", "S V V")
    colours, mask = grids.cell_colours(truth, truth, masked)
    assert mask.tolist() == [[False, True, False], [False, True, False], [False, True, True]]
    assert (colours[1, 0] == colours[1, 1]).all()  # 0.5 given and 0.5 masked: one colour
    image = grids.panel((colours, mask), box=30)  # 10 pixels a cell
    outline = grids._RGB["mask"]
    assert (image[0, 15] == outline).all() or (image[1, 15] == outline).all()  # the masked cell's border
    assert not any((image[y, 5] == outline).all() for y in range(10))  # a given cell: no outline
    assert (image[15, 5] == colours[1, 0]).all() and (image[15, 15] == colours[1, 1]).all()  # insides alike


def test_a_subject_where_every_record_ties_is_drawn_once_and_said(tmp_path):
    g = {"completion": ["L 0", "S 0"], "ground_truth": ["L 1", "S 1"], "input": ["L V", "S V"],
         "optimum": ["1 1", "1 1"]}
    rows = [_row("m", "s", i, 0.0, grids=g) for i in range(4)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_report(tmp_path)
    page = (tmp_path / "report" / "m.html").read_text()
    assert "all 4 scored records score 0.000" in page and page.count("<img") == 1


# -- comparison --------------------------------------------------------------------------------------
def test_the_comparison_page_counts_changes_and_pairs_differences(tmp_path):
    rng = random.Random(11)
    a_rows = [_row("m", s, i, rng.random(), failure="severed_load_path") for s in ("a", "b") for i in range(10)]
    b_rows = [dict(r) for r in a_rows]
    for r in b_rows[:3]:
        r.update(topology_score=1.0, failure="sound")
    b_rows[3] = {"model": "m", "subject": "a", "index": 3, "error": "none", "completion_status": "missing"}
    for folder, rows in (("A", a_rows), ("B", b_rows)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert report_main([str(tmp_path / "A"), "--compare", str(tmp_path / "B")]) == 0
    page = (tmp_path / "A" / "compare.html").read_text()
    assert "severed_load_path -&gt; sound</td><td>3</td>" in page
    assert "severed_load_path -&gt; unanswered</td><td>1</td>" in page
    assert "4 records changed category" in page
    # a run compared with itself: every difference exactly 0
    path, _, _ = write_comparison(tmp_path / "A", tmp_path / "A", tmp_path / "self.html")
    same = path.read_text()
    assert "[0.000, 0.000]" in same and "0 records changed category" in same


def test_records_scored_from_unparsable_cells_are_counted_per_model_in_leaderboard_summary_and_report(tmp_path, capsys):
    """A NaN where the answer is void scores the answer's score (the published rule): counted, never hidden."""
    from sphyr_hpc.score import main as score_main

    dataset = ROOT / "examples" / "data" / "v1" / "full_hard.jsonl"
    records = [json.loads(line) for line in dataset.read_text().splitlines()][:2]
    nan, clean = tmp_path / "nan-model.jsonl", tmp_path / "clean-model.jsonl"
    lines_nan, lines_clean = [], []
    for record in records:
        grid = [row[:] for row in record["ground_truth"]]
        r, c = next((r, c) for r, row in enumerate(grid) for c, cell in enumerate(row) if cell in ("0", "0.0"))
        grid[r][c] = "nan"
        lines_nan.append(json.dumps({"index": record["index"], "completion": grid}))
        lines_clean.append(json.dumps({"index": record["index"], "completion": record["ground_truth"]}))
    nan.write_text("\n".join(lines_nan) + "\n")
    clean.write_text("\n".join(lines_clean) + "\n")
    out = tmp_path / "out"
    score_main(["--dataset", str(dataset), "--completions", str(nan), str(clean), "--out", str(out), "--quiet",
                "--no-store"])
    printed = capsys.readouterr().out
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    scored_nan = [r for r in rows if r["model"] == "nan-model" and "error" not in r]
    assert len(scored_nan) == 2 and all(r["failure"] == "unfilled_or_unparsable" for r in scored_nan)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["nan-model"]["full_hard"]["unparsable"] == 2 and summary["clean-model"]["full_hard"]["unparsable"] == 0
    header = next(line for line in printed.splitlines() if "unparsable" in line and "coverage" in line).split()
    for model, count in (("nan-model", 2), ("clean-model", 0)):
        row = next(line for line in printed.splitlines() if line.split()[1:2] == [model]).split()
        assert row[header.index("unparsable")] == str(count)
    assert any(line.startswith("unparsable: records scored although") for line in printed.splitlines())
    page = (out / "report.html").read_text()
    assert "<th>unparsable</th>" in page and "2 records scored from a completion with a cell left V" in page
    assert "<th>unparsable</th>" in (out / "report" / "nan-model.html").read_text()
