"""Parity with the published scorer, as any machine can reproduce it (docs/scoring.md, "Parity").

The last digits of a solve depend on the rounding of the factorisation, and
that rounding on the BLAS kernel the CPU selects at run time: the published
scorer itself gives different digits on different machines.  Parity is
therefore a comparison of what is physically meaningful:

- ratios within ``RATIO_TOLERANCE`` absolute;
- flags and counts equal;
- compliances within ``RELATIVE_TOLERANCE x max(1, c / c_gt)`` relative, ``c``
  the published value and ``c_gt`` the published ground-truth compliance (the
  softer a design, the more of its number is Emin and rounding);
- ``max_displacement`` within ``DISPLACEMENT_TOLERANCE x max(1, c / c_gt)``
  relative, ``c`` its design's published compliance: where the largest
  displacement sits on a node held by void (Emin) cells only, rounding the
  element matrix to float64 alone moves its exact value by up to 1.6e-5
  (``benchmarks/max_displacement_conditioning.py``), so no double-precision
  scorer can promise 1e-6 there;
- an infinite compliance (``None`` in JSON) matches only ``None`` or a finite
  value above ``SEVERED_RATIO x c_gt``: a load path through Emin cells only;
  ``max_displacement`` of a design that does not carry its load is not compared;
- the yardstick is never weaker: ``optimal_compliance`` at most the published
  value times ``1 + RELATIVE_TOLERANCE``.

:func:`differences` returns what breaks these rules for one record;
``python -m sphyr_hpc.parity RESULTS.jsonl PATH...`` checks a scoring run's
``results.jsonl`` against the published result files it scored.
"""

import json
import math
import sys
from pathlib import Path

from . import cli
from .cli import Parser, UsageError

# The metric and file modules (and NumPy with them) are imported where they are used: a command's
# module loads no NumPy before cli.main has set the BLAS threads (runtime.process.command_environment).

RELATIVE_TOLERANCE = 1e-6
DISPLACEMENT_TOLERANCE = 1e-4
SEVERED_RATIO = 1e5

RATIOS = (
    "topology_score",
    "structural_efficiency",
    "structural_efficiency_raw",
    "material_efficiency",
    "compliance_efficiency_vs_ground_truth",
    "volume_fraction",
    "ground_truth_volume_fraction",
    "volume_ratio",
    "difference_ratio",
    "relative_difference_ratio",
    "penalized_difference_ratio",
)
FLAGS = ("load_carrying", "physically_valid", "exact_match", "valid_output_grid", "unfilled_cells", "unparsable_cells")
COMPLIANCES = ("compliance", "ground_truth_compliance", "optimal_compliance")
YARDSTICK = "optimal_compliance"


def _finite(value):
    return value is not None and math.isfinite(float(value))


def compliance_tolerance(published, c_gt, base=RELATIVE_TOLERANCE):
    """The relative tolerance of a compliance (``base`` 1e-6) or a displacement (``base``
    ``DISPLACEMENT_TOLERANCE``) whose design has compliance ``published``."""
    scale = max(1.0, float(published) / c_gt) if _finite(published) and _finite(c_gt) and c_gt > 0 else 1.0
    return base * scale


def _compliance_difference(key, ours, theirs, c_gt, design_compliance=None, base=RELATIVE_TOLERANCE):
    """Why ``ours`` is not ``theirs`` under the compliance rule, or None.

    ``design_compliance`` sets the tolerance's scale (default: ``theirs`` itself), ``base`` its size.
    """
    ours_finite, theirs_finite = _finite(ours), _finite(theirs)
    if not ours_finite or not theirs_finite:
        if not ours_finite and not theirs_finite:
            return None
        finite = float(ours if ours_finite else theirs)
        if _finite(c_gt) and finite > SEVERED_RATIO * c_gt:
            return None
        return f"{key}: {ours} vs published {theirs} (null only against null or above {SEVERED_RATIO:g} c_gt)"
    tolerance = compliance_tolerance(theirs if design_compliance is None else design_compliance, c_gt, base)
    ours, theirs = float(ours), float(theirs)
    if not math.isclose(ours, theirs, rel_tol=tolerance, abs_tol=0.0):
        return f"{key}: {ours!r} vs published {theirs!r} (relative {abs(ours - theirs) / abs(theirs):.3g} > {tolerance:.3g})"
    return None


def differences(ours, theirs):
    """Every way the metrics ``ours`` break parity with the published record ``theirs``.

    Both are dicts with the published field names, infinite compliances as
    None (JSON).  Fields missing from ``theirs`` are not compared.
    """
    from .core.metrics import RATIO_TOLERANCE

    found = []
    c_gt = theirs.get("ground_truth_compliance")
    c_gt = float(c_gt) if _finite(c_gt) else None
    for key in FLAGS:
        if key in theirs and ours.get(key) != theirs[key]:
            found.append(f"{key}: {ours.get(key)!r} vs published {theirs[key]!r}")
    for key in RATIOS:
        if key not in theirs:
            continue
        a, b = ours.get(key), theirs[key]
        if a is None or b is None:
            if a is not b:
                found.append(f"{key}: {a!r} vs published {b!r}")
        elif abs(float(a) - float(b)) > RATIO_TOLERANCE:
            found.append(f"{key}: {a!r} vs published {b!r} (differs by {abs(float(a) - float(b)):.3g})")
    for key in COMPLIANCES:
        if key in theirs:
            why = _compliance_difference(key, ours.get(key), theirs[key], c_gt)
            if why:
                found.append(why)
    if theirs.get("load_carrying") and "max_displacement" in theirs:
        # a displacement takes the tolerance of its design's compliance
        why = _compliance_difference("max_displacement", ours.get("max_displacement"), theirs["max_displacement"],
                                     c_gt, design_compliance=theirs.get("compliance"), base=DISPLACEMENT_TOLERANCE)
        if why:
            found.append(why)
    a, b = ours.get(YARDSTICK), theirs.get(YARDSTICK)
    if YARDSTICK in theirs and _finite(b) and not (_finite(a) and float(a) <= float(b) * (1.0 + RELATIVE_TOLERANCE)):
        found.append(f"{YARDSTICK}: {a!r} is weaker than the published {b!r}")
    return found


# -- command: check a scoring run against the published records --------------------------------
def _published_records(paths):
    """{(model, subject, index): published metrics} from result files/folders, or JSONL files of
    metrics rows that carry their own ``model``, ``subject`` and ``index``."""
    from .io.records import find_result_files, subject_of

    published = {}
    for path in find_result_files([Path(p) for p in paths if not str(p).endswith(".jsonl")]):
        for index, record in enumerate(json.loads(Path(path).read_text())):
            published[(path.parent.name, subject_of(path), index)] = record
    for path in (p for p in paths if str(p).endswith(".jsonl")):
        published.update(_rows_by_key(path))
    return published


def _rows_by_key(path):
    """{(model, subject, index): row} of a JSONL file of rows; a line that is not one is named on stderr."""
    from .io.jsonl import read_rows
    from .io.results_log import row_key

    rows, broken = read_rows(path)
    if broken:
        print(f"{path}: {broken} line(s) skipped: not a row with model, subject and index", file=sys.stderr)
    return {row_key(row): row for row in rows}


def build_parser():
    parser = Parser(
        prog="python -m sphyr_hpc.parity",
        description="Check a scoring run's results.jsonl against the published result files it scored "
                    "(the parity rules of docs/scoring.md).",
    )
    parser.add_argument("results", help="results.jsonl written by `python -m sphyr_hpc.score`")
    parser.add_argument("published", nargs="+",
                        help="the published result files or folders that were scored, or JSONL files of the "
                             "published metrics with model, subject and index")
    return parser


def _check(args):
    from .runtime.messages import no_such

    missing = [p for p in [args.results] + args.published if not Path(p).exists()]
    if missing:
        raise UsageError(no_such(missing, folders=True))


def main(argv=None):
    return cli.main(COMMAND, argv)


def _run(args, context):
    from .core.metrics import RATIO_TOLERANCE

    published = _published_records(args.published)
    ours = _rows_by_key(args.results)
    missing = sorted(set(published) - set(ours))
    broken = {key: differences(ours[key], record) for key, record in published.items() if key in ours}
    broken = {key: why for key, why in broken.items() if why}
    used = {}  # the largest share of its tolerance any record uses, per field
    for key, record in published.items():
        row = ours.get(key)
        if row is None:
            continue
        c_gt = record.get("ground_truth_compliance")
        pairs = [(f, row.get(f), record.get(f), compliance_tolerance(record.get(f), c_gt)) for f in COMPLIANCES]
        if record.get("load_carrying"):
            pairs.append(("max_displacement", row.get("max_displacement"), record.get("max_displacement"),
                          compliance_tolerance(record.get("compliance"), c_gt, DISPLACEMENT_TOLERANCE)))
        for field, a, b, tolerance in pairs:
            if _finite(a) and _finite(b) and float(b) != 0.0:
                used[field] = max(used.get(field, 0.0), abs(float(a) - float(b)) / abs(float(b)) / tolerance)
        for field in RATIOS:
            a, b = row.get(field), record.get(field)
            if a is not None and b is not None:
                used[field] = max(used.get(field, 0.0), abs(float(a) - float(b)) / RATIO_TOLERANCE)
    for key, why in sorted(broken.items()):
        print(f"{'/'.join(map(str, key))}: " + "; ".join(why))
    for key in missing:
        print(f"{'/'.join(map(str, key))}: not in {args.results}")
    print(f"{len(published)} published records, {len(published) - len(missing)} scored, "
          f"{len(broken)} outside the parity rules, {len(missing)} missing")
    print("largest share of its tolerance used by any record: "
          + ", ".join(f"{k} {v:.2g}" for k, v in sorted(used.items())))
    return 0 if not broken and not missing else 1


COMMAND = cli.Command(prog="python -m sphyr_hpc.parity", build_parser=build_parser, run=_run, check=_check,
                      mpi=False)


if __name__ == "__main__":
    from .runtime.launcher import run_as_process  # bin/mpirun: the status without OpenMPI's banner

    sys.exit(run_as_process(main))
