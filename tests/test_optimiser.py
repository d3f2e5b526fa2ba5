"""The yardstick's pieces: binarisation and the swap polish."""

import json

import numpy as np
import pytest

from conftest import DATA
from sphyr_hpc import grid as grids
from sphyr_hpc import loadcase as loadcases
from sphyr_hpc._petsc import petsc
from sphyr_hpc.optimiser import discrete
from sphyr_hpc.optimiser.discrete import _SwapScreen as SwapScreen
from sphyr_hpc.optimiser.discrete import binarise, polish
from sphyr_hpc.optimiser.simp import design_space
from sphyr_hpc.solvers import ElasticitySystem

RECORDS = [json.loads(line) for line in (DATA / "full_easy_first20.jsonl").read_text().splitlines()][:6]


@pytest.mark.parametrize("start", ["answer", "random"])
@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"full_easy[{r['index']}]")
def test_screened_polish_takes_the_same_swaps_as_the_plain_scan(record, start, monkeypatch):
    truth = record["ground_truth"]
    lc = loadcases.from_grid(truth)
    rho, _ = grids.densities(truth)
    free, pinned = design_space(lc, grids.mask_of(record["input_grid"], "V"), rho)
    if start == "answer":  # a load-carrying design: the low-rank screen is used
        design = np.where(free, rho, pinned)
    else:  # random cells at the same budget, usually a mechanism: scanned in full
        rng = np.random.default_rng(record["index"])
        design = np.where(free, 0.0, pinned)
        cells = np.flatnonzero(free.ravel())
        design.ravel()[rng.choice(cells, size=int(rho[free].sum()), replace=False)] = 1.0
    screens = []
    monkeypatch.setattr(discrete, "_SwapScreen", lambda *a: screens.append(1) or SwapScreen(*a))
    with ElasticitySystem(lc, comm=petsc().COMM_SELF, solver="direct") as system:
        fast = polish(system, design, free, screen=True)
        plain = polish(system, design, free, screen=False)
    np.testing.assert_array_equal(fast[0], plain[0])
    assert fast[1] == plain[1]
    assert fast[0].sum() == design.sum()
    if start == "answer":
        assert screens, "the screen should be used on a load-carrying design"


def test_binarise_keeps_the_budget_and_the_densest_cells():
    d = np.array([[0.9, 0.2, 0.6], [0.55, 0.1, 1.0]])
    free = np.array([[True, True, True], [True, False, True]])
    out = binarise(d, free, target=2.5)
    assert out[free].sum() == 2  # floor of the budget, never more
    assert out[0, 0] == 1.0 and out[1, 2] == 1.0 and out[1, 1] == 0.1  # pinned cell untouched
