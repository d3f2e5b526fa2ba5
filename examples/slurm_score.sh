#!/bin/bash
# Score SPhyR result folders on a Slurm cluster: one MPI job, every rank takes work as it frees up
# (whole samples, and the pieces of large samples' yardsticks), records appended to $OUT/results.jsonl.
#
#   cd sphyr_hpc && sbatch examples/slurm_score.sh     # the bundled examples/results -> out-slurm/
#   RESULTS=/scratch/me/sphyr-results OUT=/scratch/me/scored sbatch examples/slurm_score.sh
#
# Interrupted (time limit, preemption, node failure)?  Submit the same script again: it always passes
# --resume, which keeps every record already in $OUT/results.jsonl (a line cut short is dropped) and
# scores the rest; the first submission simply finds nothing to keep.  --requeue lets Slurm resubmit a
# preempted job by itself.  Each record ends up in results.jsonl exactly once.
#
# Ranks: one per physical core (each rank limits its BLAS to one thread).  A rank needs a few hundred MB
# at 160x160; SPhyR's 10x10 and 20x20 samples need far less.  Output: --out must be a folder on a
# file system all nodes share and where O_APPEND writes from several nodes stay whole lines (Lustre,
# GPFS/Spectrum Scale, BeeGFS; not NFS); Slurm's own log goes to slurm-<job>.out (the leaderboard at
# the end); the run's summary.json, leaderboard.png and run.json are written when it finishes.
#
#SBATCH --job-name=sphyr-score
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=32
#SBATCH --cpus-per-task=1
#SBATCH --time=02:00:00
#SBATCH --requeue
#SBATCH --output=slurm-%j.out
set -euo pipefail

# The checkout with its .venv (bin/setup): by default the folder sbatch was run from (Slurm runs a
# copy of this script from its spool folder, so the script's own location says nothing).
SPHYR_HPC=${SPHYR_HPC:-${SLURM_SUBMIT_DIR:-$PWD}}
# What to score (result files or folders of model folders of them) and where: by default the
# repository's bundled examples, so the script runs as printed; give RESULTS for your own.
RESULTS=${RESULTS:-$SPHYR_HPC/examples/results}
OUT=${OUT:-out-slurm}
if [ ! -e "$RESULTS" ]; then
  echo "examples/slurm_score.sh: no such file or folder: RESULTS=$RESULTS (give RESULTS=/path/to/result-folders)" >&2
  exit 2
fi
PYTHON=${PYTHON:-$SPHYR_HPC/.venv/bin/python}

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

echo "sphyr_hpc.score on ${SLURM_NTASKS:-?} ranks (${SLURM_JOB_NUM_NODES:-?} nodes): $RESULTS -> $OUT (progress: wc -l $OUT/results.jsonl)"
# srun starts the MPI ranks (PMIx); with an MPI that Slurm cannot launch, use: mpirun "$PYTHON" -m ...
srun "$PYTHON" -m sphyr_hpc.score "$RESULTS" --out "$OUT" --resume --quiet
