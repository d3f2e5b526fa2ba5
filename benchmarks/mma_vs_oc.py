"""MMA against OC on the mbb, cantilever and bridge presets: compliance, iterations, seconds per iteration.

    python3 benchmarks/mma_vs_oc.py                       # 512x256 (150 iterations) and 2048x1024 (6), 2 ranks
    python3 benchmarks/mma_vs_oc.py --sizes 256x128:300 --ranks 1
    python3 benchmarks/mma_vs_oc.py --sizes 1024x512:8,2048x1024:6 --presets mbb --rounds 5 \
        --out benchmarks/results/plan/mma_vs_oc.json      # the cost of an iteration, 5 rounds

Every (size, preset) runs ``bin/mpirun -n RANKS python -m sphyr_hpc.optimize --preset P --size S
--optimizer oc`` and then the same with ``--optimizer mma``, one after the other (interleaved, so
that both see the same load on a shared machine), with the default settings (volume fraction 0.5,
continuation 1,0.5,10, move 0.2, tolerance 0.01) and ``--iterations`` as given after the size's
colon.  Reports each run's final compliance, volume fraction, iterations and whether it
converged, its mean seconds per iteration after the first and the update phase's (max over
ranks, ``summary`` of the run's JSON), and the ratios MMA / OC.  At 2048x1024 the few iterations
measure the cost of an iteration only (the compliances are not final).
With ``--rounds N`` every (size, preset) runs N OC/MMA pairs, the pairs one after the other, and
reports every round's seconds per iteration and the median of the ratios.
Results: ``benchmarks/results/mma_vs_oc.{json,md}``.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, commit_of, machine, machine_line, now, write_results  # noqa: E402

PYTHON = str(ROOT / ".venv" / "bin" / "python")
MPIRUN = str(ROOT / "bin" / "mpirun")
PRESETS = ("mbb", "cantilever", "bridge")


def one(size, iterations, preset, optimizer, ranks, work):
    out = Path(work) / f"{preset}_{size}_{optimizer}.json"
    cmd = [MPIRUN, "-n", str(ranks), PYTHON, "-m", "sphyr_hpc.optimize", "--preset", preset, "--size", size,
           "--iterations", str(iterations), "--optimizer", optimizer, "--quiet", "--json", str(out)]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    data = json.loads(out.read_text())
    s = data["summary"]
    return {"preset": preset, "size": size, "optimizer": optimizer, "ranks": data["ranks"],
            "compliance": data["compliance"], "volume_fraction": data["volume_fraction"],
            "iterations": data["iterations"], "converged": data["converged"],
            "seconds_per_iteration": s["seconds"], "update_seconds": s["sphyr_update_seconds"],
            "solve_seconds": s["sphyr_solve_seconds"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="512x256:150,2048x1024:6", help="SIZE:ITERATIONS,...")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--rounds", type=int, default=1, help="OC/MMA pairs per (size, preset), interleaved")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mma_vs_oc.json"))
    args = parser.parse_args()
    load = os.getloadavg()
    work = tempfile.mkdtemp(prefix="sphyr_hpc-mma-")
    rows = []
    for entry in args.sizes.split(","):
        size, iterations = entry.split(":")
        for preset in args.presets.split(","):
            for round_ in range(args.rounds):
                oc = one(size, int(iterations), preset, "oc", args.ranks, work)
                mma = one(size, int(iterations), preset, "mma", args.ranks, work)
                rows.append({"oc": oc, "mma": mma, "round": round_ + 1, "load": os.getloadavg()[0],
                             "compliance_ratio": mma["compliance"] / oc["compliance"],
                             "seconds_per_iteration_ratio": mma["seconds_per_iteration"] / oc["seconds_per_iteration"],
                             "update_seconds_ratio": mma["update_seconds"] / oc["update_seconds"]})
                print(json.dumps(rows[-1]), flush=True)  # each round as it ends (a long study stopped early)
    report = {"date": now(), "commit": commit_of(), "ranks": args.ranks, "sizes": args.sizes, "rounds": args.rounds,
              "rows": rows,
              "machine": machine(load)}
    lines = [f"# MMA against OC on {args.ranks} ranks", "",
             f"`python3 benchmarks/mma_vs_oc.py --sizes {args.sizes} --ranks {args.ranks} --presets {args.presets} "
             f"--rounds {args.rounds}` ({report['date']}, "
             f"commit {report['commit']}). OC and MMA of each row ran one after the other on a shared machine: "
             "compare the ratios, not the seconds.", "",
             "| preset | size | iterations OC / MMA (converged) | compliance OC | compliance MMA | MMA / OC | "
             "volume OC / MMA | s/iteration OC | s/iteration MMA | MMA / OC | update s OC / MMA |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        oc, mma = r["oc"], r["mma"]
        lines.append(
            f"| {oc['preset']} | {oc['size']} | {oc['iterations']} ({oc['converged']}) / {mma['iterations']} "
            f"({mma['converged']}) | {oc['compliance']:.6g} | {mma['compliance']:.6g} | {r['compliance_ratio']:.4f} | "
            f"{oc['volume_fraction']:.5f} / {mma['volume_fraction']:.5f} | {oc['seconds_per_iteration']:.3f} | "
            f"{mma['seconds_per_iteration']:.3f} | {r['seconds_per_iteration_ratio']:.3f} | "
            f"{oc['update_seconds']:.3f} / {mma['update_seconds']:.3f} |")
    if args.rounds > 1:
        lines += ["", "| preset | size | rounds | median s/iteration MMA / OC | median update s MMA / OC |",
                  "|---|---|---|---|---|"]
        for key in dict.fromkeys((r["oc"]["preset"], r["oc"]["size"]) for r in rows):
            group = [r for r in rows if (r["oc"]["preset"], r["oc"]["size"]) == key]
            lines.append(f"| {key[0]} | {key[1]} | {len(group)} | "
                         f"{statistics.median(r['seconds_per_iteration_ratio'] for r in group):.3f} | "
                         f"{statistics.median(r['update_seconds_ratio'] for r in group):.3f} |")
    lines += ["", machine_line(report["machine"]), ""]
    write_results(args.out, report, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
