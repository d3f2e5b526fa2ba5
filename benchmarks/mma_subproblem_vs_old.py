"""MMA's subproblem solved through its dual (this checkout) against the interior-point method of an older one.

    git worktree add ../old 5d17dd6 && (cd ../old && bin/setup)
    .venv/bin/python benchmarks/mma_subproblem_vs_old.py --old ../old \
        > benchmarks/results/plan/mma_subproblem_vs_old.txt

The first three MMA subproblems of the 64x32 MBB beam (one rank, the default settings) are solved
by this checkout's :class:`~sphyr_hpc.optimiser.mma.Subproblem` and by the older checkout's
``mma.Subproblem`` (loaded from its file; m = 1, epsilon down to 1e-7), and again by the latter with
its epsilon lowered: the largest difference of x, the subproblem's objective and its constraint
for each.  A lower objective with the constraint met is the better solution of the same problem.
"""

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402,F401  (the checkout on the path)

from sphyr_hpc.optimiser import driver, mma, problems  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="the older checkout")
    parser.add_argument("--iterations", type=int, default=3, help="the subproblems of this many iterations")
    parser.add_argument("--epsilon-min", type=float, default=None,
                        help="the older interior point's EPSILON_MIN for every iteration (default: its own, 1e-7)")
    parser.add_argument("--continuation", default=None, help="p_start,p_step,every (default: none)")
    args = parser.parse_args()
    from mpi4py import MPI

    spec = importlib.util.spec_from_file_location("old_mma", Path(args.old) / "sphyr_hpc" / "optimiser" / "mma.py")
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    if args.epsilon_min is not None:
        old.EPSILON_MIN = args.epsilon_min
    continuation = tuple(float(v) for v in args.continuation.split(",")) if args.continuation else None
    subproblems = []
    step = mma.MMAUpdate.step

    def kept(self, *arguments):
        result = step(self, *arguments)
        subproblems.append(self.last_subproblem)
        return result

    mma.MMAUpdate.step = kept
    driver.optimise(problems.preset("mbb", 64, 32, 0.5), driver.RunSettings(update="mma", iterations=args.iterations, tolerance=0,
                                                                          continuation=continuation),
                    comm=None, log=lambda line: None)

    def interior_point(sub):
        return old.Subproblem(old.Reductions(MPI.COMM_SELF), sub.low, sub.upp, sub.alpha, sub.beta, sub.p0, sub.q0,
                              sub.P[None], sub.Q[None], np.array([sub.b])).solve()

    for k, sub in enumerate(subproblems):
        x, lam = sub.solve()
        xo = interior_point(sub)

        def f(xs):
            return sub.p0 @ (1 / (sub.upp - xs)) + sub.q0 @ (1 / (xs - sub.low))

        def g(xs):
            return sub.P @ (1 / (sub.upp - xs)) + sub.Q @ (1 / (xs - sub.low)) - sub.b

        i = int(np.argmax(np.abs(x - xo)))
        print(f"iteration {k + 1}: multiplier {lam:.6g} ({sub.evaluations} evaluations), max |x_dual - "
              f"x_interior_point| {np.abs(x - xo).max():.3g} (that cell: x - alpha {x[i] - sub.alpha[i]:.3g}); "
              f"objective dual {f(x):.12g}, interior point {f(xo):.12g}; constraint g - b: dual {g(x):.3g}, "
              f"interior point {g(xo):.3g}")
    if args.epsilon_min is not None:
        return
    sub = subproblems[0]
    x, _ = sub.solve()
    for epsilon in (1e-9, 1e-11, 1e-13):
        old.EPSILON_MIN = epsilon
        print(f"iteration 1, interior point down to epsilon {epsilon:g}: max |x_dual - x_interior_point| "
              f"{np.abs(x - interior_point(sub)).max():.3g}")


if __name__ == "__main__":
    main()
