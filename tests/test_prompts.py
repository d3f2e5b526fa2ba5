"""The prompts (docs/harness.md): SPhyR's template, byte for byte the prompt the published runs showed.

The reference is the ``prompt`` field of every published result record (examples/results, the two
baselines' 144 records): the prompts command, given those records' input grids as a dataset,
writes exactly those prompts.  On the bundled datasets every prompt quotes its record's input grid
and asks for what the subject's difficulty says; bad records cost only themselves.
"""

import json
from pathlib import Path

import pytest

from conftest import EXAMPLE_RESULTS, ROOT, run_in_process

import sphyr_hpc
from sphyr_hpc.prompts import main as prompts_main
from sphyr_hpc.core import grid as grids
from sphyr_hpc.core.prompt import EASY_FILL, HARD_FILL

DATA = ROOT / "examples" / "data"


def run_prompts(*args, cwd=ROOT):
    """``python -m sphyr_hpc.prompts ARGS`` (its main, in this process)."""
    return run_in_process(prompts_main, args, cwd=cwd)


def read_lines(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def published_records():
    """(subject, record) of every published result record, in file order."""
    for path in sorted(EXAMPLE_RESULTS.glob("*/*.json")):
        for record in json.loads(path.read_text(encoding="utf-8")):
            yield path.stem, record


def test_the_prompts_of_the_published_records_are_byte_for_byte_the_stored_ones(tmp_path):
    # Each published record as a dataset record (its input grid is the one its prompt quotes), one
    # dataset file per model and subject: the command must write back the stored prompt.
    stored = {}
    for subject, record in published_records():
        folder = tmp_path / record["model"]
        folder.mkdir(exist_ok=True)
        index = sum(1 for key in stored if key[:2] == (record["model"], subject))
        line = {"index": index, "input_grid": grids.prompt_input_grid(record["prompt"]),
                "ground_truth": record["ground_truth"]}
        with open(folder / f"{subject}.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
        stored[(record["model"], subject, index)] = record["prompt"]
    equal = 0
    for folder in sorted(tmp_path.iterdir()):
        run = run_prompts(folder, "--out", tmp_path / f"{folder.name}.prompts.jsonl")
        assert run.returncode == 0, run.stderr
        for line in read_lines(tmp_path / f"{folder.name}.prompts.jsonl"):
            assert line["prompt"].encode() == stored[(folder.name, line["subject"], line["index"])].encode()
            equal += 1
    assert equal == len(stored) == 144


@pytest.fixture(scope="module")
def bundled_prompts(tmp_path_factory):
    """{version: prompt lines} of examples/data/v1 and examples/data/v2_20."""
    out = tmp_path_factory.mktemp("prompts")
    lines = {}
    for version in ("v1", "v2_20"):
        run = run_prompts(DATA / version, "--out", out / f"{version}.jsonl")
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith(f"{411 if version == 'v1' else 41} prompts of 16 datasets -> ")
        lines[version] = read_lines(out / f"{version}.jsonl")
    return lines


def test_every_bundled_record_that_a_published_record_shows_has_its_prompt(bundled_prompts):
    # The bundled dataset prefixes and the published records are different samples of SPhyR; any
    # record of one that the other shows (same subject and input grid) must have the same prompt.
    published = {(subject, record["prompt"]) for subject, record in published_records()}
    for lines in bundled_prompts.values():
        for line in lines:
            quoted = grids.grid_to_text(grids.prompt_input_grid(line["prompt"]))
            for subject, prompt in published:
                if subject == line["subject"] and grids.grid_to_text(grids.prompt_input_grid(prompt)) == quoted:
                    assert line["prompt"] == prompt


def test_a_bundled_prompt_quotes_its_record_and_asks_by_the_subjects_difficulty(bundled_prompts):
    for version, lines in bundled_prompts.items():
        for line in lines:
            assert set(line) == {"index", "subject", "dataset", "prompt"}
            assert line["dataset"] == f"{line['subject']}.jsonl"
            record = next(json.loads(text) for text in (DATA / version / line["dataset"]).open()
                          if json.loads(text)["index"] == line["index"])
            assert grids.prompt_input_grid(line["prompt"]) == record["input_grid"]
            hard = line["subject"].endswith("_hard")
            assert line["prompt"].count(HARD_FILL if hard else EASY_FILL) == 2
            assert (EASY_FILL if hard else HARD_FILL) not in line["prompt"]
            assert line["prompt"] == sphyr_hpc.prompt_of(record, line["subject"])
            assert not line["prompt"].endswith("\n")


def test_hard_and_easy_override_the_subjects_name(tmp_path):
    dataset = DATA / "v1" / "full_easy.jsonl"
    run = run_prompts(dataset, "--hard", "--out", tmp_path / "hard.jsonl")
    assert run.returncode == 0, run.stderr
    hard = read_lines(tmp_path / "hard.jsonl")
    assert all(HARD_FILL in line["prompt"] and EASY_FILL not in line["prompt"] for line in hard)
    record = json.loads(dataset.open().readline())
    assert hard[0]["prompt"] == sphyr_hpc.prompt_of(record, "full_hard") == sphyr_hpc.prompt_of(record, hard=True)
    assert run_prompts(dataset, "--hard", "--easy", "--out", tmp_path / "x.jsonl").returncode == 2


def test_each_bad_record_is_one_line_naming_file_and_line_and_the_rest_is_written(tmp_path):
    good = (DATA / "v1" / "full_easy.jsonl").read_text().splitlines()
    record = json.loads(good[1])
    lines = [good[0], "{not json", "[1, 2]", json.dumps({"index": 7}), json.dumps({**record, "index": "3"}),
             json.dumps({**record, "input_grid": [["L", "0"], ["S"]]}), good[0], good[2]]
    dataset = tmp_path / "broken_easy.jsonl"
    dataset.write_text("\n".join(lines) + "\n")
    run = run_prompts(dataset, "--out", tmp_path / "p.jsonl")
    assert run.returncode == 1
    errors = run.stderr.strip().splitlines()
    assert [e.split(": skipped, ")[0] for e in errors] == [f"{dataset}:{n}" for n in (2, 3, 4, 5, 6, 7)]
    assert "not valid JSON" in errors[0] and "not list" in errors[1] and "'input_grid'" in errors[2]
    assert "integer 'index'" in errors[3] and "ragged grid" in errors[4] and "duplicate index 0" in errors[5]
    assert [line["index"] for line in read_lines(tmp_path / "p.jsonl")] == [0, 2]
    assert "2 prompts of 1 dataset -> " in run.stdout and "(6 records skipped, named above)" in run.stdout


def test_usage_errors_come_before_any_work(tmp_path):
    for args, words in ((["nowhere.jsonl"], "no such file or folder: nowhere.jsonl"),
                        ([DATA / "v1", DATA / "v2_20"], "have the same name"),
                        ([tmp_path], "holds no dataset")):
        run = run_prompts(*args, "--out", tmp_path / "p.jsonl")
        assert run.returncode == 2 and words in run.stderr and "Traceback" not in run.stderr
        assert not (tmp_path / "p.jsonl").exists()
