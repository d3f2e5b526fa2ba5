"""MMA (``optimize --optimizer mma``, sphyr_hpc/optimiser/mma.py): its subproblem's solution against
SciPy's, its designs against OC's on the presets, 1 rank against 2, and its checkpoint.

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


def _random_subproblem(n=12, m=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.2, 0.8, n)
    low, upp = x - 0.5, x + 0.5
    alpha, beta = np.maximum(0.0, x - 0.2), np.minimum(1.0, x + 0.2)
    p0, q0 = mma.approximations(x, low, upp, -rng.uniform(0.1, 1.0, n))
    gradients = rng.uniform(0.5, 1.5, (m, n)) / n
    P, Q = mma.approximations(x, low, upp, gradients)
    values = np.array([0.05, -0.02])[:m]  # the first constraint violated at x: the subproblem must act
    b = P @ (1.0 / (upp - x)) + Q @ (1.0 / (x - low)) - values
    return mma.Subproblem(mma.Reductions(MPI.COMM_SELF), low, upp, alpha, beta, p0, q0, P, Q, b)


def test_the_interior_point_solution_is_the_subproblems_minimum():
    """The same convex subproblem solved by SciPy's SLSQP (an independent method): the same x.  The
    subproblem is feasible, so its artificial variables are 0 at the optimum and SciPy solves it in x."""
    sub = _random_subproblem()
    x = sub.solve()

    def g(xs):
        return sub.P @ (1 / (sub.upp - xs)) + sub.Q @ (1 / (xs - sub.low))

    reference = minimize(lambda xs: sub.p0 @ (1 / (sub.upp - xs)) + sub.q0 @ (1 / (xs - sub.low)),
                         0.5 * (sub.alpha + sub.beta), method="SLSQP", bounds=list(zip(sub.alpha, sub.beta)),
                         constraints=[{"type": "ineq", "fun": lambda xs: sub.b - g(xs)}],
                         options={"ftol": 1e-14, "maxiter": 500})
    assert reference.success
    assert np.abs(x - reference.x).max() < 1e-5
    # The violated constraint is active at the solution, and x stays within its move limits.
    assert abs(g(x)[0] - sub.b[0]) < 1e-6 and g(x)[1] < sub.b[1] + 1e-9
    assert np.all(x >= sub.alpha) and np.all(x <= sub.beta)


@pytest.mark.parametrize("preset", ["mbb", "cantilever", "bridge"])
def test_mma_reaches_ocs_compliance_at_the_same_volume(preset):
    problem = problems.preset(preset, 64, 32, 0.5)
    oc = driver.optimise(problem, **QUIET)
    got = driver.optimise(problem, optimizer="mma", **QUIET)
    # MMA ends on the feasible side of the volume constraint, within 1e-4 of OC's (which meets it exactly).
    assert oc["volume_fraction"] - 1e-4 < got["volume_fraction"] <= oc["volume_fraction"] + 1e-6
    assert got["compliance"] < 1.02 * oc["compliance"]


@two_ranks
def test_mma_on_2_ranks_follows_the_1_rank_run():
    problem = problems.preset("cantilever", 48, 24, 0.4)
    two = collective(lambda: driver.optimise(problem, optimizer="mma", iterations=40, solver="direct", **QUIET))[0]
    if MPI.COMM_WORLD.rank == 0:
        one = driver.optimise(problem, comm=petsc().COMM_SELF, optimizer="mma", iterations=40, solver="direct",
                              **QUIET)
        assert one["iterations"] == two["iterations"]
        assert abs(one["compliance"] - two["compliance"]) < 1e-8 * one["compliance"]
        assert np.abs(one["density"] - two["density"]).max() < 1e-6
