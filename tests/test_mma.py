"""MMA (``optimize --optimizer mma``, sphyr_hpc/optimiser/mma.py): its subproblem's solution against
SciPy's (solved through its dual), its designs against OC's on the presets, 1 rank against 2, and its checkpoint.

    python -m pytest -q tests/test_mma.py
    bin/mpirun -n 2 .venv/bin/python -m pytest -q -m mpi tests/test_mma.py
"""

import numpy as np
import pytest
from mpi4py import MPI
from scipy.optimize import minimize

from conftest import collective, two_ranks_marker
from sphyr_hpc.optimiser import driver, mma, problems
from sphyr_hpc.runtime.petsc import petsc

two_ranks = two_ranks_marker("tests/test_mma.py")
QUIET = dict(log=lambda line: None)


def _random_subproblem(n=12, violation=0.05, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.2, 0.8, n)
    low, upp = x - 0.5, x + 0.5
    df0 = -rng.uniform(0.1, 1.0, n)
    gradient = rng.uniform(0.5, 1.5, n) / n
    P, Q = mma.approximations(x, low, upp, gradient)
    b = P @ (1.0 / (upp - x)) + Q @ (1.0 / (x - low)) - violation  # violation > 0: the subproblem must act
    sub = mma.Subproblem(mma.Reductions(MPI.COMM_SELF), x, low, upp, df0, gradient, 0.2, b)
    assert np.array_equal(sub.alpha, np.maximum(0.0, x - 0.2)) and np.array_equal(sub.beta, np.minimum(1.0, x + 0.2))
    return sub


def _scipy_minimum(sub):
    """The subproblem in x alone (feasible, so its artificial variables are 0) by SciPy's SLSQP."""
    reference = minimize(lambda xs: sub.p0 @ (1 / (sub.upp - xs)) + sub.q0 @ (1 / (xs - sub.low)),
                         0.5 * (sub.alpha + sub.beta), method="SLSQP", bounds=list(zip(sub.alpha, sub.beta)),
                         constraints=[{"type": "ineq", "fun": lambda xs: sub.b - _g(sub, xs)}],
                         options={"ftol": 1e-15, "maxiter": 500})
    assert reference.success
    return reference.x


def _g(sub, xs):
    return sub.P @ (1 / (sub.upp - xs)) + sub.Q @ (1 / (xs - sub.low))


def _passes(sub, form):
    """The subproblem evaluated by the compiled kernel (mma_dual.c) or by numpy's passes."""
    if form == "numpy":
        sub.kernel = None
    elif sub.kernel is None:
        pytest.skip("the compiled kernels are not built here")
    return sub


FORMS = ["kernel", "numpy"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_dual_solution_is_the_subproblems_minimum(seed, form):
    """The same convex subproblem solved by SciPy's SLSQP (an independent method): the same x.  The violated
    constraint is active at the dual's solution to rounding, and x stays within its move limits."""
    sub = _passes(_random_subproblem(n=12 + seed, seed=seed), form)
    x, lam = sub.solve()
    assert lam > 0.0
    assert np.abs(x - _scipy_minimum(sub)).max() < 1e-6
    assert abs(_g(sub, x) - sub.b) < 1e-12 * abs(sub.b)
    assert np.all(x >= sub.alpha) and np.all(x <= sub.beta)
    # Any start of the root find reaches the same multiplier (to the stopping step) and design.
    x_again, lam_again = sub.solve(start=10.0 * lam)
    assert abs(lam_again - lam) < 4 * mma.DUAL_RELATIVE_STEP * lam and np.abs(x_again - x).max() < 1e-11
    # A few evaluations of the dual's derivative, not the interior-point method's hundreds of passes.
    assert sub.evaluations < 40


@pytest.mark.parametrize("form", FORMS)
def test_an_inactive_constraint_has_multiplier_zero(form):
    """A subproblem whose constraint holds at the Lagrangian's free minimum: lam = 0, the objective alone,
    from any start of the root find."""
    for start in (None, 5.0):
        sub = _passes(_random_subproblem(violation=-10.0), form)
        x, lam = sub.solve(start)
        assert lam == 0.0 and _g(sub, x) < sub.b
        assert np.abs(x - _scipy_minimum(sub)).max() < 1e-6


def test_the_kernel_and_numpys_passes_agree_and_the_kernel_gives_the_same_bits_twice():
    """mma_dual.c's evaluation of the dual against numpy's (another order of the sums: 1e-13), on a slab whose
    length is no multiple of the kernel's four partial sums, with cells clipped at both move limits; and
    mma_asymptotes.c's asymptotes and constraint approximation against numpy's."""
    sub = _random_subproblem(n=1001, violation=0.3, seed=5)
    if sub.kernel is None:
        pytest.skip("the compiled kernels are not built here")
    clipped = set()
    for lam in (0.0, 0.37, 5.0, 2.0e3):
        x_c, constraint_c, slope_c = sub._sums(lam)
        clipped |= {"alpha"} if np.any(x_c == sub.alpha) else set()
        clipped |= {"beta"} if np.any(x_c == sub.beta) else set()
        again = sub._sums(lam)
        assert np.array_equal(x_c, again[0]) and (constraint_c, slope_c) == again[1:]
        numpy_sub = _passes(_random_subproblem(n=1001, violation=0.3, seed=5), "numpy")
        x_n, constraint_n, slope_n = numpy_sub._sums(lam)
        assert np.abs(x_c - x_n).max() < 1e-14
        assert constraint_c == pytest.approx(constraint_n, rel=1e-13)
        assert slope_c == pytest.approx(slope_n, rel=1e-12)
    assert clipped == {"alpha", "beta"}
    x_k, lam_k = sub.solve()
    x_n, lam_n = numpy_sub.solve()
    assert lam_k == pytest.approx(lam_n, rel=1e-11) and np.abs(x_k - x_n).max() < 1e-11
    # The asymptotes of a third iteration (widened, narrowed and kept), in one pass against numpy's.
    rng = np.random.default_rng(3)
    n = 1001
    x, x1, x2 = rng.uniform(0.0, 1.0, (3, n))
    update = mma.MMAUpdate.__new__(mma.MMAUpdate)
    update.k, update.xold1, update.xold2 = 3, x1, x2
    update.low, update.upp, update.gradient = x1 - rng.uniform(0.005, 12.0, n), x1 + rng.uniform(0.005, 12.0, n), \
        rng.uniform(0.5, 1.5, n) / n
    compiled = update._asymptotes(x)
    kernels = mma._kernels
    try:
        mma._kernels = lambda: None
        reference = update._asymptotes(x)
    finally:
        mma._kernels = kernels
    np.testing.assert_allclose(compiled[0], reference[0], rtol=0, atol=1e-14)
    np.testing.assert_allclose(compiled[1], reference[1], rtol=0, atol=1e-14)
    assert compiled[2] == pytest.approx(reference[2], rel=1e-13)


@pytest.mark.parametrize("preset", ["mbb", "cantilever", "bridge"])
def test_mma_reaches_ocs_compliance_at_the_same_volume(preset):
    problem = problems.preset(preset, 64, 32, 0.5)
    oc = driver.optimise(problem, **QUIET)
    got = driver.optimise(problem, driver.RunSettings(update="mma"), **QUIET)
    assert oc["update"] == "oc" and got["update"] == "mma"
    # MMA ends on the feasible side of the volume constraint, within 1e-4 of OC's (which meets it exactly).
    assert oc["volume_fraction"] - 1e-4 < got["volume_fraction"] <= oc["volume_fraction"] + 1e-6
    assert got["compliance"] < 1.02 * oc["compliance"]


@two_ranks
def test_mma_on_2_ranks_follows_the_1_rank_run():
    problem = problems.preset("cantilever", 48, 24, 0.4)
    settings = driver.RunSettings(update="mma", iterations=40, solver="direct")
    two = collective(lambda: driver.optimise(problem, settings, **QUIET))[0]
    if MPI.COMM_WORLD.rank == 0:
        one = driver.optimise(problem, settings, comm=petsc().COMM_SELF, **QUIET)
        assert one["iterations"] == two["iterations"]
        assert abs(one["compliance"] - two["compliance"]) < 1e-8 * one["compliance"]
        assert np.abs(one["density"] - two["density"]).max() < 1e-8  # (1.1e-10 measured: the sums' order)
