"""The drop-in Python API (sphyr_hpc.api), stated as the published scorer's users state it.

A small cantilever column (load on the top-left cells, supports below them)
and its mirror image, real dataset answers (tests/data), and the 144 published
records scored through the API against the score command's results.jsonl.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest

from conftest import DATA, EXAMPLE_RESULTS, ROOT
from sphyr_hpc import StructuralMetrics, clear_reference_cache, get_structural_metrics
from sphyr_hpc.api import REFERENCE_CACHE_SIZE, ScoredRecord, reference_cache_info, score_records


def grid(text):
    return [row.split() for row in text.strip().splitlines()]


def masked(truth):
    """The dataset's input: first and last rows kept, the rows between masked."""
    return [truth[0]] + [["V"] * len(truth[0]) for _ in truth[1:-1]] + [truth[-1]]


ANSWER = grid("""
L L 0 0 0
1 1 0 0 0
1 1 0 0 0
1 1 0 0 0
S S 0 0 0
""")
INPUT = masked(ANSWER)
SEVERED = grid("""
L L 0 0 0
1 1 0 0 0
0 0 0 0 0
1 1 0 0 0
S S 0 0 0
""")
SOLID = [["1" if cell == "0" else cell for cell in row] for row in ANSWER]
EMPTY = [["0" if cell == "1" else cell for cell in row] for row in ANSWER]
MIRRORED_ANSWER = [row[::-1] for row in ANSWER]
MIRRORED_INPUT = masked(MIRRORED_ANSWER)


def score(completion, **options):
    return get_structural_metrics(completion, ANSWER, input_grid=INPUT, **options)


def dataset_records(name="full_easy_first20.jsonl", count=4):
    with open(DATA / name) as handle:
        return [json.loads(line) for line in handle if line.strip()][:count]


# -- the published behaviours ---------------------------------------------------------------------
def test_the_dataset_answer_carries_its_load():
    metrics = score(ANSWER)
    assert metrics.physically_valid and metrics.load_carrying
    assert metrics.topology_score > 0.5
    # Exact by construction: the completion's analysis is the ground truth's (equal cells, the same cache entry).
    assert metrics.compliance_efficiency_vs_ground_truth == 1.0


@pytest.mark.parametrize("record", dataset_records(), ids=lambda r: f"full_easy[{r['index']}]")
def test_every_real_dataset_answer_carries_its_load_and_scores_above_half(record):
    metrics = get_structural_metrics(record["ground_truth"], record["ground_truth"], record["input_grid"])
    assert metrics.load_carrying
    assert metrics.topology_score > 0.5
    assert metrics.compliance_efficiency_vs_ground_truth == 1.0  # one analysis of equal cells: exact
    assert metrics.exact_match


def test_a_severed_load_path_scores_zero_and_is_orders_of_magnitude_softer():
    metrics = score(SEVERED)
    assert metrics.physically_valid
    assert not metrics.load_carrying
    assert metrics.topology_score == 0.0 and metrics.structural_efficiency == 0.0
    assert metrics.compliance > 1e3 * score(ANSWER).compliance


def test_an_empty_completion_scores_zero():
    metrics = score(EMPTY)
    assert metrics.topology_score == 0.0
    assert not metrics.load_carrying


def test_filling_everything_solid_saturates_stiffness_but_pays_for_material():
    metrics = score(SOLID)
    assert metrics.structural_efficiency == 1.0  # exact: clipped at 1 (solid is 17% stiffer than the optimum)
    assert metrics.material_efficiency < 0.6
    assert metrics.topology_score < score(ANSWER).topology_score


def test_the_mirror_image_scores_as_the_answer_and_other_load_paths_are_not_punished():
    answer = score(ANSWER)
    mirrored = get_structural_metrics(MIRRORED_ANSWER, MIRRORED_ANSWER, MIRRORED_INPUT)
    assert mirrored.topology_score == pytest.approx(answer.topology_score, abs=1e-9)
    assert mirrored.compliance == pytest.approx(answer.compliance, rel=1e-9)
    # On the mirrored problem: the column widened inwards (more material), and the same
    # material as two columns one cell apart.  Neither matches the answer cell for cell.
    for path in ("0 0 1 1 1", "0 0 1 0 1"):
        completion = [MIRRORED_ANSWER[0]] + [path.split()] * 3 + [MIRRORED_ANSWER[-1]]
        metrics = get_structural_metrics(completion, MIRRORED_ANSWER, MIRRORED_INPUT)
        assert not metrics.exact_match
        assert metrics.load_carrying, path
        assert metrics.topology_score > 0.5, path


def test_a_wrong_shape_completion_is_not_physically_valid_and_scores_zero():
    metrics = score([["L", "L"], ["S", "S"]])
    assert not metrics.physically_valid
    assert metrics.topology_score == 0.0
    assert metrics.compliance == math.inf
    assert "completion has 2 rows" in metrics.invalid_reason


def test_unfilled_cells_are_counted():
    unfinished = [row[:] for row in ANSWER]
    unfinished[1][0] = unfinished[2][3] = "V"
    assert score(unfinished).unfilled_cells == 2
    assert score(ANSWER).unfilled_cells == 0


def test_supports_moved_by_the_completion_are_ignored():
    """Boundary conditions come from the ground truth: calling cells S wins nothing."""
    relocated = [row[:] for row in EMPTY]
    relocated[1][:2] = ["S", "S"]  # "supports" right under the load, nothing below them
    assert not score(relocated).load_carrying
    assert score(relocated).topology_score == 0.0


def test_design_efficiency_only_on_request():
    plain = score(SOLID)
    assert plain.design_efficiency is None and plain.own_budget_optimal_compliance is None
    asked = score(SOLID, include_own_budget_reference=True)
    assert 0.0 < asked.design_efficiency <= 1.0
    # a solid fill is the stiffest design at its own (full) budget
    assert asked.design_efficiency == pytest.approx(1.0, abs=1e-9)
    assert isinstance(asked.own_budget_optimal_compliance, float)


def test_as_dict_is_valid_json_without_inf():
    metrics = score([["L"]])  # wrong shape: every compliance infinite on the object
    assert metrics.compliance == math.inf and metrics.optimal_compliance == math.inf
    values = metrics.as_dict()
    assert values["compliance"] is None and values["optimal_compliance"] is None
    assert json.loads(json.dumps(values, allow_nan=False)) == values
    severed = score(SEVERED).as_dict()
    assert json.loads(json.dumps(severed, allow_nan=False))["load_carrying"] is False


# -- the interface itself ---------------------------------------------------------------------------
def test_signature_and_defaults_are_the_published_ones():
    import inspect

    parameters = dict(inspect.signature(get_structural_metrics).parameters)
    # sphyr_hpc's one addition, keyword only so every published call means what it meant: the yardstick store
    store = parameters.pop("store")
    assert store.kind is inspect.Parameter.KEYWORD_ONLY and store.default is True
    assert list(parameters) == ["output_grid", "gt_grid", "input_grid", "gravity_dir", "penal",
                                "filter_radius", "include_own_budget_reference"]
    defaults = {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}
    assert defaults == {"input_grid": None, "gravity_dir": (1, 0), "penal": 3.0, "filter_radius": 1.2,
                        "include_own_budget_reference": False}


def test_the_metrics_worth_averaging_are_importable_as_published():
    from sphyr_hpc import STRUCTURAL_METRIC_KEYS

    assert STRUCTURAL_METRIC_KEYS == ("topology_score", "structural_efficiency", "material_efficiency",
                                      "compliance_efficiency_vs_ground_truth", "load_carrying", "volume_ratio")


def test_fields_have_the_published_names_and_python_types():
    metrics = score(ANSWER)
    published = ["physically_valid", "load_carrying", "compliance", "ground_truth_compliance",
                 "optimal_compliance", "own_budget_optimal_compliance", "topology_score",
                 "structural_efficiency", "structural_efficiency_raw", "design_efficiency",
                 "material_efficiency", "compliance_efficiency_vs_ground_truth", "volume_fraction",
                 "ground_truth_volume_fraction", "volume_ratio", "max_displacement", "unfilled_cells",
                 "unparsable_cells"]
    assert [f.name for f in dataclasses.fields(StructuralMetrics)][:len(published)] == published
    assert list(metrics.as_dict())[:len(published)] == published
    for name in ("physically_valid", "load_carrying", "exact_match", "valid_output_grid"):
        assert type(getattr(metrics, name)) is bool, name
    for name in ("unfilled_cells", "unparsable_cells"):
        assert type(getattr(metrics, name)) is int, name
    for name in ("compliance", "optimal_compliance", "topology_score", "volume_ratio", "max_displacement",
                 "difference_ratio"):
        assert type(getattr(metrics, name)) is float, name


def test_grids_may_be_text_as_a_model_writes_them():
    text = "Here is the completed grid:\n\n" + "\n".join(" ".join(row) for row in SEVERED) + "\n\nDone."
    as_text = get_structural_metrics(text, "\n".join(" ".join(r) for r in ANSWER),
                                     "\n".join(" ".join(r) for r in INPUT))
    assert as_text == score(SEVERED)


def test_arguments_that_are_not_grids_give_zero_metrics_with_a_reason():
    for completion in (None, 42, ""):
        metrics = score(completion)
        assert not metrics.physically_valid and metrics.topology_score == 0.0
        assert metrics.invalid_reason
    no_support = [row[:] for row in ANSWER]
    no_support[-1] = ["0"] * 5
    # no input_grid: the API warns that every cell counts as masked, and the reason still stands
    with pytest.warns(UserWarning, match=r"input_grid=None"):
        assert "gt_grid" in get_structural_metrics(ANSWER, None).invalid_reason
    with pytest.warns(UserWarning, match=r"input_grid=None"):
        assert "no support" in get_structural_metrics(ANSWER, no_support).invalid_reason


def test_parameters_no_problem_can_have_raise_value_error():
    for options in ({"gravity_dir": (0, 0)}, {"gravity_dir": "down"}, {"gravity_dir": "10"}, {"gravity_dir": (1, 0, 0)}, {"penal": 0}, {"filter_radius": -1.0}):
        with pytest.raises(ValueError):
            score(ANSWER, **options)


def test_gravity_sideways_loads_the_column_in_bending():
    down, sideways = score(ANSWER), score(ANSWER, gravity_dir=(0, 1))
    assert sideways.compliance > 2 * down.compliance


def test_further_scorer_metrics_appear_as_attributes_and_in_as_dict():
    from sphyr_hpc.scoring.scorer import Scorer

    scorer = Scorer()
    try:
        raw = scorer.score(SEVERED, ANSWER, INPUT)
    finally:
        scorer.close()
    raw["failure_category"] = "severed_load_path"  # a metric the API does not declare
    metrics = StructuralMetrics.from_metrics(raw)
    assert metrics.failure_category == "severed_load_path"
    assert metrics.as_dict()["failure_category"] == "severed_load_path"
    plain = score(SEVERED)
    assert metrics == dataclasses.replace(plain, extras={**plain.extras, "failure_category": "severed_load_path"})
    with pytest.raises(AttributeError):
        metrics.no_such_metric


def test_many_completions_of_one_sample_cost_one_yardstick():
    clear_reference_cache()
    for completion in (ANSWER, SEVERED, SOLID, EMPTY, ANSWER):
        score(completion)
    info = reference_cache_info()
    assert (info.misses, info.currsize, info.maxsize) == (1, 1, REFERENCE_CACHE_SIZE)
    assert info.hits == 4
    score(SOLID, include_own_budget_reference=True)  # the reference yardstick again, plus one at the solid budget
    assert reference_cache_info().misses == 2
    clear_reference_cache()
    assert reference_cache_info()[:3] == (0, 0, 0)
    # Recomputed after clearing: the same code on the same cells in this process, exact by construction.
    assert score(ANSWER) == get_structural_metrics(ANSWER, ANSWER, INPUT)


def test_importing_sphyr_hpc_starts_neither_mpi_nor_petsc():
    code = ("import sys, sphyr_hpc; from sphyr_hpc import StructuralMetrics, get_structural_metrics; "
            "print(sorted(m for m in sys.modules if m.startswith(('mpi4py', 'petsc4py'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


# -- many records -----------------------------------------------------------------------------------
def test_score_records_yields_one_result_per_record_equal_to_single_calls():
    records = [dict(r, completion=c) for r in dataset_records(count=2)
               for c in (r["ground_truth"], r["input_grid"])]
    records.append({"ground_truth": ANSWER, "prompt": "no grid here"})  # no completion: an error, not a crash
    records.append({"ground_truth": ANSWER, "completion": 7, "input_grid": INPUT})
    results = list(score_records(records))
    assert sorted(r.position for r in results) == list(range(len(records)))
    by_position = {r.position: r for r in results}
    for i, record in enumerate(records[:4]):  # the same score_case code, scorer and caches: exact by construction
        assert by_position[i].error is None
        assert by_position[i].metrics == get_structural_metrics(record["completion"], record["ground_truth"],
                                                                 record["input_grid"])
    assert by_position[4] == ScoredRecord(4, None, "input record 4: missing field 'completion'")
    assert by_position[5].metrics is None and "completion" in by_position[5].error


def test_the_144_published_records_through_the_api_equal_the_score_commands_results(bundled_scored):
    from sphyr_hpc.io.records import find_result_files, subject_of

    command = {}
    for line in (bundled_scored / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        row.pop("grids")  # the command's copy of the grids, for its report
        command[(row.pop("model"), row.pop("subject"), row.pop("index"))] = row
    keys, records = [], []
    for path in find_result_files([EXAMPLE_RESULTS]):
        for index, record in enumerate(json.loads(path.read_text())):
            keys.append((path.parent.name, subject_of(path), index))
            records.append(record)
    assert len(records) == 144
    clear_reference_cache()
    ours = {keys[r.position]: r.metrics.as_dict() for r in score_records(records)}
    assert set(ours) == set(command)
    for key, row in command.items():  # the command's own code path (SampleScorer) in this process: exact
        assert ours[key] == {**row, "invalid_reason": row.get("invalid_reason")}, key


def test_the_example_scores_its_records_as_published_and_both_functions_agree(capsys):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import python_api
    finally:
        sys.path.remove(str(ROOT / "examples"))
    assert python_api.main([]) == 0
    out = capsys.readouterr().out
    table = [line.split() for line in out.split("(b)")[1].split("(c)")[0].splitlines()[2:] if line.strip()]
    assert len(table) == 10
    for name, ours, published, _ in table:
        assert float(ours) == pytest.approx(float(published), abs=2e-6), name
    assert "agree on baseline-empty/10_random_cell_easy[0]: True" in out


def test_an_unexpected_error_on_one_rank_aborts_every_rank_instead_of_hanging():
    script = ROOT / "tests" / "scripts" / "score_records_with_fault.py"
    run = subprocess.run([str(ROOT / "bin" / "mpirun"), "-n", "2", sys.executable, str(script),
                          str(DATA / "full_easy_first20.jsonl")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         # os.environ, not the C-level environment: once this process has started MPI
                         # as a singleton, OpenMPI's own variables there would capture the child mpirun
                         env=dict(os.environ))
    assert run.returncode != 0  # MPI_Abort's 3, or the status mpirun reports for the killed rank 0
    assert "injected failure for the abort test" in run.stderr
    assert "unexpected error on rank 1; aborting all 2 ranks" in run.stderr
