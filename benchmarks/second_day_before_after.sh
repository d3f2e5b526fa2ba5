#!/bin/bash
# Each defect of the issue "a benchmark maintainer's second day": the command in an old checkout and in
# this one, what each printed (the last lines) and its exit status.
#   benchmarks/second_day_before_after.sh OLD_CHECKOUT NEW_CHECKOUT WORK_DIR
# Each checkout runs with its own .venv, in its own folder (python -m takes the package from there).
old=$(realpath "$1") new=$(realpath "$2") work=$3
mkdir -p "$work"; work=$(realpath "$work")
v1=$new/examples/data/v1 v2=$new/examples/data/v2_20
printf '{"index": 0, "completion": "0 1"}\n' > "$work/a.jsonl"
python3 - "$v1/full_easy.jsonl" "$work" <<'PY'
import json, sys
first = json.loads(open(sys.argv[1]).readline())
rows = [r.split() if isinstance(r, str) else list(r) for r in first["ground_truth"]]
def text(rows): return "\n".join(" ".join(r) for r in rows)
forms = {"nan": [r if i != 4 else r[:3] + ["nan"] + r[4:] for i, r in enumerate(rows)],
         "lower": [[c.lower() for c in r] for r in rows],
         "nospace": ["".join(r) for r in rows]}
with open(f"{sys.argv[2]}/parser.jsonl", "w") as out:
    for i, form in enumerate(("nan", "lower", "nospace")):
        grid = forms[form]
        out.write(json.dumps({"index": i, "completion": "\n".join(grid) if form == "nospace" else text(grid)}) + "\n")
PY
run() {  # run LABEL COMMAND...: in both checkouts
  label=$1; shift
  for side in old new; do
    root=${!side}
    echo "=== $label [$side: $(git -C "$root" log --oneline -1 | cut -c1-7)]"
    echo "\$ $*"
    (cd "$root" && TIKTOKEN_CACHE_DIR=$work/no-tiktoken HTTPS_PROXY=http://127.0.0.1:9 \
        timeout 900 bash -c "$*" > "$work/out.txt" 2>&1; echo "exit status $?" >> "$work/out.txt")
    grep -v '^\s*$' "$work/out.txt" | grep -v '^ \{2,\}\|^---\|^  [0-9]' | tail -n "${LINES_SHOWN:-6}" | cut -c1-400
  done
  echo
}
mkdir -p "$work/no-tiktoken"
run "a second --dataset" ".venv/bin/python -m sphyr_hpc.score --dataset $v1/full_easy.jsonl --dataset $v1/full_hard.jsonl --completions $work/a.jsonl --out $work/o1-\$(basename \$PWD) --overwrite --quiet --no-report --no-store | grep 'records ('"
run "a dataset folder and a completions file" ".venv/bin/python -m sphyr_hpc.score --dataset $v1 --completions $work/a.jsonl --out $work/o2-\$(basename \$PWD) --overwrite --quiet --no-store"
run "validate a dataset folder" ".venv/bin/python -m sphyr_hpc.validate --dataset $v2 --samples 1 --no-store | grep -E 'samples|error'"
run "validate --quiet" ".venv/bin/python -m sphyr_hpc.validate --dataset $v2/full_easy.jsonl --samples 1 --quiet --no-store | grep -E 'sample|error'"
run "store list of a mistyped store" ".venv/bin/python -m sphyr_hpc.store list --store /typo"
run "the parser: nan, lowercase, cells without spaces" ".venv/bin/python -m sphyr_hpc.score --dataset $v1/full_easy.jsonl --completions $work/parser.jsonl --out $work/o3-\$(basename \$PWD) --overwrite --quiet --no-report --no-store > /dev/null; python3 -c \"import json; [print(r['index'], r.get('failure'), r.get('unparsable_cells'), r.get('invalid_reason')) for r in map(json.loads, open('$work/o3-'+'\$(basename \$PWD)'+'/results.jsonl')) if r['index'] < 3]\""
LINES_SHOWN=3 run "inspect eval -T dataset=FOLDER" ".venv/bin/inspect eval sphyr_hpc/sphyr --model mockllm/model --limit 2 -T dataset=$v2 -T store=none --log-dir $work/logs-folder-\$(basename \$PWD) --display none 2>&1 | wc -l; ls $work/logs-folder-\$(basename \$PWD) 2>/dev/null | wc -l"
LINES_SHOWN=2 run "inspect eval offline (every sample fails)" ".venv/bin/inspect eval sphyr_hpc/sphyr --model mockllm/model --limit 3 -T dataset=$v1/full_easy.jsonl -T store=none --log-dir $work/logs-offline-\$(basename \$PWD) --display none"
LINES_SHOWN=3 run "score --inspect-log of that run" ".venv/bin/python -m sphyr_hpc.score --inspect-log $work/logs-offline-\$(basename \$PWD) --out $work/o4-\$(basename \$PWD) --overwrite --quiet --no-report --no-store"
