#!/bin/bash
# A long optimisation on a Slurm cluster that outlives its queue's time limit: it saves itself and
# resubmits itself until the run is done.
#
#   cd sphyr_hpc && sbatch examples/slurm_optimize.sh     # mbb 4096x2048, 300 iterations -> run-mbb/
#   PRESET=bridge SIZE=2048x1024 OUT=/scratch/me/bridge sbatch examples/slurm_optimize.sh
#
# --signal=TERM@120 has Slurm send SIGTERM to the ranks 120 s before the time limit; optimize then
# finishes the iteration it is in, writes its checkpoint ($OUT/checkpoint) and exits with 143.  This
# script then submits itself again, and the next job continues the run with --resume (which, on the
# first submission, finds no checkpoint and starts it).  A job killed without warning (a node
# failure, kill -9) loses at most --checkpoint-every iterations: resubmit it by hand, or let
# --requeue do it after a preemption.  The run's history in $OUT/run.json is one, whole, however
# many jobs it took; the same checkpoint also resumes on another number of ranks or nodes.
#
#SBATCH --job-name=sphyr-optimize
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=32
#SBATCH --cpus-per-task=1
#SBATCH --time=00:30:00
#SBATCH --signal=TERM@120
#SBATCH --requeue
#SBATCH --output=slurm-%j.out
set -euo pipefail

# The checkout with its .venv (bin/setup): by default the folder sbatch was run from (Slurm runs a
# copy of this script from its spool folder, so the script's own location says nothing).
SPHYR_HPC=${SPHYR_HPC:-${SLURM_SUBMIT_DIR:-$PWD}}
PYTHON=${PYTHON:-$SPHYR_HPC/.venv/bin/python}
PRESET=${PRESET:-mbb}
SIZE=${SIZE:-4096x2048}
ITERATIONS=${ITERATIONS:-300}
OUT=${OUT:-run-$PRESET}
# How many times the run may submit itself (a run that cannot progress does not loop forever).
SUBMISSION=${SUBMISSION:-1}
MAX_SUBMISSIONS=${MAX_SUBMISSIONS:-20}

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$OUT"
OUT=$(realpath "$OUT")  # the next job runs in the same folder, but says where explicitly

echo "sphyr_hpc.optimize on ${SLURM_NTASKS:-?} ranks, submission $SUBMISSION: $PRESET $SIZE -> $OUT"
status=0
# srun starts the MPI ranks (PMIx); with an MPI that Slurm cannot launch, use: mpirun "$PYTHON" -m ...
srun "$PYTHON" -m sphyr_hpc.optimize --preset "$PRESET" --size "$SIZE" --iterations "$ITERATIONS" \
  --checkpoint "$OUT/checkpoint" --checkpoint-every 10 --resume --quiet \
  --json "$OUT/run.json" --png "$OUT/design.png" --save-density "$OUT/design.npy" || status=$?

if [ "$status" -eq 143 ] || [ "$status" -eq 130 ]; then
  if [ "$SUBMISSION" -ge "$MAX_SUBMISSIONS" ]; then
    echo "examples/slurm_optimize.sh: stopped after $SUBMISSION submissions (MAX_SUBMISSIONS); the run is saved in $OUT/checkpoint" >&2
    exit "$status"
  fi
  echo "interrupted (status $status): the run is saved in $OUT/checkpoint; submitting the next job"
  sbatch --chdir="$PWD" --export="ALL,SUBMISSION=$((SUBMISSION + 1)),OUT=$OUT,SPHYR_HPC=$SPHYR_HPC" \
    "$SPHYR_HPC/examples/slurm_optimize.sh"
  exit 0
fi
exit "$status"
