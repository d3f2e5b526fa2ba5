"""Write the sample field files the field tests inspect, on any number of ranks.

    [bin/mpirun -n 2] python tests/paraview/write_sample_fields.py OUT_DIR NELY NELX [--die-after N]

Writes, for the sample load case and design of ``sample_problem`` (below): one
design in each format (``design.xdmf``, ``design_quad.xdmf``, ``design.vtu``)
and a 3-step history in each (``history.xdmf``, ``history_quad.xdmf``,
``history.pvd``), all from an elasticity_system on COMM_WORLD, plus
``problem.npz`` (rank 0) with the in-memory natural arrays.  With
``--die-after N`` it writes N steps of ``dying.xdmf`` and exits at once
(``os._exit``: no close, no clean-up), like a run that crashes.
"""

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from sphyr_hpc.core import discretisation as fe  # noqa: E402
from sphyr_hpc.core import loadcase as lcs  # noqa: E402


def sample_problem(nely, nelx, seed=7):
    """A non-square load case (load on top, supports at the bottom corners), a design and a mask."""
    load = ((0, nelx // 2),)
    supports = ((nely - 1, 0), (nely - 1, nelx - 1))
    lc = lcs.LoadCase(nely, nelx, load, supports)
    rng = np.random.default_rng(seed)
    rho = rng.uniform(0.05, 1.0, lc.shape)
    rho[lc.structural_mask()] = 1.0
    masked = np.zeros(lc.shape, dtype=bool)
    masked[nely // 3: nely // 3 + 2, 1: nelx - 1] = True
    masked &= ~lc.structural_mask()
    return lc, rho, masked


def history_densities(rho, step):
    """The design of history step 1, 2, 3: a blend towards ``rho``."""
    return np.clip(rho * (0.5 + step / 6.0), 0.0, 1.0)


def main(argv):
    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.io import fields
    from sphyr_hpc.solvers.elasticity import elasticity_system

    out, nely, nelx = argv[0], int(argv[1]), int(argv[2])
    die_after = int(argv[argv.index("--die-after") + 1]) if "--die-after" in argv else None
    PETSc = petsc()
    comm = PETSc.COMM_WORLD
    lc, rho, masked = sample_problem(nely, nelx)
    with elasticity_system(lc, comm=comm, prefix="fields_sample_", solver="direct") as system:
        compliance = system.solve(system.slab_of(fe.simp_modulus(rho)))
        if die_after is not None:
            writer = fields.HistoryWriter(os.path.join(out, "dying"), system, masked=masked)
            for step in range(1, die_after + 1):
                writer.write_step(step, system.slab_of(history_densities(rho, step)), compliance=compliance)
            comm.tompi4py().Barrier()
            os._exit(3)
        u = system.natural_displacements()
        for fmt, name in (("xdmf", "design"), ("xdmf-quad", "design_quad"), ("vtu", "design")):
            fields.write_fields(os.path.join(out, name), system, system.slab_of(rho), masked=masked,
                                compliance=compliance, fields_format=fmt)
        for fmt, name in (("xdmf", "history"), ("xdmf-quad", "history_quad"), ("vtu", "history")):
            with fields.HistoryWriter(os.path.join(out, name), system, masked=masked, fields_format=fmt) as writer:
                for step in (1, 2, 3):
                    writer.write_step(step, system.slab_of(history_densities(rho, step)),
                                      compliance=compliance * step, change=0.1 / step)
        if comm.getRank() == 0:
            np.savez(os.path.join(out, "problem.npz"), rho=rho, masked=masked, u=u, compliance=compliance,
                     ranks=comm.getSize())


if __name__ == "__main__":
    main(sys.argv[1:])
