"""What the ``simulate`` tool tells a model about a grid: the scorer's analysis without the answer.

:func:`simulate_grid` reads a grid as ``score`` reads a completion (:func:`~sphyr_hpc.core.grid.as_grid`)
and analyses it as the scorer does (:meth:`~sphyr_hpc.scoring.scorer.Scorer.prepare` and
:meth:`~sphyr_hpc.scoring.scorer.Scorer.analysis`, the same scorer and store as
:func:`~sphyr_hpc.jobs.answer.scorer_of`), with the sample's input grid standing in for its
ground truth: the load case (the ``L`` and ``S`` cells) and the cells outside the mask are the
same in both, and those are all an analysis reads, so ``compliance``, ``load_carrying`` and
``volume_fraction`` are the numbers ``score`` writes for the same grid.  The checks are the
scorer's (:func:`~sphyr_hpc.scoring.diagnosis.diagnose`) up to ``floating_material``; the
last two need the answer's material (``overspent_material``) or the yardstick
(``weaker_than_yardstick``), which the tool does not tell, so they are ``not told``.
"""

from ..core import grid as grids
from ..io.atomic import json_safe
from ..scoring.diagnosis import CHECKS, FAIL, SOUND, diagnose
from .answer import scorer_of

# The checks that need what the model must not be told: the answer's material, the yardstick.
NOT_TOLD = ("overspent_material", "weaker_than_yardstick")
NOT_TOLD_OUTCOME = "not told"


def simulate_grid(text, input_grid, gravity=(1.0, 0.0), store=True):
    """``{"compliance", "load_carrying", "volume_fraction", "failure", "checks", ...}`` of one grid
    (``text``: the grid as a model would answer it) on the sample whose masked input grid is
    ``input_grid`` (rows or text): JSON-ready (an infinite compliance is None)."""
    sample = grids.as_grid(input_grid)
    try:
        completion = grids.as_grid(text) if isinstance(text, str) else []
    except grids.GridError as err:
        return {"error": f"grid: {err}", "failure": "no_grid"}
    scorer = scorer_of(store)
    case, reason = scorer.prepare(completion, sample, sample, tuple(gravity))
    metrics = {"compliance": None, "load_carrying": False, "volume_fraction": None,
               "unfilled_cells": 0, "unparsable_cells": 0}
    if case is not None:
        out = scorer.analysis(case.loadcase, case.rho, (case.free, case.truth))
        metrics.update(case.counts, compliance=out.compliance, load_carrying=bool(out.load_carrying),
                       volume_fraction=out.volume_fraction)
    # the scorer's checks; the two that need the answer or the yardstick are not run (NOT_TOLD)
    told = diagnose(completion, sample, case, dict(metrics, material_efficiency=1.0, structural_efficiency=1.0))
    checks = {name: NOT_TOLD_OUTCOME if name in NOT_TOLD else outcome for name, outcome in told["checks"].items()}
    failure = next((c.category for c in CHECKS if checks.get(c.category) == FAIL), SOUND)
    result = {"compliance": metrics["compliance"], "load_carrying": metrics["load_carrying"],
              "volume_fraction": metrics["volume_fraction"], "failure": failure, "checks": checks,
              "floating_clusters": told["floating_clusters"], "unfilled_cells": metrics["unfilled_cells"],
              "unparsable_cells": metrics["unparsable_cells"], "shape": list(grids.grid_shape(sample))}
    if reason:
        result["reason"] = reason.replace("ground truth", "the input grid")
    return json_safe(result)
