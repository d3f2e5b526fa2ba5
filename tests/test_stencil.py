"""The coarse multigrid levels held as symmetric node stencils (sphyr_hpc.solvers.stencil) against
the same levels stored as SBAIJ (a ``matrix_free=False`` system of the same hierarchy): the
products, the diagonals, the fused smoother's steps and estimates, and the solves.

Serial tests run under plain ``pytest``; tests marked ``mpi`` need 2 ranks
(``mpirun -n 2 python -m pytest -m mpi tests/test_stencil.py``) and gather what
every rank got before asserting.
"""

import numpy as np
import pytest
from mpi4py import MPI

from conftest import collective, two_ranks_marker
from sphyr_hpc.core import discretisation as fe
from sphyr_hpc.optimiser import measure, problems
from sphyr_hpc.runtime.petsc import petsc
from sphyr_hpc.solvers import multigrid, stencil
from sphyr_hpc.solvers import plan as mgplan
from sphyr_hpc.solvers.elasticity import elasticity_system
from sphyr_hpc.solvers.fused import operator_of
from sphyr_hpc.solvers.stencil import NS, StencilOperator
from test_matfree import COARSE, _design, _finest, _petsc_chebyshev, _with_options

WORLD = MPI.COMM_WORLD
ONE_RANK = pytest.mark.skipif(WORLD.size > 1, reason="serial test")
two_ranks = two_ranks_marker("tests/test_stencil.py")


def _all_stencils(monkeypatch):
    """Every level between the finest and the coarsest of the systems made next as stencils, however small."""
    monkeypatch.setattr(mgplan, "STENCIL_MIN_DOFS", 0)


def _stored(lc, prefix):
    """The ``matrix_free=False`` system of ``lc``: every operator a PETSc matrix, the same hierarchy."""
    return elasticity_system(lc, prefix=prefix, solver="mg", coarse_max_dofs=COARSE, matrix_free=False)


def _grey(shape, seed):
    return fe.simp_modulus(np.random.default_rng(seed).uniform(0.3, 1.0, shape))


def _levels(system):
    """(PCMG level, its smoother KSP, its operator) of the levels between the finest and the coarsest."""
    pc = system.ksp.getPC()
    n = pc.getMGLevels()
    return [(level, pc.getMGSmoother(level), pc.getMGSmoother(level).getOperators()[0]) for level in range(1, n - 1)]


def _relative(a, b):
    a = a.copy()
    a.axpy(-1.0, b)
    return a.norm() / b.norm()


def _stencil_against_sbaij(preset, nelx, nely, seed, monkeypatch, layout=None):
    """Per level between the finest and the coarsest (worst over two designs, the second assembled
    after the first): the kinds, the products' and diagonals' relative differences; on the second,
    the fused smoothing against KSPCHEBYSHEV on the SBAIJ level, the compliances' difference and
    both iteration counts."""
    lc = problems.preset(preset, nelx, nely).loadcase()
    _all_stencils(monkeypatch)
    clear = _with_options("st_stencil_", layout or {})
    clear_sbaij = _with_options("st_sbaij_", layout or {})
    out = {"kinds": set(), "mult": 0.0, "diag": 0.0, "smooth": 0.0, "compliance": 0.0, "its": []}
    try:
        with elasticity_system(lc, prefix="st_stencil_", solver="mg", coarse_max_dofs=COARSE) as ours, \
                _stored(lc, "st_sbaij_") as stock:
            assert [lv.n_dofs for lv in ours.method.levels] == [lv.n_dofs for lv in stock.method.levels]
            # Voids (modulus contrast 1e-9) beside solid cells: the products; then a design CG
            # converges on (random voids leave islands): the solves and the smoothing too.
            for solve, moduli in ((False, _design(lc.shape, seed)), (True, _grey(lc.shape, seed + 1))):
                if solve:
                    c_ours, c_stock = ours.solve(ours.slab_of(moduli)), stock.solve(stock.slab_of(moduli))
                    out["compliance"] = max(out["compliance"], abs(c_ours - c_stock) / c_stock)
                    out["its"].append((ours.last_iterations, stock.last_iterations))
                else:
                    ours.assemble(ours.slab_of(moduli))
                    stock.assemble(stock.slab_of(moduli))
                for (_, smoother, A), (_, _, B) in zip(_levels(ours), _levels(stock)):
                    x = B.createVecs()[0]
                    x.setRandom()
                    y_ours, y_stock = B.createVecs()
                    A.mult(x, y_ours)
                    B.mult(x, y_stock)
                    out["mult"] = max(out["mult"], _relative(y_ours, y_stock))
                    out["diag"] = max(out["diag"], _relative(A.getDiagonal(), B.getDiagonal()))
                    if not solve:
                        continue  # (the levels' smoothers are made by the first solve's set-up)
                    out["kinds"].add((A.getType(), smoother.getType(), B.getType()))
                    context = smoother.getPythonContext()
                    for zero_guess in (False, True):
                        x_fused = x.copy()
                        if zero_guess:
                            x_fused.set(0.0)
                        x_petsc = x_fused.copy()
                        smoother.setInitialGuessNonzero(not zero_guess)
                        context.solve(smoother, y_stock, x_fused)
                        _petsc_chebyshev(B, y_stock, x_petsc, smoother.getTolerances()[3], context.bounds,
                                         zero_guess)
                        out["smooth"] = max(out["smooth"], _relative(x_fused, x_petsc))
                    smoother.setInitialGuessNonzero(True)
    finally:
        clear()
        clear_sbaij()
    return out


@ONE_RANK
@pytest.mark.parametrize("preset, nelx, nely", [("mbb", 96, 32), ("cantilever", 61, 27), ("bridge", 80, 41)])
def test_the_stencil_levels_apply_the_sbaij_levels(preset, nelx, nely, monkeypatch):
    got = _stencil_against_sbaij(preset, nelx, nely, 3, monkeypatch)
    assert got["kinds"] == {("python", "python", "seqsbaij")}
    # The same sums in another order: rounding only (odd grids' half-width last intervals included).
    assert got["mult"] <= 1e-13 and got["diag"] <= 1e-14
    # The fused Chebyshev step of a stencil level is KSPCHEBYSHEV + PCJACOBI's on the same interval.
    assert got["smooth"] <= 1e-12
    # New values replace the old ones (the second design), and the solves agree to CG's tolerance.
    assert got["compliance"] <= 1e-9
    assert all(abs(a - b) <= 1 for a, b in got["its"])


@two_ranks
def test_the_stencil_levels_apply_the_sbaij_levels_on_2_ranks(monkeypatch):
    # A coarse element astride the ranks is held by both, each with its own children's part: the
    # parts are summed on the owner and the ghost nodes' stencils come back for the transposed terms.
    for preset, nelx, nely, ranks_x, ranks_y in (("mbb", 97, 33, 2, 1), ("bridge", 80, 41, 1, 2),
                                                 ("cantilever", 61, 27, 2, 1)):
        layout = {"da_processors_x": ranks_x, "da_processors_y": ranks_y}
        for got in collective(lambda: _stencil_against_sbaij(preset, nelx, nely, 4, monkeypatch, layout)):
            assert got["kinds"] == {("python", "python", "mpisbaij")}
            assert got["mult"] <= 1e-13 and got["diag"] <= 1e-14 and got["smooth"] <= 1e-12
            assert got["compliance"] <= 1e-9
    WORLD.Barrier()


def _estimates(preset, nelx, nely, seed, monkeypatch, steps=8):
    """Per stencil level: the fused estimate and PETSc KSPCG's on the SBAIJ level, from the same noise."""
    PETSc = petsc()
    lc = problems.preset(preset, nelx, nely).loadcase()
    _all_stencils(monkeypatch)
    pairs = []
    with elasticity_system(lc, prefix="st_est_", solver="mg", coarse_max_dofs=COARSE) as ours, \
            _stored(lc, "st_est_sbaij_") as stock:
        moduli = _grey(lc.shape, seed)
        ours.solve(ours.slab_of(moduli))
        stock.solve(stock.slab_of(moduli))
        for (_, _, A), (_, _, B) in zip(_levels(ours), _levels(stock)):
            assert "sbaij" in B.getType()
            op = operator_of(A)
            fused = op.extreme_eigenvalues(steps, ours.comm)
            cg = PETSc.KSP().create(comm=ours.comm)
            b, x = B.createVecs()
            try:
                cg.setType(PETSc.KSP.Type.CG)
                cg.setOperators(B)
                cg.getPC().setType(PETSc.PC.Type.JACOBI)
                cg.setTolerances(rtol=1e-30, atol=0.0, max_it=steps)
                cg.setNormType(PETSc.KSP.NormType.NONE)
                cg.setComputeEigenvalues(True)
                op.noise(b)
                cg.solve(b, x)
                values = cg.computeEigenvalues().real
            finally:
                cg.destroy()
                b.destroy()
                x.destroy()
            pairs.append((fused, (float(values.min()), float(values.max()))))
    return pairs


@ONE_RANK
def test_the_fused_estimate_of_a_stencil_level_is_petscs_cg_estimate(monkeypatch):
    pairs = _estimates("mbb", 96, 32, 9, monkeypatch)
    assert len(pairs) >= 2
    for fused, stock in pairs:
        assert fused == pytest.approx(stock, rel=1e-9)
        assert 0.0 < fused[0] < 1.0 < fused[1] < 4.0


@two_ranks
def test_the_fused_estimate_of_a_stencil_level_is_petscs_cg_estimate_on_2_ranks(monkeypatch):
    results = collective(lambda: _estimates("mbb", 97, 33, 9, monkeypatch))
    for pairs in results:
        for fused, stock in pairs:
            assert fused == pytest.approx(stock, rel=1e-9)
    assert results[0] == results[1]  # the noise depends on the natural numbering only
    WORLD.Barrier()


def _kinds(lc, prefix, options, **arguments):
    clear = _with_options(prefix, options)
    try:
        with elasticity_system(lc, prefix=prefix, solver="mg", coarse_max_dofs=COARSE, **arguments) as system:
            compliance = system.solve(system.slab_of(_grey(lc.shape, 2)))
            kinds = [(A.getType(), smoother.getType()) for _, smoother, A in _levels(system)]
            phases = measure.phase_bytes(system, 1.0, lc.n_elements)
            stored = [operator_of(A).stored_bytes for _, _, A in _levels(system) if operator_of(A) is not None]
            sizes = [A.getSize()[0] for _, _, A in _levels(system)]
            return kinds, compliance, phases, stored, sizes
    finally:
        clear()


@ONE_RANK
def test_small_levels_stay_sbaij_and_petscs_smoother_is_a_level_option(monkeypatch):
    lc = problems.preset("mbb", 192, 64).loadcase()
    # By default a level under STENCIL_MIN_DOFS (a rank) stays SBAIJ with PETSc's Chebyshev.
    kinds, c_default, _, stored, sizes = _kinds(lc, "st_default_", {})
    expected = [("python", "python") if n >= mgplan.STENCIL_MIN_DOFS else ("seqsbaij", "chebyshev")
                for n in sizes]
    assert kinds == expected and ("python", "python") in kinds and ("seqsbaij", "chebyshev") in kinds
    # The bytes model reads a stencil level's 19 numbers a node.
    assert stored == [8.0 * NS * n / 2 for n in sizes if n >= mgplan.STENCIL_MIN_DOFS]
    # Without the kernels' operators (matrix_free=False) every level is SBAIJ with PETSc's Chebyshev,
    # however large (no stencil levels without the finest level's shell): the same solve.
    _all_stencils(monkeypatch)
    kinds, c_sbaij, _, _, _ = _kinds(lc, "st_sbaij_", {}, matrix_free=False)
    assert set(kinds) == {("seqsbaij", "chebyshev")}
    assert c_sbaij == pytest.approx(c_default, rel=1e-9)
    # Stencils smoothed by PETSc's KSPCHEBYSHEV (the shell's product and diagonal) by each level's PCMG
    # option (levels 1 .. finest - 1 between the coarsest and the finest): the same solve.
    between = range(1, _finest(192, 64))
    kinds, c_petsc, _, _, _ = _kinds(lc, "st_petsc_", {f"mg_levels_{level}_ksp_type": "chebyshev" for level in between})
    assert len(kinds) == len(between) and set(kinds) == {("python", "chebyshev")}
    assert c_petsc == pytest.approx(c_default, rel=1e-9)
    # One level's option: PETSc's smoother on that level, the fused one on the other stencil levels.
    kinds, c_one, _, _, _ = _kinds(lc, "st_one_", {"mg_levels_1_ksp_type": "chebyshev"})
    assert kinds == [("python", "chebyshev")] + [("python", "python")] * (len(between) - 1)
    assert c_one == pytest.approx(c_default, rel=1e-9)


def _interpolation_kinds(lc, prefix, **arguments):
    with elasticity_system(lc, prefix=prefix, solver="mg", coarse_max_dofs=COARSE, **arguments) as system:
        compliance = system.solve(system.slab_of(_grey(lc.shape, 3)))
        pc = system.ksp.getPC()
        pairs = [(pc.getMGInterpolation(level).getType(), pc.getMGInterpolation(level).getSize()[1])
                 for level in range(1, pc.getMGLevels())]
        return pairs, compliance


@ONE_RANK
def test_interpolations_into_large_levels_are_applied_from_the_grids_and_stored_without_the_kernels():
    lc = problems.preset("mbb", 192, 64).loadcase()
    pairs, c_default = _interpolation_kinds(lc, "tr_default_")
    # Into a level of STENCIL_MIN_DOFS (a rank) or more: the C transfers; into a smaller one: AIJ.
    assert pairs == [("python" if n >= mgplan.STENCIL_MIN_DOFS else "seqaij", n) for _, n in pairs]
    assert {kind for kind, _ in pairs} == {"python", "seqaij"}
    # Every operator a PETSc matrix (matrix_free=False): the interpolations too, the same solve.
    pairs, c_stored = _interpolation_kinds(lc, "tr_aij_", matrix_free=False)
    assert {kind for kind, _ in pairs} == {"seqaij"}
    assert c_stored == pytest.approx(c_default, rel=1e-9)


@ONE_RANK
def test_elements_beyond_the_ring_are_refused():
    PETSc = petsc()
    dm = PETSc.DMDA().create(dim=2, dof=2, sizes=(5, 4), stencil_width=1,
                             stencil_type=PETSc.DMDA.StencilType.BOX, comm=PETSc.COMM_SELF)
    op = StencilOperator(PETSc, dm, nnz=0)
    try:
        op.begin()
        with pytest.raises(RuntimeError, match="outside this rank's nodes and the ring around them"):
            op.add_elements(np.zeros((3, 4, 64)), 2, 2)  # nodes up to row 5, column 6: beyond the ring
        op.add_elements(np.ones((3, 4, 64)), 0, 0)  # the whole grid: accepted
    finally:
        op.close()
        dm.destroy()


@ONE_RANK
def test_coarse_elements_summed_from_the_moduli_in_c_and_by_numpy_agree():
    # ModuliSum: each coarse element the sum of its fine elements' moduli times their positions' table rows;
    # the C kernel, numpy's fallback (no compiler) and the sum written out term by term agree.
    rng = np.random.default_rng(5)
    ystart, xstart = np.array([0, 2, 4, 5]), np.array([1, 2, 4, 7])
    ytype, xtype = rng.integers(0, 3, 6), rng.integers(0, 4, 8)
    table, moduli = rng.random((3, 4, 36)), rng.random((6, 8))
    c_kernel = stencil.ModuliSum(ystart, xstart, ytype, xtype, table)
    by_numpy = stencil.ModuliSum(ystart, xstart, ytype, xtype, table)
    by_numpy._kernel = None
    ours, theirs = np.zeros((3, 3, 64)), np.zeros((3, 3, 64))
    c_kernel.elements(moduli, ours)
    by_numpy.elements(moduli, theirs)
    order = stencil.upper_order()
    for cy in range(3):
        for cx in range(3):
            upper = sum(moduli[i, j] * table[ytype[i], xtype[j]] for i in range(ystart[cy], ystart[cy + 1])
                        for j in range(xstart[cx], xstart[cx + 1]))
            half = np.zeros(64)
            half[order] = upper
            half = half.reshape(8, 8)
            element = half + half.T - np.diag(np.diag(half))  # one of each symmetric pair, mirrored
            assert np.abs(ours[cy, cx] - element.ravel()).max() <= 1e-14 * np.abs(element).max()
    assert np.abs(ours - theirs).max() <= 1e-14 * np.abs(ours).max()
    pairs = sorted({(min(divmod(k, 8)), max(divmod(k, 8))) for k in order.tolist()})
    assert len(pairs) == 36 and pairs == [(r, c) for r in range(8) for c in range(r, 8)]
