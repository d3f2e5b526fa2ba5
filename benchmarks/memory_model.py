"""Peak memory per rank of ``optimize`` by solver, size and ranks: the measurements behind
``sphyr_hpc.optimiser.memory``'s coefficients (a benchmark, not a test).

Every run is ``bin/mpirun -n R .venv/bin/python -m sphyr_hpc.optimize --preset mbb --size S
--solver X --iterations 2 --tolerance 0 --quiet --force --json ...``; its peak is the largest
``summary.peak_memory_mb_per_rank`` (``ru_maxrss``) over the ranks.  The fit, per kind of run (one
rank; several ranks):

* the process itself, ``BASE_MB``: the peak at 64x32 with mg (4,290 DOFs);
* per solver, bytes per DOF a rank owns: the least-squares slope through that base of
  (peak - base) against DOFs / ranks over the solver's large sizes (``--fit-sizes``).

Every run is then compared with the estimate the module holds (``per_rank_bytes``) and with the
fitted one.  Results: ``benchmarks/results/memory_model.{json,md}``.

    .venv/bin/python benchmarks/memory_model.py [--iterations 2] [--ranks 1,2] [--runs mg:64x32,mg:2048x1024]
    .venv/bin/python benchmarks/memory_model.py --merge A.json B.json --out C.json   # fit earlier runs together
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from _common import ROOT, machine, machine_line, now, write_results

from sphyr_hpc.optimiser import memory

MPIRUN = str(ROOT / "bin" / "mpirun")
BASE_SIZE = "64x32"
# The sizes each solver's coefficient is fitted at: mg at 2048x1024 and 4096x2048; gamg and direct
# at the largest sizes whose peaks (about 3 GB a rank for direct at 1024x512, 12 GB for one
# rank of gamg at 4096x2048) the shared machine measured has room for.
FIT_SIZES = {"mg": ("2048x1024", "4096x2048"), "gamg": ("1024x512", "2048x1024"),
             "direct": ("512x256", "1024x512")}
CHECK_SIZES = ("256x128", "512x256", "1024x512")


def measure(size, solver, ranks, iterations, workdir):
    out = os.path.join(workdir, f"{size}_{solver}_{ranks}.json")
    cmd = [MPIRUN, "-n", str(ranks), sys.executable, "-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", size,
           "--solver", solver, "--iterations", str(iterations), "--tolerance", "0", "--quiet", "--force",
           "--json", out]
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"size": size, "solver": solver, "ranks": ranks, "error": (proc.stdout + proc.stderr)[-2000:]}
    data = json.loads(open(out).read())
    peaks = data["summary"]["peak_memory_mb_per_rank"]
    row = {"size": size, "solver": solver, "ranks": ranks, "dofs": data["dofs"], "peak_mb_per_rank": peaks,
           "peak_mb": max(peaks), "seconds_per_iteration": data["summary"]["seconds"]}
    print(f"  {size} {solver} {ranks} rank(s): peak {row['peak_mb']:.0f} MB/rank", flush=True)
    return row


def kind(ranks):
    return "one" if ranks == 1 else "several"


def fit(rows):
    """(BASE_MB by kind, bytes per DOF by (solver, kind)) from the measured rows."""
    base = {kind(r["ranks"]): r["peak_mb"] for r in rows if r["size"] == BASE_SIZE and r["solver"] == "mg"
            and "error" not in r}
    per_dof = {}
    for solver, sizes in FIT_SIZES.items():
        for k in ("one", "several"):
            if k not in base:
                continue
            points = [(r["dofs"] / r["ranks"], (r["peak_mb"] - base[k]) * memory.MB) for r in rows
                      if r["solver"] == solver and r["size"] in sizes and kind(r["ranks"]) == k and "error" not in r]
            if points:
                per_dof[f"{solver}/{k}"] = sum(x * y for x, y in points) / sum(x * x for x, _ in points)
    return base, per_dof


def fitted_estimate(row, base, per_dof):
    k = kind(row["ranks"])
    slope = per_dof.get(f"{row['solver']}/{k}")
    if slope is None or k not in base:
        return None
    return base[k] + slope * row["dofs"] / row["ranks"] / memory.MB


def markdown(report):
    lines = ["# Peak memory per rank of `optimize`: measured and estimated", "",
             machine_line(report["machine"]) + f"  {report['date']}.", "",
             f"`optimize --preset mbb --size S --solver X --iterations {report['iterations']} --tolerance 0` on "
             "`bin/mpirun -n R`; peak = the largest `ru_maxrss` over the ranks.  Command: "
             "`.venv/bin/python benchmarks/memory_model.py`.", "",
             "Fitted: base " + ", ".join(f"{k} rank(s) {v:.1f} MB" for k, v in report["base_mb"].items())
             + "; bytes per DOF a rank owns: "
             + ", ".join(f"{k} {v:.0f}" for k, v in report["bytes_per_dof"].items()) + ".", "",
             "| size | DOFs | solver | ranks | measured MB/rank | module's estimate | error | fitted estimate | "
             "error | used for the fit |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        if "error" in r:
            lines.append(f"| {r['size']} | | {r['solver']} | {r['ranks']} | failed | | | | | |")
            continue
        est, fitted = r["estimate_mb"], r["fitted_estimate_mb"]
        fitted_text = f"{fitted:.0f} | {100 * (fitted / r['peak_mb'] - 1):+.1f} %" if fitted else "- | -"
        lines.append(f"| {r['size']} | {r['dofs']:,} | {r['solver']} | {r['ranks']} | {r['peak_mb']:.0f} | "
                     f"{est:.0f} | {100 * (est / r['peak_mb'] - 1):+.1f} % | {fitted_text} | "
                     f"{'yes' if r['fit'] else ''} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--runs", help="only these SOLVER:SIZE runs, comma-separated (default: every run of the "
                                       "fit and the check, and the base)")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="run nothing: fit the rows of these results files together (and estimate them with "
                             "the module's coefficients) into --out")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "memory_model.json"))
    args = parser.parse_args()
    ranks = [int(r) for r in args.ranks.split(",")]
    load_before = os.getloadavg()
    plan = [(BASE_SIZE, "mg")] + [(size, solver) for solver in ("direct", "mg", "gamg") for size in CHECK_SIZES]
    plan += [(size, solver) for solver, sizes in FIT_SIZES.items() for size in sizes if (size, solver) not in plan]
    if args.merge:  # no run: the rows of earlier results, fitted and estimated anew
        rows = [row for path in args.merge for row in json.loads(open(path).read())["runs"]]
        report = _report(rows, args.iterations, load_before)
        write_results(args.out, report, markdown(report))
        print(markdown(report))
        return
    if args.runs:
        plan = [tuple(reversed(item.split(":"))) for item in args.runs.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="sphyr_memory_") as workdir:
        for size, solver in plan:
            for r in ranks:
                row = measure(size, solver, r, args.iterations, workdir)
                row["fit"] = size in FIT_SIZES.get(solver, ())
                rows.append(row)
                report = _report(rows, args.iterations, load_before)  # after every run: a stop keeps the rest
                write_results(args.out, report, markdown(report))
    print(markdown(report))


def _report(rows, iterations, load_before):
    base, per_dof = fit(rows)
    for r in rows:
        if "error" not in r:
            r["estimate_mb"] = memory.per_rank_bytes(r["dofs"], r["solver"], r["ranks"]) / memory.MB
            r["fitted_estimate_mb"] = fitted_estimate(r, base, per_dof)
    return {"benchmark": "memory_model", "date": now(), "iterations": iterations, "machine": machine(load_before),
            "base_mb": base, "bytes_per_dof": per_dof, "runs": rows}


if __name__ == "__main__":
    main()
