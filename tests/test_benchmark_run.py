"""A whole benchmark in one run (issue: a maintainer's second day).

Two toy subjects (4x4 grids, two records each) and two models: ``score --dataset DIR --completions
DIR`` makes one leaderboard over the subjects whose means are those of one run per subject merged by
``report A B --out DIR``; a completions file that names no subject, a folder where a file goes and
the reverse are usage errors; ``report A --compare B`` pairs two models on the same samples.
"""

import json
import math

import pytest

from sphyr_hpc.report import main as report_main
from sphyr_hpc.score import main as score_main
from sphyr_hpc.validate import main as validate_main

TRUTHS = {
    "alpha_easy": ["0 L L 0\n0 1 1 0\n0 1 0 0\nS S S 0", "L 0 0 0\n1 1 0 0\n0 1 1 0\nS S S S"],
    "beta_easy": ["0 0 L 0\n0 1 1 0\n1 1 0 0\nS S 0 0", "0 L 0 0\n0 1 0 0\n0 1 1 0\n0 S S 0"],
}


def _masked(truth):
    rows = [row.split() for row in truth.splitlines()]
    return "\n".join(" ".join(c if r in (0, len(rows) - 1) else "V" for c in row) for r, row in enumerate(rows))


def _solid(truth):
    rows = [row.split() for row in truth.splitlines()]
    return "\n".join(" ".join(c if c in "LS" else "1" for c in row) for row in rows)


@pytest.fixture()
def benchmark(tmp_path):
    """(dataset folder, completions folder MODEL/SUBJECT.jsonl): 'exact' answers the truth, 'solid' all 1."""
    data, answers = tmp_path / "data", tmp_path / "completions"
    data.mkdir()
    for subject, truths in TRUTHS.items():
        (data / f"{subject}.jsonl").write_text("".join(
            json.dumps({"index": i, "input_grid": _masked(t), "ground_truth": t}) + "\n" for i, t in enumerate(truths)))
        for model, answer in (("exact", lambda t: t), ("solid", _solid)):
            (answers / model).mkdir(parents=True, exist_ok=True)
            (answers / model / f"{subject}.jsonl").write_text("".join(
                json.dumps({"index": i, "completion": answer(t)}) + "\n" for i, t in enumerate(truths)))
    return data, answers


def _score(*argv):
    return score_main([*map(str, argv), "--quiet", "--no-store", "--no-report"])


def _means(out):
    summary = json.loads((out / "summary.json").read_text())
    return {model: {subject: entry["topology_score"] for subject, entry in subjects.items()}
            for model, subjects in summary.items() if model in ("exact", "solid")}


def test_a_dataset_folder_and_a_completions_folder_make_one_leaderboard_equal_to_the_runs_merged(
        benchmark, tmp_path, capsys):
    data, answers = benchmark
    assert _score("--dataset", data, "--completions", answers, "--out", tmp_path / "one") == 0
    rows = [json.loads(line) for line in (tmp_path / "one" / "results.jsonl").read_text().splitlines()]
    assert {(r["model"], r["subject"]) for r in rows} == {(m, s) for m in ("exact", "solid") for s in TRUTHS}
    assert len(rows) == 8 and not any("error" in r for r in rows)
    apart = []
    for subject in TRUTHS:
        apart.append(tmp_path / subject)
        assert _score("--dataset", data / f"{subject}.jsonl", "--completions", answers / "exact" / f"{subject}.jsonl",
                      answers / "solid" / f"{subject}.jsonl", "--out", apart[-1]) == 0
    capsys.readouterr()
    assert report_main([*map(str, apart), "--out", str(tmp_path / "merged")]) == 0
    out = capsys.readouterr().out
    assert "4 records of 2 runs" not in out and "8 records of 2 runs" in out
    one, merged = _means(tmp_path / "one"), _means(tmp_path / "merged")
    assert one.keys() == merged.keys() == {"exact", "solid"}
    for model in one:
        for subject in TRUTHS:
            assert math.isclose(one[model][subject], merged[model][subject], rel_tol=0, abs_tol=1e-12)
    # The records themselves: the same run twice gives the same bits; one run and the merged runs agree.
    assert (tmp_path / "one" / "results.jsonl").read_bytes() == (tmp_path / "merged" / "results.jsonl").read_bytes()
    material = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert material["exact"]["alpha_easy"]["material_efficiency"] == 1.0  # the answer's own material
    assert material["solid"]["alpha_easy"]["material_efficiency"] < 1.0


def test_a_record_in_two_runs_merged_is_named_and_kept_once(benchmark, tmp_path, capsys):
    data, answers = benchmark
    subject = data / "alpha_easy.jsonl"
    for run in ("a", "b"):
        _score("--dataset", subject, "--completions", answers / "exact" / "alpha_easy.jsonl", "--out", tmp_path / run)
    capsys.readouterr()
    status = report_main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "merged")])
    err = capsys.readouterr().err
    assert status == 1
    assert f"exact/alpha_easy/0 is in {tmp_path / 'a'} and in {tmp_path / 'b'}: scored twice" in err
    assert len((tmp_path / "merged" / "results.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "{data}", "--completions", "{tmp}/plain.jsonl"], "names no subject of the 2 datasets"),
    (["--dataset", "{tmp}/empty", "--completions", "{tmp}/plain.jsonl"], "empty holds no dataset (*.jsonl files)"),
    (["--dataset", "{data}/alpha_easy.jsonl", "--completions", "{tmp}/empty"], "is a folder without a *.jsonl file"),
    (["--dataset", "{data}", "--completions", "{answers}/exact", "--out", "{data}/alpha_easy.jsonl"],
     "is a file; --out names a folder"),
])
def test_a_folder_where_a_file_goes_and_the_reverse_are_usage_errors(benchmark, tmp_path, capsys, argv, message):
    data, answers = benchmark
    (tmp_path / "empty").mkdir()
    (tmp_path / "plain.jsonl").write_text(json.dumps({"index": 0, "completion": "0 1"}) + "\n")
    argv = [a.format(data=data, answers=answers, tmp=tmp_path) for a in argv]
    status = score_main(argv + ["--quiet", "--out", str(tmp_path / "out")] if "--out" not in argv else argv + ["--quiet"])
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_report_of_a_file_and_merging_without_out_are_usage_errors(benchmark, tmp_path, capsys):
    data, answers = benchmark
    _score("--dataset", data, "--completions", answers, "--out", tmp_path / "one")
    capsys.readouterr()
    assert report_main([str(tmp_path / "one" / "results.jsonl")]) == 2
    assert "is a file; report takes score output folders" in capsys.readouterr().err
    assert report_main([str(tmp_path / "one"), str(tmp_path / "one")]) == 2
    assert "--out DIR" in capsys.readouterr().err


def test_compare_of_two_models_on_the_same_samples_is_their_paired_difference(benchmark, tmp_path, capsys):
    data, answers = benchmark
    _score("--dataset", data, "--completions", answers / "exact", "--out", tmp_path / "exact")
    _score("--dataset", data, "--completions", answers / "solid", "--out", tmp_path / "solid")
    capsys.readouterr()
    assert report_main([str(tmp_path / "exact"), "--compare", str(tmp_path / "solid")]) == 0
    page = (tmp_path / "exact" / "compare.html").read_text()
    assert "solid vs exact" in page and "The runs share no model" in page
    from sphyr_hpc.reporting.collect import ReportData
    from sphyr_hpc.reporting.compare import comparison

    a, _ = ReportData.read(tmp_path / "exact" / "results.jsonl")
    b, _ = ReportData.read(tmp_path / "solid" / "results.jsonl")
    rows, changed, counts, _, _ = comparison(a, b)
    overall = next(r for r, css in rows if css == "all")
    assert overall[0] == "solid vs exact" and overall[2] == 4  # every sample answered by both
    mean_a, mean_b, difference = overall[4], overall[6], overall[7]
    assert math.isclose(difference, mean_b - mean_a, abs_tol=1e-12) and difference < 0  # all solid is worse
    assert {r[1] for r, _ in rows} == {"all subjects", *TRUTHS}
    assert len(changed) == sum(counts.values())


def test_compare_of_runs_sharing_neither_model_nor_sample_says_what_can_be_compared(benchmark, tmp_path, capsys):
    data, answers = benchmark
    _score("--dataset", data / "alpha_easy.jsonl", "--completions", answers / "exact" / "alpha_easy.jsonl",
           "--out", tmp_path / "a")
    _score("--dataset", data / "beta_easy.jsonl", "--completions", answers / "solid" / "beta_easy.jsonl",
           "--out", tmp_path / "b")
    capsys.readouterr()
    assert report_main([str(tmp_path / "a"), "--compare", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "nothing to compare: A holds 1 model (exact) on alpha_easy" in err
    assert not (tmp_path / "a" / "compare.html").exists()


def test_validate_takes_a_dataset_folder_and_quiet(benchmark, capsys):
    data, _ = benchmark
    assert validate_main(["--dataset", str(data), "--samples", "1", "--quiet", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "alpha_easy: 1 sample (easy)" in out and "beta_easy: 1 sample (easy)" in out


def test_the_report_of_a_run_of_a_dataset_folder_names_its_subjects(benchmark, tmp_path):
    data, answers = benchmark
    assert score_main(["--dataset", str(data), "--completions", str(answers), "--out", str(tmp_path / "one"),
                       "--quiet", "--no-store"]) == 0
    page = (tmp_path / "one" / "report.html").read_text()
    assert "SPhyR report: 2 models (exact, solid) on 2 subjects (data)" in page


def test_a_dataset_folder_given_as_a_result_path_and_a_folder_without_logs_are_usage_errors(benchmark, tmp_path, capsys):
    data, _ = benchmark
    assert score_main([str(data), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"no result files under {data} (a folder without a *.json file): it holds JSONL files" in err
    assert f"--dataset {data}" in err
    (tmp_path / "logs").mkdir()
    assert score_main(["--inspect-log", str(tmp_path / "logs"), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert "is a folder without an Inspect log" in capsys.readouterr().err
