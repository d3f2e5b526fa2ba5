"""What the lm-evaluation-harness tasks of SPhyR call: the dataset, the prompt, the answer's scores.

``load``: the dataset file ``<data>/<subject>.jsonl`` as the task's ``test`` split, ``data`` given by
``--metadata '{"data": "FOLDER"}'`` (default: the bundled v1 prefixes).  ``doc_to_text``: SPhyR's
prompt of the document (:func:`sphyr_hpc.core.prompt.prompt_of`, easy or hard by the subject).
``process_results``: the answer scored as ``python -m sphyr_hpc.score`` scores a completions line
(:func:`sphyr_hpc.jobs.answer.answer_row`, through the yardstick store ``score`` uses; ``"store"``
in ``--metadata`` names another folder, ``"none"`` none): ``topology_score``, ``load_carrying``
(0 or 1), ``structural_efficiency`` and ``material_efficiency``, each averaged over the documents.
Plain Python: lm-eval loads this file by its path, and nothing here imports lm-eval.
"""

import json
from pathlib import Path

from sphyr_hpc.core import grid as grids
from sphyr_hpc.jobs.answer import answer_row

BUNDLED = Path(__file__).resolve().parent.parent / "_examples" / "data" / "v1"
METRICS = ("topology_score", "load_carrying", "structural_efficiency", "material_efficiency")


def _store(store):
    """A document's ``store``: '' the default (``score``'s), 'none' none, else a folder."""
    if not store:
        return True
    return None if store.lower() == "none" else store


def documents(data, subject, store=""):
    """The documents of ``<data>/<subject>.jsonl``: each record's grids as text, its prompt, subject,
    dataset and the yardstick ``store`` its answer is scored with.

    A record without an integer index or a rectangular input grid and ground truth is named on
    stderr (``FILE:LINE: skipped, reason``), as ``python -m sphyr_hpc.prompts`` names it.
    """
    from sphyr_hpc.jobs.prompts import prompt_rows

    path = Path(data) / f"{subject}.jsonl"
    prompts = {row["index"]: row["prompt"] for row in prompt_rows(path)[0]}
    docs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            truth = grids.as_grid(record["ground_truth"])
            grids.grid_shape(truth)
        except (ValueError, KeyError, TypeError):
            continue  # prompt_rows named it, or its ground truth is not a grid (then it has no prompt either)
        if record.get("index") in prompts:
            docs.append({"index": record["index"], "subject": subject, "dataset": str(path),
                         "input_grid": grids.grid_to_text(grids.as_grid(record["input_grid"])),
                         "ground_truth": grids.grid_to_text(truth), "prompt": prompts[record["index"]],
                         "store": str(store or "")})
    return docs


def load(subject, data=str(BUNDLED), store="", **_):
    """lm-eval's ``custom_dataset`` (called with the task's ``dataset_kwargs`` and ``--metadata``):
    ``{"test": the documents}`` as a ``datasets.Dataset``."""
    import datasets

    return {"test": datasets.Dataset.from_list(documents(data, subject, store))}


def doc_to_text(doc):
    return doc["prompt"]


def doc_to_target(doc):
    return doc["ground_truth"]


def process_results(doc, results):
    """The metrics of one answer (``results[0]``) to ``doc``: ``score``'s, as numbers to average."""
    row = answer_row(results[0], doc["ground_truth"], doc["input_grid"], doc["subject"], doc["index"],
                     dataset=doc["dataset"], store=_store(doc.get("store")))
    return {name: float(row.get(name) or 0.0) for name in METRICS}


