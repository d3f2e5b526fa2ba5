"""The yardstick's pieces: binarisation and the swap polish."""

import json

import numpy as np
import pytest

from conftest import DATA, two_ranks_marker
from sphyr_hpc.core import grid as grids
from sphyr_hpc.core import loadcase as loadcases
from sphyr_hpc.runtime.petsc import petsc
from sphyr_hpc.optimiser import discrete
from sphyr_hpc.optimiser.discrete import _SwapScreen as SwapScreen
from sphyr_hpc.optimiser.discrete import binarise, polish
from sphyr_hpc.optimiser.simp import design_space
from sphyr_hpc.solvers.elasticity import elasticity_system

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
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system:
        fast = polish(system, design, free, screen=True)
        plain = polish(system, design, free, screen=False)
    # Exact by construction: the screen only skips swaps; every compliance compared and returned is the same full
    # solve of the same 0/1 design on the same system, so the same swaps give the same bits.
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


def _plain_bisection(offset, g, d, b, move, target):
    """The "SIMP run" rules' bisection on the free cells, every middle evaluated."""
    from sphyr_hpc.optimiser import simp

    lower, upper = simp.OC_BOUNDS
    middle = None
    while (upper - lower) / (lower + upper) > simp.OC_RELATIVE_GAP:
        middle = 0.5 * (lower + upper)
        x = np.clip(np.clip(d * np.sqrt(b / middle), d - move, d + move), 0.0, 1.0)
        if offset + g @ x > target:
            lower = middle
        else:
            upper = middle
    return middle


def _oc_instances():
    """Random OC updates plus the degenerate ones: V flat at the target, out of reach, zero sensitivities."""
    rng = np.random.default_rng(7)
    for n in (1, 3, 10, 80, 400):
        for _ in range(40):
            d = rng.choice([rng.random(n), np.round(rng.random(n)), np.full(n, 0.5)])
            b = rng.random(n) ** 4 * 10.0 ** rng.uniform(-6, 3)
            b[rng.random(n) < 0.1] = 0.0
            g = rng.uniform(0.2, 1.6, n)
            offset = float(rng.uniform(0, 30))
            reach = (offset + g @ np.maximum(d - 0.2, 0.0), offset + g @ np.minimum(d + 0.2, 1.0))
            for target in (rng.uniform(*reach), reach[0], reach[1], reach[0] - 1.0, reach[1] + 1.0,
                           offset + g @ d):
                yield offset, g, d, b, float(target)


def test_serial_oc_takes_the_step_of_the_plain_bisection():
    """The one-rank update decides most comparisons analytically; its step must be the rules', bit for bit."""
    import scipy.sparse as sp

    from sphyr_hpc.optimiser import simp

    count = 0
    for offset, g, d, b, target in _oc_instances():
        n = g.size
        update = simp.SerialOC.__new__(simp.SerialOC)  # an identity filter, every cell free
        update.free, update.pinned, update.move, update.offset, update.target = np.arange(n), np.zeros(n), 0.2, \
            offset, target
        update.g, update.g_floor, update.Hs = g, np.maximum(g, 1e-12), np.ones(n)
        update.rows = update.chain_rule = sp.identity(n, format="csr")
        energies = b * update.g_floor  # p = 1: dc = -energies
        new_design, physical, change = update.step(d, d, energies, 1.0)
        b_used = np.maximum(energies, 0.0) / update.g_floor
        middle = _plain_bisection(offset, g, d, b_used, 0.2, target)
        expected = np.clip(np.clip(d * np.sqrt(b_used / middle), d - 0.2, d + 0.2), 0.0, 1.0)
        # Exact by construction: the comparisons not decided analytically evaluate offset + g @ clip(...) as the
        # plain bisection does (the same expression, the same BLAS call in this process), and the step is the
        # same formula at the same middle.
        np.testing.assert_array_equal(new_design, expected, err_msg=f"n={n} target={target}")
        np.testing.assert_array_equal(physical, expected)
        assert change == np.max(np.abs(expected - d))
        count += 1
    assert count == 5 * 40 * 6


def test_serial_oc_evaluates_few_middles_on_a_typical_update():
    from sphyr_hpc.optimiser import simp

    rng = np.random.default_rng(3)
    d, b, g = rng.random(100), rng.random(100), rng.uniform(0.2, 1.6, 100)
    target = 0.5 * (g @ np.maximum(d - 0.2, 0.0) + g @ np.minimum(d + 0.2, 1.0))
    below, above = simp._certain_multipliers(0.0, g, d * np.sqrt(b), np.maximum(d - 0.2, 0.0),
                                             np.minimum(d + 0.2, 1.0), target)
    assert 0.0 < below < above < np.inf
    assert (above - below) / below < 1e-7  # a hair around the crossing, not the whole bracket


def test_the_linear_oc_update_in_one_c_pass_takes_numpys_steps(monkeypatch):
    # The large-grid driver's bisection (simp.LinearOC): each pass one C read of three arrays
    # (oc_volume.c) where numpy makes seven; the same passes, the same multiplier, the same design.
    from mpi4py import MPI

    from sphyr_hpc.optimiser import measure, simp
    from sphyr_hpc.optimiser.update import UpdateContext
    from sphyr_hpc.runtime import events

    class Identity:
        """The identity filter; the chain rule gives the test's filtered sensitivities ``dc``."""

        def apply(self, x):
            return x

        def chain(self, d, free):
            return dc

    rng = np.random.default_rng(11)
    n = 5000
    design = rng.uniform(0.0, 1.0, n)
    dc, dv = -rng.exponential(1.0, n), rng.uniform(0.5, 1.5, n)
    is_free = rng.random(n) < 0.9
    pinned = np.where(is_free, 0.0, rng.integers(0, 2, n).astype(float))
    target = 0.45 * n
    events.start_logging()
    assert simp._oc_kernels() is not None  # a compiler is here: the first run takes the C pass
    outcomes = {}
    for kind in ("c", "numpy"):
        if kind == "numpy":
            monkeypatch.setattr(simp, "_oc_kernels", lambda: None)
        before = events.count(events.BISECTION_PASS)
        update = simp.LinearOC(UpdateContext(MPI.COMM_SELF, dv, is_free, pinned, Identity(), target, 0.2))
        new_design, physical, _ = update.step(design, design, np.ones(n), 1.0)
        outcomes[kind] = new_design, events.count(events.BISECTION_PASS) - before
    (ours, our_passes), (theirs, their_passes) = outcomes["c"], outcomes["numpy"]
    assert 0 < our_passes == their_passes < measure.bisection_steps()
    assert np.abs(ours - theirs).max() <= 1e-15
    assert np.all(np.abs(ours[is_free] - design[is_free]) <= 0.2 + 1e-15)
    assert np.all(ours[~is_free] == pinned[~is_free])


def test_the_update_is_chosen_once_by_its_name():
    """One Update interface: the settings' name picks the class (OC's form by the volume sums and the ranks)."""
    import scipy.sparse as sp
    from mpi4py import MPI

    from sphyr_hpc.optimiser import mma, simp
    from sphyr_hpc.optimiser.update import Update, UpdateContext

    class Identity:
        def on_cells(self, cells):
            identity = sp.identity(len(cells), format="csr")
            return identity, identity, np.ones(len(cells))

    n = 10
    context = UpdateContext(MPI.COMM_SELF, np.ones(n), np.ones(n, dtype=bool), np.zeros(n), Identity(), 5.0, 0.2)
    expected = {("oc", "scorer"): simp.SerialOC, ("oc", "linear"): simp.LinearOC, ("oc88", "scorer"): simp.OC88Update,
                ("mma", "linear"): mma.MMAUpdate}
    for (name, sums), cls in expected.items():
        update = simp.make_update(simp.SimpSettings(update=name, volume_sums=sums), context)
        assert type(update) is cls and isinstance(update, Update) and update.name == name


@pytest.mark.parametrize("settings, message", [
    (dict(update="mma"), 'update mma needs volume_sums="linear"'),
    (dict(filter="sensitivity"), "filter sensitivity is the 88-line code's"),
    (dict(update="nope"), "update nope is not one of oc, oc88, mma"),
    (dict(move_limit=0.0), "move_limit 0.0 must be in (0, 1]"),
    (dict(continuation=(4.0, 0.5, 10)), "continuation (4.0, 0.5, 10) needs p_start <= penal"),
])
def test_a_setting_out_of_range_is_refused_when_the_settings_are_made(settings, message):
    from sphyr_hpc.optimiser import simp

    with pytest.raises(simp.SettingError) as err:
        simp.SimpSettings(**settings)
    assert str(err.value).startswith(message)


def test_the_command_names_the_option_of_a_setting_out_of_range(capsys):
    from sphyr_hpc import optimize
    from sphyr_hpc.optimiser import driver, simp

    with pytest.raises(simp.SettingError, match="move 0"):
        driver.RunSettings(move=0)  # the run's name of the field, not SimpSettings' move_limit
    assert optimize.main(["--preset", "mbb", "--size", "30x10", "--move", "0"]) == 2
    err = capsys.readouterr().err
    assert "--move 0.0 must be in (0, 1]" in err and len(err.strip().splitlines()) == 1


@two_ranks_marker("tests/test_optimiser.py")
def test_a_run_with_no_free_cell_hands_back_this_ranks_slab_when_asked_not_to_gather():
    # run_simp(gather=False) gives every rank its slab of the design (the driver gathers it); with no
    # free cell it gave the whole grid, which the driver then gathered again.
    from sphyr_hpc.optimiser import simp
    from sphyr_hpc.optimiser.filter import DensityFilter

    lc = loadcases.LoadCase(8, 16, ((4, 15),), ((7, 0), (7, 1)))
    free, pinned = design_space(lc, np.zeros((8, 16), dtype=bool), np.ones((8, 16)))
    assert not free.any()
    with elasticity_system(lc, comm=petsc().COMM_WORLD, prefix="no_free_", solver="direct") as system:
        dfilter = DensityFilter(system, 1.5)
        try:
            result = simp.run_simp(system, dfilter, 0.5, free, pinned, gather=False)
            assert result.densities.shape == system.slab_of(pinned).shape
            np.testing.assert_array_equal(system.gather(result.densities), pinned)
        finally:
            dfilter.close()
