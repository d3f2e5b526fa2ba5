"""Certified metrics: the yardstick against the proven best binary design of a record.

:func:`certify_record` computes a record's yardstick as the scorer does and
then :func:`~sphyr_hpc.optimiser.exact.branch_and_bound` searches the binary
designs of its masked cells at the yardstick's budget (``python -m
sphyr_hpc.certify`` runs it over datasets); :func:`certified_metrics` adds the
certified optimum to a scored row (``score --certified DIR``).
"""

import hashlib
import math
import statistics
import time
from pathlib import Path

import numpy as np

from ..core.metrics import clipped_ratio
from ..io.jsonl import read_jsonl
from ..io.records import Sample
from ..optimiser import exact, simp
from ..solvers.condensed import CondensedSystem
from .tasks import sample_key


def sample_id(ground_truth, input_grid, gravity):
    """A short id of what a yardstick depends on (:func:`~sphyr_hpc.scoring.tasks.sample_key`)."""
    key = sample_key(Sample("", "", 0, "", tuple(float(v) for v in gravity), None, ground_truth, input_grid))
    return hashlib.sha1(repr(key).encode()).hexdigest()[:16]


def _finite(value):
    return None if value is None or not math.isfinite(value) else float(value)


def certify_record(scorer, subject, index, ground_truth, input_grid, gravity=(1.0, 0.0),
                   node_budget=exact.NODE_BUDGET, time_budget=None):
    """The certify.jsonl row of one dataset record (bad input becomes ``error``)."""
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


def read_certified(folder):
    """``{sample id: row}`` of a certify folder's certify.jsonl (rows with an error, broken lines left out)."""
    rows = {}
    for _, row, problem in read_jsonl(Path(folder) / "certify.jsonl")[0]:
        if not problem and isinstance(row, dict) and "error" not in row and row.get("sample"):
            rows[row["sample"]] = row  # a broken line certifies nothing
    return rows


def certified_metrics(row, certified):
    """``certified_optimal_compliance`` and ``certified_structural_efficiency`` of a scored row.

    The certified optimum is the exact binary optimum at the budget where
    certify proved it (the yardstick's own compliance if its grey design is
    stiffer still); null where certify only bounded it or did not see the
    sample.  The efficiency is the "Metrics" rules' clipped ratio against it (0 for a
    design that does not carry its load, as for structural_efficiency).
    """
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
