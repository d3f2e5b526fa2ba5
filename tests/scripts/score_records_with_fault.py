"""score_records over the ranks with rank 1 failing unexpectedly on its first record.

Used by tests/test_api.py to show that one rank's unexpected exception ends
the whole job (exit status 3) instead of leaving rank 0 waiting for results.

    mpirun -n 2 python tests/scripts/score_records_with_fault.py DATASET.jsonl
"""

import json
import sys

from mpi4py import MPI

from sphyr_hpc.scoring import scorer
from sphyr_hpc.api import score_records

if MPI.COMM_WORLD.rank == 1:
    def failing(self, *args, **kwargs):
        raise RuntimeError("injected failure for the abort test")

    scorer.Scorer.score_case = failing  # what Scorer.score and the per-sample scorer both call

with open(sys.argv[1]) as handle:
    records = [json.loads(line) for line in handle if line.strip()][:6]
for result in score_records([dict(r, completion=r["ground_truth"]) for r in records]):
    print(result.position, result.metrics.topology_score)
