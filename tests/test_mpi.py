"""Distributed runs equal serial ones (run with ``mpirun -n 2 python3 -m pytest tests/test_mpi.py``).

Every test computes the same quantity on ``PETSc.COMM_WORLD`` (distributed) and on
``PETSc.COMM_SELF`` (each rank alone), gathers the results of all ranks, and only
then asserts on the gathered data, so every rank reaches every assertion with the
same values and either all ranks pass or all fail: no rank is left waiting in a
collective.  Each test ends with a barrier.

Under plain ``pytest`` (one rank) the whole module is skipped.
"""

import json
import os

import numpy as np
import pytest
from mpi4py import MPI

from conftest import cantilever, collective
from sphyr_hpc.core import discretisation as fe
from sphyr_hpc.core import grid as grids
from sphyr_hpc.core import loadcase as lcs
from sphyr_hpc.runtime.petsc import petsc
from sphyr_hpc.optimiser import simp
from sphyr_hpc.optimiser.filter import DensityFilter
from sphyr_hpc.solvers.elasticity import elasticity_system

_MPI_MARK = pytest.mark.mpi  # registered in conftest.py

WORLD = MPI.COMM_WORLD
pytestmark = [
    _MPI_MARK,
    pytest.mark.skipif(WORLD.size < 2, reason="MPI tests need >= 2 ranks: "
                       "mpirun -n 2 python3 -m pytest tests/test_mpi.py"),
]

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "v1_sample.jsonl")
with open(DATA) as _fh:
    RECORDS = [json.loads(line) for line in _fh if line.strip()]
RECORD_IDS = [f"full_easy[{r['index']}]" for r in RECORDS]


def _world_system(loadcase, **kwargs):
    return elasticity_system(loadcase, comm=petsc().COMM_WORLD, **kwargs)


def _self_system(loadcase, **kwargs):
    return elasticity_system(loadcase, comm=petsc().COMM_SELF, **kwargs)


def _ground_truth(record):
    grid = grids.as_grid(record["ground_truth"])
    rho, _ = grids.densities(grid)
    return lcs.from_grid(grid), rho


def _solve_both(lc, rho):
    """Compliance, displacements, energies and max displacement, distributed and serial."""
    moduli = fe.simp_modulus(rho)
    with _world_system(lc, prefix="mpi_world_") as world:
        c_world = world.solve(world.slab_of(moduli))
        u_world = world.natural_displacements()
        e_world = world.gather(world.unit_energies())
        m_world = world.max_displacement()
        slab_cells = int(np.prod(world.slab_shape))
    with _self_system(lc, prefix="mpi_self_") as alone:
        c_self = alone.solve(alone.slab_of(moduli))
        u_self = alone.natural_displacements()
        e_self = alone.gather(alone.unit_energies())
        m_self = alone.max_displacement()
    return dict(c_world=c_world, c_self=c_self, u_world=u_world, u_self=u_self, e_world=e_world,
                e_self=e_self, m_world=m_world, m_self=m_self, slab_cells=slab_cells)


def _assert_distributed_equals_serial(results, lc):
    assert len(results) == WORLD.size
    # A distributed slab is a proper part of the grid on every rank, and the parts tile it.
    assert all(0 < r["slab_cells"] < lc.n_elements for r in results)
    assert sum(r["slab_cells"] for r in results) == lc.n_elements
    first = results[0]
    assert np.isfinite(first["c_world"]) and first["c_world"] > 0
    for r in results:
        # Collective results are the same on every rank, exactly by construction: computed once and handed
        # round (allgather of the owned pieces; an allreduce, whose sum of 2 terms is a + b = b + a) ...
        assert r["c_world"] == first["c_world"]
        assert r["m_world"] == first["m_world"]
        np.testing.assert_array_equal(r["u_world"], first["u_world"])
        np.testing.assert_array_equal(r["e_world"], first["e_world"])
        # ... and equal what each rank computes alone: Cholesky of K gathered to rank 0 vs on 1 rank, another
        # summation order of K and of the compliance, so within rounding of a well-conditioned load path.
        assert r["c_world"] == pytest.approx(r["c_self"], rel=1e-10)
        assert r["m_world"] == pytest.approx(r["m_self"], rel=1e-10)
        assert np.linalg.norm(r["u_world"] - r["u_self"]) <= 1e-10 * np.linalg.norm(r["u_self"])
        np.testing.assert_allclose(r["e_world"], r["e_self"], rtol=1e-8, atol=1e-10 * r["e_self"].max())


@pytest.mark.parametrize("record", RECORDS, ids=RECORD_IDS)
def test_distributed_ground_truth_compliance_equals_the_serial_one(record):
    lc, rho = _ground_truth(record)
    assert lc.shape == (10, 10)
    results = collective(lambda: _solve_both(lc, rho))
    _assert_distributed_equals_serial(results, lc)


@pytest.mark.parametrize("design", ["solid", "graded"])
def test_distributed_cantilever_compliance_equals_the_serial_one(design):
    lc = cantilever(20, 40)
    if design == "solid":
        rho = np.ones(lc.shape)
    else:  # the same field on every rank: a fixed seed
        rho = np.random.default_rng(17).uniform(0.2, 1.0, lc.shape)
    results = collective(lambda: _solve_both(lc, rho))
    _assert_distributed_equals_serial(results, lc)


def test_slab_of_and_gather_round_trip_and_tile_the_grid():
    lc = cantilever(20, 40)
    field = np.arange(lc.n_elements, dtype=float).reshape(lc.shape) * 0.5 - 3.0

    def compute():
        with _world_system(lc, prefix="mpi_gather_") as world:
            slab = world.slab_of(field)
            round_trip = world.gather(slab)
            owner = world.gather(np.full(world.slab_shape, float(WORLD.rank)).ravel())
        return round_trip, owner, slab.size

    results = collective(compute)
    owners = results[0][1]
    for round_trip, owner, size in results:  # scatter and gather of the same values: copies, exact
        np.testing.assert_array_equal(round_trip, field)
        np.testing.assert_array_equal(owner, owners)
    # Every rank owns a non-empty part and the parts' sizes add up to the grid.
    counts = [int(np.sum(owners == rank)) for rank in range(WORLD.size)]
    assert counts == [size for _, _, size in results]
    assert all(n > 0 for n in counts) and sum(counts) == lc.n_elements


def _simp_history(comm_kind, lc, prefix):
    free, pinned = simp.design_space(lc, ~lc.structural_mask(), np.zeros(lc.shape))
    make = _world_system if comm_kind == "world" else _self_system
    with make(lc, prefix=prefix) as system:
        dfilter = DensityFilter(system)
        try:
            result = simp.run_simp(system, dfilter, 0.4, free, pinned, simp.SimpSettings(max_iterations=20))
        finally:
            dfilter.close()
    return result


@pytest.mark.parametrize("problem", ["ground_truth", "cantilever"])
def test_distributed_simp_run_has_the_serial_compliance_history(problem):
    lc = _ground_truth(RECORDS[1])[0] if problem == "ground_truth" else cantilever(20, 40)

    def compute():
        world = _simp_history("world", lc, "mpi_simp_world_")
        alone = _simp_history("self", lc, "mpi_simp_self_")
        return world, alone

    results = collective(compute)
    reference_world = results[0][0]
    assert len(reference_world.history) >= 2
    for world, alone in results:
        assert world.iterations == alone.iterations
        assert world.converged == alone.converged
        assert len(world.history) == len(alone.history) == world.iterations
        for (it_w, c_w, ch_w), (it_s, c_s, ch_s) in zip(world.history, alone.history):
            assert it_w == it_s
            assert np.isfinite(c_w)
            assert c_w == pytest.approx(c_s, rel=1e-10)
            assert ch_w == pytest.approx(ch_s, rel=1e-8, abs=1e-10)
        assert world.compliance == pytest.approx(alone.compliance, rel=1e-10)
        np.testing.assert_allclose(world.densities, alone.densities, rtol=0, atol=1e-9)
        # The distributed result is identical on every rank, exactly by construction: every rank takes the
        # same allreduced volumes and compliance through the same bisection, and gathers the same densities.
        assert world.compliance == reference_world.compliance
        np.testing.assert_array_equal(world.densities, reference_world.densities)
    # The run honours the volume constraint (docs/scoring.md, "SIMP run": sum(physical) <= pinned + budget).
    assert reference_world.densities.mean() <= 0.4 + 1e-6
    # Compliance decreases overall from the uniform start.
    assert reference_world.history[-1][1] < reference_world.history[0][1]


def test_a_rank_out_of_work_waits_asleep_for_the_one_still_working():
    # run_dynamic with one long task: the rank that gets no task waits for the other to finish
    # without polling MPI at full speed (on shared cores it would take the worker's CPU time).
    import time

    from sphyr_hpc.runtime.tasks import run_dynamic

    def compute():
        def task(i, counters):
            finish = time.process_time() + 1.0
            while time.process_time() < finish:  # a task that keeps its rank busy for a second of CPU
                pass
            counters.add_done(1)

        cpu, wall = time.process_time(), time.perf_counter()
        run_dynamic(WORLD, 1, task)
        return time.process_time() - cpu, time.perf_counter() - wall

    spent = collective(compute)
    waited = min(spent, key=lambda s: s[0])  # the rank that took no task
    worked = max(spent, key=lambda s: s[0])
    assert waited[1] >= 0.9 and worked[0] >= 1.0  # it did wait for the busy rank
    # Asleep: a spinning wait gets about the CPU time the busy rank gets, whatever else the machine
    # runs (on a loaded machine both get less than their wall time: CPU time against CPU time).
    assert waited[0] < 0.3 * worked[0]
    WORLD.Barrier()
