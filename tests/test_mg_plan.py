"""The multigrid plan (sphyr_hpc.solvers.plan): a pure function of the grid, the ranks, the smoother and
the kernels; tested without PETSc (nothing here imports petsc4py)."""

import sys

import pytest

from sphyr_hpc.solvers import plan as mgplan
from sphyr_hpc.solvers.hierarchy import hierarchy


def test_the_plan_module_needs_no_petsc():
    assert "sphyr_hpc.solvers.plan" in sys.modules
    import sphyr_hpc.solvers.plan as module

    assert "petsc4py" not in module.__dict__ and "PETSc" not in module.__dict__


def test_the_default_plan_of_a_large_grid_on_2_ranks():
    plan = mgplan.make_plan((512, 1024), 2, "chebyshev", True, ((513, 512), (513,)))
    assert plan.dim == 2 and len(plan.levels) == len(plan.hierarchy) == 6
    assert [lv.number for lv in plan.levels] == [5, 4, 3, 2, 1, 0]
    assert [lv.grid for lv in plan.levels] == [(1024, 512), (512, 256), (256, 128), (128, 64), (64, 32), (32, 16)]
    finest, *middle, coarsest = plan.levels
    assert (finest.storage, finest.smoother, finest.cycle) == ("matrix-free", "fused-chebyshev", "v")
    # 2000 DOFs a rank and more: node stencils with the fused smoother, transfers from the grids.
    assert [lv.storage for lv in middle] == ["stencil"] * 4  # the smallest, 4290 DOFs, too
    for level in middle:
        large = level.dofs >= 2 * mgplan.STENCIL_MIN_DOFS
        assert level.storage == ("stencil" if large else "sbaij")
        assert level.smoother == ("fused-chebyshev" if large else "chebyshev")
        assert level.cycle == "w"
    assert [lv.transfer for lv in plan.levels] == ["grid", "grid", "grid", "grid", "aij", None]
    assert (coarsest.storage, coarsest.smoother, coarsest.cycle) == ("aij", "redundant-lu", None)
    assert plan.options["mg_coarse_pc_type"] == "redundant" and plan.options["pc_mg_galerkin"] == "none"
    assert plan.coarse_operators == "grid"


def test_the_plan_follows_the_hierarchy_and_its_sizes():
    levels = hierarchy((100, 300))
    plan = mgplan.make_plan((100, 300))
    assert [lv.dofs for lv in plan.levels] == [lv.n_dofs for lv in levels]
    assert [lv.grid for lv in plan.levels] == [(300, 100), (150, 50), (75, 25), (38, 13)]
    assert plan.levels[-1].smoother == "lu" and plan.options["mg_coarse_pc_type"] == "lu"


@pytest.mark.parametrize("smoother, kernels, ranks, finest, middle, transfers, operators", [
    ("chebyshev", False, 1, "sbaij", {"sbaij"}, {"aij"}, "grid"),
    ("sor", True, 1, "aij-in-place", {"aij"}, {"aij"}, "element"),
    ("sor", True, 2, "aij", {"aij"}, {"aij"}, "grid"),
])
def test_stored_plans(smoother, kernels, ranks, finest, middle, transfers, operators):
    ownership = ((513, 512), (513,)) if ranks == 2 else None
    plan = mgplan.make_plan((512, 1024), ranks, smoother, kernels, ownership)
    assert plan.finest.storage == finest
    assert {lv.storage for lv in plan.levels[1:-1]} == middle
    assert {lv.transfer for lv in plan.levels[:-1]} == transfers
    assert plan.coarse_operators == operators
    assert "fused-chebyshev" not in {lv.smoother for lv in plan.levels}
    expected = "sor" if smoother == "sor" else "chebyshev"
    assert {lv.smoother for lv in plan.levels[:-1]} == {expected}
    assert plan.options.get("mg_levels_pc_type") == ("sor" if smoother == "sor" else None)


def test_a_grid_at_most_the_coarse_size_is_one_factored_level():
    plan = mgplan.make_plan((20, 40), 1, "chebyshev", True)
    assert len(plan.levels) == 1 and plan.options == {}
    assert (plan.finest.storage, plan.finest.smoother, plan.finest.transfer) == ("aij", "lu", None)
    two = mgplan.make_plan((20, 40), 2, "chebyshev", True, ((21, 20), (21,)))
    assert two.finest.smoother == "redundant-lu"  # the same bits on every run: no parallel factorisation


def test_max_levels_caps_the_plan():
    assert len(mgplan.make_plan((128, 256)).levels) == 4
    capped = mgplan.make_plan((128, 256), max_levels=3)
    assert len(capped.levels) == 3 and capped.levels[-1].smoother == "lu"


def test_the_plan_is_frozen_and_the_same_for_the_same_inputs():
    a = mgplan.make_plan((100, 300))
    assert a == mgplan.make_plan((100, 300)) and str(a) == str(mgplan.make_plan((100, 300)))
    with pytest.raises(AttributeError):
        a.levels = ()


def test_the_printed_plan_is_a_table_of_every_level():
    text = str(mgplan.make_plan((512, 1024), 2, "chebyshev", True, ((513, 512), (513,))))
    lines = text.splitlines()
    assert lines[0].startswith("multigrid plan: 6 levels, 2D 1024x512 elements, 2 ranks")
    assert lines[1].split() == ["level", "grid", "dofs", "storage", "transfer", "smoother", "cycle"]
    assert len(lines) == 2 + 6
    assert lines[2].split() == ["5", "1024x512", str(2 * 1025 * 513), "matrix-free", "grid", "fused-chebyshev", "v"]
    assert lines[-1].split() == ["0", "32x16", str(2 * 33 * 17), "aij", "-", "redundant-lu", "-"]


def test_every_way_a_solve_can_go_is_a_distinct_plan():
    ways = mgplan.ways()
    kinds = {(p.finest.storage, tuple(sorted({lv.storage for lv in p.levels[1:]}))) for _, p in ways}
    assert len(kinds) == len(ways) == 5


def test_the_dimension_comes_from_the_grid():
    from sphyr_hpc.core import discretisation as fe

    assert fe.grid_dimension((4, 8)) == 2 and fe.grid_dimension((2, 4, 8)) == 3
    for make in (mgplan.make_plan, hierarchy, lambda shape: fe.element_stiffness(dim=len(shape))):
        with pytest.raises(NotImplementedError, match="3D"):
            make((8, 8, 8))
    with pytest.raises(ValueError, match="expected 2 axes"):
        mgplan.make_plan((8,))
    assert fe.element_stiffness(dim=2).shape == (8, 8)


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="unknown smoother 'jacobi'"):
        mgplan.make_plan((100, 300), smoother="jacobi")
    with pytest.raises(ValueError, match="ownership"):
        mgplan.make_plan((100, 300), ranks=2)


def test_the_plan_printed_in_docs_optimize_md_is_the_plan_made():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "optimize.md").read_text(encoding="utf-8")
    block = page.split("```text\nmultigrid plan: 6 levels", 1)[1].split("```", 1)[0]
    assert "multigrid plan: 6 levels" + block.rstrip("\n") == str(mgplan.ways()[0][1])
