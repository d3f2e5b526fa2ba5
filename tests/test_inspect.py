"""The Inspect AI task (docs/harness.md, "Inspect AI"), run for real with Inspect's ``mockllm/model``.

The mock model answers v1/full_easy with the ground truth, an empty grid (every masked cell 0) or
prose with no grid, by sample (through Inspect's ``eval()``: only there can mockllm be given answers).  Every sample's score must be ``score``'s ``topology_score`` of the
same completion (to 1e-12), its metadata ``score``'s metrics and failure category; the metrics the
mean and its standard error; the log, scored with ``--inspect-log``, the same results.jsonl and
leaderboard as the completions file, on 1 and 2 ranks; and the Inspect scorer's yardsticks are the
store's, so ``score`` after it computes none.  The ``inspect`` command itself runs the task by its
registry name from a folder outside the checkout, with mockllm's one default answer.
"""

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, inspect_or_skip, needs_o200k, run_in_process

inspect_ai = inspect_or_skip()
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from sphyr_hpc.score import main as score_main  # noqa: E402

DATASET = ROOT / "examples" / "data" / "v1" / "full_easy.jsonl"
TASK = "sphyr_hpc/inspect/task.py"
PROSE = "The load should travel down to the supports through a solid column of material."
MODEL = "mockllm/model"
MOCK_ANSWER = "Default output from mockllm/model"  # what mockllm/model answers unless given answers


def grid_text(grid):
    return "\n".join(" ".join(row) for row in grid)


def answer_of(record):
    """The ground truth, an empty grid or prose, by the record's index."""
    kind = record["index"] % 3
    if kind == 0:
        return grid_text(record["ground_truth"])
    if kind == 1:
        return grid_text([["0" if cell == "V" else cell for cell in row] for row in record["input_grid"]])
    return PROSE


def score(out, *args, ranks=1, store):
    """``python -m sphyr_hpc.score ARGS --out OUT`` from the checkout's folder: its exit status, stdout and
    stderr.  On 1 rank its ``main`` in this process (what the command runs), on more under bin/mpirun."""
    where = ["--store", str(store)] if store is not None else ["--no-store"]
    argv = [*map(str, args), "--out", str(out), *where, "--quiet", "--no-report"]
    if ranks == 1:
        return run_in_process(score_main, argv)
    # not this process's MPI (the Inspect scorer started it here): mpirun's ranks are their own
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    return subprocess.run([str(ROOT / "bin" / "mpirun"), "-n", str(ranks), sys.executable, "-m", "sphyr_hpc.score",
                           *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def rows_of(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def leaderboard(run):
    """The printed leaderboard tables (the lines before them name the run's files and its store)."""
    table = run.stdout.split("\nleaderboard: ")[0]
    return table[table.index("# model"):]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """(Inspect log, folder, completions run, store) of the mock model's answers: the completions are
    scored without a store (each computed here, not read back from what the Inspect scorer stored),
    and again with the Inspect run's store (folder/stored)."""
    folder = tmp_path_factory.mktemp("inspect")
    records = [json.loads(line) for line in DATASET.read_text().splitlines()]
    from sphyr_hpc.inspect.task import samples_of

    by_prompt = {sample.input: answer_of(next(r for r in records if r["index"] == sample.id))
                 for sample in samples_of(DATASET)}

    def answer(messages, tools, tool_choice, config):
        output = ModelOutput.from_content(model=MODEL, content=by_prompt[messages[-1].text])
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # no tokenizer offline
        return output

    store = folder / "store"
    with contextlib.chdir(ROOT):  # Inspect takes a task file's path relative to the working folder
        logs = inspect_ai.eval(TASK, model=get_model(MODEL, custom_outputs=answer), log_dir=str(folder / "logs"),
                               task_args={"dataset": str(DATASET), "store": str(store)}, display="none")
    assert logs[0].status == "success", logs[0].error
    completions = folder / "completions.jsonl"
    completions.write_text("".join(json.dumps({"index": r["index"], "completion": answer_of(r)}) + "\n"
                                   for r in records))
    run = score(folder / "scored", "--dataset", DATASET, "--completions", completions, "--model", MODEL, store=None)
    assert run.returncode == 0, run.stderr
    stored = score(folder / "stored", "--dataset", DATASET, "--completions", completions, "--model", MODEL,
                   store=store)
    assert stored.returncode == 0, stored.stderr
    return read_eval_log(logs[0].location), folder, run, store


def test_every_samples_score_is_scores_topology_score_with_its_metrics(evaluated):
    log, folder, _, _ = evaluated
    rows = {row["index"]: row for row in rows_of(folder / "scored")}
    assert len(log.samples) == len(rows) == 29
    kinds = set()
    for sample in log.samples:
        result, row = sample.scores["topology_score"], rows[sample.id]
        assert math.isclose(result.value, row["topology_score"], rel_tol=0, abs_tol=1e-12)
        meta = result.metadata
        assert meta["load_carrying"] == row["load_carrying"] and meta["exact_match"] == row["exact_match"]
        assert meta["failure"] == row["failure"]
        for key in ("structural_efficiency", "material_efficiency"):
            assert math.isclose(meta[key], row[key], rel_tol=0, abs_tol=1e-12)
        kinds.add((sample.id % 3, row["exact_match"], row["load_carrying"], row["valid_output_grid"]))
    # the ground truth: exact and carrying; the empty grid: a grid, carrying nothing; prose: no grid
    assert kinds == {(0, True, True, True), (1, False, False, True), (2, False, False, False)}


def test_the_metrics_are_the_mean_and_its_standard_error(evaluated):
    log = evaluated[0]
    values = [sample.scores["topology_score"].value for sample in log.samples]
    metrics = log.results.scores[0].metrics
    assert math.isclose(metrics["mean"].value, statistics.fmean(values), rel_tol=1e-12)
    assert math.isclose(metrics["stderr"].value, statistics.stdev(values) / math.sqrt(len(values)), rel_tol=1e-9)


def test_the_log_names_its_dataset_and_each_sample_its_record(evaluated):
    log = evaluated[0]
    assert log.eval.dataset.location == str(DATASET) and log.eval.dataset.name == "full_easy"
    first = log.samples[0]
    assert first.metadata["index"] == first.id and first.metadata["dataset"] == "full_easy.jsonl"
    assert first.input.startswith("You are given a structural material distribution")


def test_the_inspect_scorer_filled_the_store_score_reads(evaluated):
    _, folder, _, _ = evaluated
    yardsticks = json.loads((folder / "stored" / "run.json").read_text())["yardsticks"]
    assert yardsticks["computed"] == 0 and yardsticks["from_store"] > 0
    assert rows_of(folder / "stored") == rows_of(folder / "scored")


@pytest.mark.parametrize("ranks", [1, 2])
def test_the_log_scored_with_inspect_log_is_the_completions_file_scored(evaluated, ranks, tmp_path):
    log, folder, completions_run, store = evaluated
    run = score(tmp_path / "from_log", "--inspect-log", log.location, ranks=ranks, store=store)
    assert run.returncode == 0, run.stderr
    assert rows_of(tmp_path / "from_log") == rows_of(folder / "scored")
    assert leaderboard(run) == leaderboard(completions_run)


def test_a_log_that_cannot_be_read_is_one_line_and_usage_errors_come_first(evaluated, tmp_path):
    log, _, _, store = evaluated
    broken = tmp_path / "broken.eval"
    broken.write_bytes(b"not a zip file")
    run = score(tmp_path / "out", "--inspect-log", log.location, broken, store=store)
    assert run.returncode == 1 and f"{broken}: not a readable Inspect log" in run.stderr
    assert len(rows_of(tmp_path / "out")) == 29
    for args, words in ((["--inspect-log", "nowhere.eval"], "no such file or folder: nowhere.eval"),
                        (["--inspect-log", log.location, "--dataset", DATASET, "--completions", DATASET],
                         "--inspect-log and --completions are two runs")):
        run = score(tmp_path / "usage", *args, store=store)
        assert run.returncode == 2 and words in run.stderr and "Traceback" not in run.stderr


def inspect_eval_command(cwd, dataset, limit, log_dir):
    """The ``inspect`` command run as a user types it: the task by its registry name, mockllm/model
    (skips where tiktoken's o200k_base, which mockllm counts tokens with, would be downloaded)."""
    needs_o200k()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    run = subprocess.run([str(Path(sys.executable).with_name("inspect")), "eval", "sphyr_hpc/sphyr", "--model", MODEL,
                          "--limit", str(limit), "--log-dir", str(log_dir), "-T", f"dataset={dataset}", "-T", "store=none",
                          "--display", "none"], cwd=cwd, env={**env, "PWD": str(cwd)}, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    (log_file,) = (cwd / log_dir).glob("*.eval")
    return log_file, read_eval_log(str(log_file))


def test_the_inspect_command_runs_the_task_by_its_registry_name_outside_the_checkout_and_its_log_scores_as_its_completions(
        tmp_path):
    """``inspect eval sphyr_hpc/sphyr`` (the entry point of setup.cfg) from a folder outside the
    checkout, with an absolute ``-T dataset=``: each sample's score, and ``score --inspect-log`` on the
    log, are ``score --completions``'s ``topology_score`` of the same answer, record by record."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    log_file, log = inspect_eval_command(elsewhere, DATASET, 5, tmp_path / "logs")
    assert log.status == "success" and log.eval.task == "sphyr_hpc/sphyr"
    assert log.eval.dataset.location == str(DATASET)
    assert [sample.output.completion for sample in log.samples] == [MOCK_ANSWER] * 5
    completions = tmp_path / "completions.jsonl"
    completions.write_text("".join(json.dumps({"index": sample.id, "completion": sample.output.completion}) + "\n"
                                   for sample in log.samples))
    from_completions = score(tmp_path / "scored", "--dataset", DATASET, "--completions", completions, "--model", MODEL,
                             store=None)
    from_log = score(tmp_path / "from_log", "--inspect-log", log_file, store=None)
    # exit status 1: the other 24 records have no completion, in both runs
    assert from_completions.returncode == from_log.returncode == 1, from_completions.stderr + from_log.stderr
    expected = {row["index"]: row for row in rows_of(tmp_path / "scored")}
    scored = {row["index"]: row for row in rows_of(tmp_path / "from_log")}
    for sample in log.samples:  # the other records' rows say they have no completion, no score
        value = expected[sample.id]["topology_score"]
        assert math.isclose(sample.scores["topology_score"].value, value, rel_tol=0, abs_tol=1e-12)
        assert math.isclose(scored[sample.id]["topology_score"], value, rel_tol=0, abs_tol=1e-12)
    # the same rows, but that a record with no answer names the file it is missing from
    assert [{key: value for key, value in row.items() if key != "error"} for row in rows_of(tmp_path / "from_log")] \
        == [{key: value for key, value in row.items() if key != "error"} for row in rows_of(tmp_path / "scored")]
    assert sum("has no completion in" in row.get("error", "") for row in rows_of(tmp_path / "from_log")) == 24


def test_a_log_of_a_relative_dataset_path_is_scored_from_another_folder(tmp_path):
    """Inspect writes the dataset's location relative to the folder it ran in; the task's metadata
    names the file absolutely, so ``score --inspect-log`` finds it from anywhere."""
    (tmp_path / "data").mkdir()
    copy = tmp_path / "data" / DATASET.name
    copy.write_bytes(DATASET.read_bytes())
    log_file, log = inspect_eval_command(tmp_path, f"data/{DATASET.name}", 2, "logs")
    assert log.eval.dataset.location == f"data/{DATASET.name}" and log.eval.metadata["sphyr_hpc_dataset"] == str(copy)
    scored = score(tmp_path / "out", "--inspect-log", log_file, store=None)  # from the checkout's folder
    assert scored.returncode == 1 and "its dataset" not in scored.stderr, scored.stderr  # 27 records unanswered
    assert sum("topology_score" in row for row in rows_of(tmp_path / "out")) == 2
