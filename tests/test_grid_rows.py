"""The parser as docs/scoring.md ("Grids") says: a row holding unparsable cells keeps its place.

Each form is scored end to end against a 4x4 toy sample; where the published scorer's reading of a
token is defined (SPEC section 1: ``L``/``S``/``V``, else a float clipped to [0, 1], ``nan``/``inf``
and anything float() refuses unparsable, read as 0) the record says what that reading gives.
"""

import json

import pytest

from sphyr_hpc.core import grid as grids
from sphyr_hpc.score import main

GT = ["0 L L 0", "0 1 1 0", "0 1 0 0", "S S S 0"]
PROMPT = "Below is the input grid with masked regions:\n\n" + "\n".join(
    ["0 L L 0", "V V V V", "V V V V", "S S S 0"]) + "\n\nPlease output the completed grid"


def _score(tmp_path, completions):
    folder = tmp_path / "results" / "model-a"
    folder.mkdir(parents=True)
    records = [{"prompt": PROMPT, "ground_truth": "\n".join(GT), "completion": c} for c in completions]
    (folder / "toy.json").write_text(json.dumps(records))
    status = main([str(tmp_path / "results"), "--out", str(tmp_path / "out"), "--quiet", "--no-store",
                   "--no-report"])
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    return status, {r["index"]: r for r in rows}


@pytest.mark.parametrize("token", ["nan", "NaN", "inf", "-inf", "Infinity"])
def test_a_row_holding_a_non_finite_number_keeps_its_place_and_the_cell_counts_unparsable(tmp_path, token):
    completion = "\n".join(["0 L L 0", f"0 1 {token} 0", "0 1 0 0", "S S S 0"])
    status, rows = _score(tmp_path, [completion])
    row = rows[0]
    assert status == 0 and "invalid_reason" not in row
    assert row["failure"] == "unfilled_or_unparsable"
    assert row["unparsable_cells"] == 1 and row["unfilled_cells"] == 0
    assert row["volume_fraction"] == pytest.approx(7 / 16)  # 2 L, 3 S, one 1: the non-finite cell reads as 0


def test_lowercase_markers_are_unparsable_cells_in_their_row(tmp_path):
    # The published reading of a token: L, S and V are upper case, float("l") fails: unparsable, read as 0.
    # The ground truth's L and S cells are solid whatever the completion holds there.
    completion = "\n".join(["0 l l 0", "0 1 1 0", "0 1 0 0", "s s s 0"])
    status, rows = _score(tmp_path, [completion])
    row = rows[0]
    assert row["failure"] == "unfilled_or_unparsable" and row["unparsable_cells"] == 5
    assert row["compliance"] == pytest.approx(row["ground_truth_compliance"], rel=1e-9)  # the same design


def test_rows_without_spaces_are_one_cell_each_and_the_reason_says_so(tmp_path):
    # The published reading: "0LL0" is one token (unparsable), "0110" one number (110, clipped to 1).
    completion = "\n".join(["0LL0", "0110", "0100", "SSS0"])
    status, rows = _score(tmp_path, [completion])
    row = rows[0]
    assert row["failure"] == "wrong_shape" and row["topology_score"] == 0.0
    assert row["invalid_reason"].startswith("completion has 4 rows of 1 cell, ground truth is 4x4 (its rows are "
                                            "written without spaces")


def test_a_word_still_ends_the_grid_and_prose_is_not_a_row():
    text = "Here is my answer:\n0 L L 0\n0 1 1 0\n0 1 0 0\nS S S 0\nHope it helps."
    assert grids.extract_grid_from_text(text) == [row.split() for row in GT]
    assert grids.extract_grid_from_text("0 L L 0\n0 1 x 0\n0 1 0 0") == [["0", "1", "0", "0"]]


def test_one_row_short_is_named_in_the_singular_and_plural_alike(tmp_path):
    status, rows = _score(tmp_path, ["0 L L 0", "0 L L 0\n0 1 1 0"])
    assert rows[0]["invalid_reason"] == "completion has 1 row of 4 cells, ground truth is 4x4"
    assert rows[1]["invalid_reason"] == "completion has 2 rows of 4 cells, ground truth is 4x4"
