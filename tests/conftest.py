"""Shared fixtures: the repository on sys.path and the parity fixtures' location."""

import sys
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EXAMPLE_RESULTS = ROOT / "examples" / "results"
DATA = Path(__file__).resolve().parent / "data"


def pytest_configure(config):
    config.addinivalue_line("markers", "mpi: needs at least 2 MPI ranks (run under mpirun -n 2)")


@pytest.fixture(scope="session")
def example_results():
    return EXAMPLE_RESULTS


def collective(compute):
    """Run ``compute()`` on every rank of COMM_WORLD; return every rank's result.

    An exception on one rank is caught and reported on all ranks (after the
    allgather), so no rank goes on to the next collective alone.
    """
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    try:
        outcome = (True, compute())
    except Exception:  # noqa: BLE001 - reported below on every rank
        outcome = (False, f"rank {world.rank}:\n{traceback.format_exc()}")
    outcomes = world.allgather(outcome)
    failures = [payload for ok, payload in outcomes if not ok]
    if failures:
        pytest.fail("\n".join(failures))
    return [payload for _, payload in outcomes]
