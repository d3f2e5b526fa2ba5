"""MMA's designs of this checkout against another's (an older commit checked out beside it), at 64x32.

    git worktree add ../old 5d17dd6 && (cd ../old && bin/setup)
    python3 benchmarks/mma_designs_vs_old.py --old ../old --out benchmarks/results/plan/mma_designs_vs_old.json

Every preset (mbb, cantilever, bridge) runs ``python -m sphyr_hpc.optimize --preset P --size 64x32
--optimizer mma --save-density`` (one rank, the default settings) with each checkout's own venv, and the
report gives the largest difference of a density between the two designs, the two final compliances
and the iterations each took.
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


def run(checkout, preset, size, work):
    stem = Path(work) / f"{Path(checkout).name}_{preset}"
    cmd = [str(Path(checkout) / ".venv" / "bin" / "python"), "-m", "sphyr_hpc.optimize", "--preset", preset,
           "--size", size, "--optimizer", "mma", "--quiet", "--save-density", f"{stem}.npy", "--json", f"{stem}.json"]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=checkout, stdout=subprocess.DEVNULL)
    data = json.loads(Path(f"{stem}.json").read_text())
    return np.load(f"{stem}.npy"), data


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="the other checkout (with its own .venv)")
    parser.add_argument("--size", default="64x32")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "plan" / "mma_designs_vs_old.json"))
    args = parser.parse_args()
    load = os.getloadavg()
    work = tempfile.mkdtemp(prefix="sphyr_hpc-mma-designs-")
    rows = []
    for preset in PRESETS:
        old, old_data = run(args.old, preset, args.size, work)
        new, new_data = run(ROOT, preset, args.size, work)
        rows.append({"preset": preset, "size": args.size,
                     "max_density_difference": float(np.abs(new - old).max()),
                     "compliance_old": old_data["compliance"], "compliance_new": new_data["compliance"],
                     "iterations_old": old_data["iterations"], "iterations_new": new_data["iterations"],
                     "update_seconds_old": old_data["summary"]["sphyr_update_seconds"],
                     "update_seconds_new": new_data["summary"]["sphyr_update_seconds"]})
    report = {"date": now(), "commit": commit_of(), "old_commit": commit_of(Path(args.old)), "rows": rows,
              "machine": machine(load)}
    lines = [f"# MMA's designs, {report['commit']} against {report['old_commit']}", "",
             f"`python3 benchmarks/mma_designs_vs_old.py --old {args.old} --size {args.size}` ({report['date']}).", "",
             "| preset | size | largest density difference | compliance old | compliance new | iterations old / new "
             "| update s/iteration old / new |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['preset']} | {r['size']} | {r['max_density_difference']:.3g} | "
                     f"{r['compliance_old']:.10g} | {r['compliance_new']:.10g} | {r['iterations_old']} / {r['iterations_new']} | "
                     f"{r['update_seconds_old']:.4f} / {r['update_seconds_new']:.4f} |")
    lines += ["", machine_line(report["machine"]), ""]
    write_results(args.out, report, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
