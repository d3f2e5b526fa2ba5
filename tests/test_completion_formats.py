"""What model runners write is scored as it is (docs/harness.md, "Completions").

The same answers, as plain ``{"index", "completion"}`` lines, as the prompts file with a
``completion`` added and as OpenAI batch output lines, give the same results.jsonl rows; lines of
another dataset in the same file are left out; a failed batch request is a record with no
completion (the model's zero), and a line that is none of the forms is one line on stderr naming
file and line, the rest scored.
Each run exits 1: my-model answers 6 of the 29 records, the others count 0 as unanswered.
"""

import json

import pytest

from conftest import ROOT, run_in_process
from sphyr_hpc.prompts import main as prompts_main
from sphyr_hpc.score import main as score_main

DATASET = ROOT / "examples" / "data" / "v1" / "full_easy.jsonl"
PLAIN = ROOT / "examples" / "completions" / "my-model.jsonl"  # records 0-5 of full_easy


def score(tmp_path, name, completions, store, *extra):
    """``python -m sphyr_hpc.score`` of the completions (its main, in this process)."""
    out = tmp_path / name
    run = run_in_process(score_main, ["--dataset", DATASET, "--completions", completions, "--model", "my-model",
                                      "--out", out, "--store", store, "--quiet", "--no-report", *extra])
    rows = {row["index"]: row for row in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    return run, rows


def answers():
    return [json.loads(line) for line in PLAIN.read_text().splitlines()]


def batch_line(custom_id, content, status=200):
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    return {"id": f"batch_req_{custom_id}", "custom_id": custom_id,
            "response": {"status_code": status, "request_id": "req", "body": body}, "error": None}


def as_text(grid):
    return grid if isinstance(grid, str) else "\n".join(" ".join(row) for row in grid)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plain")
    run, rows = score(folder, "out", PLAIN, folder / "store")
    assert run.returncode == 1 and "23 of 29 records have no completion" in run.stderr, run.stderr
    return folder / "store", rows


def _same_rows(rows, reference, indices):
    """Equal rows; of an unanswered record all but the error, which names the file that lacks it."""
    def kept(row):
        return {k: v for k, v in row.items() if not (k == "error" and row.get("completion_status") == "missing")}

    for index in indices:
        assert kept(rows[index]) == kept(reference[index]), index


def test_openai_batch_output_lines_are_read_as_they_are(plain, tmp_path):
    store, reference = plain
    lines = [batch_line(f"full_easy-{a['index']}", as_text(a["completion"])) for a in answers()]
    lines.insert(2, batch_line("1_random_row_easy-0", "1 1 1"))  # another dataset's request: not this one's
    failed = batch_line("full_easy-6", None, status=429)
    failed["response"]["body"] = {"error": {"message": "Rate limit reached", "type": "requests"}}
    lines.append(failed)
    path = tmp_path / "batch_output.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run, rows = score(tmp_path, "out", path, store)
    assert run.returncode == 1 and "23 of 29 records have no completion" in run.stderr, run.stderr
    _same_rows(rows, reference, range(29))  # the failed request is unanswered, as a missing line is
    unanswered = (tmp_path / "out" / "unanswered.txt").read_text()
    assert f"{path}:8: index 6: the batch request answered status 429: Rate limit reached" in unanswered


def test_the_prompts_file_with_a_completion_added_is_read_as_it_is(plain, tmp_path):
    store, reference = plain
    assert run_in_process(prompts_main, [DATASET.parent, "--out", tmp_path / "prompts.jsonl"]).returncode == 0
    given = {a["index"]: a["completion"] for a in answers()}
    lines = []
    for line in map(json.loads, (tmp_path / "prompts.jsonl").read_text().splitlines()):
        if line["dataset"] != "full_easy.jsonl":
            line["completion"] = "0 0 0"  # the other datasets' lines share the indices: left out
        elif line["index"] in given:
            line["completion"] = as_text(given[line["index"]])
        else:
            continue
        lines.append(line)
    path = tmp_path / "answered.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run, rows = score(tmp_path, "out", path, store)
    assert run.returncode == 1 and "23 of 29 records have no completion" in run.stderr, run.stderr
    assert "error" not in run.stderr.replace("23 of 29", "")
    _same_rows(rows, reference, range(29))


def test_a_line_of_no_form_is_one_line_naming_file_and_line_and_the_rest_is_scored(plain, tmp_path):
    store, reference = plain
    lines = [batch_line(f"full_easy-{a['index']}", as_text(a["completion"])) for a in answers()]
    lines[1] = {**lines[1], "custom_id": "request-one"}
    lines[3] = {"custom_id": "full_easy-3", "response": {"status_code": 200, "body": {"choices": []}}, "error": None}
    path = tmp_path / "batch_output.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run, rows = score(tmp_path, "out", path, store)
    assert run.returncode == 1
    assert (f"{path}:2: custom_id \"request-one\" does not end in the record's index: write custom_id as "
            f"SUBJECT-INDEX (e.g. full_easy-3)") in run.stderr
    _same_rows(rows, reference, [0, 2, 4, 5])
    assert rows[1]["completion_status"] == rows[3]["completion_status"] == "missing"
    assert "no choices[0].message.content" in rows[3]["error"]
