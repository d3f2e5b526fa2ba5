"""The 88-line code's half MBB beam: ``optimize --preset mbb88`` against the published listing.

For every size (default 60x20, 150x50 and 300x100; volume fraction 0.5, penalty 3, filter radius
1.5 nelx / 60) and both filters (``--filter sensitivity``, the listing's ``ft = 1``, and
``--filter density``, ``ft = 2``), one run of each, one after the other:

* the listing: the NumPy/SciPy implementation of tests/top88_reference.py (one process, SciPy's
  direct solver), the yardstick;
* ``python -m sphyr_hpc.optimize --preset mbb88 --size NXxNY --volfrac 0.5 --penal 3 --radius R
  --filter F --continuation none --json OUT.json`` on 1 rank and on 2 (``bin/mpirun -n R``), with
  the direct solver the command chooses at these sizes.

Recorded: iterations, final compliance, the relative difference of the compliance from the
listing's, the first iteration whose compliance differs from the listing's by more than 1e-6
relative (none: the two follow each other to the end) and wall seconds of each whole run (not
comparable with ``--jobs`` above 1, which runs that many at once).  With ``--png-dir DIR`` the
1-rank designs are written there as ``mbb88_NXxNY_FILTER.png``.

    .venv/bin/python benchmarks/mbb88_published.py [--sizes 60x20,150x50,300x100] [--png-dir docs] [--jobs 1]
Results: benchmarks/results/mbb88_published.{json,md}.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from _common import ROOT, commit_of, machine, machine_line, now, write_results

PYTHON = str(ROOT / ".venv" / "bin" / "python")
FILTERS = {"sensitivity": 1, "density": 2}
RELATIVE = 1e-6
# The listing has no iteration limit (its reference implementation stops at this one for safety):
# optimize's default of 300 would stop the larger cases before the listing does.
MAX_ITERATIONS = 10_000


def listing(nelx, nely, filter_name):
    """One run of the listing (tests/top88_reference.py, its own process): (its result, wall seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        # One thread, as the listing runs (a BLAS thread pool only waits on a loaded machine).
        return run([PYTHON, str(ROOT / "tests" / "top88_reference.py"), str(nelx), str(nely),
                    str(FILTERS[filter_name]), out], out, {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})


def optimize(nelx, nely, filter_name, ranks, png=None):
    """One ``optimize`` run: (its JSON, wall seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        cmd = [str(ROOT / "bin" / "mpirun"), "-n", str(ranks), PYTHON, "-m",
               "sphyr_hpc.optimize", "--preset", "mbb88", "--size", f"{nelx}x{nely}", "--volfrac", "0.5",
               "--penal", "3", "--radius", f"{1.5 * nelx / 60:g}", "--filter", filter_name,
               "--continuation", "none", "--iterations", str(MAX_ITERATIONS), "--json", out, "--quiet"] + (["--png", str(png)] if png else [])
        return run(cmd, out)


def run(cmd, out, env=None):
    """Run ``cmd`` (with ``env`` added to the environment); (the JSON it wrote to ``out``, wall seconds)."""
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    with open(out) as handle:
        return json.load(handle), wall


def first_departure(ours, reference):
    """The first iteration whose compliance differs from the listing's by more than RELATIVE, or None."""
    for (iteration, c_ref, _), row in zip(reference, ours):
        if abs(row["compliance"] - c_ref) > RELATIVE * abs(c_ref):
            return iteration
    return None


def case(nelx, nely, filter_name, png_dir, pool):
    """The listing and ``optimize`` on 1 and 2 ranks (at once with ``--jobs`` > 1)."""
    png = os.path.join(png_dir, f"mbb88_{nelx}x{nely}_{filter_name}.png") if png_dir else None
    runs = {"listing": pool.submit(listing, nelx, nely, filter_name),
            1: pool.submit(optimize, nelx, nely, filter_name, 1, png),
            2: pool.submit(optimize, nelx, nely, filter_name, 2)}
    ref, wall = runs["listing"].result()
    row = {"size": f"{nelx}x{nely}", "radius": 1.5 * nelx / 60, "filter": filter_name, "ft": FILTERS[filter_name],
           "listing": {"iterations": ref["iterations"], "compliance": ref["compliance"], "seconds": wall}}
    for ranks in (1, 2):
        out, wall = runs[ranks].result()
        row[f"ranks_{ranks}"] = {"iterations": out["iterations"], "compliance": out["compliance"],
                                 "relative_difference": out["compliance"] / ref["compliance"] - 1.0,
                                 "first_departure": first_departure(out["history"], ref["history"]),
                                 "solver": out["solver"], "seconds": wall}
    return row


def markdown(report):
    lines = ["# The 88-line code's half MBB beam: `optimize --preset mbb88` against the listing", "",
             "Volume fraction 0.5, penalty 3, filter radius 1.5 nelx / 60; the listing is "
             "tests/top88_reference.py (NumPy/SciPy); `optimize` with the direct solver on 1 and 2 ranks. "
             "\"first departure\": the first iteration whose compliance differs from the listing's by more "
             "than 1e-6 relative (none: they agree at every iteration).", "",
             "| size | filter | listing: iterations | listing: compliance | ranks | iterations | compliance | "
             "relative difference | first departure |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for row in report["cases"]:
        for ranks in (1, 2):
            ours = row[f"ranks_{ranks}"]
            lines.append(f"| {row['size']} | {row['filter']} (ft={row['ft']}) | {row['listing']['iterations']} | "
                         f"{row['listing']['compliance']:.6f} | {ranks} | {ours['iterations']} | "
                         f"{ours['compliance']:.6f} | {ours['relative_difference']:.1e} | "
                         f"{ours['first_departure'] or 'none'} |")
    lines += ["", machine_line(report["machine"]), "",
              "```", report["command"], "```", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="60x20,150x50,300x100")
    parser.add_argument("--png-dir", help="write the 1-rank designs here")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (seconds are then not comparable)")
    parser.add_argument("--add", action="store_true",
                        help="keep the cases of other sizes already in --out (a results file built size by size)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mbb88_published.json"))
    args = parser.parse_args(argv)
    load = os.getloadavg()
    sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",")]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool, ThreadPoolExecutor(max_workers=args.jobs) as cases:
        rows = [cases.submit(case, nelx, nely, filter_name, args.png_dir, pool)
                for nelx, nely in sizes for filter_name in FILTERS]
        rows = [row.result() for row in rows]
    for row in rows:
        print(json.dumps(row), flush=True)
    command = ".venv/bin/python benchmarks/mbb88_published.py " + " ".join(argv or sys.argv[1:])
    if args.add and os.path.exists(args.out):
        with open(args.out) as handle:
            earlier = json.load(handle)
        rows = sorted([row for row in earlier["cases"] if row["size"] not in {r["size"] for r in rows}] + rows,
                      key=lambda row: (int(row["size"].split("x")[0]), row["ft"]))
        command = earlier["command"] + "\n" + command
    report = {"date": now(), "commit": commit_of(), "machine": machine(load), "jobs": args.jobs, "cases": rows,
              "command": command}
    write_results(args.out, report, markdown(report))


if __name__ == "__main__":
    main()
