"""The score command end to end, and bad input as data rather than crashes."""

import json

import pytest

from conftest import EXAMPLE_RESULTS
from sphyr_hpc.core import grid as grids
from sphyr_hpc.score import main

GT = [
    "0 L L 0",
    "0 1 1 0",
    "0 1 0 0",
    "S S S 0",
]
PROMPT = "Below is the input grid with masked regions:\n\n" + "\n".join(
    ["0 L L 0", "V V V V", "V V V V", "S S S 0"]) + "\n\nPlease output the completed grid"


def _record(**overrides):
    record = {"prompt": PROMPT, "ground_truth": "\n".join(GT), "completion": "\n".join(GT)}
    record.update(overrides)
    return {k: v for k, v in record.items() if v is not None}


def _run(tmp_path, files, *extra):
    root = tmp_path / "results" / "model-a"
    root.mkdir(parents=True)
    for name, content in files.items():
        (root / name).write_text(content if isinstance(content, str) else json.dumps(content))
    out = tmp_path / "out"
    # --no-report: these claims are the rows; the report of odd records is drawn by tests/test_fuzz.py's
    # run and test_hostile_input's mixed folder, the report's numbers are tests/test_report_html.py's.
    status = main([str(tmp_path / "results"), "--out", str(out), "--quiet", "--no-report", *extra])
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return status, {(r["subject"], r["index"]): r for r in rows}


def test_completion_equal_to_ground_truth_scores_one(tmp_path):
    status, rows = _run(tmp_path, {"toy_results.json": [_record()]})
    row = rows[("toy", 0)]
    assert status == 0
    assert row["model"] == "model-a" and "error" not in row
    assert row["exact_match"] is True and row["load_carrying"] is True
    assert row["compliance"] == pytest.approx(row["ground_truth_compliance"], rel=1e-12)
    assert row["optimal_compliance"] <= row["ground_truth_compliance"] * (1 + 1e-12)
    assert row["material_efficiency"] == 1.0  # exact: the same cells, the same volume, min(1, v / v)


@pytest.mark.parametrize("ground_truth, reason", [
    ("0 0 0 0\n0 1 1 0\n0 1 0 0\nS S S 0", "no load"),
    ("0 L L 0\n0 1 1 0\n0 1 0 0\n0 0 0 0", "no support"),
    ("", "empty"),
    ("0 L L 0\n0 1 1\n0 1 0 0\nS S S 0", "ragged"),
])
def test_unusable_ground_truth_gets_all_zero_metrics_and_a_reason(tmp_path, ground_truth, reason):
    if reason == "ragged":
        record = _record(ground_truth=[row.split() for row in ground_truth.splitlines()])
    else:
        record = _record(ground_truth=ground_truth)
    status, rows = _run(tmp_path, {"toy_results.json": [record, _record()]})
    row = rows[("toy", 0)]
    assert reason in row["invalid_reason"]
    assert row["physically_valid"] is False and row["topology_score"] == 0.0
    assert row["compliance"] is None and row["optimal_compliance"] is None
    # Exact: a completion equal to the answer shares its analysis (one cache entry), so the ratio is c / c.
    assert "error" not in rows[("toy", 1)] and rows[("toy", 1)]["compliance_efficiency_vs_ground_truth"] == 1.0


@pytest.mark.parametrize("completion", [
    "0 L L 0\n0 1 1 0\nS S S 0",                      # one row short
    "Sorry, I cannot solve this.",                     # no grid in the text
    "0 L L 0\n0 1 x 0\n0 1 0 0\nS S S 0",             # 'x' (a word, not a cell) breaks the grid
    [["0", "L", "L", "0"], ["0", "1"]],                # ragged list
])
def test_completion_of_the_wrong_shape_gets_all_zero_metrics(tmp_path, completion):
    status, rows = _run(tmp_path, {"toy_results.json": [_record(completion=completion)]})
    row = rows[("toy", 0)]
    assert status == 0
    assert "ground truth is 4x4" in row["invalid_reason"]
    assert row["physically_valid"] is False and row["topology_score"] == 0.0


def test_grid_in_prose_and_code_fences_is_found(tmp_path):
    text = "Here is my answer:\n```\n" + "\n".join(GT) + "\n```\nHope it helps."
    status, rows = _run(tmp_path, {"toy_results.json": [_record(completion=text)]})
    assert rows[("toy", 0)]["exact_match"] is True


def test_out_of_range_and_unparsable_tokens_are_clipped_or_counted(tmp_path):
    clipped = [["0", "L", "L", "0"], ["0", "1.5", "1", "-0.2"], ["0", "1", "0", "0"], ["S", "S", "S", "0"]]
    junk = [["0", "L", "L", "0"], ["0", "x", "1", "0"], ["nan", "1", "V", "0"], ["S", "S", "S", "0"]]
    status, rows = _run(tmp_path, {"toy_results.json": [_record(completion=clipped), _record(completion=junk)]})
    a, b = rows[("toy", 0)], rows[("toy", 1)]
    assert a["physically_valid"] and a["valid_output_grid"] is False
    assert a["compliance"] == pytest.approx(a["ground_truth_compliance"], rel=1e-12)  # 1.5 -> 1, -0.2 -> 0
    assert b["unparsable_cells"] == 2 and b["unfilled_cells"] == 1
    assert b["volume_fraction"] == pytest.approx((5 + 2) / 16)  # x, nan and V read as 0


def test_missing_field_and_non_object_record_get_an_error_naming_them(tmp_path):
    status, rows = _run(tmp_path, {"toy_results.json": [_record(completion=None), 42, _record()]})
    assert status == 1
    assert "record 0" in rows[("toy", 0)]["error"] and "'completion'" in rows[("toy", 0)]["error"]
    assert "record 1" in rows[("toy", 1)]["error"]
    assert "error" not in rows[("toy", 2)]


def test_wrong_grid_type_is_an_error_for_that_record(tmp_path):
    status, rows = _run(tmp_path, {"toy_results.json": [_record(completion=3.5), _record()]})
    assert "completion" in rows[("toy", 0)]["error"]
    assert "error" not in rows[("toy", 1)]


def test_unreadable_files_are_reported_and_the_others_scored(tmp_path, capsys):
    files = {
        "cut_results.json": json.dumps([_record()])[:-20],
        "object_results.json": {"prompt": PROMPT},
        "good_results.json": [_record()],
        "good_aggregated_results.json": {"total_topology_score": 1.0},
    }
    status, rows = _run(tmp_path, files)
    err = capsys.readouterr().err
    assert status == 1
    assert "cut_results.json: not valid JSON" in err
    assert "object_results.json: expected a JSON array" in err
    assert list(rows) == [("good", 0)]


def test_rotated_folders_load_along_their_gravity(tmp_path):
    record = _record()
    root = tmp_path / "results"
    for folder in ("m", "m_1_rotations", "m_2_rotations"):
        (root / folder).mkdir(parents=True)
        (root / folder / "toy_results.json").write_text(json.dumps([record]))
    main([str(root), "--out", str(tmp_path / "out"), "--quiet", "--no-report"])
    rows = {json.loads(line)["model"]: json.loads(line)
            for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()}
    # Pulling sideways changes the compliance of this structure; pulling up instead
    # of down only flips the sign of u, so by linearity the compliance is the same.
    assert rows["m"]["compliance"] != pytest.approx(rows["m_1_rotations"]["compliance"], rel=1e-6)
    assert rows["m"]["compliance"] == pytest.approx(rows["m_2_rotations"]["compliance"], rel=1e-12)


def test_no_argument_scores_the_bundled_examples(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--quiet"]) == 0
    out = capsys.readouterr().out
    assert "baseline-random" in out and "baseline-empty" in out
    rows = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(rows) == 144
    assert EXAMPLE_RESULTS.is_dir()


def test_grid_extraction_prefers_the_last_of_equally_long_runs():
    text = "0 1\n1 0\nno wait\n1 1\n0 0\n"
    assert grids.extract_grid_from_text(text) == [["1", "1"], ["0", "0"]]


def test_fields_option_writes_completion_truth_and_optimum_for_paraview(tmp_path):
    import h5py
    import numpy as np

    completion = "0 L L 0\n0 1 1 0\n0 0 1 0\nS S S 0"
    _run(tmp_path, {"toy_results.json": [_record(completion=completion)]}, "--fields", str(tmp_path / "fields"))
    names = sorted(p.name for p in (tmp_path / "fields").glob("*.xdmf"))
    assert names == [f"model-a__toy__0000__{d}.xdmf" for d in ("completion", "ground_truth", "optimum")]
    with h5py.File(tmp_path / "fields" / "model-a__toy__0000__completion.h5") as handle:
        stored = handle["density"][()].reshape(4, 4)[::-1]  # stored bottom row first (y up)
    expected, _ = grids.densities(grids.as_grid(completion))
    np.testing.assert_array_equal(stored, expected)


def test_samples_written_as_1_and_as_1_0_are_one_task():
    """SPhyR's full_easy and full_hard share samples: one rank computes their yardstick once."""
    from sphyr_hpc.io.records import Sample
    from sphyr_hpc.scoring.tasks import make_tasks

    easy = [row.split() for row in GT]
    hard = [[f"{float(c):.1f}" if c in "01" else c for c in row] for row in easy]
    masked = [["V" if c in ("0", "1") and r in (1, 2) else c for c in row] for r, row in enumerate(easy)]
    samples = [Sample("m", "full_easy", 0, "a", completion=easy, ground_truth=easy, input_grid=masked),
               Sample("m", "full_hard", 0, "b", completion=hard, ground_truth=hard, input_grid=masked),
               Sample("m", "full_hard", 1, "b", completion=hard, ground_truth=hard, input_grid=easy)]
    tasks = make_tasks(samples)
    assert sorted(len(t) for t in tasks) == [1, 2]  # another mask is another yardstick
    assert {s.subject for s in max(tasks, key=len)} == {"full_easy", "full_hard"}
