"""Benchmark: score every record of the SPhyR dataset samples with the ground truth as completion.

For every ``<subject>.jsonl`` in each dataset folder (default: ``v1`` and
``v2_20`` under ``examples/data``, the prefixes the repository ships) every
record is scored with ``completion = ground_truth`` and
``input_grid = input_grid``.  Each subject file gets a fresh ``Scorer()``, so
the yardstick cache (and the per-load-case solver cache) starts cold for every
subject.  Only the ``Scorer.score`` calls are timed (``time.perf_counter``);
reading the files and building the ``Scorer`` are not.

The times are compared with the published SPhyR scorer measured on the same
machine (see ``PUBLISHED`` below).  Results are printed as a Markdown table and
written to ``--out`` (JSON) and to a Markdown file next to it.

Usage (from the repository root)::

    /usr/bin/python3 benchmarks/score_dataset.py [--data-root DIR]
        [--dataset-dir DIR ...] [--out benchmarks/results/score_dataset.json]

Arguments argparse does not know (e.g. ``-ksp_type cg``) are handed to PETSc's
options database.
"""

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
import traceback

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

DEFAULT_DATA_ROOT = os.path.join(REPO_ROOT, "examples", "data")
DEFAULT_DATASETS = ("v1", "v2_20")
DEFAULT_OUT = os.path.join(REPO_ROOT, "benchmarks", "results", "score_dataset.json")
RAW_EFFICIENCY_TOLERANCE = 1.0005

# The published SPhyR scorer, measured on this same machine.
PUBLISHED = {
    "v1_all_samples": 408,
    "v1_all_seconds": 174.96,
    "v1_seconds_per_sample": 174.96 / 408,  # 0.4288 s
    "v1_full_easy_seconds_per_sample": 1.56,
    "v2_20_full_seconds_per_sample": 7.6,  # 20x20 full_easy / full_hard
}

CACHE_NOTE = ("A fresh Scorer() is built for each subject file, so the yardstick cache and the "
              "per-load-case solver cache start cold for every subject; within a subject, records "
              "that share a sample can hit the cache.")
TIMING_NOTE = ("Seconds are time.perf_counter() summed over the Scorer.score() calls only "
               "(file reading and Scorer construction are not timed).")


def dataset_label(path):
    """'v1' / 'v2_20' / ...: the folder's own name."""
    return os.path.basename(os.path.normpath(path))


def read_records(path):
    records = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                records.append(json.loads(line))
    return records


def _finite(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def score_subject(path, dataset, gravity):
    """Score every record of one subject file with a fresh Scorer; per-subject summary."""
    from sphyr_hpc.scoring.scorer import Scorer

    subject = os.path.splitext(os.path.basename(path))[0]
    records = read_records(path)
    scorer = Scorer()
    seconds = 0.0
    sample_seconds = []
    topology, structural_raw = [], []
    over_one = []
    invalid = []
    errors = []
    try:
        for pos, rec in enumerate(records):
            index = rec.get("index", pos)
            truth = rec["ground_truth"]
            masked = rec.get("input_grid")
            t0 = time.perf_counter()
            try:
                metrics = scorer.score(truth, truth, masked, gravity)
            except Exception:  # a library bug: record it, go on with the next sample
                elapsed = time.perf_counter() - t0
                seconds += elapsed
                sample_seconds.append(elapsed)
                errors.append({"index": index, "traceback": traceback.format_exc()})
                continue
            elapsed = time.perf_counter() - t0
            seconds += elapsed
            sample_seconds.append(elapsed)
            if "invalid_reason" in metrics:
                invalid.append({"index": index, "invalid_reason": metrics["invalid_reason"]})
            topology.append(float(metrics["topology_score"]))
            raw = float(metrics["structural_efficiency_raw"])
            structural_raw.append(raw)
            if raw > RAW_EFFICIENCY_TOLERANCE:
                over_one.append({"index": index, "structural_efficiency_raw": raw})
        hits, misses = scorer.yardsticks.hits, scorer.yardsticks.misses
    finally:
        scorer.close()

    n = len(records)
    return {
        "dataset": dataset,
        "subject": subject,
        "file": path,
        "samples": n,
        "scored": len(topology),
        "errors": len(errors),
        "error_details": errors,
        "invalid": len(invalid),
        "invalid_details": invalid,
        "seconds": seconds,
        "seconds_per_sample": seconds / n if n else None,
        "max_sample_seconds": max(sample_seconds) if sample_seconds else None,
        "mean_topology_score": sum(topology) / len(topology) if topology else None,
        "min_topology_score": min(topology) if topology else None,
        "mean_structural_efficiency_raw": sum(structural_raw) / len(structural_raw) if structural_raw else None,
        "max_structural_efficiency_raw": max(structural_raw) if structural_raw else None,
        "structural_efficiency_raw_over_1.0005": len(over_one),
        "structural_efficiency_raw_over_1.0005_samples": over_one,
        "yardstick_cache_hits": hits,
        "yardstick_cache_misses": misses,
    }


def _group(rows, dataset, subjects=None):
    sel = [r for r in rows if r["dataset"] == dataset and (subjects is None or r["subject"] in subjects)]
    samples = sum(r["samples"] for r in sel)
    seconds = sum(r["seconds"] for r in sel)
    return {
        "subjects": len(sel),
        "samples": samples,
        "seconds": seconds,
        "seconds_per_sample": seconds / samples if samples else None,
    }


def _ratio(published, ours):
    if ours is None or ours <= 0:
        return None
    return published / ours


def summarise(rows, wall_seconds):
    totals = {}
    for ds in sorted({r["dataset"] for r in rows}):
        sel = [r for r in rows if r["dataset"] == ds]
        g = _group(rows, ds)
        topo = [(r["mean_topology_score"], r["scored"]) for r in sel if r["mean_topology_score"] is not None]
        scored = sum(w for _, w in topo)
        g.update(
            errors=sum(r["errors"] for r in sel),
            invalid=sum(r["invalid"] for r in sel),
            mean_topology_score=(sum(m * w for m, w in topo) / scored) if scored else None,
            structural_efficiency_raw_over_1_0005=sum(r["structural_efficiency_raw_over_1.0005"] for r in sel),
        )
        totals[ds] = g
    all_samples = sum(r["samples"] for r in rows)
    all_seconds = sum(r["seconds"] for r in rows)
    topo_all = [(r["mean_topology_score"], r["scored"]) for r in rows if r["mean_topology_score"] is not None]
    scored_all = sum(w for _, w in topo_all)
    totals["all"] = {
        "samples": all_samples,
        "mean_topology_score": (sum(m * w for m, w in topo_all) / scored_all) if scored_all else None,
        "invalid": sum(r["invalid"] for r in rows),
        "seconds": all_seconds,
        "seconds_per_sample": all_seconds / all_samples if all_samples else None,
        "errors": sum(r["errors"] for r in rows),
        "structural_efficiency_raw_over_1_0005": sum(r["structural_efficiency_raw_over_1.0005"] for r in rows),
    }

    comparison = {"published_scorer": PUBLISHED, "ratio_definition": "published_seconds / our_seconds (> 1: we are faster)"}
    v1 = totals.get("v1")
    if v1:
        v1_spp = v1["seconds_per_sample"]
        comparison["v1_all"] = {
            "our_samples": v1["samples"],
            "our_seconds": v1["seconds"],
            "our_seconds_per_sample": v1_spp,
            "our_seconds_scaled_to_408_samples": v1_spp * PUBLISHED["v1_all_samples"],
            "published_samples": PUBLISHED["v1_all_samples"],
            "published_seconds": PUBLISHED["v1_all_seconds"],
            "published_seconds_per_sample": PUBLISHED["v1_seconds_per_sample"],
            "ratio_per_sample": _ratio(PUBLISHED["v1_seconds_per_sample"], v1_spp),
            "ratio_raw_totals": _ratio(PUBLISHED["v1_all_seconds"], v1["seconds"]),
            "note": (f"The v1 folder here holds {v1['samples']} records, the published timing is for "
                     f"{PUBLISHED['v1_all_samples']}. ratio_per_sample (= 174.96 s / our time scaled to "
                     f"408 samples) is the like-for-like figure; ratio_raw_totals divides 174.96 s by our "
                     f"time for all {v1['samples']} records."),
        }
        fe = _group(rows, "v1", {"full_easy"})
        if fe["samples"]:
            comparison["v1_full_easy"] = {
                "our_samples": fe["samples"],
                "our_seconds_per_sample": fe["seconds_per_sample"],
                "published_seconds_per_sample": PUBLISHED["v1_full_easy_seconds_per_sample"],
                "ratio_per_sample": _ratio(PUBLISHED["v1_full_easy_seconds_per_sample"], fe["seconds_per_sample"]),
            }
    if "v2_20" in totals:
        full = _group(rows, "v2_20", {"full_easy", "full_hard"})
        if full["samples"]:
            comparison["v2_20_full"] = {
                "subjects": "full_easy + full_hard",
                "our_samples": full["samples"],
                "our_seconds_per_sample": full["seconds_per_sample"],
                "published_seconds_per_sample": PUBLISHED["v2_20_full_seconds_per_sample"],
                "ratio_per_sample": _ratio(PUBLISHED["v2_20_full_seconds_per_sample"], full["seconds_per_sample"]),
            }
    return {"totals": totals, "comparison": comparison, "wall_seconds": wall_seconds}


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine_info(load_before=None):
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "cpu_count": os.cpu_count(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # 1/5/15-minute load averages: other work on the machine inflates the times.
        "load_average_before": load_before,
        "load_average_after": _loadavg(),
    }


# -- output ---------------------------------------------------------------------------------------
def _fmt(value, digits=4):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(rows):
    lines = [
        "| dataset | subject | samples | seconds | s/sample | max s | mean topology_score | raw>1.0005 | yardsticks (miss/hit) | invalid | errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['subject']} | {r['samples']} | {_fmt(r['seconds'], 2)} | "
            f"{_fmt(r['seconds_per_sample'])} | {_fmt(r['max_sample_seconds'], 2)} | "
            f"{_fmt(r['mean_topology_score'])} | {r['structural_efficiency_raw_over_1.0005']} | "
            f"{r['yardstick_cache_misses']}/{r['yardstick_cache_hits']} | {r['invalid']} | {r['errors']} |"
        )
    return "\n".join(lines)


def markdown_report(rows, summary, machine):
    out = ["# score_dataset benchmark", ""]
    out += ["Every record scored with completion = ground_truth and input grid = the record's input_grid.",
            "", f"- {CACHE_NOTE}", f"- {TIMING_NOTE}",
            "- raw>1.0005: samples whose structural_efficiency_raw exceeds 1.0005 (the yardstick is worse "
            "than the ground truth itself).",
            "- invalid: samples the scorer returned with an invalid_reason (all-zero metrics); "
            "errors: samples whose Scorer.score() raised (a library bug; tracebacks below).", ""]
    out += ["## Machine", ""]
    out += [f"- {k}: {v}" for k, v in machine.items()]
    out += ["", "## Per subject", "", markdown_table(rows), ""]
    out += ["## Totals", "", "| dataset | samples | seconds | s/sample | mean topology_score | raw>1.0005 | invalid | errors |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for ds, t in summary["totals"].items():
        out.append(f"| {ds} | {t['samples']} | {_fmt(t['seconds'], 2)} | {_fmt(t['seconds_per_sample'])} | "
                   f"{_fmt(t.get('mean_topology_score'))} | {t['structural_efficiency_raw_over_1_0005']} | {t['invalid']} | {t['errors']} |")
    out += ["", f"Wall time of the whole run (including file reading and Scorer set-up): "
                f"{summary['wall_seconds']:.2f} s", ""]
    out += comparison_lines(summary["comparison"])
    errs = [(r["dataset"], r["subject"], e) for r in rows for e in r["error_details"]]
    out += ["", "## Exceptions", ""]
    if not errs:
        out.append("None: every sample was scored.")
    for ds, subj, e in errs:
        out += [f"### {ds}/{subj} index {e['index']}", "", "```", e["traceback"].rstrip(), "```", ""]
    return "\n".join(out) + "\n"


def comparison_lines(cmp):
    out = ["## Comparison with the published scorer (same machine)", "",
           "Ratio = published seconds / our seconds (> 1 means sphyr_hpc is faster).", "",
           "| what | published | ours | ratio |", "|---|---:|---:|---:|"]
    v1 = cmp.get("v1_all")
    if v1:
        out.append(f"| v1 all samples, per sample | {v1['published_seconds_per_sample']:.4f} s "
                   f"({v1['published_seconds']:.2f} s / {v1['published_samples']}) | "
                   f"{v1['our_seconds_per_sample']:.4f} s ({v1['our_seconds']:.2f} s / {v1['our_samples']}) | "
                   f"{_fmt(v1['ratio_per_sample'], 2)} |")
        out.append(f"| v1 all samples, total scaled to {v1['published_samples']} | {v1['published_seconds']:.2f} s | "
                   f"{v1['our_seconds_scaled_to_408_samples']:.2f} s | {_fmt(v1['ratio_per_sample'], 2)} |")
        out.append(f"| v1 all samples, raw totals ({v1['published_samples']} vs {v1['our_samples']}) | "
                   f"{v1['published_seconds']:.2f} s | {v1['our_seconds']:.2f} s | {_fmt(v1['ratio_raw_totals'], 2)} |")
    fe = cmp.get("v1_full_easy")
    if fe:
        out.append(f"| v1 full_easy, per sample | {fe['published_seconds_per_sample']:.2f} s | "
                   f"{fe['our_seconds_per_sample']:.4f} s | {_fmt(fe['ratio_per_sample'], 2)} |")
    full = cmp.get("v2_20_full")
    if full:
        out.append(f"| v2_20 full_easy + full_hard (20x20), per sample | {full['published_seconds_per_sample']:.2f} s | "
                   f"{full['our_seconds_per_sample']:.4f} s ({full['our_samples']} samples) | "
                   f"{_fmt(full['ratio_per_sample'], 2)} |")
    if v1:
        out += ["", f"Note: {v1['note']}"]
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", default=DEFAULT_DATA_ROOT,
                   help="folder holding the dataset folders (default: examples/data)")
    p.add_argument("--dataset-dir", action="append", default=None,
                   help="dataset folder of <subject>.jsonl files, absolute or relative to --data-root; "
                        "repeatable (default: v1 and v2_20)")
    p.add_argument("--out", default=DEFAULT_OUT,
                   help="JSON result file; the Markdown report goes next to it with a .md suffix")
    return p.parse_known_args(argv)


def main(argv=None):
    args, petsc_args = parse_args(sys.argv[1:] if argv is None else argv)
    # Only unknown arguments reach PETSc's options database, never our own flags.
    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.core import loadcase

    petsc([sys.argv[0]] + petsc_args)

    dirs = args.dataset_dir or list(DEFAULT_DATASETS)
    dirs = [d if os.path.isabs(d) else os.path.join(args.data_root, d) for d in dirs]
    for d in dirs:
        if not os.path.isdir(d):
            raise SystemExit(f"dataset folder not found: {d}")

    rows = []
    load_before = _loadavg()
    wall0 = time.perf_counter()
    for d in dirs:
        dataset = dataset_label(d)
        gravity = loadcase.gravity_from_folder(dataset)
        for name in sorted(os.listdir(d)):
            if not name.endswith(".jsonl"):
                continue
            row = score_subject(os.path.join(d, name), dataset, gravity)
            rows.append(row)
            print(f"[{dataset}/{row['subject']}] {row['samples']} samples, {row['seconds']:.2f} s, "
                  f"{row['errors']} errors", file=sys.stderr, flush=True)
    wall = time.perf_counter() - wall0

    summary = summarise(rows, wall)
    machine = machine_info(load_before)
    out_md = os.path.splitext(args.out)[0] + ".md"
    result = {
        "benchmark": "score_dataset",
        "description": "Scorer.score(ground_truth, ground_truth, input_grid) on every dataset record",
        "cache": CACHE_NOTE,
        "timing": TIMING_NOTE,
        "machine": machine,
        "dataset_dirs": dirs,
        "subjects": rows,
        "summary": summary,
    }
    report = markdown_report(rows, summary, machine)
    from sphyr_hpc.io.atomic import write_json_atomic, write_text_atomic

    write_json_atomic(args.out, result, indent=2)
    write_text_atomic(out_md, report)

    print(markdown_table(rows))
    print()
    print("\n".join(comparison_lines(summary["comparison"])))
    n_err = summary["totals"]["all"]["errors"]
    for r in rows:
        for e in r["error_details"]:
            print(f"\nEXCEPTION in {r['dataset']}/{r['subject']} index {e['index']}:\n{e['traceback']}", file=sys.stderr)
    print(f"\n{summary['totals']['all']['samples']} samples, {summary['totals']['all']['seconds']:.2f} s scoring, "
          f"{n_err} exceptions. Results: {args.out}, {out_md}")
    return result


if __name__ == "__main__":
    main()
