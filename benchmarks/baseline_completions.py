"""Completions of two baseline models for every subject of a dataset folder, as a model runner writes them.

    python benchmarks/baseline_completions.py examples/data/v1 OUT_DIR

writes ``OUT_DIR/baseline-empty/<subject>.jsonl`` (every masked cell void: 0, or 0.0 on hard
subjects) and ``OUT_DIR/baseline-random/<subject>.jsonl`` (every masked cell drawn with
``random.Random(index)``: 0 or 1, or one decimal on hard subjects), one ``{"index", "completion"}``
line a record: the two baselines of SPhyR's published results, for every record of the folder
(the published result files hold other samples than the bundled datasets).
"""

import json
import random
import sys
from pathlib import Path


def _rows(grid):
    return [row.split() if isinstance(row, str) else list(row) for row in
            (grid.splitlines() if isinstance(grid, str) else grid)]


def _fill(grid, draw):
    return "\n".join(" ".join(draw() if cell == "V" else cell for cell in row) for row in _rows(grid))


def main(folder, out):
    for dataset in sorted(Path(folder).glob("*.jsonl")):
        hard = dataset.stem.endswith("_hard")
        records = [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]
        for model in ("baseline-empty", "baseline-random"):
            lines = []
            for record in records:
                rng = random.Random(record["index"])
                if model == "baseline-empty":
                    draw = (lambda: "0.0") if hard else (lambda: "0")
                else:
                    draw = (lambda: f"{rng.randint(0, 10) / 10:.1f}") if hard else (lambda: str(rng.randint(0, 1)))
                lines.append(json.dumps({"index": record["index"], "completion": _fill(record["input_grid"], draw)}))
            target = Path(out) / model / dataset.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
