"""The yardstick store on 2 ranks (run under ``mpirun -n 2 python -m pytest -m mpi`` by bin/test):
a cold and a warm store give the records one rank writes without one, byte for byte, and
score_records over the ranks reads what an earlier call wrote."""

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from mpi4py import MPI

from conftest import EXAMPLE_RESULTS, collective
from sphyr_hpc.io.yardstick_store import YardstickStore
from sphyr_hpc.jobs.score import run_score
from sphyr_hpc.score import build_parser

WORLD = MPI.COMM_WORLD
pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(WORLD.size < 2, reason="needs >= 2 ranks: mpirun -n 2 python3 -m pytest -m mpi"),
]
SUBJECTS = ("full_easy", "3_random_row_hard", "1_random_cell_easy")


def _folder():
    """One temporary folder, the same on every rank, holding three models' records of SUBJECTS (two
baselines and the ground truth's answers)."""
    folder = None
    if WORLD.rank == 0:
        folder = Path(tempfile.mkdtemp(prefix="store_mpi_"))
        for model in ("baseline-empty", "baseline-random"):
            (folder / "results" / model).mkdir(parents=True)
            for subject in SUBJECTS:
                shutil.copy(EXAMPLE_RESULTS / model / f"{subject}.json",
                            folder / "results" / model / f"{subject}_results.json")
        (folder / "results" / "truth").mkdir()
        for subject in SUBJECTS:  # the ground truth's answers: their analysis is the stored reference's
            records = json.loads((EXAMPLE_RESULTS / "baseline-empty" / f"{subject}.json").read_text())
            (folder / "results" / "truth" / f"{subject}_results.json").write_text(
                json.dumps([dict(r, completion=r["ground_truth"]) for r in records]))
    return Path(WORLD.bcast(str(folder) if folder else None, root=0))


def test_two_ranks_with_a_cold_and_a_warm_store_write_the_records_one_rank_writes_without():
    folder = _folder()

    def args(out, *store):
        return build_parser().parse_args([str(folder / "results"), "--out", str(folder / out), "--quiet",
                                          "--no-report", *store])

    def compute():
        cold = run_score(args("cold", "--store", str(folder / "store")), WORLD)
        warm = run_score(args("warm", "--store", str(folder / "store")), WORLD)
        alone = run_score(args("alone", "--no-store"), MPI.COMM_SELF) if WORLD.rank == 0 else 0
        return cold, warm, alone

    assert all(s == (0, 0, 0) for s in collective(compute))
    verdict = None
    if WORLD.rank == 0:
        records = [(folder / out / "results.jsonl").read_bytes() for out in ("cold", "warm", "alone")]
        runs = [json.loads((folder / out / "run.json").read_text())["yardsticks"] for out in ("cold", "warm")]
        entries = sum(1 for f in YardstickStore(folder / "store").files() if f.digest)
        verdict = (records[0] == records[1] == records[2], runs[0]["computed"], runs[0]["from_store"],
                   runs[1]["from_store"], runs[1]["computed"], entries)
        shutil.rmtree(folder)
    verdict = WORLD.bcast(verdict, root=0)
    assert verdict[0] and verdict[2] == verdict[4] == 0 and verdict[1] == verdict[3] == verdict[5] > 0


def test_score_records_over_ranks_reads_what_an_earlier_call_stored():
    from sphyr_hpc.api import _stored_for, clear_reference_cache, score_records

    folder = _folder()
    records = [dict(r, completion=r["completion"]) for subject in SUBJECTS
               for r in json.loads((EXAMPLE_RESULTS / "baseline-random" / f"{subject}.json").read_text())]
    store = str(folder / "api-store")

    def scored():
        clear_reference_cache()
        return sorted((r.position, r.metrics, r.error) for r in score_records(records, comm=WORLD, store=store))

    first = collective(scored)[0]
    stored = _stored_for(store)
    counts_first = WORLD.allreduce(stored.from_store), WORLD.allreduce(stored.computed)
    again = collective(scored)[0]
    counts_again = WORLD.allreduce(stored.from_store), WORLD.allreduce(stored.computed)
    clear_reference_cache()
    if WORLD.rank == 0:
        shutil.rmtree(folder)
    assert first == again and len(first) == len(records)
    assert counts_first[0] == 0 and counts_first[1] > 0
    assert counts_again == (counts_first[1], counts_first[1])  # the second call computed nothing
