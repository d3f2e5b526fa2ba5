"""The Inspect task with tools (docs/harness.md, "With tools"), run with a scripted ``mockllm/model``.

The mock model, given ``simulate``, calls it on its first answer (the ground truth, an empty grid or
prose, by sample, as tests/test_inspect.py's model answers) while it may, and answers the ground
truth when the tool said the load path is severed, else its first answer.  Each tool result must be
``score``'s analysis of the same grid (compliance to 1e-9); ``-T max_tool_calls`` bounds the calls;
the log names its tools, and ``score --inspect-log`` of the runs with and without tools gives the
tools-minus-no-tools delta that the rows give, in summary.json, the printed leaderboard and
report.html.  ``-T tools=python`` runs Inspect's python() in the ``local`` sandbox.
"""

import contextlib
import json
import math
import os
import subprocess
import sys

import pytest

from conftest import ROOT, inspect_or_skip

inspect_ai = inspect_or_skip()
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ChatMessageTool, ChatMessageUser, ModelOutput, ModelUsage, get_model  # noqa: E402

from sphyr_hpc.core.prompt import prompt_of  # noqa: E402
from sphyr_hpc.inspect.tools import PARAGRAPHS  # noqa: E402

DATASET = ROOT / "examples" / "data" / "v1" / "full_easy.jsonl"
TASK = "sphyr_hpc/inspect/task.py"
MODEL = "mockllm/model"
PROSE = "The load should travel down to the supports through a solid column of material."
RECORDS = [json.loads(line) for line in DATASET.read_text().splitlines()]
BY_INDEX = {r["index"]: r for r in RECORDS}
TOLD = ("no_grid", "wrong_shape", "unfilled_or_unparsable", "severed_load_path", "floating_material")


def grid_text(grid):
    return "\n".join(" ".join(row) for row in grid)


def first_answer(record):
    """The ground truth, an empty grid or prose, by the record's index (as tests/test_inspect.py)."""
    kind = record["index"] % 3
    if kind == 0:
        return grid_text(record["ground_truth"])
    if kind == 1:
        return grid_text([["0" if cell == "V" else cell for cell in row] for row in record["input_grid"]])
    return PROSE


def record_of(messages):
    prompt = next(m.text for m in messages if isinstance(m, ChatMessageUser))
    return next(r for r in RECORDS if prompt.startswith(prompt_of(r, "full_easy")))


def usage(output):
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # no tokenizer offline
    return output


def scripted(messages, tools, tool_choice, config):
    """Call simulate on the first answer while allowed (twice at most), then answer: the ground truth
    when a result said the load path is severed, else the first answer."""
    record = record_of(messages)
    results = [json.loads(m.text) for m in messages if isinstance(m, ChatMessageTool)]
    if tools and tool_choice != "none" and len(results) < 2:
        return usage(ModelOutput.for_tool_call(MODEL, "simulate", {"grid": first_answer(record)}))
    severed = any(r.get("failure") == "severed_load_path" for r in results)
    return usage(ModelOutput.from_content(MODEL, grid_text(record["ground_truth"]) if severed else first_answer(record)))


def run_task(folder, name, **task_args):
    with contextlib.chdir(ROOT):  # Inspect takes a task file's path relative to the working folder
        logs = inspect_ai.eval(TASK, model=get_model(MODEL, custom_outputs=scripted), log_dir=str(folder / name),
                               task_args={"dataset": str(DATASET), "store": "none", **task_args}, display="none")
    assert logs[0].status == "success", logs[0].error
    return read_eval_log(logs[0].location)


def score(out, *args, ranks=1):
    prefix = [str(ROOT / "bin" / "mpirun"), "-n", str(ranks)] if ranks > 1 else []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    return subprocess.run(prefix + [sys.executable, "-m", "sphyr_hpc.score", *map(str, args), "--out", str(out),
                                    "--no-store", "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)


def rows_of(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(folder, log with simulate at most once a sample, log without tools, the first answers scored)."""
    folder = tmp_path_factory.mktemp("tools")
    with_tools = run_task(folder, "tools", tools="simulate", max_tool_calls=1)
    without = run_task(folder, "plain")
    completions = folder / "first.jsonl"
    completions.write_text("".join(json.dumps({"index": r["index"], "completion": first_answer(r)}) + "\n"
                                   for r in RECORDS))
    first = score(folder / "first", "--dataset", DATASET, "--completions", completions, "--model", MODEL, "--no-report")
    assert first.returncode == 0, first.stderr
    return folder, with_tools, without, {row["index"]: row for row in rows_of(folder / "first")}


def test_each_simulate_result_is_scores_analysis_of_the_same_grid(runs):
    _, log, _, first = runs
    assert log.eval.metadata["sphyr_hpc_tools"] == ["simulate"]
    finite = 0
    for sample in log.samples:
        calls = [call for m in sample.messages if m.role == "assistant" for call in (m.tool_calls or [])]
        results = [json.loads(m.text) for m in sample.messages if isinstance(m, ChatMessageTool)]
        assert [c.function for c in calls] == ["simulate"] and len(results) == 1  # max_tool_calls=1
        assert calls[0].arguments["grid"] == first_answer(BY_INDEX[sample.id])
        result, row = results[0], first[sample.id]
        assert result["load_carrying"] == row["load_carrying"]
        if row["compliance"] is None:
            assert result["compliance"] is None
        else:
            assert math.isclose(result["compliance"], row["compliance"], rel_tol=1e-9, abs_tol=0)
            assert math.isclose(result["volume_fraction"], row["volume_fraction"], rel_tol=1e-12)
            finite += 1
        expected = row["failure"] if row["failure"] in TOLD else "sound"
        assert result["failure"] == expected, (sample.id, result, row["failure"])
        if "checks" in result:  # an analysed grid: the checks of the answer and the yardstick are not run
            assert result["checks"]["overspent_material"] == result["checks"]["weaker_than_yardstick"] == "not told"
    assert finite >= 6


def test_the_prompt_with_a_tool_is_sphyrs_and_one_paragraph(runs):
    _, log, without, _ = runs
    for tools_sample, plain in zip(log.samples, without.samples):
        record = BY_INDEX[plain.id]
        assert plain.input == prompt_of(record, "full_easy")  # byte for byte without tools
        assert tools_sample.input == prompt_of(record, "full_easy") + "\n\n" + PARAGRAPHS["simulate"].replace("{N}", "1")


def test_the_calls_stop_at_max_tool_calls_and_go_on_without(tmp_path):
    log = run_task(tmp_path, "free", tools="simulate", limit=3)
    assert log.eval.metadata["sphyr_hpc_max_tool_calls"] == 10
    for sample in log.samples:
        assert sum(isinstance(m, ChatMessageTool) for m in sample.messages) == 2  # the script's own limit


def test_the_runs_with_and_without_tools_give_the_paired_delta(runs, tmp_path):
    folder, with_tools, without, _ = runs
    run = score(tmp_path / "both", "--inspect-log", with_tools.location, without.location)
    assert run.returncode == 0, run.stderr
    rows = rows_of(tmp_path / "both")
    tools_rows = {r["index"]: r for r in rows if r["model"] == MODEL + "+simulate"}
    plain_rows = {r["index"]: r for r in rows if r["model"] == MODEL}
    assert len(tools_rows) == len(plain_rows) == 29
    assert all(r["tools"]["names"] == ["simulate"] and r["tools"]["calls"] == 1 for r in tools_rows.values())
    assert not any("tools" in r for r in plain_rows.values())
    differences = [tools_rows[i]["topology_score"] - plain_rows[i]["topology_score"] for i in plain_rows]
    # the empty grids (index % 3 == 1) were answered with the ground truth after simulate: the only gain
    assert all(d > 0 for i, d in zip(plain_rows, differences) if i % 3 == 1 and BY_INDEX[i])
    assert all(d == 0 for i, d in zip(plain_rows, differences) if i % 3 != 1)
    (entry,) = json.loads((tmp_path / "both" / "summary.json").read_text())["tools"]["runs"]
    assert entry["model"] == MODEL and entry["with_tools"] == MODEL + "+simulate"
    delta = entry["delta"]
    assert math.isclose(delta["difference"], sum(differences) / len(differences), rel_tol=1e-12)
    assert delta["samples"] == 29 and delta["excludes_zero"] and delta["ci95"][0] > 0
    assert delta["subjects"]["full_easy"]["difference"] == delta["difference"]  # one subject: the same mean
    assert entry["calls"]["mean"] == 1.0 and entry["calls"]["share_calling"] == 1.0 and entry["calls"]["total"] == 29
    assert entry["calls"]["ms_per_call"] > 0
    assert f"{delta['difference']:+.3f}" in run.stdout and "tools minus no tools" in run.stdout
    page = (tmp_path / "both" / "report.html").read_text()
    assert "<h2 id='tools'>With tools</h2>" in page and f"{delta['difference']:+.3f}" in page


def test_two_ranks_give_the_records_and_the_delta_of_one(runs, tmp_path):
    _, with_tools, without, _ = runs
    outs = []
    for ranks in (1, 2):
        run = score(tmp_path / f"n{ranks}", "--inspect-log", with_tools.location, without.location, "--no-report",
                    ranks=ranks)
        assert run.returncode == 0, run.stderr
        outs.append(tmp_path / f"n{ranks}")
    assert (outs[0] / "results.jsonl").read_bytes() == (outs[1] / "results.jsonl").read_bytes()
    assert (outs[0] / "summary.json").read_bytes() == (outs[1] / "summary.json").read_bytes()


def test_the_python_tool_runs_in_the_local_sandbox(tmp_path):
    def answer(messages, tools, tool_choice, config):
        results = [m.text for m in messages if isinstance(m, ChatMessageTool)]
        if not results:
            return usage(ModelOutput.for_tool_call(MODEL, "python", {"code": "print(6 * 7)"}))
        return usage(ModelOutput.from_content(MODEL, results[0].strip()))

    with contextlib.chdir(ROOT):
        (log,) = inspect_ai.eval(TASK, model=get_model(MODEL, custom_outputs=answer), log_dir=str(tmp_path), limit=2,
                                 task_args={"dataset": str(DATASET), "store": "none", "tools": "python",
                                            "sandbox": "local"}, display="none")
    assert log.status == "success", log.error
    assert log.eval.sandbox.type == "local" and log.eval.metadata["sphyr_hpc_tools"] == ["python"]
    assert [sample.output.completion for sample in log.samples] == ["42", "42"]


def test_the_docs_quote_each_tools_paragraph():
    page = (ROOT / "docs" / "harness.md").read_text()
    for paragraph in PARAGRAPHS.values():
        assert f"```text\n{paragraph}\n```" in page


def test_simulate_on_a_subject_whose_mask_hides_loads_and_supports(tmp_path):
    """v1/3_random_column_easy masks L or S cells in all 29 records: the ground truth, which puts them
    back, gets score's compliance; the same grid with the hidden L and S cells left 0 loses them."""
    from sphyr_hpc.jobs.simulate import simulate_grid

    dataset = ROOT / "examples" / "data" / "v1" / "3_random_column_easy.jsonl"
    records = [json.loads(line) for line in dataset.read_text().splitlines()]
    completions = tmp_path / "truth.jsonl"
    completions.write_text("".join(json.dumps({"index": r["index"], "completion": grid_text(r["ground_truth"])}) + "\n"
                                   for r in records))
    run = score(tmp_path / "out", "--dataset", dataset, "--completions", completions, "--model", "truth", "--no-report")
    assert run.returncode == 0, run.stderr
    rows = {row["index"]: row for row in rows_of(tmp_path / "out")}
    hidden = 0
    for record in records:
        truth, masked = record["ground_truth"], record["input_grid"]
        result = simulate_grid(grid_text(truth), masked, store=None)
        assert math.isclose(result["compliance"], rows[record["index"]]["compliance"], rel_tol=1e-9, abs_tol=0)
        assert result["failure"] in ("sound", "floating_material") and result["load_carrying"]
        lost = [[("0" if t in "LS" and m == "V" else t) for t, m in zip(tr, mr)] for tr, mr in zip(truth, masked)]
        if lost != truth:
            hidden += 1
            assert simulate_grid(grid_text(lost), masked, store=None)["compliance"] != result["compliance"]
    assert hidden == 29


def test_a_bad_tool_option_is_one_line_naming_it():
    from sphyr_hpc.inspect.tools import parse_max_tool_calls, parse_tools

    assert parse_tools("simulate,python") == ("simulate", "python") and parse_tools("none") == parse_tools(None) == ()
    assert parse_max_tool_calls("3") == 3 and parse_max_tool_calls(0) == 0
    for bad, call in (("simulator", parse_tools), ("-1", parse_max_tool_calls), ("2.5", parse_max_tool_calls)):
        with pytest.raises(ValueError, match=f"={bad}: "):
            call(bad)
