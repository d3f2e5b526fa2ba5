"""Score SPhyR records from Python, as with the published scorer: one import changes.

    .venv/bin/python examples/python_api.py [FILE ...]
    bin/mpirun -n 2 .venv/bin/python examples/python_api.py [FILE ...]

FILE: SPhyR result files (JSON arrays of records with ``prompt``,
``ground_truth``, ``completion``); default: the two baselines' ``10_random_cell_easy``
records in ``examples/results`` (10 records, 5 samples).

(a) ``get_structural_metrics`` on the first record, as an evaluation script
    written for the published scorer calls it (grids as text, the input grid
    taken from the prompt), printed as JSON via ``as_dict()``;
(b) ``score_records`` on every record, one line per record as it finishes
    (on several ranks: rank 0 prints, every rank scores), with the published
    ``topology_score`` stored in the record beside ours;
(c) a check that (a) and (b) agree on the first record.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sphyr_hpc import get_structural_metrics, score_records  # noqa: E402  (was: from sphyr.metrics.structural import ...)
from sphyr_hpc.core.grid import prompt_input_grid  # noqa: E402

DEFAULT_FILES = [ROOT / "examples" / "results" / model / "10_random_cell_easy.json"
                 for model in ("baseline-empty", "baseline-random")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, default=DEFAULT_FILES, help="SPhyR result files")
    args = parser.parse_args(argv)
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.rank
    records, names = [], []
    for path in args.files:
        for index, record in enumerate(json.loads(path.read_text())):
            records.append(record)
            names.append(f"{path.parent.name}/{path.stem}[{index}]")

    # (a) one completion, exactly as a script written for the published scorer does it
    first = records[0]
    single = get_structural_metrics(first["completion"], first["ground_truth"], prompt_input_grid(first["prompt"]))
    if rank == 0:
        print(f"(a) {names[0]}:")
        print(json.dumps(single.as_dict(), indent=1, allow_nan=False))

    # (b) every record, results as they finish (every rank iterates; rank 0 receives them all)
    if rank == 0:
        print(f"\n(b) {len(records)} records on {MPI.COMM_WORLD.size} rank(s):")
        print(f"{'record':40} {'topology_score':>14} {'published':>10} {'load_carrying':>13}")
    results = {}
    for result in score_records(records):
        results[result.position] = result
        published = records[result.position].get("topology_score")
        published = "-" if published is None else f"{published:.6f}"
        if result.error:
            print(f"{names[result.position]:40} error: {result.error}")
        else:
            m = result.metrics
            print(f"{names[result.position]:40} {m.topology_score:14.6f} {published:>10} {str(m.load_carrying):>13}")

    # (c) the two functions agree
    if rank == 0:
        same = results[0].metrics == single
        print(f"\n(c) get_structural_metrics and score_records agree on {names[0]}: {same}")
        return 0 if same and len(results) == len(records) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
