"""One model answer scored as ``score`` scores a completions line: what the harnesses' scorers call.

The Inspect AI scorer (:mod:`sphyr_hpc.inspect.scorer`) and lm-evaluation-harness's
``process_results`` (``sphyr_hpc/lm_eval/utils.py``) score each answer alone, as it comes.  Both
read it with :func:`sphyr_hpc.io.records.parse_grids` and score it with
:func:`sphyr_hpc.scoring.tasks.score_sample`, the path of every record of ``python -m
sphyr_hpc.score``, against the yardstick store ``score`` uses, so the row is the results.jsonl row
the same completion gets there, and a yardstick computed by one is read by the other.
"""

from pathlib import Path

from ..core.loadcase import gravity_from_folder
from ..io.limits import InputLimits
from ..io.records import Sample, parse_grids

# The scorers made so far, one per store (True: score's default store; a folder; None: no store).
_SCORERS = {}


def scorer_of(store=True):
    """The :class:`~sphyr_hpc.scoring.scorer.Scorer` of ``store``, made once (PETSc starts then)."""
    from ..io.yardstick_store import open_store
    from ..scoring.scorer import Scorer, ScoringConfig
    from ..scoring.yardstick_store import StoredYardsticks

    key = str(store) if store not in (True, None, False) else store
    if key not in _SCORERS:
        _SCORERS[key] = Scorer(ScoringConfig(), store=StoredYardsticks(open_store(store)))
    return _SCORERS[key]


def answer_row(answer, ground_truth, input_grid, subject, index, model="model", dataset="", gravity=None,
               store=True):
    """The results.jsonl row of one ``answer`` (text) to the record (``ground_truth``, ``input_grid``:
    grids as text or rows) of ``subject``/``index``; ``gravity`` by the dataset's folder name by default."""
    from ..scoring.tasks import score_sample

    if gravity is None:
        gravity = gravity_from_folder(Path(dataset).parent.name) if dataset else (1.0, 0.0)
    sample = Sample(model, subject, index, dataset or subject, tuple(gravity))
    where = f"{dataset or subject}: index {index}"
    values = {"ground_truth": ground_truth, "input_grid": input_grid, "completion": answer}
    parse_grids(sample, values, dict.fromkeys(values, where), InputLimits())
    return score_sample(sample, scorer_of(store))


def completion_text(row):
    """The completion's grid as text, as the row holds it ('' for none)."""
    return "\n".join(row.get("grids", {}).get("completion") or [])

