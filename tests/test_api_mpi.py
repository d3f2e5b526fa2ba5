"""score_records over MPI ranks (run under ``mpirun -n 2 python -m pytest -m mpi``).

Every rank calls score_records and iterates it to the end; rank 0 receives
every result.  Results are broadcast from rank 0 before any assertion, so all
ranks assert on the same data and pass or fail together.  Under plain pytest
(one rank) the module is skipped.
"""

import json

import pytest
from mpi4py import MPI

from conftest import DATA, collective
from sphyr_hpc.api import get_structural_metrics, score_records

WORLD = MPI.COMM_WORLD
pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(WORLD.size < 2, reason="needs >= 2 ranks: mpirun -n 2 python -m pytest -m mpi"),
]


def _records():
    with open(DATA / "full_easy_first20.jsonl") as handle:
        data = [json.loads(line) for line in handle if line.strip()][:6]
    # two completions of each sample (the answer, and the masked input left unfilled) and one broken record
    return ([dict(r, completion=r["ground_truth"]) for r in data] + [dict(r, completion=r["input_grid"]) for r in data]
            + [{"ground_truth": data[0]["ground_truth"], "completion": None, "input_grid": data[0]["input_grid"]}])


@pytest.fixture(autouse=True)
def _barrier_after_each_test():
    yield
    WORLD.Barrier()


def test_rank_0_receives_every_result_and_they_equal_single_calls():
    records = _records()
    mine = collective(lambda: [(r.position, r.metrics, r.error) for r in score_records(records)])
    on_root = WORLD.bcast(mine[0], root=0)
    assert all(not got for got in mine[1:])  # the other ranks yield nothing
    assert sorted(p for p, _, _ in on_root) == list(range(len(records)))
    worked = WORLD.allgather(len(on_root))  # every rank got the same list to check
    assert len(set(worked)) == 1
    expected = {i: get_structural_metrics(r["completion"], r["ground_truth"], r["input_grid"])
                for i, r in enumerate(records[:-1])}
    for position, metrics, error in on_root:
        if position == len(records) - 1:
            assert metrics is None and "completion" in error
        else:  # exact by construction: each record is scored whole on one rank's serial system, as here
            assert error is None and metrics == expected[position], position


def test_records_need_only_be_given_on_rank_0():
    records = _records()[:4]
    mine = collective(lambda: sorted(r.position for r in score_records(records if WORLD.rank == 0 else None)))
    assert WORLD.bcast(mine[0], root=0) == [0, 1, 2, 3]


def test_stopping_early_on_rank_0_releases_every_rank():
    records = _records()

    def first_two():
        taken = []
        for result in score_records(records):
            taken.append(result.position)
            if len(taken) == 2:
                break
        return len(taken)

    counts = collective(first_two)
    assert counts[0] == 2 and all(c == 0 for c in counts[1:])
    # the ranks are free again: a second batch runs to the end
    again = collective(lambda: len(list(score_records(records[:3]))))
    assert again[0] == 3
