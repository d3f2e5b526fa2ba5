"""Failure categories: every hand-built record lands in its category; the tallies count what they say."""

import json

import numpy as np
import pytest

from conftest import EXAMPLE_RESULTS
from sphyr_hpc.scoring import diagnosis as failures
from sphyr_hpc.core import grid as grids
from sphyr_hpc.io.records import Sample, find_result_files
from sphyr_hpc.scoring.scorer import Scorer
from sphyr_hpc.scoring.summary import leaderboard, summarise
from sphyr_hpc.scoring.tasks import score_sample

# A 2-wide column from the load to the supports; rows 1-3 masked.
TRUTH = ["0 L L 0 0 0",
         "0 1 1 0 0 0",
         "0 1 1 0 0 0",
         "0 1 1 0 0 0",
         "S S S S S S"]
INPUT = [TRUTH[0]] + ["V V V V V V"] * 3 + [TRUTH[4]]


def _with(masked_rows):
    return [TRUTH[0]] + masked_rows + [TRUTH[4]]


CASES = {
    "invalid_ground_truth": dict(truth=[r.replace("S", "0") for r in TRUTH]),
    "no_grid": dict(completion="I would rather describe the structure in words."),
    "wrong_shape": dict(completion="\n".join(TRUTH[:4])),
    "unfilled_or_unparsable": dict(completion=_with(["0 1 1 0 0 0", "0 1 V 0 0 0", "0 1 1 0 0 0"])),
    "severed_load_path": dict(completion=_with(["0 0 0 0 0 0", "0 0 0 0 0 0", "0 1 1 0 0 0"])),
    # one cell of the column moved to a corner no load or support touches: same material
    "floating_material": dict(completion=_with(["0 1 1 0 0 1", "0 1 0 0 0 0", "0 1 1 0 0 0"])),
    "overspent_material": dict(completion=_with(["1 1 1 1 1 1"] * 3)),
    # the same six cells as a staircase: carries its load by bending
    "weaker_than_yardstick": dict(completion=_with(["0 0 1 1 0 0", "0 0 0 1 1 0", "0 0 0 0 1 1"])),
    "sound": dict(),
}


@pytest.fixture(scope="module")
def scorer():
    scorer = Scorer()
    yield scorer
    scorer.close()


def _row(scorer, truth=TRUTH, completion=TRUTH, input_grid=INPUT):
    as_text = completion if isinstance(completion, str) else "\n".join(completion)
    sample = Sample("m", "toy", 0, "hand-built", completion=grids.as_grid(as_text),
                    ground_truth=grids.as_grid("\n".join(truth)), input_grid=grids.as_grid("\n".join(input_grid)))
    return score_sample(sample, scorer)


def test_the_categories_are_the_checks_in_order_then_sound():
    assert failures.CATEGORIES == tuple(CASES)


@pytest.mark.parametrize("category", list(CASES))
def test_a_hand_built_record_lands_in_its_category(scorer, category):
    row = _row(scorer, **CASES[category])
    assert row["failure"] == category, (row["checks"], row.get("structural_efficiency"))
    assert list(row["checks"]) == list(failures.CATEGORIES[:-1])
    before = failures.CATEGORIES.index(category)
    assert all(row["checks"][c] != failures.FAIL for c in failures.CATEGORIES[:before])
    if category != "sound":
        assert row["checks"][category] == failures.FAIL
    carrying = failures.CATEGORIES.index(category) >= failures.CATEGORIES.index("floating_material")
    assert row["load_carrying"] is (carrying or category == "unfilled_or_unparsable")


def test_checks_after_the_first_failure_are_still_judged(scorer):
    # floating material and too much of it: failure is the first, checks show both
    row = _row(scorer, completion=_with(["0 1 1 0 0 1", "0 1 1 0 0 0", "0 1 1 0 0 0"]))
    assert row["failure"] == "floating_material" and row["floating_clusters"] == 1
    assert row["checks"]["overspent_material"] == failures.FAIL


def test_nothing_to_judge_is_skipped_not_passed(scorer):
    row = _row(scorer, **CASES["no_grid"])
    assert row["checks"]["no_grid"] == failures.FAIL
    assert {row["checks"][c] for c in failures.CATEGORIES[2:-1]} == {failures.SKIP}
    assert row["floating_clusters"] is None  # not counted, rather than zero


def test_floating_clusters_count_node_sharing_neighbours_as_connected():
    anchors = np.zeros((4, 4), dtype=bool)
    anchors[3, :] = True
    rho = np.zeros((4, 4))
    rho[3, :] = 1.0
    rho[2, 1] = 1.0   # standing on the supports
    rho[0, 0] = 0.2   # floating, however light
    rho[1, 3] = 1.0   # floating, and one cluster with (0, 2): they share a node
    rho[0, 2] = 1.0
    assert failures.floating_clusters(rho, anchors) == 2
    rho[2, 2] = 1.0   # shares a node with (1, 3) and stands on the supports
    assert failures.floating_clusters(rho, anchors) == 1


def test_floating_clusters_equal_the_published_isolated_clusters_count():
    # The published count anchors on the completion's own L/S tokens; the scorer anchors on the
    # ground truth's (the simulated load case).  With the same anchors the counts agree on every record.
    compared = 0
    for path in find_result_files([EXAMPLE_RESULTS]):
        for record in json.loads(path.read_text()):
            completion = grids.as_grid(record["completion"])
            rho, _ = grids.densities(completion)
            anchors = grids.mask_of(completion, grids.LOAD) | grids.mask_of(completion, grids.SUPPORT)
            assert failures.floating_clusters(rho, anchors) == record["isolated_clusters_count"], record["subject"]
            compared += 1
    assert compared == 144


def test_rounding_below_the_parity_tolerance_is_not_overspending(scorer):
    completion, truth, input_grid = (grids.as_grid("\n".join(g)) for g in (TRUTH, TRUTH, INPUT))
    case, _ = scorer.prepare(completion, truth, input_grid)
    metrics = scorer.score(completion, truth, input_grid)
    assert failures.diagnose(completion, truth, case, dict(metrics, material_efficiency=1 - 1e-15))["failure"] == "sound"
    assert failures.diagnose(completion, truth, case, dict(metrics, material_efficiency=0.99))["failure"] == \
        "overspent_material"


def test_beats_yardstick_ignores_rounding_below_the_parity_tolerance():
    metrics = {"unfilled_cells": 0, "unparsable_cells": 0, "load_carrying": True, "material_efficiency": 1.0,
               "structural_efficiency": 1.0}
    assert not failures.diagnose([], [], None, dict(metrics, structural_efficiency_raw=1 + 1e-13))["beats_yardstick"]
    assert failures.diagnose([], [], None, dict(metrics, structural_efficiency_raw=1.01))["beats_yardstick"]


def test_summary_shares_and_exact_match_table_count_what_they_say():
    rows = [
        {"model": "a", "subject": "s", "index": 0, "failure": "sound", "valid_output_grid": True,
         "exact_match": True, "load_carrying": True, "beats_yardstick": False},
        {"model": "a", "subject": "s", "index": 1, "failure": "overspent_material", "valid_output_grid": True,
         "exact_match": False, "load_carrying": True, "beats_yardstick": True},
        {"model": "a", "subject": "s", "index": 2, "failure": "severed_load_path", "valid_output_grid": True,
         "exact_match": False, "load_carrying": False},
        {"model": "a", "subject": "s", "index": 3, "failure": "no_grid", "valid_output_grid": False,
         "exact_match": False, "load_carrying": False},
        {"model": "b", "subject": "s", "index": 0, "error": "broken"},
    ]
    summary = summarise(rows)
    fs = summary[failures.SUMMARY_KEY]
    a = fs["models"]["a"]
    assert a["records"] == 4 and a["counts"]["sound"] == 1 and a["shares"]["no_grid"] == 0.25
    assert a["beats_yardstick"] == 1
    assert a["exact_match_vs_load_carrying"] == {"valid_grids": 3, "exact_carrying": 1, "exact_severed": 0,
                                                 "inexact_carrying": 1, "inexact_severed": 1,
                                                 "carrying_not_exact": 1 / 3}
    assert fs["models"]["b"]["records"] == 0 and fs["models"]["b"]["shares"]["sound"] is None
    assert fs[failures.OVERALL]["records"] == 4
    assert [e["model"] for e in leaderboard(summary)] == ["a", "b"]  # "failures" is not a model
    lines = failures.format_failures(fs)
    assert any(line.startswith("a ") and "0.250" in line for line in lines)
    assert any(line.startswith(failures.OVERALL) for line in lines)
