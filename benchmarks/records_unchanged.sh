#!/bin/bash
# Today's inputs scored by an old checkout and by this one, the same command in each: cmp of results.jsonl.
#   benchmarks/records_unchanged.sh OLD_CHECKOUT NEW_CHECKOUT WORK_DIR COMPLETIONS_DIR
# COMPLETIONS_DIR holds MODEL/SUBJECT.jsonl for v1 (benchmarks/baseline_completions.py), and
# COMPLETIONS_DIR-v2_20 the same for v2_20; each subject is scored with both models' files, written
# as SUBJECT/MODEL.jsonl (a layout both checkouts read: the model is the file's name).
old=$(realpath "$1") new=$(realpath "$2") work=$3 comp=$4
mkdir -p "$work"; work=$(realpath "$work")
score() {  # score SIDE NAME ARGS...
  side=$1 name=$2; shift 2
  (cd "${!side}" && timeout 1800 .venv/bin/python -m sphyr_hpc.score "$@" --out "$work/$side/$name" --store "$work/store-$side" \
      --quiet --no-report > "$work/$side/$name.log" 2>&1)
}
for side in old new; do
  mkdir -p "$work/$side"
  score $side examples-results "$new/examples/results"
  score $side my-model-full_easy --dataset "$new/examples/data/v1/full_easy.jsonl" --completions "$new/examples/completions/my-model.jsonl"
  score $side my-model-3_random_row_easy --dataset "$new/examples/data/v1/3_random_row_easy.jsonl" \
      --completions "$new/examples/completions/3_random_row_easy/my-model.jsonl"
  for data in v1 v2_20; do
    src=$comp; [ $data = v2_20 ] && src=$comp-v2_20
    for dataset in "$new/examples/data/$data"/*.jsonl; do
      subject=$(basename "$dataset" .jsonl)
      mkdir -p "$work/layout-$data/$subject"
      for model in baseline-empty baseline-random; do cp "$src/$model/$subject.jsonl" "$work/layout-$data/$subject/$model.jsonl"; done
      score $side "$data-$subject" --dataset "$dataset" --completions "$work/layout-$data/$subject"/*.jsonl
    done
  done
done
same=0 differ=0
for folder in "$work"/old/*/; do
  name=$(basename "$folder")
  if cmp -s "$folder/results.jsonl" "$work/new/$name/results.jsonl"; then same=$((same + 1)); else differ=$((differ + 1)); echo "differ: $name"; fi
done
echo "results.jsonl the same bytes in $same runs, different in $differ"
