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
    alpha, beta = np.maximum(0.0, x - 0.2), np.minimum(1.0, x + 0.2)
    p0, q0 = mma.approximations(x, low, upp, -rng.uniform(0.1, 1.0, n))
    gradient = rng.uniform(0.5, 1.5, n) / n
    P, Q = mma.approximations(x, low, upp, gradient)
    b = P @ (1.0 / (upp - x)) + Q @ (1.0 / (x - low)) - violation  # violation > 0: the subproblem must act
    return mma.Subproblem(mma.Reductions(MPI.COMM_SELF), low, upp, alpha, beta, p0, q0, P, Q, b)


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


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_dual_solution_is_the_subproblems_minimum(seed):
    """The same convex subproblem solved by SciPy's SLSQP (an independent method): the same x.  The violated
    constraint is active at the dual's solution to rounding, and x stays within its move limits."""
    sub = _random_subproblem(n=12 + seed, seed=seed)
    x, lam = sub.solve()
    assert lam > 0.0
    assert np.abs(x - _scipy_minimum(sub)).max() < 1e-6
    assert abs(_g(sub, x) - sub.b) < 1e-12 * abs(sub.b)
    assert np.all(x >= sub.alpha) and np.all(x <= sub.beta)
    # Any start of the root find reaches the same multiplier (to the stopping step) and design.
    x_again, lam_again = sub.solve(start=10.0 * lam)
    assert abs(lam_again - lam) < 1e-12 * lam and np.abs(x_again - x).max() < 1e-12
    # A few evaluations of the dual's derivative, not the interior-point method's hundreds of passes.
    assert sub.evaluations < 40


def test_an_inactive_constraint_has_multiplier_zero():
    """A subproblem whose constraint holds at the Lagrangian's free minimum: lam = 0, the objective alone."""
    sub = _random_subproblem(violation=-10.0)
    x, lam = sub.solve()
    assert lam == 0.0 and _g(sub, x) < sub.b
    assert np.abs(x - _scipy_minimum(sub)).max() < 1e-6


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
        assert np.abs(one["density"] - two["density"]).max() < 1e-6
