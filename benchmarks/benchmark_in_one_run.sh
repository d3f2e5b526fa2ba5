#!/bin/sh
# A whole benchmark in one run against one run per subject, on 2 ranks, interleaved (one, the 16, one, the 16).
#   benchmarks/benchmark_in_one_run.sh DATA_DIR COMPLETIONS_DIR OUT_DIR
# COMPLETIONS_DIR holds MODEL/SUBJECT.jsonl (benchmarks/baseline_completions.py makes two baselines').
# Every run computes its yardsticks (--no-store). Prints one line a run: what, seconds, load.
set -e
data=$1 completions=$2 out=$3
mkdir -p "$out"
stamp() { date +%s.%N; }
for round in 1 2; do
  start=$(stamp)
  bin/mpirun -n 2 .venv/bin/python -m sphyr_hpc.score --dataset "$data" --completions "$completions" \
      --out "$out/one-$round" --no-store --quiet --no-report > "$out/one-$round.log" 2>&1 || true
  echo "one run, 16 subjects, round $round: $(echo "$(stamp) - $start" | bc) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(stamp)
  for dataset in "$data"/*.jsonl; do
    subject=$(basename "$dataset" .jsonl)
    bin/mpirun -n 2 .venv/bin/python -m sphyr_hpc.score --dataset "$dataset" \
        --completions "$completions"/*/"$subject.jsonl" --out "$out/sep-$round/$subject" --no-store --quiet \
        --no-report > "$out/sep-$round-$subject.log" 2>&1 || true
  done
  echo "16 runs, one a subject, round $round: $(echo "$(stamp) - $start" | bc) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
done
