"""The cost of one design update alone, MMA's against OC's (LinearOC), in one process on one rank.

    .venv/bin/python benchmarks/mma_update_cost.py > benchmarks/results/plan/mma_update_cost.txt

1024x512 / 2 cells (one rank's share of 1024x512 on 2 ranks), every cell free, an identity
filter and made-up unit energies: the updates' own arithmetic, no solve.  Each of 8 iterations
runs OC's step and then MMA's (interleaved); printed: every step's seconds, the median ratio
MMA / OC over iterations 2-8, and the evaluations of the dual's derivative MMA's last subproblem took.
"""

import os
import time

import numpy as np
from mpi4py import MPI

from sphyr_hpc.optimiser import mma, simp
from sphyr_hpc.optimiser.update import UpdateContext


class Identity:
    def apply(self, x):
        return x.copy()

    def chain(self, d, free):
        return d * free


def main():
    n = 1024 * 512 // 2
    energies = np.random.default_rng(0).uniform(0.5, 2.0, n)
    context = UpdateContext(MPI.COMM_SELF, np.ones(n), np.ones(n, dtype=bool), np.zeros(n), Identity(), 0.5 * n, 0.2)
    updates = {"oc": simp.LinearOC(context), "mma": mma.MMAUpdate(context)}
    designs = {name: (np.full(n, 0.5), np.full(n, 0.5)) for name in updates}
    seconds = {name: [] for name in updates}
    load = os.getloadavg()
    for iteration in range(8):
        for name, update in updates.items():
            design, physical = designs[name]
            started = time.perf_counter()
            design, physical, _ = update.step(design, physical, energies * (1.0 + 0.1 * iteration), 3.0)
            seconds[name].append(time.perf_counter() - started)
            designs[name] = design, physical
    ratio = float(np.median(np.array(seconds["mma"][1:]) / np.array(seconds["oc"][1:])))
    print(f"cells {n}, load average before {load}, after {os.getloadavg()}")
    for name, values in seconds.items():
        print(f"{name} seconds per update: {' '.join(f'{v:.4f}' for v in values)}")
    print(f"median MMA / OC (iterations 2-8): {ratio:.2f}; dual evaluations of MMA's last subproblem: "
          f"{updates['mma'].last_subproblem.evaluations}")


if __name__ == "__main__":
    main()
