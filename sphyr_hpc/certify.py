"""``python -m sphyr_hpc.certify``: how far the yardstick is from the best binary design, proven.

Usage::

    mpirun -n N python -m sphyr_hpc.certify --dataset D.jsonl [D2.jsonl ...] [--samples N]
                                            [--node-budget K] [--time-budget S] --out DIR

For every dataset record (ground truth, masked cells, the "Yardstick" rules' budget) the
yardstick is computed as ``score`` computes it, then
:func:`~sphyr_hpc.optimiser.exact.branch_and_bound` searches the binary
designs of the masked cells with at most ``budget_cells`` solid ones
(``floor`` of the free budget), starting from the yardstick's design: the
exact optimum where the search closes (``status`` ``optimal``), otherwise the
best design found and a certified lower bound (``gap``).

Outputs in ``--out``: ``certify.jsonl`` (one object per record, sorted by
subject and index: ``subject``, ``index``, ``sample`` (an id of ground truth,
mask and gravity, which ``score --certified`` matches), ``free_cells``,
``budget_cells``, ``yardstick_compliance``, ``best_compliance``,
``lower_bound``, ``status``, ``nodes``, ``seconds`` and ``cpu_seconds``
(this process's CPU time: the cost on a shared machine), ``yardstick_gap`` =
yardstick / lower_bound - 1 (the most the yardstick can be above the binary
optimum; exact when optimal; negative when the yardstick's grey design is
stiffer than every binary design at the budget), ``ground_truth_compliance``,
or ``error`` for a record that cannot be certified); ``summary.json`` (per
subject: samples, share certified optimal, median and worst yardstick gap,
samples where the search beat the yardstick or the dataset answer beat the
certified optimum, seconds per sample) and ``certify.png``.  Every file is
written atomically by rank 0; the table is printed.

Records are dealt over the ranks like ``score``'s samples (largest masks
first, to whichever rank asks: :func:`~sphyr_hpc.parallel.run_dynamic`), each
on ``COMM_SELF``.  With the default (no time budget) the records do not
depend on the number of ranks, except the seconds.  Exit status: 0, 1 when
some record could not be certified, 2 on a usage error, 3 when an unexpected
error on one rank aborted every rank.
"""

import argparse
import hashlib
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from mpi4py import MPI

from .io.atomic import write_text_atomic
from .io.records import Sample, write_jsonl_atomic
from .optimiser import exact

ABORT_STATUS = 3


def sample_id(ground_truth, input_grid, gravity):
    """A short id of what a yardstick depends on (:func:`sphyr_hpc.score.sample_key`)."""
    from .score import sample_key

    key = sample_key(Sample("", "", 0, "", tuple(float(v) for v in gravity), None, ground_truth, input_grid))
    return hashlib.sha1(repr(key).encode()).hexdigest()[:16]


def _finite(value):
    return None if value is None or not math.isfinite(value) else float(value)


def certify_record(scorer, subject, index, ground_truth, input_grid, gravity=(1.0, 0.0),
                   node_budget=exact.NODE_BUDGET, time_budget=None):
    """The certify.jsonl row of one dataset record (bad input becomes ``error``)."""
    from .optimiser import simp
    from .solvers.condensed import CondensedSystem

    started, cpu_started = time.perf_counter(), time.process_time()
    row = {"subject": subject, "index": index}
    case, reason = scorer.prepare(ground_truth, ground_truth, input_grid, gravity)  # never raises on bad grids
    if case is None:
        row["error"] = reason
        return row
    row["sample"] = sample_id(ground_truth, input_grid, gravity)
    lc = case.loadcase
    gt = scorer.analysis(lc, case.truth)
    optimum = scorer.optimum(lc, case.free, case.truth, gt.volume_fraction, (case.truth,))
    free, pinned = simp.design_space(lc, case.free, case.truth)
    budget = exact.budget_cells(simp.free_budget(free, pinned, gt.volume_fraction)[0])
    row.update(free_cells=int(free.sum()), budget_cells=budget, yardstick_compliance=_finite(optimum.compliance))
    if not free.any():  # nothing to choose: the pinned design is the only one
        best = lower = optimum.compliance
        status, nodes = "optimal", 0
    else:
        system = scorer.problem(lc).system
        result = exact.branch_and_bound(CondensedSystem(system, free), pinned, budget, optimum.densities,
                                        node_budget=node_budget,
                                        time_budget=math.inf if time_budget is None else time_budget,
                                        penal=scorer.config.penal)
        # The best design's compliance as every other compliance of the package is computed (the
        # yardstick's own number where it is the yardstick's design).
        same = np.array_equal(result.design, optimum.densities)
        best = optimum.compliance if same else scorer.analysis(lc, result.design).compliance
        status, nodes = result.status, result.nodes
        lower = best if status == "optimal" else min(result.lower_bound, best)
    gap = optimum.compliance / lower - 1.0 if math.isfinite(lower) and lower > 0 else None
    row.update(best_compliance=_finite(best), lower_bound=_finite(lower), status=status, nodes=nodes,
               yardstick_gap=_finite(gap), ground_truth_compliance=_finite(gt.compliance),
               seconds=round(time.perf_counter() - started, 4),
               cpu_seconds=round(time.process_time() - cpu_started, 4))
    return row


def summarise(rows):
    """Per subject: samples, share optimal, median/worst yardstick gap, who beat whom, seconds."""
    subjects = {}
    for row in rows:
        subjects.setdefault(row["subject"], []).append(row)
    summary = {}
    for subject in sorted(subjects):
        items = subjects[subject]
        done = [r for r in items if "error" not in r]
        gaps = [r["yardstick_gap"] for r in done if r["yardstick_gap"] is not None]
        optimal = [r for r in done if r["status"] == "optimal"]
        summary[subject] = {
            "samples": len(items),
            "errors": len(items) - len(done),
            "certified_optimal": len(optimal),
            "share_optimal": len(optimal) / len(done) if done else None,
            "median_gap": statistics.median(gaps) if gaps else None,
            "worst_gap": max(gaps) if gaps else None,
            # The search found a binary design stiffer than the yardstick (by more than rounding).
            "search_beats_yardstick": sum(1 for r in done if _below(r["best_compliance"], r["yardstick_compliance"])),
            # The dataset answer is stiffer than the yardstick / the certified binary optimum.
            "answer_beats_yardstick": sum(1 for r in done
                                          if _below(r["ground_truth_compliance"], r["yardstick_compliance"])),
            "answer_beats_certified": sum(1 for r in optimal
                                          if _below(r["ground_truth_compliance"], r["best_compliance"])),
            # By how much at most: reference / answer - 1 (> 0: the answer is stiffer).
            "answer_margin_yardstick": _margin(done, "yardstick_compliance"),
            "answer_margin_certified": _margin(optimal, "best_compliance"),
            # The yardstick's grey design is stiffer than every binary design at the budget (gap < 0).
            "grey_beats_binary": sum(1 for r in done if r["yardstick_gap"] is not None and r["yardstick_gap"] < -1e-6),
            "seconds_per_sample": sum(r["seconds"] for r in done) / len(done) if done else None,
            "cpu_seconds_per_sample": sum(r["cpu_seconds"] for r in done) / len(done) if done else None,
            "nodes_max": max((r["nodes"] for r in done), default=0),
        }
    return summary


def _margin(rows, key):
    """Largest ``row[key] / ground_truth_compliance - 1`` (None when no row has both finite)."""
    margins = [r[key] / r["ground_truth_compliance"] - 1.0 for r in rows
               if r[key] is not None and r["ground_truth_compliance"]]
    return max(margins) if margins else None


def _below(a, b, tolerance=1e-6):
    """a < b by more than ``tolerance`` relative (None is an infinite compliance)."""
    a = math.inf if a is None else a
    b = math.inf if b is None else b
    return a < b * (1.0 - tolerance)


def _pct(value):
    """A relative gap in percent (3 decimals), or as a factor when it is huge (a severed design)."""
    if value is None:
        return "-"
    return f"{100.0 * value:.3f}%" if abs(value) < 100.0 else f"{1.0 + value:.2g}x"


def format_table(summary):
    """The per-subject table: gaps in percent; ``grey<bin``: samples whose yardstick (grey) beats every
    binary design; ``answer>yard``/``answer>opt``: samples whose dataset answer is stiffer than the
    yardstick/the certified binary optimum, ``by at most`` the largest such margin over the latter."""
    header = (f"{'subject':22s} {'samples':>7s} {'optimal':>8s} {'median gap':>10s} {'worst gap':>10s} "
              f"{'grey<bin':>8s} {'beats yard':>10s} {'answer>yard':>11s} {'answer>opt':>10s} "
              f"{'by at most':>10s} {'s/sample':>8s}")
    lines = [header, "-" * len(header)]
    for subject, s in summary.items():
        share = f"{100.0 * s['share_optimal']:7.1f}%" if s["share_optimal"] is not None else f"{'-':>8s}"
        lines.append(f"{subject:22s} {s['samples']:7d} {share} {_pct(s['median_gap']):>10s} {_pct(s['worst_gap']):>10s} "
                     f"{s['grey_beats_binary']:8d} {s['search_beats_yardstick']:10d} {s['answer_beats_yardstick']:11d} "
                     f"{s['answer_beats_certified']:10d} {_pct(s['answer_margin_certified']):>10s} "
                     f"{s['seconds_per_sample'] or 0.0:8.3f}")
    return lines


def plot(rows, summary, path):
    """Share certified optimal per subject, and every sample's yardstick gap."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    subjects = list(summary)
    fig = Figure(figsize=(11.0, 1.2 + 0.32 * len(subjects)))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(subjects))[::-1]
    left.barh(y, [100.0 * (summary[s]["share_optimal"] or 0.0) for s in subjects], color="#3a6ea5")
    left.set_yticks(y, subjects, fontsize=8)
    left.set_xlim(0, 100)
    left.set_xlabel("samples certified optimal (%)")
    for yi, subject in zip(y, subjects):
        gaps = [100.0 * r["yardstick_gap"] for r in rows if r["subject"] == subject and "error" not in r
                and r["yardstick_gap"] is not None]
        colours = ["#2a9d5c" if r["status"] == "optimal" else "#d1495b" for r in rows
                   if r["subject"] == subject and "error" not in r and r["yardstick_gap"] is not None]
        right.scatter(gaps, np.full(len(gaps), yi), s=12, c=colours, alpha=0.7)
    right.axvline(0.0, color="grey", lw=0.8)
    right.set_xscale("symlog", linthresh=1.0)
    right.set_xlabel("yardstick / certified lower bound - 1 (%): green exact, red bounded")
    fig.suptitle("The yardstick against the certified binary optimum (sphyr_hpc.certify)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _tasks(datasets, samples):
    """(subject, index, record) of the first ``samples`` records of every dataset, largest masks first."""
    from .validate import read_records

    tasks = []
    for path in datasets:
        subject = Path(path).name.removesuffix(".jsonl")
        for position, record in read_records(path, samples):
            index = record.get("index", position)
            mask = record["input_grid"] or []
            tasks.append((subject, index, record, sum(cell == "V" for row in mask for cell in row)))
    tasks.sort(key=lambda t: -t[3])  # stable: ties keep input order
    return [t[:3] for t in tasks]


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _positive_float(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m sphyr_hpc.certify", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--dataset", nargs="+", required=True, metavar="D.jsonl",
                        help="dataset JSONL files (index, input_grid, ground_truth)")
    parser.add_argument("--samples", type=_positive_int, default=None, metavar="N",
                        help="the first N records of each dataset (default: all)")
    parser.add_argument("--node-budget", type=_positive_int, default=exact.NODE_BUDGET, metavar="K",
                        help="nodes a sample's search may evaluate before it reports a gap")
    parser.add_argument("--time-budget", type=_positive_float, default=None, metavar="S",
                        help="seconds a sample's search may take (results then depend on the machine)")
    parser.add_argument("--out", default="certify", help="output folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no table")
    return parser


def run_certify(args, comm):
    rank = comm.rank
    tasks = _tasks(args.dataset, args.samples) if rank == 0 else None
    tasks = comm.bcast(tasks, root=0)
    from .scorer import Scorer
    from .parallel import run_dynamic

    scorer = Scorer()
    mine = []
    bar = None
    if rank == 0 and not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), unit="sample", file=sys.stderr, dynamic_ncols=True)

    def run(i, counters):
        subject, index, record = tasks[i]
        mine.append(certify_record(scorer, subject, index, record["ground_truth"], record["input_grid"],
                                   node_budget=args.node_budget, time_budget=args.time_budget))
        counters.add_done(1)

    def progress(count):
        bar.update(count - bar.n)
        return count >= len(tasks)

    started = time.perf_counter()
    try:
        run_dynamic(comm, len(tasks), run, progress if bar is not None else None)
    finally:
        scorer.close()
    seconds = time.perf_counter() - started
    if bar is not None:
        bar.close()
    gathered = comm.gather(mine, root=0)
    status = None
    if rank == 0:
        rows = sorted((r for part in gathered for r in part), key=lambda r: (r["subject"], r["index"]))
        summary = summarise(rows)
        out = Path(args.out)
        write_jsonl_atomic(out / "certify.jsonl", rows)
        write_text_atomic(out / "summary.json", json.dumps(
            {"ranks": comm.size, "node_budget": args.node_budget, "time_budget": args.time_budget,
             "seconds": round(seconds, 3), "subjects": summary}, indent=2, allow_nan=False) + "\n")
        plot(rows, summary, out / "certify.png")
        if not args.quiet:
            print("\n".join(format_table(summary)))
            print(f"\n{len(rows)} samples on {comm.size} rank(s) in {seconds:.1f} s -> {out / 'certify.jsonl'}")
        for row in rows:
            if "error" in row:
                print(f"error: {row['subject']} record {row['index']}: {row['error']}", file=sys.stderr)
        status = 1 if any("error" in r for r in rows) else 0
    return comm.bcast(status, root=0)


def read_certified(folder):
    """``{sample id: row}`` of a certify folder's certify.jsonl (rows with an error, broken lines left out)."""
    rows = {}
    with open(Path(folder) / "certify.jsonl", encoding="utf-8") as handle:
        for line in handle:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a blank or broken line certifies nothing
            if isinstance(row, dict) and "error" not in row and row.get("sample"):
                rows[row["sample"]] = row
    return rows


def certified_metrics(row, certified):
    """``certified_optimal_compliance`` and ``certified_structural_efficiency`` of a scored row.

    The certified optimum is the exact binary optimum at the budget where
    certify proved it (the yardstick's own compliance if its grey design is
    stiffer still); null where certify only bounded it or did not see the
    sample.  The efficiency is the "Metrics" rules' clipped ratio against it (0 for a
    design that does not carry its load, as for structural_efficiency).
    """
    from .metrics import clipped_ratio

    optimum = None
    if certified is not None and certified["status"] == "optimal" and certified["best_compliance"] is not None:
        optimum = certified["best_compliance"]
        if certified["yardstick_compliance"] is not None:
            optimum = min(optimum, certified["yardstick_compliance"])
    efficiency = None
    if optimum is not None:
        compliance = row.get("compliance")
        efficiency = clipped_ratio(optimum, compliance) if row.get("load_carrying") and compliance else 0.0
    return {"certified_optimal_compliance": optimum, "certified_structural_efficiency": efficiency}


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    missing = [p for p in args.dataset if not Path(p).is_file()]
    if missing:
        if comm.rank == 0:
            print(f"{parser.prog}: error: dataset file not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    from ._petsc import petsc

    petsc()
    try:
        return run_certify(args, comm)
    except Exception:
        if comm.size == 1:
            raise
        traceback.print_exc(file=sys.stderr)
        print(f"{parser.prog}: unexpected error on rank {comm.rank}; aborting all {comm.size} ranks",
              file=sys.stderr, flush=True)
        comm.Abort(ABORT_STATUS)


if __name__ == "__main__":
    sys.exit(main())
