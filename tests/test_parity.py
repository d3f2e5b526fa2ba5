"""Parity with the published scorer, record by record, on its own stored numbers.

The fixtures are the reference scorer's output records in examples/results
(copied unchanged from shared/data/sphyr/results).  Every record is scored
with one Scorer, as the published rescoring does (yardsticks shared between
the two baselines).
"""

import json
import math

import pytest

from conftest import EXAMPLE_RESULTS
from sphyr_hpc import grid as grids
from sphyr_hpc.io.records import find_result_files, read_result_file
from sphyr_hpc.metrics import Scorer, json_safe

COMPLIANCES = ("compliance", "ground_truth_compliance")
YARDSTICK_FIELDS = ("optimal_compliance",)
RATIOS = ("topology_score", "structural_efficiency", "material_efficiency",
          "compliance_efficiency_vs_ground_truth", "volume_ratio", "load_carrying",
          "structural_efficiency_raw")
EXACT = ("exact_match", "valid_output_grid", "physically_valid", "unfilled_cells", "unparsable_cells",
         "volume_fraction", "ground_truth_volume_fraction", "difference_ratio",
         "relative_difference_ratio", "penalized_difference_ratio")
# Records where sphyr_hpc's yardstick finds a stiffer design than the stored one
# (allowed for at most 2% of records, and only in that direction).  None today.
KNOWN_STIFFER = frozenset()

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


def _close(ours, theirs, rel=0.0, abs_=0.0):
    if theirs is None or ours is None:
        return ours is None and theirs is None
    return math.isclose(float(ours), float(theirs), rel_tol=rel, abs_tol=abs_)


def test_fixtures_cover_all_144_reference_records():
    assert len(RECORDS) == 144


def test_input_grid_of_every_record_is_the_prompt_grid_with_masks():
    for path in FILES:
        for record in json.loads(path.read_text()):
            rows = grids.prompt_input_grid(record["prompt"])
            assert grids.grid_shape(rows) == grids.grid_shape(grids.as_grid(record["ground_truth"]))
            assert any("V" in row for row in rows)


@pytest.mark.parametrize("record", RECORDS, ids=_name)
def test_record_matches_published_scorer(scored, record):
    ours, theirs = scored[record]
    for key in COMPLIANCES:
        assert _close(ours[key], theirs[key], rel=1e-9), (key, ours[key], theirs[key])
    assert _close(ours["max_displacement"], theirs["max_displacement"], rel=1e-9)
    for key in EXACT:
        assert _close(ours[key], theirs[key], abs_=1e-12), (key, ours[key], theirs[key])
    if _name(record) in KNOWN_STIFFER:
        assert ours["optimal_compliance"] < theirs["optimal_compliance"]
        return
    assert _close(ours["optimal_compliance"], theirs["optimal_compliance"], rel=1e-9), (
        ours["optimal_compliance"], theirs["optimal_compliance"])
    for key in RATIOS:
        assert _close(ours[key], theirs[key], abs_=1e-9), (key, ours[key], theirs[key])


def test_stiffer_yardstick_exceptions_stay_under_two_percent():
    assert len(KNOWN_STIFFER) <= 0.02 * len(RECORDS)
