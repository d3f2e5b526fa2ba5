"""Shared fixtures: the repository on sys.path and the parity fixtures' location."""

import sys
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
