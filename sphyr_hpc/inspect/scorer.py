"""The Inspect AI scorer of SPhyR answers: sphyr_hpc's ``topology_score``, as ``score`` computes it.

Each answer is read and scored by the path ``python -m sphyr_hpc.score`` takes for a completions
line (:func:`sphyr_hpc.jobs.answer.answer_row`), with the yardstick store ``score`` uses
(``store=True``: ``$SPHYR_HPC_STORE``, else the user's cache folder; a folder; None for none): a
second model costs only its completions.  The score's value is ``topology_score``; its metadata
holds ``load_carrying``, ``structural_efficiency``, ``material_efficiency``, ``exact_match`` and
``failure`` (the failure category, docs/scoring.md), and ``error`` for an answer that could not be
scored.  The metrics are the mean and its standard error over the samples.
"""

from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState

from sphyr_hpc.jobs.answer import answer_row, completion_text

METADATA = ("load_carrying", "structural_efficiency", "material_efficiency", "exact_match", "failure")


def score_of(row):
    """The Inspect :class:`Score` of one results row."""
    if "error" in row:
        return Score(value=0.0, explanation=row["error"],
                     metadata={**dict.fromkeys(METADATA), "error": row["error"],
                               "failure": "unanswered" if row.get("completion_status") == "missing" else None})
    return Score(value=float(row["topology_score"]), answer=completion_text(row) or None,
                 explanation=f"failure: {row['failure']}" if row.get("failure") else None,
                 metadata={key: row.get(key) for key in METADATA})


@scorer(metrics=[mean(), stderr()])
def topology_score(store=True):
    """sphyr_hpc's ``topology_score`` of each answer (module docstring)."""

    async def score(state: TaskState, target: Target) -> Score:
        meta = state.metadata
        return score_of(answer_row(state.output.completion, target.text, meta["input_grid"], meta["subject"],
                                   meta["index"], str(state.model), meta["dataset"], tuple(meta["gravity"]), store))

    return score
