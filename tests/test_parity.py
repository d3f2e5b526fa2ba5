"""Parity with the published scorer, record by record, under the rules any machine can reproduce.

The fixtures are the published scorer's output records in examples/results
(copied unchanged from shared/data/sphyr/results).  Every record is scored
with one Scorer, as the published rescoring does (yardsticks shared between
the two baselines), and compared by :func:`sphyr_hpc.parity.differences`:
docs/scoring.md, "Parity" (ratios 1e-6 absolute, flags equal, compliances
1e-6 x max(1, c/c_gt) relative, null only against null or a load path
through Emin cells, the yardstick never weaker).
"""

import json

import pytest

from conftest import EXAMPLE_RESULTS
from sphyr_hpc.core import grid as grids
from sphyr_hpc import parity
from sphyr_hpc.io.records import find_result_files, read_result_file
from sphyr_hpc.io.atomic import json_safe
from sphyr_hpc.scoring.scorer import Scorer

FILES = find_result_files([EXAMPLE_RESULTS])
RECORDS = [(p, i) for p in FILES for i in range(len(json.loads(p.read_text())))]


def _name(record):
    path, index = record
    return f"{path.parent.name}/{path.stem}[{index}]"


@pytest.fixture(scope="module")
def scored():
    scorer = Scorer()
    out = {}
    try:
        for path in FILES:
            stored = json.loads(path.read_text())
            for sample, record in zip(read_result_file(path), stored):
                assert sample.error is None, sample.error
                metrics = json_safe(scorer.score(sample.completion, sample.ground_truth, sample.input_grid))
                out[(path, sample.index)] = (metrics, record)
    finally:
        scorer.close()
    return out


def test_fixtures_cover_all_144_reference_records():
    assert len(RECORDS) == 144


def test_input_grid_of_every_record_is_the_prompt_grid_with_masks():
    for path in FILES:
        for record in json.loads(path.read_text()):
            rows = grids.prompt_input_grid(record["prompt"])
            assert grids.grid_shape(rows) == grids.grid_shape(grids.as_grid(record["ground_truth"]))
            assert any("V" in row for row in rows)


@pytest.mark.parametrize("record", RECORDS, ids=_name)
def test_record_matches_published_scorer_under_the_parity_rules(scored, record):
    ours, theirs = scored[record]
    assert parity.differences(ours, theirs) == []


# -- the rules themselves: each one can fail ----------------------------------------------------
PUBLISHED = {
    "topology_score": 0.5, "structural_efficiency": 0.5, "material_efficiency": 1.0,
    "load_carrying": True, "physically_valid": True, "unfilled_cells": 0,
    "compliance": 30.0, "ground_truth_compliance": 10.0, "optimal_compliance": 15.0,
    "max_displacement": 2.0,
}


def _with(**changes):
    return {**PUBLISHED, **changes}


def test_identical_metrics_have_no_difference():
    assert parity.differences(dict(PUBLISHED), PUBLISHED) == []


def test_a_ratio_off_by_more_than_1e_6_is_a_difference():
    assert parity.differences(_with(topology_score=0.5 + 1.1e-6), PUBLISHED)
    assert parity.differences(_with(topology_score=0.5 + 0.9e-6), PUBLISHED) == []


def test_flags_and_counts_must_be_equal():
    assert parity.differences(_with(load_carrying=False), PUBLISHED)
    assert parity.differences(_with(unfilled_cells=1), PUBLISHED)


def test_compliance_tolerance_grows_with_softness_relative_to_the_ground_truth():
    # c = 3 c_gt: tolerance 3e-6 relative
    assert parity.differences(_with(compliance=30.0 * (1 + 2.9e-6)), PUBLISHED) == []
    assert parity.differences(_with(compliance=30.0 * (1 + 3.1e-6)), PUBLISHED)
    # the ground truth itself: 1e-6
    assert parity.differences(_with(ground_truth_compliance=10.0 * (1 + 1.1e-6)), PUBLISHED)


def test_null_matches_only_null_or_a_path_through_void_cells():
    severed = _with(compliance=None, load_carrying=False, topology_score=0.0, structural_efficiency=0.0)
    assert parity.differences(_with(compliance=2e6, load_carrying=False, topology_score=0.0,
                                    structural_efficiency=0.0), severed) == []
    assert parity.differences(_with(compliance=9e5, load_carrying=False, topology_score=0.0,
                                    structural_efficiency=0.0), severed)
    assert parity.differences(severed, _with(compliance=2e6, load_carrying=False, topology_score=0.0,
                                             structural_efficiency=0.0)) == []


def test_max_displacement_of_a_design_that_does_not_carry_its_load_is_not_compared():
    severed = _with(compliance=3e8, load_carrying=False, topology_score=0.0, structural_efficiency=0.0)
    assert parity.differences({**severed, "compliance": 3.1e8, "max_displacement": 9.0}, severed) == []
    assert parity.differences(_with(max_displacement=2.0 * (1 + 4e-4)), PUBLISHED)


def test_max_displacement_is_held_to_1e_4_scaled_by_its_designs_softness_and_compliance_to_1e_6():
    # c = 3 c_gt: max_displacement within 3e-4 relative, the compliance itself within 3e-6
    assert parity.differences(_with(max_displacement=2.0 * (1 + 2.9e-4)), PUBLISHED) == []
    assert parity.differences(_with(max_displacement=2.0 * (1 - 2.9e-4)), PUBLISHED) == []
    assert parity.differences(_with(max_displacement=2.0 * (1 + 3.1e-4)), PUBLISHED)
    assert parity.differences(_with(compliance=30.0 * (1 + 2.9e-4)), PUBLISHED)
    # a design as stiff as the answer: 1e-4
    stiff = _with(compliance=10.0)
    assert parity.differences({**stiff, "max_displacement": 2.0 * (1 + 0.9e-4)}, stiff) == []
    assert parity.differences({**stiff, "max_displacement": 2.0 * (1 + 1.1e-4)}, stiff)


def test_a_weaker_yardstick_is_a_difference_and_a_slightly_stiffer_one_is_not():
    assert parity.differences(_with(optimal_compliance=15.0 * (1 + 2e-6)), PUBLISHED)
    assert parity.differences(_with(optimal_compliance=15.0 * (1 - 0.5e-6)), PUBLISHED) == []
