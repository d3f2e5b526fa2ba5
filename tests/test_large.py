"""Large grids: problems at any size, the multigrid solver, the distributed SIMP loop, the commands.

Serial tests run under plain ``pytest`` (one rank, ``PETSc.COMM_SELF`` or a
1-rank ``COMM_WORLD``).  Tests marked ``mpi`` need 2 ranks
(``mpirun -n 2 python -m pytest -m mpi tests/test_large.py``): each computes
on every rank, gathers what every rank got (an exception on one rank is
reported on all), and only then asserts, so every rank reaches every
assertion; a barrier ends each test.
"""

import contextlib
import json
import os

import numpy as np
import pytest
from mpi4py import MPI

from conftest import collective, two_ranks_marker
from sphyr_hpc.core import discretisation as fe
from sphyr_hpc import generate, optimize, scaling
from sphyr_hpc.jobs import scaling as scaling_study
from sphyr_hpc.optimiser import problems
from sphyr_hpc.core import loadcase as lcs
from sphyr_hpc.runtime.petsc import petsc
from sphyr_hpc.optimiser import driver, simp
from sphyr_hpc.optimiser.filter import DensityFilter, filter_offsets
from sphyr_hpc.optimiser.problems import ProblemError
from sphyr_hpc.solvers import assembly, elasticity, hierarchy, multigrid, sizing
from sphyr_hpc.solvers import plan as mgplan
from sphyr_hpc.solvers.base import SolverError
from sphyr_hpc.solvers.elasticity import elasticity_system
from sphyr_hpc.solvers.layout import PartitionError

WORLD = MPI.COMM_WORLD
two_ranks = two_ranks_marker("tests/test_large.py")  # marked mpi (registered in conftest.py), skipped on 1 rank
ONE_RANK = pytest.mark.skipif(WORLD.size > 1, reason="serial test")
DATASET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "v1_sample.jsonl")


def _options(prefix, **values):
    """Set per-prefix PETSc options; returns a function that removes them."""
    opts = petsc().Options(prefix)
    for key, value in values.items():
        opts.setValue(key, value)

    def clear():
        for key in values:
            opts.delValue(key)
    return clear


@contextlib.contextmanager
def _coarse_max_dofs(n):
    """The multigrid systems made inside coarsen to at most ``n`` DOFs (deeper hierarchies on small grids)."""
    saved = hierarchy.COARSE_MAX_DOFS
    hierarchy.COARSE_MAX_DOFS = n
    try:
        yield
    finally:
        hierarchy.COARSE_MAX_DOFS = saved


def _stored_interpolations(mg):
    """PCMG's P of a multigrid system as AIJ matrices, coarsest pair first (the caller destroys them)."""
    levels = mg.method.levels
    return [multigrid.stored_interpolation(mg, fine, coarse) for fine, coarse in zip(levels[:-1], levels[1:])][::-1]


def _simp_design(nelx=64, nely=32, iterations=40):
    """A real SIMP design of the MBB beam (0/1 with voids; modulus contrast 1e-9..1)."""
    problem = problems.preset("mbb", nelx, nely, 0.4)
    lc = problem.loadcase()
    free, pinned = simp.design_space(lc, *problem.design())
    with elasticity_system(lc, comm=petsc().COMM_SELF, prefix="large_design_", solver="direct") as system:
        dfilter = DensityFilter(system, 1.5)
        try:
            result = simp.run_simp(system, dfilter, 0.4, free, pinned,
                                   simp.SimpSettings(max_iterations=iterations, tolerance=0.0))
        finally:
            dfilter.close()
    return lc, result.densities


# -- 1. problems ------------------------------------------------------------------------------------
@ONE_RANK
def test_loadcase_without_extra_fixed_dofs_is_unchanged():
    a = lcs.LoadCase(4, 5, ((0, 1),), ((3, 0),))
    b = lcs.LoadCase(4, 5, ((0, 1),), ((3, 0),), extra_fixed_dofs=())
    assert a == b and hash(a) == hash(b)
    nodes = a._cell_nodes(a.support_cells).ravel()
    np.testing.assert_array_equal(a.fixed_dofs(), np.unique(np.concatenate([2 * nodes, 2 * nodes + 1])))
    c = lcs.LoadCase(4, 5, ((0, 1),), ((3, 0),), extra_fixed_dofs=(1, 2))
    assert c != a and set(c.fixed_dofs()) == set(a.fixed_dofs()) | {1, 2}


@ONE_RANK
def test_mbb_preset_is_the_classic_half_beam():
    nelx, nely = 12, 4
    lc = problems.preset("mbb", nelx, nely).loadcase()
    left_x = {2 * (r * (nelx + 1)) for r in range(nely + 1)}  # symmetry rollers: x fixed
    bottom_right_y = {2 * (nely * (nelx + 1) + nelx) + 1}      # roller: y fixed
    assert set(lc.fixed_dofs()) == left_x | bottom_right_y
    assert lc.support_cells == () and lc.load_cells == ((0, 0),)
    f = lc.force_vector()
    assert f.sum() == pytest.approx(1.0) and np.all(f[0::2] == 0)  # unit load, straight down
    assert set(np.flatnonzero(f)) == {1, 3, 2 * (nelx + 1) + 1, 2 * (nelx + 2) + 1}  # top-left cell's nodes


@ONE_RANK
def test_cantilever_and_bridge_presets_are_symmetric_with_a_unit_load():
    lc = problems.preset("cantilever", 10, 6).loadcase()
    fixed = set(lc.fixed_dofs())
    assert fixed == {2 * r * 11 + d for r in range(7) for d in (0, 1)}  # clamped left edge
    f = lc.force_vector().reshape(7, 11, 2)
    np.testing.assert_allclose(f[:, :, 1], f[::-1, :, 1])  # mirror-symmetric about mid-height
    assert f[:, -2:, 1].sum() == pytest.approx(1.0)  # on the right-edge cells' nodes only
    lc = problems.preset("bridge", 10, 6).loadcase()
    assert len(lc.load_cells) == 10 and lc.force_vector().sum() == pytest.approx(1.0)
    corners = {2 * (6 * 11), 2 * (6 * 11) + 1, 2 * (6 * 11 + 10), 2 * (6 * 11 + 10) + 1}
    assert set(lc.fixed_dofs()) == corners


@ONE_RANK
def test_upscaled_sphyr_sample_spreads_loads_and_supports_and_keeps_densities():
    small = problems.dataset_problem(DATASET, 0)
    big = problems.dataset_problem(DATASET, 0, upscale=3)
    lc_small, lc_big = small.loadcase(), big.loadcase()
    assert (big.nelx, big.nely) == (3 * small.nelx, 3 * small.nely)
    assert len(lc_big.load_cells) == 9 * len(lc_small.load_cells)
    assert len(lc_big.support_cells) == 9 * len(lc_small.support_cells)
    assert lc_big.force_vector().sum() == pytest.approx(1.0)
    rho_small, rho_big = small.ground_truth(), big.ground_truth()
    np.testing.assert_array_equal(rho_big, np.kron(rho_small, np.ones((3, 3))))  # copied cells: exact
    assert big.target_volume_fraction() == pytest.approx(small.target_volume_fraction())
    # Every node of an upscaled S block is clamped.
    r, c = lc_big.support_cells[0]
    node = r * (big.nelx + 1) + c
    assert {2 * node, 2 * node + 1} <= set(lc_big.fixed_dofs())
    # The text grid of the upscaled sample is the same problem.
    free, pinned = big.design()
    assert not np.any(free & lc_big.structural_mask()) and np.all(pinned[lc_big.structural_mask()] == 1)


@ONE_RANK
def test_grid_files_round_trip(tmp_path):
    mbb = problems.preset("mbb", 30, 10, 0.45)
    assert problems.read_problem(problems.write_problem(mbb, tmp_path / "mbb.json")) == mbb
    sample = problems.dataset_problem(DATASET, 2, upscale=2)
    assert problems.read_problem(problems.write_problem(sample, tmp_path / "s.json")) == sample
    text = problems.read_problem(problems.write_problem(sample, tmp_path / "s.txt"))
    assert text.loadcase() == sample.loadcase()
    np.testing.assert_array_equal(text.ground_truth(), sample.ground_truth())
    # Upscaling the small text grid on reading gives the same problem again.
    small = problems.write_problem(problems.dataset_problem(DATASET, 2), tmp_path / "small.txt")
    assert problems.read_problem(small, upscale=2).loadcase() == sample.loadcase()
    # A preset upscaled keeps its supports at the larger size and spreads its load over k x k cells.
    up, direct = mbb.upscaled(3).loadcase(), problems.preset("mbb", 90, 30, 0.45).loadcase()
    np.testing.assert_array_equal(up.fixed_dofs(), direct.fixed_dofs())
    assert up.load_cells == tuple((r, c) for r in range(3) for c in range(3))


@ONE_RANK
def test_generate_writes_grid_files_the_other_commands_read(tmp_path, capsys):
    out = tmp_path / "mbb.json"
    assert generate.main(["--preset", "mbb", "--size", "60x20", "--volfrac", "0.5", "--out", str(out)]) == 0
    assert problems.read_problem(out) == problems.preset("mbb", 60, 20, 0.5)
    out = tmp_path / "sample.txt"
    assert generate.main(["--dataset", DATASET, "--index", "1", "--upscale", "4", "--out", str(out)]) == 0
    assert problems.read_problem(out).loadcase() == problems.dataset_problem(DATASET, 1, upscale=4).loadcase()
    assert generate.main(["--preset", "mbb", "--size", "60x20", "--out", str(tmp_path / "x.txt")]) == 2
    assert "no SPhyR text form" in capsys.readouterr().err


@ONE_RANK
@pytest.mark.parametrize("argv, message", [
    (["--preset", "mbb", "--size", "0x5"], "at least 1"),
    (["--preset", "mbb", "--size", "big"], "is not NELXxNELY"),
    (["--preset", "wing", "--size", "20x10"], "unknown preset 'wing'"),
    (["--preset", "mbb"], "needs --size"),
    (["--preset", "mbb", "--size", "20x10", "--volfrac", "1.5"], "not in (0, 1]"),
    (["--preset", "mbb", "--size", "20x10", "--upscale", "0"], "positive integer"),
    (["--preset", "mbb", "--size", "20x10", "--continuation", "3,0"], "--continuation"),
    (["--preset", "mbb", "--size", "20x10", "--radius", "0"], "--radius"),
    (["no/such/file.json"], "no such file"),
    ([], "give exactly one of"),
])
def test_bad_options_sizes_and_presets_give_clear_errors(argv, message, capsys):
    assert optimize.main(argv) == 2
    err = capsys.readouterr().err  # usage errors: one line on stderr
    assert message in err and len(err.strip().splitlines()) == 1


@ONE_RANK
def test_bad_problem_files_give_clear_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "other"}')
    with pytest.raises(ProblemError, match="not a sphyr_hpc.problem file"):
        problems.read_problem(bad)
    bad.write_text(json.dumps({"format": "sphyr_hpc.problem", "version": 1, "kind": "preset", "nelx": 4,
                               "nely": 2, "load_cells": [[0, 1, 0, 9]], "fixed_nodes": [[0, 3, 0, 1, "x"]]}))
    with pytest.raises(ProblemError, match="outside"):
        problems.read_problem(bad)
    no_support = tmp_path / "g.txt"
    no_support.write_text("L 0\n1 1\n")
    with pytest.raises(ProblemError, match="no support"):
        problems.read_problem(no_support)


# -- 2. the stencil assembly and the multigrid hierarchy ---------------------------------------------
def _element_block_assembly_differs(preset, nelx, nely, block, monkeypatch):
    """Largest |K_blocks - K_elements| / |K_elements| (infinity norms) over a design with voids, a solid one
    and the first again (each assembly overwrites the last), and whether both store the same entries:
    GAMG's K (2x2 element blocks, ``block`` elements at a time) against the direct solver's."""
    monkeypatch.setattr(assembly, "BLOCK_ELEMENTS", block)
    PETSc = petsc()
    lc = problems.preset(preset, nelx, nely).loadcase()
    rho = np.random.default_rng(nelx).uniform(0.0, 1.0, lc.shape)
    rho[rho < 0.4] = 0.0
    moduli = fe.simp_modulus(rho)
    with elasticity_system(lc, prefix="large_el_", solver="direct") as a, \
            elasticity_system(lc, prefix="large_blocks_", solver="gamg") as b:
        worst = 0.0
        for m in (moduli, np.ones(lc.shape), moduli):
            a.assemble(a.slab_of(m))
            b.assemble(b.slab_of(m))
            diff = b.K.copy()
            diff.axpy(-1.0, a.K, structure=PETSc.Mat.Structure.DIFFERENT_NONZERO_PATTERN)
            worst = max(worst, diff.norm(PETSc.NormType.INFINITY) / a.K.norm(PETSc.NormType.INFINITY))
        return worst, a.K.getInfo(a.K.InfoType.GLOBAL_SUM)["nz_used"] == b.K.getInfo(b.K.InfoType.GLOBAL_SUM)["nz_used"]


@ONE_RANK
@pytest.mark.parametrize("preset, nelx, nely, block", [("mbb", 23, 9, 5), ("cantilever", 17, 12, 8192),
                                                       ("bridge", 40, 21, 41)])
def test_the_element_block_assembly_equals_the_element_assembly(preset, nelx, nely, block, monkeypatch):
    worst, same_entries = _element_block_assembly_differs(preset, nelx, nely, block, monkeypatch)
    assert worst <= 1e-14 and same_entries


@two_ranks
def test_the_element_block_assembly_equals_the_element_assembly_on_2_ranks(monkeypatch):
    # Blocks coupling rank 0's edge nodes with rank 1's go through PETSc's stash.
    for preset, nelx, nely in (("mbb", 23, 9), ("bridge", 40, 21)):
        for worst, same_entries in collective(lambda: _element_block_assembly_differs(preset, nelx, nely, 7,
                                                                                      monkeypatch)):
            assert worst <= 1e-14 and same_entries
    WORLD.Barrier()


@ONE_RANK
@pytest.mark.parametrize("size, levels, coarse", [((300, 100), 4, (38, 13)), ((1000, 500), 6, (32, 16)),
                                                  ((1024, 512), 6, (32, 16)), ((2048, 1024), 7, (32, 16))])
def test_hierarchy_coarsens_any_size_to_a_small_coarse_grid(size, levels, coarse):
    levels_of = hierarchy.hierarchy(size[::-1])
    assert len(levels_of) == levels
    assert (levels_of[-1].nelx, levels_of[-1].nely) == coarse
    assert levels_of[-1].n_dofs <= hierarchy.COARSE_MAX_DOFS
    for fine, coarser in zip(levels_of[:-1], levels_of[1:]):
        assert set(coarser.x_pos) <= set(fine.x_pos) and set(coarser.y_pos) <= set(fine.y_pos)  # nested
    # On 2 processes every level keeps a part for each.
    two = hierarchy.hierarchy(size[::-1], ([size[0] // 2, size[0] + 1 - size[0] // 2], None))
    assert len(two) == levels and all(min(np.diff(lv.x_starts)) >= 1 for lv in two)


@ONE_RANK
@pytest.mark.parametrize("size", [(13, 7), (37, 21), (40, 20)])
def test_interpolation_reproduces_linear_fields(size):
    fine, coarse = hierarchy.hierarchy(size[::-1], coarse_max_dofs=10)[:2]
    indptr, cols, vals = hierarchy.interpolation_csr(fine, coarse, 0)
    import scipy.sparse as sp

    P = sp.csr_matrix((vals, cols, indptr), shape=(fine.n_dofs, coarse.n_dofs))
    for a, b, c in [(1.0, 0.0, 0.0), (0.3, 2.0, -1.5)]:
        def field(level):
            x, y = np.meshgrid(np.asarray(level.x_pos, float), np.asarray(level.y_pos, float))
            u = np.zeros((x.size, 2))
            u[:, 0] = a + b * x.ravel() - c * y.ravel()   # translations + rotation (linear)
            u[:, 1] = c * x.ravel() + b * y.ravel()
            return u.ravel()
        np.testing.assert_allclose(P @ field(coarse), field(fine), atol=1e-12)
    np.testing.assert_allclose(np.asarray(P.sum(axis=1)).ravel(), 1.0)


@ONE_RANK
def test_pcmg_builds_the_hierarchy_on_a_non_power_of_two_grid():
    lc = problems.preset("mbb", 300, 100).loadcase()
    with elasticity_system(lc, comm=petsc().COMM_SELF, prefix="large_h_", solver="mg") as system:
        c = system.solve(system.slab_of(np.ones(lc.n_elements)))
        pc = system.ksp.getPC()
        assert np.isfinite(c) and pc.getType() == "mg" and pc.getMGLevels() == 4
        rows, complexity = system.hierarchy
        assert [r["rows"] for r in rows] == [2 * 301 * 101, 2 * 151 * 51, 2 * 76 * 26, 2 * 39 * 14]
        assert pc.getMGCoarseSolve().getOperators()[0].getSize()[0] == 2 * 39 * 14
        assert complexity < 1.4  # nested levels keep the 3x3 stencil
        lines = hierarchy.format_hierarchy(rows, complexity, system.method.levels)
        assert lines[0].startswith("multigrid: 4 levels, operator complexity")
        assert "300x100 elements" in lines[1]


# -- 3. multigrid against the direct solver ----------------------------------------------------------
@ONE_RANK
def test_multigrid_solution_equals_the_direct_one_on_a_simp_design_with_voids():
    lc, rho = _simp_design()
    moduli = fe.simp_modulus(rho)
    # voids: contrast 1e-9 .. 1; E(1) = 1e-9 + (1 - 1e-9) rounds to 1.0 exactly (elementwise, no BLAS)
    assert moduli.min() <= 1e-8 and moduli.max() == 1.0
    PETSc = petsc()
    clear = _options("large_mg_", ksp_rtol=1e-12)
    try:
        with elasticity_system(lc, comm=PETSc.COMM_SELF, prefix="large_direct_", solver="direct") as direct:
            c_direct = direct.solve(direct.slab_of(moduli))
            u_direct = direct.natural_displacements()
        with elasticity_system(lc, comm=PETSc.COMM_SELF, prefix="large_mg_", solver="mg", coarse_max_dofs=300) as mg:
            c_mg = mg.solve(mg.slab_of(moduli))
            u_mg = mg.natural_displacements()
            assert mg.ksp.getPC().getMGLevels() >= 3
    finally:
        clear()
    assert c_mg == pytest.approx(c_direct, rel=1e-10)
    assert np.linalg.norm(u_mg - u_direct) <= 1e-8 * np.linalg.norm(u_direct)


@ONE_RANK
@pytest.mark.parametrize("nely, nelx", [(32, 64), (13, 27), (33, 33)])
def test_coarse_operators_from_the_element_moduli_equal_the_galerkin_products(nely, nelx):
    # One rank, K assembled in place: the coarse operators are assembled from the moduli
    # (solvers/galerkin.py) instead of PCMG's P^T A P; they must be those products, on even and odd
    # (nested, last interval half as wide) grids, with supports (identity rows) and voids.
    lc = problems.preset("mbb", nelx, nely, 0.4).loadcase()
    rng = np.random.default_rng(nelx)
    moduli = np.where(rng.random(lc.shape) < 0.3, 1e-3, rng.random(lc.shape) + 0.1)
    PETSc = petsc()
    clear = _options("large_gal_")
    try:
        with elasticity_system(lc, comm=PETSc.COMM_SELF, prefix="large_gal_", solver="mg", smoother="sor",
                               coarse_max_dofs=100) as mg:
            assert mg.in_place and mg.method.coarse is not None
            mg.solve(mg.slab_of(np.ones(lc.shape)))  # the operators compared are those of the second design
            mg.solve(mg.slab_of(moduli))
            pc = mg.ksp.getPC()
            assert pc.getMGLevels() >= 3
            A = mg.K
            for level in range(pc.getMGLevels() - 1, 0, -1):
                galerkin = A.ptap(pc.getMGInterpolation(level))
                ours = (pc.getMGCoarseSolve() if level == 1 else pc.getMGSmoother(level - 1)).getOperators()[0]
                difference = galerkin.copy()
                difference.axpy(-1.0, ours, structure=PETSc.Mat.Structure.DIFFERENT_NONZERO_PATTERN)
                assert difference.norm(PETSc.NormType.FROBENIUS) <= 1e-13 * galerkin.norm(PETSc.NormType.FROBENIUS)
                A = galerkin
    finally:
        clear()


@ONE_RANK
def test_simp_multigrid_solves_a_sequence_of_designs_as_the_direct_solver_does():
    # The SIMP runs' system (sizing.simp_system: in place, SOR smoothing, coarse operators from the
    # moduli) re-assembled for every design: each solve must see the new K on every level.
    lc, rho = _simp_design(48, 24, 25)
    PETSc = petsc()
    clear = _options(sizing.SIMP_PREFIX)
    try:
        with elasticity_system(lc, comm=PETSc.COMM_SELF, prefix="large_seq_direct_", solver="direct") as direct, \
                elasticity_system(lc, comm=PETSc.COMM_SELF, prefix=sizing.SIMP_PREFIX,
                                 **sizing.simp_system_arguments()) as mg:
            assert mg.ksp.getPC().getType() == "mg"
            for penal, floor in ((1.0, 0.0), (3.0, 0.0), (3.0, 0.3), (2.0, 0.05)):
                moduli = fe.simp_modulus(np.maximum(rho, floor), penal)
                c_direct = direct.solve(direct.slab_of(moduli))
                assert mg.solve(mg.slab_of(moduli)) == pytest.approx(c_direct, rel=1e-7)
            assert mg.ksp.getPC().getMGSmoother(1).getPC().getType() == "sor"
    finally:
        clear()


@ONE_RANK
def test_gamg_with_rigid_body_modes_solves_the_same_problem():
    lc, rho = _simp_design(48, 24, 25)
    moduli = fe.simp_modulus(np.maximum(rho, 1e-2))
    PETSc = petsc()
    with elasticity_system(lc, comm=PETSc.COMM_SELF, prefix="large_direct2_", solver="direct") as direct:
        c_direct = direct.solve(direct.slab_of(moduli))
    with elasticity_system(lc, comm=PETSc.COMM_SELF, prefix="large_gamg_", solver="gamg") as gamg:
        c_gamg = gamg.solve(gamg.slab_of(moduli))
        assert gamg.ksp.getPC().getType() == "gamg" and gamg.K.getNearNullSpace() is not None
        assert gamg.K.getBlockSize() == 2
    assert c_gamg == pytest.approx(c_direct, rel=1e-6)


@ONE_RANK
def test_a_stalled_solve_raises_instead_of_returning_a_number():
    lc, rho = _simp_design(48, 24, 25)
    clear = _options("large_stall_", ksp_max_it=2)
    try:
        with elasticity_system(lc, comm=petsc().COMM_SELF, prefix="large_stall_", solver="mg", coarse_max_dofs=300) as mg:
            with pytest.raises(SolverError, match="did not converge: DIVERGED"):
                mg.solve(mg.slab_of(fe.simp_modulus(rho)))
    finally:
        clear()


@ONE_RANK
def test_warm_start_reuses_the_previous_displacement():
    lc, rho = _simp_design(48, 24, 25)
    moduli = fe.simp_modulus(rho)
    clear = _options("large_warm_")
    try:
        with elasticity_system(lc, comm=petsc().COMM_SELF, prefix="large_warm_", solver="mg", coarse_max_dofs=300) as mg:
            ksp = mg.ksp
            mg.solve(mg.slab_of(moduli))
            cold = mg.last_iterations
            mg.solve(mg.slab_of(moduli * 1.001))
            assert mg.ksp is ksp  # one KSP for the life of the system
            assert ksp.getInitialGuessNonzero() and 1 <= mg.last_iterations < cold
    finally:
        clear()


# -- 4. the SIMP loop -------------------------------------------------------------------------------
@ONE_RANK
def test_linear_volume_sums_follow_the_scorer_bisection():
    problem = problems.preset("mbb", 40, 20, 0.5)
    lc = problem.loadcase()
    free, pinned = simp.design_space(lc, *problem.design())
    histories = {}
    for sums in simp.VOLUME_SUMS:
        with elasticity_system(lc, comm=petsc().COMM_SELF, prefix=f"large_{sums}_") as system:
            dfilter = DensityFilter(system, 1.5)
            try:
                histories[sums] = simp.run_simp(system, dfilter, 0.5, free, pinned,
                                                simp.SimpSettings(max_iterations=30, volume_sums=sums))
            finally:
                dfilter.close()
    a, b = histories["scorer"], histories["linear"]
    for (_, ca, cha), (_, cb, chb) in zip(a.history, b.history):
        assert ca == pytest.approx(cb, rel=1e-9) and cha == pytest.approx(chb, rel=1e-6, abs=1e-9)
    np.testing.assert_allclose(a.densities, b.densities, atol=1e-8)


@ONE_RANK
def test_continuation_raises_the_penalty_in_steps_and_converges_only_at_the_end():
    schedule = simp.penalty_schedule(3.0, (1.0, 0.5, 10))
    assert [schedule(i) for i in (1, 10, 11, 21, 31, 41, 100)] == [1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.0]
    with pytest.raises(ValueError):
        simp.penalty_schedule(3.0, (4.0, 0.5, 10))
    problem = problems.preset("mbb", 30, 10, 0.5)
    lc = problem.loadcase()
    free, pinned = simp.design_space(lc, *problem.design())
    with elasticity_system(lc, comm=petsc().COMM_SELF, prefix="large_cont_") as system:
        dfilter = DensityFilter(system, 1.5)
        try:
            result = simp.run_simp(system, dfilter, 0.5, free, pinned, simp.SimpSettings(
                max_iterations=60, tolerance=0.5, continuation=(1.0, 1.0, 5), volume_sums="linear"))
        finally:
            dfilter.close()
    assert result.converged and result.iterations >= 11  # p reaches 3 at iteration 11


# -- 5. the optimize and scaling commands -----------------------------------------------------------
@ONE_RANK
def test_optimize_runs_the_mbb_preset_with_multigrid_and_writes_its_outputs(tmp_path, capsys):
    png, npy, out = tmp_path / "mbb.png", tmp_path / "mbb.npy", tmp_path / "run.json"
    status = optimize.main(["--preset", "mbb", "--size", "120x40", "--iterations", "12", "--solver", "mg",
                            "--png", str(png), "--save-density", str(npy), "--json", str(out),
                            "-sphyr_mg_levels_ksp_max_it", "3"])
    text = capsys.readouterr().out
    assert status == 0
    lines = [line for line in text.splitlines() if line.startswith("it ")]
    assert len(lines) == 12 and all("ksp" in line and " s" in line for line in lines)
    assert "multigrid: 2 levels" in text
    data = json.loads(out.read_text())
    assert data["summary"]["ksp_iterations_mean"] > 0 and len(data["history"]) == 12
    assert set(data["history"][0]) >= {"compliance", "volume", "change", "ksp_iterations", "seconds"}
    density = np.load(npy)
    assert density.shape == (40, 120) and density.mean() == pytest.approx(0.5, abs=1e-6)
    import matplotlib.image

    image = matplotlib.image.imread(png)
    assert image.shape[1] >= 120 and image.shape[0] < image.shape[1]
    # The PETSc option given on the command line is gone afterwards (no leaking).
    assert not petsc().Options().hasName("sphyr_mg_levels_ksp_max_it")


@ONE_RANK
def test_optimize_callback_and_fields_hook(tmp_path, capsys):
    problem = problems.preset("mbb", 30, 10, 0.5)
    seen = []
    out = driver.optimise(problem, driver.RunSettings(iterations=4, tolerance=0.0), comm=petsc().COMM_SELF,
                          log=lambda line: None,
                            callback=lambda it, system, slab, c, ch: seen.append((it, slab.size, c, ch)))
    assert [s[0] for s in seen] == [1, 2, 3, 4] and all(s[1] == 300 for s in seen)
    assert out["density"].shape == (10, 30)
    status = optimize.main(["--preset", "mbb", "--size", "30x10", "--iterations", "3", "--quiet",
                            "--fields", str(tmp_path / "fields"), "--fields-every", "1", "--fields-format", "vtu"])
    assert status == 0
    steps = sorted(p.name for p in (tmp_path / "fields").glob("*.vtu"))
    assert len(steps) == 3 and len(list((tmp_path / "fields").glob("*.pvd"))) == 1
    import meshio

    last = meshio.read(tmp_path / "fields" / steps[-1])
    assert last.cell_data["density"][0].size == 300 and last.point_data["displacement"].shape == (31 * 11, 3)


@ONE_RANK
def test_optimize_scores_an_upscaled_sample_against_its_ground_truth(capsys):
    status = optimize.main(["--dataset", DATASET, "--index", "0", "--upscale", "2", "--iterations", "15",
                            "--radius", "2.4"])
    text = capsys.readouterr().out
    assert status == 0
    score = [line for line in text.splitlines() if line.startswith("score:")]
    assert score and "ground_truth_compliance" in score[0] and "material_efficiency" in score[0]


@ONE_RANK
def test_scaling_writes_the_table_the_json_and_the_plots(tmp_path):
    out = tmp_path / "scaling.json"
    status = scaling.main(["--sizes", "24x12,48x24", "--ranks", "1", "--iterations", "3",
                           "--design-iterations", "5", "--json", str(out), "--quiet", "--no-bandwidth"])
    assert status == 0
    entries = json.loads(out.read_text())
    assert [(e["nelx"], e["ranks"]) for e in entries] == [(24, 1), (48, 1)]
    for entry in entries:
        assert set(scaling_study.KEYS) <= set(entry)
        assert entry["dofs"] == 2 * (entry["nelx"] + 1) * (entry["nely"] + 1)
    assert "| 48x24 | 1 |" in (tmp_path / "scaling.md").read_text()
    for name in ("time", "ksp", "speedup"):
        assert (tmp_path / f"scaling_{name}.png").stat().st_size > 0


@ONE_RANK
@pytest.mark.parametrize("argv, message", [
    (["--sizes", "0x5", "--json", "x.json"], "at least 1"),
    (["--sizes", "64x32", "--ranks", "0", "--json", "x.json"], "rank counts must be positive"),
    (["--sizes", "64x32", "--preset", "wing", "--json", "x.json"], "unknown preset"),
])
def test_scaling_rejects_bad_sizes_ranks_and_presets(argv, message, capsys):
    assert scaling.main(argv) == 2
    assert message in capsys.readouterr().err


# -- 6. two ranks -----------------------------------------------------------------------------------
def _mg_history(comm, prefix, nelx=96, nely=48, iterations=15):
    problem = problems.preset("mbb", nelx, nely, 0.5)
    with _coarse_max_dofs(600):
        out = driver.optimise(problem, driver.RunSettings(solver="mg", iterations=iterations, tolerance=0.0,
                                                      continuation=(1.0, 0.5, 3)),
                              comm=comm, prefix=prefix, log=lambda line: None)
    return [h["compliance"] for h in out["history"]], out["hierarchy"]["levels"], out["density"]


@two_ranks
def test_multigrid_simp_history_is_the_same_on_1_and_2_ranks():
    PETSc = petsc()

    def compute():
        world, levels, density = _mg_history(PETSc.COMM_WORLD, "large_world_")
        alone, _, _ = _mg_history(PETSc.COMM_SELF, "large_self_")
        return world, alone, len(levels), density

    results = collective(compute)
    reference = results[0][0]
    assert len(reference) == 15 and results[0][2] >= 3
    for world, alone, _, _ in results:
        assert world == reference  # collective results, allreduced: the same on every rank by construction
        # 1 vs 2 ranks: multigrid CG stopped at its tolerance on another partition: close, not the same bits.
        np.testing.assert_allclose(world, alone, rtol=1e-8)
    assert results[0][3] is not None and results[1][3] is None  # density gathered on rank 0 only


@two_ranks
def test_multigrid_equals_direct_on_2_ranks():
    PETSc = petsc()

    def compute():
        lc, rho = _simp_design(64, 32, 30)
        moduli = fe.simp_modulus(rho)
        clear = _options("large_mg2_", ksp_rtol=1e-12)
        try:
            with elasticity_system(lc, comm=PETSc.COMM_WORLD, prefix="large_direct2r_", solver="direct") as d:
                c_direct, u_direct = d.solve(d.slab_of(moduli)), d.natural_displacements()
            with elasticity_system(lc, comm=PETSc.COMM_WORLD, prefix="large_mg2_", solver="mg", coarse_max_dofs=300) as m:
                c_mg, u_mg = m.solve(m.slab_of(moduli)), m.natural_displacements()
                levels = m.ksp.getPC().getMGLevels()
        finally:
            clear()
        return c_direct, c_mg, float(np.linalg.norm(u_mg - u_direct) / np.linalg.norm(u_direct)), levels

    for c_direct, c_mg, rel, levels in collective(compute):
        assert levels >= 3
        assert c_mg == pytest.approx(c_direct, rel=1e-10) and rel <= 1e-8


@two_ranks
def test_a_grid_too_small_for_the_ranks_is_a_clear_error():
    PETSc = petsc()

    def compute():
        lc = lcs.LoadCase(1, 1, ((0, 0),), ((0, 0),))
        try:
            elasticity_system(lc, comm=PETSc.COMM_WORLD, prefix="large_tiny_")
        except PartitionError as err:
            return str(err)
        return None

    for message in collective(compute):
        assert message is not None and "too small for 2 ranks" in message


@two_ranks
def test_optimize_main_on_2_ranks_reports_a_too_small_grid_and_runs_a_real_one(tmp_path, capsys):
    tiny = tmp_path / "tiny.json"  # every rank writes (and reads) its own copy
    tiny.write_text(json.dumps({"format": "sphyr_hpc.problem", "version": 1, "kind": "preset", "nelx": 1,
                                "nely": 1, "volume_fraction": 1.0, "load_cells": [[0, 1, 0, 1]],
                                "fixed_nodes": [[0, 2, 0, 1, "xy"]]}))
    statuses = collective(lambda: optimize.main([str(tiny), "--iterations", "2"]))
    text = capsys.readouterr().err  # a usage error: one line on stderr, from rank 0 only
    assert statuses == [2, 2]
    assert ("too small for 2 ranks" in text) == (WORLD.rank == 0)
    statuses = collective(lambda: optimize.main(["--preset", "mbb", "--size", "40x20", "--iterations", "3",
                                                  "--solver", "mg", "--quiet"]))
    assert statuses == [0, 0]


def _grid_galerkin_differences(nely, nelx, smoother, direct_depth, monkeypatch):
    """Relative Frobenius differences between every coarse operator assembled from the moduli on coarse
    DMDAs (solvers/grid_galerkin.py) and P^T A P of the level above: the stored operators (SBAIJ with
    Chebyshev, AIJ with SOR), so that each level is a matrix to subtract."""
    from sphyr_hpc.solvers import grid_galerkin

    monkeypatch.setattr(grid_galerkin, "DIRECT_DEPTH", direct_depth)
    PETSc = petsc()
    lc = problems.preset("mbb", nelx, nely, 0.4).loadcase()
    rng = np.random.default_rng(nelx)
    moduli = np.where(rng.random(lc.shape) < 0.3, 1e-3, rng.random(lc.shape) + 0.1)
    prefix = f"large_grid_gal_{smoother}_"
    mat_type = {"chebyshev": "sbaij", "sor": "aij"}[smoother]
    if smoother == "sor" and WORLD.size == 1:
        pytest.skip("one rank with SOR: K in place, the coarse operators of solvers/galerkin.py (tested above)")
    clear = _options(prefix)
    try:
        with elasticity_system(lc, prefix=prefix, solver="mg", smoother=smoother, matrix_free=False,
                               coarse_max_dofs=100) as mg:
            assert mg.method.coarse is not None and not mg.in_place
            assert mat_type in mg.K.getType()
            mg.solve(mg.slab_of(np.ones(lc.shape)))  # the operators compared are those of the second design
            mg.solve(mg.slab_of(moduli))
            pc = mg.ksp.getPC()
            out = []
            A = mg.K.convert("aij")
            stored = _stored_interpolations(mg)
            for level in range(pc.getMGLevels() - 1, 0, -1):
                galerkin = A.ptap(stored[level - 1])
                ours = (pc.getMGCoarseSolve() if level == 1 else pc.getMGSmoother(level - 1)).getOperators()[0]
                difference = galerkin.copy()
                difference.axpy(-1.0, ours.convert("aij"), structure=PETSc.Mat.Structure.DIFFERENT_NONZERO_PATTERN)
                out.append(difference.norm(PETSc.NormType.FROBENIUS) / galerkin.norm(PETSc.NormType.FROBENIUS))
                A = galerkin
            for P in stored:
                P.destroy()
            return out
    finally:
        clear()


@ONE_RANK
@pytest.mark.parametrize("nely, nelx", [(32, 64), (13, 27), (20, 61)])
@pytest.mark.parametrize("direct_depth", [1, 3])
def test_coarse_operators_from_the_moduli_on_coarse_dmdas_equal_the_galerkin_products(nely, nelx, direct_depth,
                                                                                      monkeypatch):
    # The large-grid path (stencil-assembled K in any storage): coarse element matrices summed from the
    # moduli down to direct_depth (every level of these grids at 3), the rest level by level; supports and
    # voids, odd grids.
    differences = _grid_galerkin_differences(nely, nelx, "chebyshev", direct_depth, monkeypatch)
    assert len(differences) >= 2 and max(differences) <= 1e-13


@two_ranks
@pytest.mark.parametrize("smoother", ["chebyshev", "sor"])
def test_coarse_operators_from_the_moduli_equal_the_galerkin_products_on_2_ranks(smoother, monkeypatch):
    # Coarse elements astride the two ranks are held by both, each with its own children's part.
    results = collective(lambda: _grid_galerkin_differences(21, 61, smoother, 2, monkeypatch))
    for differences in results:
        assert len(differences) >= 2 and max(differences) <= 1e-13
    WORLD.Barrier()


def _transfer_differences(nely, nelx, seed, monkeypatch):
    """Largest relative differences between PCMG's interpolations applied from the grids (solvers/transfer.py,
    the default) and the same P stored as AIJ: P x, y + P x, P^T r, every pair of levels."""
    PETSc = petsc()
    lc = problems.preset("mbb", nelx, nely).loadcase()
    rng = np.random.default_rng(seed + WORLD.rank)
    monkeypatch.setattr(mgplan, "STENCIL_MIN_DOFS", 0)  # every interpolation from the grids
    clear = _options("large_transfer_")
    try:
        with elasticity_system(lc, prefix="large_transfer_", solver="mg", coarse_max_dofs=100) as mg:
            pc = mg.ksp.getPC()
            stored = _stored_interpolations(mg)
            worst = []
            for level in range(1, pc.getMGLevels()):
                shell, aij = pc.getMGInterpolation(level), stored[level - 1]
                assert shell.getType() == "python" and shell.getSizes() == aij.getSizes()
                x, y = aij.createVecs()
                x.setArray(rng.standard_normal(x.getLocalSize()))
                y.setArray(rng.standard_normal(y.getLocalSize()))
                pairs = []
                ours, theirs = y.duplicate(), y.duplicate()
                shell.mult(x, ours), aij.mult(x, theirs)
                pairs.append((ours.copy(), theirs.copy()))
                shell.multAdd(x, y, ours), aij.multAdd(x, y, theirs)
                pairs.append((ours.copy(), theirs.copy()))
                ours_c, theirs_c = x.duplicate(), x.duplicate()
                shell.multTranspose(y, ours_c), aij.multTranspose(y, theirs_c)
                pairs.append((ours_c, theirs_c))
                for a, b in pairs:
                    a.axpy(-1.0, b)
                    worst.append(a.norm() / b.norm())
            for P in stored:
                P.destroy()
            return worst
    finally:
        clear()


@ONE_RANK
@pytest.mark.parametrize("nely, nelx", [(32, 64), (13, 27), (21, 61)])
def test_the_interpolations_applied_from_the_grids_equal_the_stored_ones(nely, nelx, monkeypatch):
    # Even and odd grids (nested, the last interval half as wide): the C transfers are PCMG's AIJ P.
    differences = _transfer_differences(nely, nelx, 3, monkeypatch)
    assert len(differences) >= 6 and max(differences) <= 1e-14


@two_ranks
def test_the_interpolations_applied_from_the_grids_equal_the_stored_ones_on_2_ranks(monkeypatch):
    # Coarse neighbours of a rank's fine nodes on the other rank: fetched (P x) and added back (P^T r).
    results = collective(lambda: _transfer_differences(21, 61, 4, monkeypatch))
    for differences in results:
        assert len(differences) >= 6 and max(differences) <= 1e-14
    WORLD.Barrier()


def _filters_agree(nelx, nely, radius):
    PETSc = petsc()
    lc = problems.preset("mbb", nelx, nely).loadcase()
    with elasticity_system(lc, solver="mg", element_halo=3, prefix="large_filter_kinds_") as system:
        matrix, stencil = DensityFilter(system, radius), DensityFilter(system, radius, kind="stencil")
        try:
            x = np.random.default_rng(nelx).random(matrix.Hs.size)
            free = (x > 0.3).astype(float)
            scale = max(1.0, float(np.abs(matrix.apply(x)).max()))
            return max(float(np.abs(matrix.Hs - stencil.Hs).max()) / float(matrix.Hs.max()),
                       float(np.abs(matrix.apply(x) - stencil.apply(x)).max()) / scale,
                       float(np.abs(matrix.chain(x, free) - stencil.chain(x, free)).max()) / scale)
        finally:
            matrix.close()
            stencil.close()
    del PETSc


@ONE_RANK
@pytest.mark.parametrize("nelx, nely, radius", [(40, 20, 1.5), (33, 17, 2.5), (30, 30, 3.1)])
def test_the_stencil_filter_equals_the_filter_matrix(nelx, nely, radius):
    assert _filters_agree(nelx, nely, radius) <= 1e-14


@two_ranks
def test_the_stencil_filter_equals_the_filter_matrix_on_2_ranks():
    for difference in collective(lambda: _filters_agree(33, 17, 2.5)):
        assert difference <= 1e-14
    WORLD.Barrier()


@ONE_RANK
def test_the_stencil_filter_kernel_adds_what_the_numpy_passes_add():
    # One C pass over the slab, the terms in the same order: the same sums, bit for bit.
    lc = problems.preset("mbb", 33, 17).loadcase()
    with elasticity_system(lc, solver="mg", element_halo=3, prefix="large_filter_kernel_") as system:
        dfilter = DensityFilter(system, 2.5, kind="stencil")
        try:
            assert dfilter._kernel is not None
            x = np.random.default_rng(5).random(dfilter.Hs.size)
            with_kernel = (dfilter.apply(x), dfilter.chain(x, (x > 0.4).astype(float)))
            dfilter._kernel = None
            with_numpy = (dfilter.apply(x), dfilter.chain(x, (x > 0.4).astype(float)))
        finally:
            dfilter.close()
    assert all(np.array_equal(a, b) for a, b in zip(with_kernel, with_numpy))


@pytest.mark.parametrize("radius, cells_2d, cells_3d", [(1.2, 5, 7), (1.5, 9, 19), (2.5, 21, 81)])
def test_the_filter_weights_take_the_dimension_of_the_grid(radius, cells_2d, cells_3d):
    # R - |offset| > 0 over the cells within reach: the cell and its edge (2D) or face (3D) neighbours
    # at R = 1.2; + the diagonal ones at 1.5 (in 3D the 12 edge diagonals, not the 8 corners: sqrt 3 > 1.5).
    flat, solid = filter_offsets(radius, 2), filter_offsets(radius, 3)
    assert (len(flat), len(solid)) == (cells_2d, cells_3d)
    for offsets, dim in ((flat, 2), (solid, 3)):
        assert all(len(offset) == dim and w > 0 and w == pytest.approx(radius - np.linalg.norm(offset))
                   for offset, w in offsets)
        weights = dict(offsets)
        assert all(weights[tuple(-o for o in offset)] == w for offset, w in offsets)  # H symmetric
        assert [offset for offset, _ in offsets] == sorted(weights)  # increasing local order
    # The 3D filter's middle layer is the 2D filter, weight for weight.
    assert [(offset[1:], w) for offset, w in solid if offset[0] == 0] == flat


@ONE_RANK
@pytest.mark.parametrize("arguments", [{"matrix_free": False}, {"smoother": "sor"}, {}])
def test_every_multigrid_level_is_one_kind_of_object_and_holds_less_the_coarser_it_is(arguments):
    # Stored (SBAIJ), one-rank SOR (K in place, element Galerkin levels) and matrix-free + stencils: each
    # level offers mat, assemble(moduli), nbytes and close; a coarser level holds fewer bytes.
    lc = problems.preset("mbb", 128, 64).loadcase()
    with elasticity_system(lc, prefix="large_levels_", solver="mg", coarse_max_dofs=100, **arguments) as system:
        method = system.method
        levels = [method.fine, *method.coarse]
        assert len(levels) == len(method.plan.levels) >= 4
        assert levels[0].mat is system.K and [lv.mat.getSize()[0] for lv in levels] == [lv.dofs for lv in method.plan.levels]
        held = [lv.nbytes for lv in levels]
        assert all(a > b > 0 for a, b in zip(held[1:], held[2:])), held
        compliance = system.solve(system.slab_of(np.ones(lc.shape)))
        assert np.isfinite(compliance) and compliance > 0


def _second_design_after_first(prefix, first):
    """(compliance, MG-CG iterations) of a design solved from zero, by a system that solved ``first``
    before it (None: a new system)."""
    from sphyr_hpc.core import discretisation as fe
    from sphyr_hpc.optimiser import problems
    from sphyr_hpc.solvers.elasticity import elasticity_system

    lc = problems.preset("mbb", 128, 64).loadcase()
    second = fe.simp_modulus(np.random.default_rng(12).uniform(0.001, 1.0, lc.shape))
    with elasticity_system(lc, prefix=prefix, solver="mg") as system:
        if first is not None:
            system.solve(system.slab_of(fe.simp_modulus(np.full(lc.shape, first))))
            system.reset()  # from zero, as the new system
        return system.solve(system.slab_of(second)), system.last_iterations


@pytest.mark.skipif(MPI.COMM_WORLD.size > 1, reason="serial test")
def test_the_coarse_levels_are_set_up_for_each_new_design():
    # The coarse operators from the moduli change in place: without a new set-up their Chebyshev
    # smoothers would keep the eigenvalue interval of the first design (0.95 everywhere here).
    fresh = _second_design_after_first("lg_renew_fresh_", None)
    after = _second_design_after_first("lg_renew_after_", 0.95)
    assert after[1] == fresh[1]
    assert after[0] == pytest.approx(fresh[0], rel=1e-13)


def test_a_level_cap_is_the_plan_s_input_and_the_hierarchy_built():
    # The level count is the plan's: a cap of 3 levels (max_levels) on a grid that coarsens to 4
    # builds 3, with the same compliance (the solve's tolerance apart).
    lc = problems.preset("mbb", 256, 128).loadcase()
    compliances = {}
    for cap in (3, hierarchy.MAX_LEVELS):
        with elasticity_system(lc, comm=petsc().COMM_SELF, solver="mg", max_levels=cap) as system:
            compliances[len(system.method.levels)] = system.solve(system.slab_of(np.ones(lc.shape)))
            assert system.ksp.getPC().getMGLevels() == len(system.method.levels) == len(system.method.plan.levels)
    assert sorted(compliances) == [3, 4]
    assert compliances[3] == pytest.approx(compliances[4], rel=1e-6)


def test_more_levels_than_the_grid_has_is_a_usage_error_naming_the_limit(capsys):
    status = optimize.main(["--preset", "mbb", "--size", "256x128", "--solver", "mg", "--iterations", "1",
                            "--quiet", "-sphyr_pc_mg_levels", "20"])
    err = capsys.readouterr().err
    assert status == 2 and "-sphyr_pc_mg_levels 20" in err and "plan has 4 levels" in err
    assert len(err.strip().splitlines()) == 1
