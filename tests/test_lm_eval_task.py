"""The lm-evaluation-harness task folder (sphyr_hpc/lm_eval, docs/harness.md), without lm-eval.

lm-eval reads the YAML files and calls the plain functions of utils.py; both are checked here as
lm-eval uses them: one task per subject, each naming functions that exist; every document's
prompt is the prompts command's; and ``process_results`` of an answer (the ground truth, an empty
grid, prose) is ``score``'s record of the same completion, to 1e-12.
"""

import json
import math

import pytest
import yaml

from conftest import ROOT, run_in_process

from sphyr_hpc.lm_eval import utils
from sphyr_hpc.prompts import main as prompts_main
from sphyr_hpc.score import main as score_main

FOLDER = ROOT / "sphyr_hpc" / "lm_eval"
DATA = ROOT / "examples" / "data" / "v1"
SUBJECTS = sorted(p.stem for p in DATA.glob("*.jsonl"))
PROSE = "The load should travel down to the supports through a solid column of material."


class _Loader(yaml.SafeLoader):
    """YAML with lm-eval's ``!function module.name`` tag, read as the name it gives."""


_Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))


def task_config(path):
    config = yaml.load(path.read_text(), Loader=_Loader)
    if "include" in config:
        config = {**task_config(path.parent / config.pop("include")), **config}
    return config


def test_one_task_per_subject_each_naming_functions_that_exist():
    configs = {p.name: task_config(p) for p in sorted(FOLDER.glob("sphyr_*.yaml"))}
    assert sorted(c["task"] for c in configs.values()) == [f"sphyr_{s}" for s in SUBJECTS]
    for name, config in configs.items():
        subject = config["dataset_kwargs"]["subject"]
        assert config["task"] == f"sphyr_{subject}" and name == f"sphyr_{subject}.yaml"
        assert config["tag"] == ["sphyr", f"sphyr_{subject.rsplit('_', 1)[1]}"]
        for key in ("custom_dataset", "doc_to_text", "doc_to_target", "process_results"):
            kind, function = config[key]
            module, _, attribute = function.partition(".")
            assert kind == "function" and module == "utils" and callable(getattr(utils, attribute))
        assert [m["metric"] for m in config["metric_list"]] == list(utils.METRICS)


def test_every_document_has_the_prompt_the_prompts_command_writes(tmp_path):
    assert run_in_process(prompts_main, [DATA, "--out", tmp_path / "p.jsonl"]).returncode == 0
    prompts = {(line["subject"], line["index"]): line["prompt"]
               for line in map(json.loads, (tmp_path / "p.jsonl").read_text().splitlines())}
    documents = [doc for subject in SUBJECTS for doc in utils.documents(DATA, subject)]
    assert len(documents) == len(prompts) == 411
    for doc in documents:
        assert utils.doc_to_text(doc) == prompts[(doc["subject"], doc["index"])]


def answer_of(doc):
    kind = doc["index"] % 3
    if kind == 0:
        return doc["ground_truth"]
    if kind == 1:
        return "\n".join(" ".join("0" if c == "V" else c for c in row.split()) for row in doc["input_grid"].splitlines())
    return PROSE


@pytest.mark.parametrize("subject", ["full_easy", "3_random_row_hard"])
def test_process_results_is_scores_record_of_the_same_answer(subject, tmp_path):
    documents = utils.documents(DATA, subject, store=str(tmp_path / "store"))
    completions = tmp_path / "answers.jsonl"
    completions.write_text("".join(json.dumps({"index": d["index"], "completion": answer_of(d)}) + "\n"
                                   for d in documents))
    run = run_in_process(score_main, ["--dataset", DATA / f"{subject}.jsonl", "--completions", completions,
                                      "--out", tmp_path / "out", "--quiet", "--no-report", "--store", tmp_path / "store"])
    assert run.returncode == 0, run.stderr
    rows = {row["index"]: row for row in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    carrying = set()
    for doc in documents:
        metrics, row = utils.process_results(doc, [answer_of(doc)]), rows[doc["index"]]
        assert set(metrics) == set(utils.METRICS)
        for name in utils.METRICS:
            assert math.isclose(metrics[name], float(row[name]), rel_tol=0, abs_tol=1e-12), (doc["index"], name)
        carrying.add((doc["index"] % 3, metrics["load_carrying"]))
    assert (0, 1.0) in carrying and (2, 0.0) in carrying and (2, 1.0) not in carrying
