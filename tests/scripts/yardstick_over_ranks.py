"""A yardstick on a system over every rank (PETSc.COMM_WORLD), its SIMP runs on multigrid.

Used by tests/test_sizes.py: ``bin/mpirun -n 2 python tests/scripts/yardstick_over_ranks.py OUT.json``
computes the yardstick of the upscaled fixture full_easy[0] (40x40, 3362 DOFs: over
sizing.MG_MIN_DOFS) with a few SIMP iterations, closes the system, and rank 0 writes the
compliance, the design and how many multigrid solves failed (SolverError) to OUT.json.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sphyr_hpc.core import grid as grids  # noqa: E402
from sphyr_hpc.core import loadcase as loadcases  # noqa: E402
from sphyr_hpc.optimiser import yardstick  # noqa: E402
from sphyr_hpc.runtime.petsc import petsc  # noqa: E402
from sphyr_hpc.solvers.base import SolverError  # noqa: E402
from sphyr_hpc.solvers.elasticity import elasticity_system  # noqa: E402
from sphyr_hpc.solvers.system import GridSystem  # noqa: E402

MAX_ITERATIONS = 15


def upscaled_problem():
    """tests/data/upscaled's full_easy[0] (40x40): load case, full mask, ground-truth densities."""
    path = ROOT / "tests" / "data" / "upscaled" / "results" / "upscaled-gt" / "full_easy.json"
    truth = grids.as_grid(json.loads(path.read_text())[0]["ground_truth"])
    lc = loadcases.from_grid(truth)
    rho, _ = grids.densities(truth)
    rho[lc.structural_mask()] = 1.0
    return lc, ~lc.structural_mask(), rho


def main(out):
    failed = []
    solve = GridSystem.solve

    def counted(self, moduli):
        try:
            return solve(self, moduli)
        except SolverError:
            if self.solver == "mg":
                failed.append(1)
            raise

    GridSystem.solve = counted
    lc, free, truth = upscaled_problem()
    PETSc = petsc()
    with elasticity_system(lc, comm=PETSc.COMM_WORLD, solver="direct") as system, \
            yardstick.Workspace(system) as workspace:
        result = yardstick.yardstick(workspace, float(truth.mean()), free, truth, seeds=(truth,),
                                     settings=yardstick.YardstickSettings(max_iterations=MAX_ITERATIONS,
                                                                          mg_min_dofs=0))
    failures = PETSc.COMM_WORLD.tompi4py().allreduce(len(failed))
    if PETSc.COMM_WORLD.getRank() == 0:
        Path(out).write_text(json.dumps({"compliance": result.compliance, "densities": result.densities.tolist(),
                                         "multigrid_failures": failures}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
