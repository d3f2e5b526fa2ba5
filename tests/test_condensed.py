"""Static condensation onto the free cells' DOFs: the same solutions as the full PETSc system."""

import json

import numpy as np
import pytest

from conftest import DATA
from sphyr_hpc.core import discretisation as fe
from sphyr_hpc.core import grid as grids
from sphyr_hpc.core import loadcase as loadcases
from sphyr_hpc.runtime.petsc import petsc
from sphyr_hpc.optimiser import simp, yardstick
from sphyr_hpc.solvers import condensed
from sphyr_hpc.solvers.elasticity import elasticity_system
from sphyr_hpc.solvers.base import LinearSystem

RECORDS = ([json.loads(line) for line in (DATA / "full_easy_first20.jsonl").read_text().splitlines()][:3]
           + [json.loads(line) for line in (DATA / "full_hard_first3.jsonl").read_text().splitlines()][:2])


def _mask(kind, shape, seed):
    """SPhyR's partial masks: random cells, one whole row, three whole columns."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(shape, dtype=bool)
    if kind == "cells":
        mask.ravel()[rng.choice(mask.size, size=5, replace=False)] = True
    elif kind == "row":
        mask[rng.integers(1, shape[0] - 1)] = True
    else:
        mask[:, rng.choice(shape[1], size=3, replace=False)] = True
    return mask


def _problem(record, kind):
    truth = record["ground_truth"]
    lc = loadcases.from_grid(truth)
    rho, _ = grids.densities(truth)
    free, pinned = simp.design_space(lc, _mask(kind, lc.shape, record["index"]), rho)
    return lc, free, pinned


@pytest.mark.parametrize("kind", ["cells", "row", "columns"])
@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{'hard' if '0.' in str(r['ground_truth']) else 'easy'}"
                                                           f"[{r['index']}]")
def test_condensed_solve_equals_the_full_solve(record, kind):
    lc, free, pinned = _problem(record, kind)
    rng = np.random.default_rng(11)
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as full:
        reduced = condensed.CondensedSystem(full, free)  # any mask works; usable() only weighs the cost
        for penal in (1.0, 2.0, 3.0):
            for _ in range(3):
                design = np.where(free, rng.uniform(0.05, 1.0, lc.shape), pinned)
                moduli = fe.simp_modulus(design, penal).ravel()
                c_reduced = reduced.solve(moduli)
                e_reduced = reduced.unit_energies().copy()
                c_full = full.solve(moduli)
                e_full = full.unit_energies()
                assert c_reduced == pytest.approx(c_full, rel=1e-10)
                cells = free.ravel()
                np.testing.assert_allclose(e_reduced[cells], e_full[cells], rtol=1e-8, atol=1e-12 * e_full.max())
                assert not e_reduced[~cells].any()  # pinned cells' sensitivities never count
        assert reduced.full_solves == 0
        # One condensation per set of pinned moduli (per penalty unless they are 0/1), reused by every solve.
        # (Bytes as keys, as the cache keys them: identical moduli arrays, not a comparison of computed values.)
        assert len(reduced._pinned) == len({fe.simp_modulus(pinned, p)[~free].tobytes() for p in (1.0, 2.0, 3.0)})


def test_condensed_solve_hands_a_severed_design_to_the_full_system():
    """A void row across the grid cuts every load path: the "Finite elements" rules' verdict is the full solver's."""
    record = RECORDS[0]
    truth = record["ground_truth"]
    lc = loadcases.from_grid(truth)
    rho, _ = grids.densities(truth)
    mask = np.zeros(lc.shape, dtype=bool)
    mask[5] = True
    free, pinned = simp.design_space(lc, mask, rho)
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as full:
        reduced = condensed.CondensedSystem(full, free)
        carried = fe.simp_modulus(np.where(free, 1.0, pinned)).ravel()
        severed = fe.simp_modulus(np.where(free, 0.0, pinned)).ravel()
        assert reduced.solve(carried) == pytest.approx(full.solve(carried), rel=1e-10)
        assert reduced.full_solves == 0
        c_severed = reduced.solve(severed)
        assert reduced.full_solves == 1
        assert c_severed == full.solve(severed)  # exact by construction: the same full solve of the same moduli
        assert not np.isfinite(c_severed) or c_severed > 1e3 * full.solve(carried)


@pytest.mark.parametrize("kind", ["cells", "row"])
@pytest.mark.parametrize("record", RECORDS[:3], ids=lambda r: f"easy[{r['index']}]")
def test_yardstick_is_the_same_with_and_without_condensation(record, kind, monkeypatch):
    lc, free, pinned = _problem(record, kind)
    vf = float(pinned.mean()) if kind == "cells" else float(np.clip(grids.densities(record["ground_truth"])[0], 0, 1).mean())
    truth = grids.densities(record["ground_truth"])[0]
    results = {}
    for use in (True, False):
        monkeypatch.setattr(condensed, "usable", lambda *a, use=use, **k: use)
        with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system, \
                yardstick.Workspace(system) as workspace:
            results[use] = yardstick.yardstick(workspace, vf, free, truth, seeds=(truth,))
    assert results[True].compliance == pytest.approx(results[False].compliance, rel=1e-9)
    # Not the same arithmetic (condensed vs full solves), so not compared as floats: the designs here are
    # polished 0/1 binarisations, a choice of cells, and the check is that both paths choose the same cells
    # (``round(6)`` added nothing on 0/1 and would flip at a rounding boundary on continuous values).  The two
    # paths' compliances agree to ~1e-14 relative (measured <= 1.4e-14 under Prescott and Haswell), so only
    # two candidates or swaps within ~1e-14 of each other could be chosen differently.
    for result in results.values():
        assert np.isin(result.densities, (0.0, 1.0)).all()
    np.testing.assert_array_equal(results[True].densities, results[False].densities)


def test_condensation_is_used_only_where_it_is_cheaper():
    lc, row, _ = _problem(RECORDS[0], "row")
    everything, _ = simp.design_space(lc, np.ones(lc.shape, dtype=bool), np.zeros(lc.shape))
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system:
        assert condensed.usable(system, row)  # 44 DOFs at most
        assert not condensed.usable(system, everything)  # SPhyR's full mask: ~200 DOFs, sparse LU wins
        assert not condensed.usable(system, np.zeros(lc.shape, dtype=bool))
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="gamg") as system:
        assert not condensed.usable(system, row)  # needs the in-place one-rank assembly


def test_larger_grids_condense_more_dofs_as_their_sparse_factorisation_costs_more():
    """k^3 against n^1.5: the limit grows with sqrt(n), 100 DOFs at 10x10, ~191 at 20x20."""
    def grid(n):
        rows = [["0"] * n for _ in range(n)]
        rows[0][n // 2] = "L"
        rows[-1] = ["S"] * n
        return rows

    small, large = loadcases.from_grid(grid(10)), loadcases.from_grid(grid(20))
    twenty_cells = np.zeros(large.shape, dtype=bool)
    twenty_cells[2:18:4, 2:20:4] = True  # 20 cells apart: 160 DOFs
    assert condensed.condensed_dofs(large, twenty_cells).size == 160
    with elasticity_system(large, comm=petsc().COMM_SELF, solver="direct") as system:
        assert condensed.usable(system, twenty_cells)
    with elasticity_system(small, comm=petsc().COMM_SELF, solver="direct") as system:
        twelve_cells = np.zeros(small.shape, dtype=bool)
        twelve_cells[1:9:2, 1:9:3] = True  # 12 cells apart: 96 DOFs, under 100
        assert condensed.condensed_dofs(small, twelve_cells).size == 96
        assert condensed.usable(system, twelve_cells)
        thirteen_cells = twelve_cells.copy()
        thirteen_cells[5, 9] = True  # 104 DOFs, over
        assert condensed.condensed_dofs(small, thirteen_cells).size == 104
        assert not condensed.usable(system, thirteen_cells)


def test_condensed_system_never_hands_on_the_full_systems_stale_displacements():
    lc, free, pinned = _problem(RECORDS[0], "row")
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as full:
        reduced = condensed.CondensedSystem(full, free)
        full.solve(fe.simp_modulus(np.ones(lc.shape)).ravel())  # a field that is not the condensed design's
        with pytest.raises(RuntimeError):
            reduced.natural_displacements()  # no solve of its own yet: nothing to hand on
        moduli = fe.simp_modulus(np.where(free, 0.5, pinned)).ravel()
        reduced.solve(moduli)
        condensed_field = reduced.natural_displacements()
        full.solve(moduli)
        np.testing.assert_allclose(condensed_field, full.natural_displacements(), rtol=0, atol=1e-9 * np.abs(condensed_field).max())
        assert reduced.max_displacement() == pytest.approx(full.max_displacement(), rel=1e-9)
        for name in ("u", "ksp", "da", "K"):
            assert not hasattr(reduced, name)  # nothing of the base system's state is forwarded
        assert isinstance(reduced, LinearSystem)
        assert reduced.slab_of(free).shape == (lc.n_elements,)  # what a SIMP run needs still works
        np.testing.assert_array_equal(reduced.gather(reduced.slab_of(pinned)), pinned)  # a round trip: copies


def test_csr_matvec_is_scipys_product_to_the_bit():
    import scipy.sparse as sp

    from sphyr_hpc.solvers import csr

    rng = np.random.default_rng(2)
    A = sp.random(60, 90, density=0.1, format="csr", random_state=3)
    x = rng.standard_normal(90)
    # Exact by construction: matvec calls the compiled kernel A @ x ends in (no BLAS), so the same sums in the
    # same order; with ``out``, a base that is non-zero only on empty rows adds to nothing but 0.
    np.testing.assert_array_equal(csr.matvec(A, x), A @ x)
    base = rng.standard_normal(60) * (np.diff(A.indptr) == 0)  # non-zero only on empty rows
    np.testing.assert_array_equal(csr.matvec(A, x, out=base.copy()), A @ x + base)
    wide = sp.csr_matrix((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape)
    np.testing.assert_array_equal(csr.matvec(wide, x[::-1].copy()), A @ x[::-1])  # the kernel, int64
    np.testing.assert_array_equal(csr.matvec(A, x[::-1]), A @ x[::-1])  # a strided x: the fallback
