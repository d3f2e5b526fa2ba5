"""certify over 2 ranks writes the records one rank writes (run under mpirun -n 2 by bin/test)."""

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from mpi4py import MPI

from conftest import DATA, collective
from sphyr_hpc.certify import build_parser
from sphyr_hpc.jobs.certify import run_certify

WORLD = MPI.COMM_WORLD
pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(WORLD.size < 2, reason="needs >= 2 ranks: mpirun -n 2 python3 -m pytest -m mpi"),
]
SUBJECTS = ("3_random_row_easy", "1_random_row_hard", "10_random_cell_easy")


def _rows(out):
    rows = [json.loads(line) for line in (Path(out) / "certify.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("seconds", "cpu_seconds")} for r in rows]


def test_one_and_two_ranks_certify_the_same_records():
    folder = WORLD.bcast(tempfile.mkdtemp(prefix="certify_mpi_") if WORLD.rank == 0 else None, root=0)
    datasets = [str(DATA / "certify" / f"{s}.jsonl") for s in SUBJECTS]

    def args(out):
        return build_parser().parse_args(["--dataset", *datasets, "--out", str(Path(folder) / out), "--quiet"])

    def compute():
        world = run_certify(args("world"), WORLD)
        alone = run_certify(args("self"), MPI.COMM_SELF) if WORLD.rank == 0 else 0
        return world, alone

    statuses = collective(compute)
    assert all(s == (0, 0) for s in statuses)
    verdict = None
    if WORLD.rank == 0:
        world, alone = _rows(Path(folder) / "world"), _rows(Path(folder) / "self")
        ranks = json.loads((Path(folder) / "world" / "summary.json").read_text())["ranks"]
        verdict = (len(world), world == alone, ranks)
        shutil.rmtree(folder)
    assert WORLD.bcast(verdict, root=0) == (7, True, 2)  # every rank asserts the same thing
