"""MMA's designs of this checkout against another's (an older commit checked out beside it), at 64x32.

    git worktree add ../old 5d17dd6 && (cd ../old && bin/setup)
    python3 benchmarks/mma_designs_vs_old.py --old ../old --epsilon-min 1e-13 --first 1,5,20 \
        --out benchmarks/results/plan/mma_designs_vs_old_tight.json

Every preset (mbb, cantilever, bridge) runs ``python -m sphyr_hpc.optimize --preset P --size 64x32
--optimizer mma --save-density`` (one rank, the default settings) with each checkout's own venv, and the
report gives the largest difference of a density between the two designs, the two final compliances
and the iterations each took.  ``--first N,...``: also the designs after the first N iterations
(``--iterations N --tolerance 0``), where the two runs have had less time to part.

5d17dd6 solved MMA's subproblem by a primal-dual interior-point method down to ``EPSILON_MIN`` = 1e-7
of its ``sphyr_hpc/optimiser/mma.py``, about 1e-3 from the subproblem's exact solution in x
(mma_subproblem_vs_old.py).  ``--epsilon-min E`` runs the older checkout with that constant set to E at
run time (this script sets the module's attribute before the command runs; the older checkout's files
are not touched), so that both sides solve the same subproblems to near rounding.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, commit_of, machine, machine_line, now, write_results  # noqa: E402

PRESETS = ("mbb", "cantilever", "bridge")
# The older checkout's optimize with its interior point's EPSILON_MIN set first (argv: E, S, then the command's);
# S > 0: each subproblem's x within S of a move limit put on it (what the exact solution's clipping gives).
TIGHTENED = """import runpy, sys
import numpy as np
import sphyr_hpc.optimiser.mma as m
m.EPSILON_MIN, snap = float(sys.argv.pop(1)), float(sys.argv.pop(1))
if snap > 0:
    solve = m.Subproblem.solve
    def snapped(self):
        x = solve(self)
        x = np.where(x - self.alpha < snap, self.alpha, x)
        return np.where(self.beta - x < snap, self.beta, x)
    m.Subproblem.solve = snapped
runpy.run_module("sphyr_hpc.optimize", run_name="__main__", alter_sys=True)
"""


def run(checkout, preset, size, work, iterations=None, epsilon_min=None, snap=0.0):
    tag = "all" if iterations is None else f"first{iterations}"
    stem = Path(work) / f"{Path(checkout).name}_{preset}_{tag}"
    python = str(Path(checkout) / ".venv" / "bin" / "python")
    head = [python, "-c", TIGHTENED, repr(epsilon_min), repr(snap)] if epsilon_min is not None else [python, "-m", "sphyr_hpc.optimize"]
    cmd = head + ["--preset", preset, "--size", size, "--optimizer", "mma", "--quiet",
                  "--save-density", f"{stem}.npy", "--json", f"{stem}.json"]
    if iterations is not None:
        cmd += ["--iterations", str(iterations), "--tolerance", "0"]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=checkout, stdout=subprocess.DEVNULL)
    data = json.loads(Path(f"{stem}.json").read_text())
    return np.load(f"{stem}.npy"), data


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="the other checkout (with its own .venv)")
    parser.add_argument("--size", default="64x32")
    parser.add_argument("--epsilon-min", type=float, default=None,
                        help="the older checkout's interior-point EPSILON_MIN, set at run time (default: its own)")
    parser.add_argument("--snap", type=float, default=0.0,
                        help="with --epsilon-min: the older checkout's subproblem solutions within this of a move "
                             "limit put on it (the interior point never reaches a bound; the exact solution clips to it)")
    parser.add_argument("--first", default="", help="N,...: also compare the designs after the first N iterations")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "plan" / "mma_designs_vs_old.json"))
    args = parser.parse_args()
    load = os.getloadavg()
    work = tempfile.mkdtemp(prefix="sphyr_hpc-mma-designs-")
    rows = []
    for preset in PRESETS:
        for iterations in [int(n) for n in args.first.split(",") if n] + [None]:
            old, old_data = run(args.old, preset, args.size, work, iterations, args.epsilon_min, args.snap)
            new, new_data = run(ROOT, preset, args.size, work, iterations)
            rows.append({"preset": preset, "size": args.size, "iterations_asked": iterations,
                         "max_density_difference": float(np.abs(new - old).max()),
                         "compliance_old": old_data["compliance"], "compliance_new": new_data["compliance"],
                         "iterations_old": old_data["iterations"], "iterations_new": new_data["iterations"],
                         "update_seconds_old": old_data["summary"]["sphyr_update_seconds"],
                         "update_seconds_new": new_data["summary"]["sphyr_update_seconds"]})
            print(json.dumps(rows[-1]), flush=True)
    report = {"date": now(), "commit": commit_of(), "old_commit": commit_of(Path(args.old)),
              "old_epsilon_min": args.epsilon_min, "old_snap": args.snap, "rows": rows, "machine": machine(load)}
    tight = "" if args.epsilon_min is None else f" --epsilon-min {args.epsilon_min:g}"
    tight += f" --snap {args.snap:g}" if args.snap else ""
    first = f" --first {args.first}" if args.first else ""
    lines = [f"# MMA's designs, {report['commit']} against {report['old_commit']}", "",
             f"`python3 benchmarks/mma_designs_vs_old.py --old {args.old} --size {args.size}{tight}{first}` "
             f"({report['date']}).  The older checkout's interior point down to EPSILON_MIN = "
             f"{'its own 1e-7' if args.epsilon_min is None else f'{args.epsilon_min:g}'}"
             f"{f', its x within {args.snap:g} of a move limit put on it' if args.snap else ''}.", "",
             "| preset | size | iterations | largest density difference | compliance old | compliance new "
             "| iterations old / new | update s/iteration old / new |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        asked = "to convergence" if r["iterations_asked"] is None else f"first {r['iterations_asked']}"
        lines.append(f"| {r['preset']} | {r['size']} | {asked} | {r['max_density_difference']:.3g} | "
                     f"{r['compliance_old']:.10g} | {r['compliance_new']:.10g} | {r['iterations_old']} / {r['iterations_new']} | "
                     f"{r['update_seconds_old']:.4f} / {r['update_seconds_new']:.4f} |")
    lines += ["", machine_line(report["machine"]), ""]
    write_results(args.out, report, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
