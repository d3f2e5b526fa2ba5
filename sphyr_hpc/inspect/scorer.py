"""The Inspect AI scorer of SPhyR answers: sphyr_hpc's ``topology_score``, as ``score`` computes it.

Each answer is read and scored by the path ``python -m sphyr_hpc.score`` takes for a completions
line (:func:`sphyr_hpc.io.records.parse_grids`, :func:`sphyr_hpc.scoring.tasks.score_sample`),
with the yardstick store ``score`` uses (``store=True``: ``$SPHYR_HPC_STORE``, else the user's
cache folder; a folder; None for none): a second model costs only its completions.  The score's
value is ``topology_score``; its metadata holds ``load_carrying``, ``structural_efficiency``,
``material_efficiency``, ``exact_match`` and ``failure`` (the failure category,
docs/scoring.md), and ``error`` for an answer that could not be scored.  The metrics are the
mean and its standard error over the samples.
"""

from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState

from sphyr_hpc.io.limits import InputLimits
from sphyr_hpc.io.records import Sample, parse_grids

METADATA = ("load_carrying", "structural_efficiency", "material_efficiency", "exact_match", "failure")


class _Scoring:
    """The sphyr_hpc scorer and its store, made at the first answer (PETSc starts then)."""

    def __init__(self, store):
        self.store, self.scorer = store, None

    def score_row(self, sample):
        from sphyr_hpc.io.yardstick_store import open_store
        from sphyr_hpc.scoring.scorer import Scorer, ScoringConfig
        from sphyr_hpc.scoring.tasks import score_sample
        from sphyr_hpc.scoring.yardstick_store import StoredYardsticks

        if self.scorer is None:
            self.scorer = Scorer(ScoringConfig(), store=StoredYardsticks(open_store(self.store)))
        return score_sample(sample, self.scorer)


def sample_of(state, target, model):
    """The :class:`~sphyr_hpc.io.records.Sample` of one answered Inspect sample, read as ``score`` reads it."""
    meta = state.metadata
    sample = Sample(model, meta["subject"], meta["index"], meta["dataset"], tuple(meta["gravity"]))
    where = f"{meta['dataset']}: index {meta['index']}"
    values = {"ground_truth": target.text, "input_grid": meta["input_grid"], "completion": state.output.completion}
    return parse_grids(sample, values, dict.fromkeys(values, where), InputLimits())


def score_of(row):
    """The Inspect :class:`Score` of one results row."""
    if "error" in row:
        return Score(value=0.0, explanation=row["error"],
                     metadata={**dict.fromkeys(METADATA), "error": row["error"],
                               "failure": "unanswered" if row.get("completion_status") == "missing" else None})
    metadata = {key: row.get(key) for key in METADATA}
    answer = "\n".join(row.get("grids", {}).get("completion") or [])
    return Score(value=float(row["topology_score"]), answer=answer or None,
                 explanation=f"failure: {row['failure']}" if row.get("failure") else None,
                 metadata=metadata)


@scorer(metrics=[mean(), stderr()])
def topology_score(store=True):
    """sphyr_hpc's ``topology_score`` of each answer (module docstring)."""
    scoring = _Scoring(store)

    async def score(state: TaskState, target: Target) -> Score:
        return score_of(scoring.score_row(sample_of(state, target, str(state.model))))

    return score



