"""``python -m sphyr_hpc.score``: score SPhyR completions like the published scorer.

Usage::

    python -m sphyr_hpc.score [PATH ...] [--out DIR]
    python -m sphyr_hpc.score validate --dataset D.jsonl --samples N

PATH is a result file (a JSON array of records with prompt, ground_truth,
completion) or a folder of model folders of them; with no PATH the bundled
example data (``examples/results``) is scored.  ``DIR/results.jsonl`` gets one
object per record: ``model``, ``subject``, ``index``, every metric (infinite
compliances as null) and, where a record could not be scored, ``error``.  A
per-model table is printed at the end.

PETSc options (``-sphyr_ksp_type``, ``-sphyr_pc_type``, ...) may be given
anywhere on the command line.

Exit status: 0 when every record was scored, 1 when some record or file could
not be (each is named on stderr and in results.jsonl), 2 on a usage error.
"""

import argparse
import math
import sys
import traceback
from collections import defaultdict
from pathlib import Path

from . import grid as grids
from .io.records import FileProblem, find_result_files, read_result_file, write_jsonl_atomic
from .metrics import STRUCTURAL_METRIC_KEYS, ScoringConfig, Scorer, json_safe

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "results"
TABLE_KEYS = ("topology_score", "structural_efficiency", "material_efficiency",
              "compliance_efficiency_vs_ground_truth", "load_carrying")


def _gravity(text):
    try:
        dr, dc = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"gravity must be 'dr,dc', e.g. 1,0 (down), not {text!r}") from None
    if dr == 0.0 and dc == 0.0:
        raise argparse.ArgumentTypeError("gravity must be non-zero")
    return (dr, dc)


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m sphyr_hpc.score", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", metavar="PATH", help="result files or folders of model folders")
    parser.add_argument("--out", default="out", help="output folder (default: ./out)")
    parser.add_argument("--gravity", type=_gravity, default=None,
                        help="load direction dr,dc for every record (default: from the folder name)")
    parser.add_argument("--design-efficiency", action="store_true",
                        help="also re-optimise at each completion's own budget (slow)")
    parser.add_argument("--analysis-solver", choices=("superlu", "petsc"), default="superlu",
                        help="factorisation for analysing designs (superlu reproduces the published numbers)")
    parser.add_argument("--quiet", action="store_true", help="no per-file progress lines")
    return parser


def score_samples(samples, scorer):
    """Metrics rows for samples; a failing record becomes a row with ``error``."""
    rows = []
    for sample in samples:
        row = {"model": sample.model, "subject": sample.subject, "index": sample.index}
        if sample.error:
            row["error"] = sample.error
        else:
            try:
                metrics = scorer.score(sample.completion, sample.ground_truth, sample.input_grid, sample.gravity)
                row.update(json_safe(metrics))
            except Exception as err:  # one record must not end the batch; the reason is kept
                traceback.print_exc(file=sys.stderr)
                row["error"] = f"{sample.source} record {sample.index}: unexpected {type(err).__name__}: {err}"
        rows.append(row)
    return rows


def summarise(rows):
    """Per model: records, errors and mean metrics (None counts as 0)."""
    per_model = defaultdict(list)
    for row in rows:
        per_model[row["model"]].append(row)
    table = {}
    for model, items in per_model.items():
        scored = [r for r in items if "error" not in r]
        table[model] = {"records": len(items), "errors": len(items) - len(scored)}
        for key in STRUCTURAL_METRIC_KEYS:
            values = [float(r.get(key) or 0.0) for r in scored]
            table[model][key] = sum(values) / len(values) if values else math.nan
    return table


def print_table(table, out=None):
    out = out or sys.stdout
    header = f"{'model':32s} {'records':>7s} {'errors':>6s} {'topo':>6s} {'struct':>7s} {'material':>8s} {'vs GT':>6s} {'carrying':>8s}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for model, s in sorted(table.items(), key=lambda kv: -(kv[1]["topology_score"] if kv[1]["records"] > kv[1]["errors"] else -1)):
        vals = " ".join(f"{s[k]:{w}.3f}" for k, w in zip(TABLE_KEYS, (6, 7, 8, 6, 8)))
        print(f"{model:32s} {s['records']:7d} {s['errors']:6d} {vals}", file=out)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "validate":
        from .validate import main as validate_main

        return validate_main(argv[1:])
    parser = build_parser()
    args, petsc_args = parser.parse_known_args(argv)
    unknown = [a for a in petsc_args if a.startswith("--")]
    if unknown:
        parser.error(f"unrecognised arguments: {' '.join(unknown)}")
    from ._petsc import petsc

    PETSc = petsc()
    if petsc_args:
        PETSc.Options().insertString(" ".join(petsc_args))

    paths = args.paths or [EXAMPLES]
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    files = find_result_files(paths)
    if not files:
        parser.error(f"no result files under {', '.join(map(str, paths))}")

    scorer = Scorer(ScoringConfig(design_efficiency=args.design_efficiency, analysis_solver=args.analysis_solver))
    rows = []
    problems = 0
    try:
        for path in files:
            samples = read_result_file(path, gravity=args.gravity)
            if isinstance(samples, FileProblem):
                problems += 1
                print(f"error: {samples.path}: {samples.reason}", file=sys.stderr)
                continue
            file_rows = score_samples(samples, scorer)
            for row in file_rows:
                if "error" in row:
                    print(f"error: {row['error']}", file=sys.stderr)
            rows += file_rows
            if not args.quiet:
                print(f"scored {len(file_rows):4d} records  {path}", file=sys.stderr)
    finally:
        scorer.close()
    out = Path(args.out) / "results.jsonl"
    write_jsonl_atomic(out, rows)
    print(f"\n{len(rows)} records from {len(files) - problems} files -> {out}")
    print_table(summarise(rows))
    failed = problems + sum(1 for r in rows if "error" in r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
