"""Run the score command with rank 1 failing unexpectedly on its second record.

Used by tests/test_score_mpi.py to show that one rank's unexpected exception
ends the whole job (instead of leaving the other ranks waiting) and that what
was written stays valid for --resume.
"""

import sys
import time

from mpi4py import MPI

from sphyr_hpc.scoring import scorer
from sphyr_hpc.score import main

if MPI.COMM_WORLD.rank == 1:
    original = scorer.Scorer.score_case  # what score and the per-sample scorer both call
    calls = []

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("injected failure for the abort test")
        return original(self, *args, **kwargs)

    scorer.Scorer.score_case = failing
else:
    # Rank 0 is slowed so that rank 1 takes its share of the records whatever the machine's load: on a
    # busy machine rank 0 could otherwise score every record before rank 1 reached its second one.
    slow = scorer.Scorer.score_case

    def slowed(self, *args, **kwargs):
        time.sleep(0.2)
        return slow(self, *args, **kwargs)

    scorer.Scorer.score_case = slowed

sys.exit(main(sys.argv[1:]))
