"""Scoring every completion of a sample at once: the same records as scoring each on its own."""

import json
import math

import numpy as np
import pytest

from conftest import DATA
from sphyr_hpc.core import grid as grids
from sphyr_hpc.core import loadcase as loadcases
from sphyr_hpc.core.analysis import analyse
from sphyr_hpc.scoring.sample_scorer import SampleScorer, sample_scorers
from sphyr_hpc.io.records import read_result_file
from sphyr_hpc.scoring.scorer import Scorer
from sphyr_hpc.solvers import condensed

RECORDS = [json.loads(line) for line in (DATA / "v1_sample.jsonl").read_text().splitlines()]


def _variants(record, rng):
    """Completions a benchmark meets: the answer, a few masked cells changed, bad cells, wrong shapes."""
    truth = record["ground_truth"]
    masked = [(r, c) for r, row in enumerate(record["input_grid"]) for c, cell in enumerate(row) if cell == "V"]
    out = [truth]
    for count in (1, 2, 4):
        rows = [list(row) for row in truth]
        for i in rng.choice(len(masked), size=min(count, len(masked)), replace=False):
            r, c = masked[i]
            rows[r][c] = "0" if rows[r][c] not in ("0", "0.0") else "1"
        out.append(rows)
    out.append([["V" if cell == "1" else cell for cell in row] for row in truth])  # unfilled
    out.append([["x" if cell == "0" else cell for cell in row] for row in truth])  # unparsable
    out.append(truth[:-1])  # a row short
    out.append([])  # no grid
    return out


def _same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], float) and math.isnan(a[key]):
            assert math.isnan(b[key])
        else:
            assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12), key


def test_sample_scorer_gives_every_completion_the_metrics_scorer_score_gives():
    rng = np.random.default_rng(17)
    batch, single = Scorer(), Scorer()
    for record in RECORDS[::7]:
        truth, given = record["ground_truth"], record["input_grid"]
        sample = SampleScorer(batch, truth, given, loadcases.DOWN)
        for completion in _variants(record, rng):
            metrics, _ = sample.score(completion)
            _same(metrics, single.score(completion, truth, given))


def test_a_completion_equal_to_the_answer_outside_a_small_mask_is_analysed_condensed_to_full_precision():
    scorer = Scorer()
    record = RECORDS[0]
    lc = loadcases.from_grid(record["ground_truth"])
    truth, _ = grids.densities(record["ground_truth"])
    truth[lc.structural_mask()] = 1.0
    free = np.zeros(lc.shape, dtype=bool)
    free[4, 4] = True  # a 1_random_cell mask (8 condensed DOFs)
    assert not lc.structural_mask()[4, 4]
    problem = scorer.problem(lc)
    for value in (0.0, 0.5, 1.0):
        design = np.where(free, value, truth)
        system = problem.workspace.condensed.analysis_system(design, free, truth)
        assert isinstance(system, condensed.CondensedSystem)
        fast = analyse(system, design, problem.solid)
        full = analyse(problem.system, design, problem.solid)
        assert fast.compliance == pytest.approx(full.compliance, rel=1e-10)
        assert fast.max_displacement == pytest.approx(full.max_displacement, rel=1e-10)
        assert fast.load_carrying == full.load_carrying
    elsewhere = truth.copy()
    elsewhere[~free & ~lc.structural_mask()] = 0.5  # changed outside the mask: the full system
    assert problem.workspace.condensed.analysis_system(elsewhere, free, truth) is problem.system


def test_records_quoting_one_sample_share_its_parsed_grids_and_one_sample_scorer(tmp_path):
    record = RECORDS[0]
    text = "\n".join(" ".join(row) for row in record["ground_truth"])
    prompt = ("Below is the input grid with masked regions:\n\n"
              + "\n".join(" ".join(row) for row in record["input_grid"]) + "\n\nPlease fill it.")
    samples = []
    for model in ("a", "b"):
        folder = tmp_path / model
        folder.mkdir()
        rows = [{"prompt": prompt, "ground_truth": text, "completion": text}]
        (folder / "full_easy_results.json").write_text(json.dumps(rows))
        samples += read_result_file(folder / "full_easy_results.json")
    assert samples[0].ground_truth is samples[1].ground_truth  # parsed once
    assert samples[0].input_grid is samples[1].input_grid
    assert samples[0].input_grid == record["input_grid"]
    assert samples[0].completion is not samples[1].completion  # a completion is its own
    pairs = list(sample_scorers(Scorer(), samples))
    assert pairs[0][1] is pairs[1][1]


def test_a_mask_whose_nodes_are_all_supported_is_solved_in_full_not_condensed_to_nothing():
    truth = [["0", "0", "L", "0", "0"],
             ["0", "1", "1", "1", "0"],
             ["0", "1", "0", "1", "0"],
             ["S", "S", "0", "S", "S"]]
    given = [row[:] for row in truth]
    given[3][2] = "V"  # between two supports: its four nodes are all fixed
    lc = loadcases.from_grid(truth)
    free = grids.mask_of(given, "V")
    assert condensed.condensed_dofs(lc, free).size == 0
    scorer = Scorer()
    rho, _ = grids.densities(truth)
    rho[lc.structural_mask()] = 1.0
    problem = scorer.problem(lc)
    system = problem.system
    assert problem.workspace.condensed.analysis_system(rho, free, rho) is system
    assert not condensed.usable(system, free)  # nor the yardstick (9889ca1 and main raised a LAPACK error here)
    metrics, _ = SampleScorer(scorer, truth, given, loadcases.DOWN).score(truth)
    assert metrics["load_carrying"] and metrics["compliance"] == pytest.approx(metrics["ground_truth_compliance"])


def test_an_equal_completion_of_a_sample_is_scored_once_and_each_caller_gets_its_own_metrics(monkeypatch):
    scorer = Scorer()
    record = RECORDS[-1]
    sample = SampleScorer(scorer, record["ground_truth"], record["input_grid"], loadcases.DOWN)
    variants = _variants(record, np.random.default_rng(5))
    calls = []
    real = scorer.score_case
    monkeypatch.setattr(scorer, "score_case", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = [sample.score(v)[0] for v in variants]
    again = [sample.score([list(row) for row in v])[0] for v in variants]  # equal cells, other objects
    assert len(calls) == len({tuple(map(tuple, v)) for v in variants})  # once per distinct completion
    assert again == first  # exact: equal cells are a table lookup of the first scoring
    first[-1]["invalid_reason"] = "changed by the caller"  # score_sample sets a sample's own reason
    assert sample.score([])[0]["invalid_reason"] != "changed by the caller"
