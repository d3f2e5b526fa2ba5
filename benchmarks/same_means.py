"""Whether two score/report output folders rank the same: their summary.json means and leaderboards.

    python benchmarks/same_means.py OUT_A OUT_B

Prints, per model, the largest difference between the two folders' means (every metric of every
subject, and the leaderboard's mean over subjects of topology_score), and whether their
results.jsonl are the same bytes.
"""

import json
import sys
from pathlib import Path

from sphyr_hpc.scoring.summary import leaderboard


def main(a, b):
    sa, sb = (json.loads((Path(x) / "summary.json").read_text()) for x in (a, b))
    boards = [{e["model"]: e for e in leaderboard(s)} for s in (sa, sb)]
    worst = 0.0
    for model in sorted(boards[0]):
        diffs = [abs(boards[0][model]["topology_score"] - boards[1][model]["topology_score"])]
        for subject, entry in sa[model].items():
            for key, value in entry.items():
                if isinstance(value, float):
                    diffs.append(abs(value - sb[model][subject][key]))
        worst = max(worst, max(diffs))
        print(f"{model}: leaderboard topology_score {boards[0][model]['topology_score']!r} vs "
              f"{boards[1][model]['topology_score']!r}; largest difference over {len(diffs)} means: {max(diffs):.3e}")
    same = (Path(a) / "results.jsonl").read_bytes() == (Path(b) / "results.jsonl").read_bytes()
    print(f"models: {sorted(boards[0]) == sorted(boards[1])}; largest difference {worst:.3e} (<= 1e-12: "
          f"{worst <= 1e-12}); results.jsonl the same bytes: {same}")
    return 0 if worst <= 1e-12 and sorted(boards[0]) == sorted(boards[1]) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
