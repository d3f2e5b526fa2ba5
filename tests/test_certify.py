"""The certified yardstick: branch and bound against brute force, bounds, the certify command, score --certified.

Fixtures: ``tests/data/certify/<subject>.jsonl`` hold v1 records copied
unchanged from the SPhyR dataset samples: masks of 9-10 cells with a budget
that leaves a choice (easy), three row masks of a hard subject (grey pinned
cells; searched at budgets of our choosing, since their own budget rounds to
0 solid cells), and two 30-cell row masks (3_random_row_easy 0: a binary
design 11.6 % stiffer than the yardstick at the same material).
"""

import itertools
import json
import math

import numpy as np
import pytest

from conftest import DATA
from sphyr_hpc.core import discretisation as fe
from sphyr_hpc.scoring.certified import certified_metrics, read_certified, sample_id
from sphyr_hpc.certify import main as certify_main
from sphyr_hpc.scoring.scorer import Scorer
from sphyr_hpc.optimiser import exact, simp
from sphyr_hpc.optimiser.discrete import binarise
from sphyr_hpc.solvers.condensed import CondensedSystem

CERTIFY = DATA / "certify"


def _records(subject):
    return [json.loads(line) for line in (CERTIFY / f"{subject}.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def scorer():
    s = Scorer()
    yield s
    s.close()


def _problem(scorer, record):
    case, _ = scorer.prepare(record["ground_truth"], record["ground_truth"], record["input_grid"])
    lc = case.loadcase
    gt = scorer.analysis(lc, case.truth)
    free, pinned = simp.design_space(lc, case.free, case.truth)
    budget = exact.budget_cells(simp.free_budget(free, pinned, gt.volume_fraction)[0])
    optimum = scorer.optimum(lc, case.free, case.truth, gt.volume_fraction, (case.truth,))
    return CondensedSystem(scorer.problem(lc).system, free), free, pinned, budget, optimum


def _brute_force(condensed, free, pinned, budget):
    """Least compliance over every design with at most ``budget`` solid free cells (condensed solves)."""
    cells = np.flatnonzero(free.ravel())
    best = math.inf
    for k in range(budget + 1):
        for solid in itertools.combinations(cells, k):
            design = pinned.ravel().copy()
            design[cells] = 0.0
            design[list(solid)] = 1.0
            best = min(best, condensed.solve(fe.simp_modulus(design)))
    return best


CASES = ([("10_random_cell_easy", i, None) for i in range(2)]
         + [("1_random_row_easy", i, None) for i in range(3)]
         + [("1_random_row_hard", i, b) for i in range(3) for b in (3, 5)])


@pytest.mark.parametrize("subject,position,budget", CASES)
def test_branch_and_bound_equals_brute_force_enumeration(scorer, subject, position, budget):
    condensed, free, pinned, own_budget, optimum = _problem(scorer, _records(subject)[position])
    budget = own_budget if budget is None else budget
    assert free.sum() <= 12 and 0 < budget < free.sum()
    best = _brute_force(condensed, free, pinned, budget)
    void = np.where(free, 0.0, pinned)
    for start in (binarise(optimum.densities, free, budget), void):  # the yardstick's design, and the worst
        for root_cuts in (True, False):
            result = exact.branch_and_bound(condensed, pinned, budget, start, root_cuts=root_cuts)
            assert result.status == "optimal"
            assert result.compliance == pytest.approx(best, rel=1e-9)
            assert result.lower_bound <= best * (1 + 1e-9)
            assert result.design[free].sum() <= budget
            assert np.array_equal(result.design[~free], pinned[~free])


@pytest.mark.parametrize("subject,position,budget", CASES)
def test_lower_bound_is_never_above_the_optimum_whatever_the_node_budget(scorer, subject, position, budget):
    condensed, free, pinned, own_budget, _ = _problem(scorer, _records(subject)[position])
    budget = own_budget if budget is None else budget
    best = _brute_force(condensed, free, pinned, budget)
    void = np.where(free, 0.0, pinned)
    for nodes in (1, 2, 3, 5, 8):
        for root_cuts in (True, False):
            result = exact.branch_and_bound(condensed, pinned, budget, void, node_budget=nodes, root_cuts=root_cuts)
            assert result.lower_bound <= best * (1 + 1e-9)
            assert result.compliance >= best * (1 - 1e-9)  # a design that exists
            assert result.nodes <= nodes


def test_a_stopped_search_reports_a_gap_and_a_closed_one_is_optimal(scorer):
    condensed, free, pinned, budget, optimum = _problem(scorer, _records("3_random_row_easy")[0])
    start = binarise(optimum.densities, free, budget)
    stopped = exact.branch_and_bound(condensed, pinned, budget, start, node_budget=1, root_cuts=False)
    closed = exact.branch_and_bound(condensed, pinned, budget, start)
    assert stopped.status == "gap" and stopped.lower_bound < stopped.compliance
    assert closed.status == "optimal" and closed.lower_bound == pytest.approx(closed.compliance, rel=1e-9)
    assert stopped.lower_bound <= closed.compliance
    # The yardstick (the ground truth here) is beaten by a binary design at the same material.
    assert closed.compliance < optimum.compliance * (1 - 0.1)
    assert closed.design[free].sum() <= budget


def test_start_design_spends_the_budget_on_the_densest_cells():
    x = exact.start_design(np.array([0.2, 0.9, 0.5, 0.9, 0.0]), 2)
    assert x.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert exact.start_design(np.array([0.5, 0.5]), 0).tolist() == [0.0, 0.0]


def _dataset_copies(tmp_path, subjects):
    for subject in subjects:
        (tmp_path / f"{subject}.jsonl").write_text((CERTIFY / f"{subject}.jsonl").read_text())
    return [str(tmp_path / f"{s}.jsonl") for s in subjects]


def test_certify_writes_one_row_per_sample_a_summary_and_a_picture(tmp_path, capsys):
    datasets = _dataset_copies(tmp_path, ["3_random_row_easy", "1_random_row_hard"])
    with open(datasets[1], "a") as handle:
        handle.write('{"index": 9, "input_grid": [["V"]], "ground_truth": [["1"]]}\n')  # no L or S: an error row
        handle.write("not json\n")  # skipped and reported
    out = tmp_path / "out"
    status = certify_main(["--dataset", *datasets, "--out", str(out), "--quiet"])
    assert status == 1  # the record without L or S
    rows = [json.loads(line) for line in (out / "certify.jsonl").read_text().splitlines()]
    assert [(r["subject"], r["index"]) for r in rows] == sorted((r["subject"], r["index"]) for r in rows)
    good = [r for r in rows if "error" not in r]
    assert len(good) == 5 and len(rows) == 6
    keys = {"subject", "index", "free_cells", "budget_cells", "yardstick_compliance", "best_compliance",
            "lower_bound", "status", "nodes", "seconds", "cpu_seconds"}
    for row in good:
        assert keys <= set(row)
        assert row["lower_bound"] <= row["best_compliance"] * (1 + 1e-9)
        assert row["status"] in ("optimal", "gap")
    beaten = next(r for r in good if r["subject"] == "3_random_row_easy" and r["index"] == 0)
    assert beaten["status"] == "optimal" and beaten["yardstick_gap"] == pytest.approx(
        beaten["yardstick_compliance"] / beaten["best_compliance"] - 1, rel=1e-9)
    assert beaten["yardstick_gap"] > 0.1
    summary = json.loads((out / "summary.json").read_text())["subjects"]
    assert summary["3_random_row_easy"]["search_beats_yardstick"] == 1
    assert summary["3_random_row_easy"]["worst_gap"] == pytest.approx(beaten["yardstick_gap"])
    assert summary["1_random_row_hard"]["errors"] == 1
    assert (out / "certify.png").stat().st_size > 0
    assert "not valid JSON" in capsys.readouterr().err


def test_node_budget_bounds_the_search_and_the_gap_is_proven(tmp_path):
    datasets = _dataset_copies(tmp_path, ["3_random_row_easy"])
    certify_main(["--dataset", *datasets, "--out", str(tmp_path / "a"), "--quiet", "--node-budget", "1"])
    rows = [json.loads(line) for line in (tmp_path / "a" / "certify.jsonl").read_text().splitlines()]
    for row in rows:
        assert row["nodes"] <= 1
        assert row["lower_bound"] <= row["best_compliance"]
        if row["status"] == "gap":
            assert row["yardstick_gap"] >= row["yardstick_compliance"] / row["best_compliance"] - 1


def test_usage_error_is_one_line_with_status_2(tmp_path, capsys):
    assert certify_main(["--dataset", str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.jsonl" in err[0]


def test_score_certified_adds_certified_fields_and_leaves_the_published_ones(tmp_path):
    from sphyr_hpc.score import main as score_main

    datasets = _dataset_copies(tmp_path, ["3_random_row_easy"])
    certify_main(["--dataset", *datasets, "--out", str(tmp_path / "cert"), "--quiet"])
    completions = tmp_path / "answers.jsonl"
    records = _records("3_random_row_easy")
    completions.write_text("".join(json.dumps({"index": r["index"], "completion": r["ground_truth"]}) + "\n"
                                   for r in records))
    common = ["--dataset", datasets[0], "--completions", str(completions), "--quiet"]
    assert score_main(common + ["--out", str(tmp_path / "plain")]) == 0
    assert score_main(common + ["--out", str(tmp_path / "certified"), "--certified", str(tmp_path / "cert")]) == 0
    plain = [json.loads(line) for line in (tmp_path / "plain" / "results.jsonl").read_text().splitlines()]
    certified = [json.loads(line) for line in (tmp_path / "certified" / "results.jsonl").read_text().splitlines()]
    cert = read_certified(tmp_path / "cert")
    for a, b, record in zip(plain, certified, records):
        # Exact: both runs score the same records with the same code in this process; certifying only adds keys.
        assert {k: v for k, v in b.items() if not k.startswith("certified_")} == a
        row = cert[sample_id(record["ground_truth"], record["input_grid"], (1.0, 0.0))]
        assert b["certified_optimal_compliance"] == pytest.approx(
            min(row["best_compliance"], row["yardstick_compliance"]))
        assert b["certified_structural_efficiency"] == pytest.approx(
            min(1.0, b["certified_optimal_compliance"] / b["compliance"]))
    # The answer of sample 0 is the yardstick; the certified optimum is 11.6 % stiffer.
    assert certified[0]["structural_efficiency"] == pytest.approx(1.0)
    assert certified[0]["certified_structural_efficiency"] < 0.9


def test_a_broken_certify_line_certifies_nothing_and_the_others_still_count(tmp_path):
    rows = [{"subject": "s", "index": 0, "sample": "a", "status": "optimal"},
            {"subject": "s", "index": 1, "error": "no L"}]
    (tmp_path / "certify.jsonl").write_text(json.dumps(rows[0]) + "\n{\"subject\": \n\n" + json.dumps(rows[1]) + "\n")
    assert read_certified(tmp_path) == {"a": rows[0]}


def test_certified_metrics_are_null_without_a_proof():
    row = {"compliance": 5.0, "load_carrying": True}
    gap = {"status": "gap", "best_compliance": 4.0, "yardstick_compliance": 4.5}
    assert certified_metrics(row, gap) == {"certified_optimal_compliance": None,
                                           "certified_structural_efficiency": None}
    assert certified_metrics(row, None)["certified_optimal_compliance"] is None
    optimal = dict(gap, status="optimal")
    assert certified_metrics(row, optimal) == {"certified_optimal_compliance": 4.0,
                                               "certified_structural_efficiency": 0.8}
    assert certified_metrics(dict(row, load_carrying=False), optimal)["certified_structural_efficiency"] == 0.0
