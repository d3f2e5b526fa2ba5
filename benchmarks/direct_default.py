"""What the direct solver's default on several ranks costs: K gathered to rank 0 and factorised there
(PETSc's Cholesky, nested dissection: PCTELESCOPE) against MUMPS's parallel LU on 2 ranks (the default before, not the same from one run to the next),
the multigrid on 2 ranks and the Cholesky on one rank, rounds interleaved.

    python3 benchmarks/direct_default.py --sizes 240x80,440x220 --rounds 3

440x220 elements is 194,922 DOFs, the largest grid the direct solver is the default for
(``sphyr_hpc.solvers.elasticity.DIRECT_SOLVER_MAX_DOFS``).  Per run: seconds per iteration after the
first (``--json``'s summary), the set-up (factorisation) and solve seconds per iteration, peak memory
per rank.  Writes benchmarks/results/direct_default.{json,md}.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
VARIANTS = {
    "PETSc Cholesky on rank 0 (default)": (2, []),
    "MUMPS LU on 2 ranks (before)": (2, ["-sphyr_pc_type", "lu", "-sphyr_pc_factor_mat_solver_type", "mumps"]),
    "mg on 2 ranks": (2, ["--solver", "mg"]),
    "PETSc Cholesky on 1 rank": (1, []),
}


NOTE = ("PCTELESCOPE sets its rank-0 solver up inside its first apply: its factorisation is in the solve column. "
        "While rank 0 factorises, rank 1 waits inside MPI, which polls: on a machine whose cores are taken by "
        "others that wait costs rank 0 time too.\n")


def one(size, iterations, variant):
    ranks, options = variant
    with tempfile.TemporaryDirectory() as work:
        out = Path(work) / "run.json"
        command = ([str(HERE / "bin" / "mpirun"), "-n", str(ranks)] if ranks > 1 else []) + [
            str(HERE / ".venv" / "bin" / "python"), "-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", size,
            "--iterations", str(iterations), "--tolerance", "0", "--solver", "direct", "--quiet", "--json", str(out),
            *options]
        load = os.getloadavg()[0]
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=3600)
        summary = json.loads(out.read_text())["summary"]
    memory = summary["peak_memory_mb_per_rank"]
    return {"seconds": summary["seconds"], "setup": summary["sphyr_setup_seconds"],
            "solve": summary["sphyr_solve_seconds"], "memory": memory + [0.0] * (2 - len(memory)), "load": load}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="240x80,440x220")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=4)
    p.add_argument("--out", default=str(HERE / "benchmarks" / "results" / "direct_default"))
    args = p.parse_args()
    runs = []
    for round_ in range(args.rounds):
        for size in args.sizes.split(","):
            for name, variant in VARIANTS.items():
                run = {"round": round_, "size": size, "variant": name, **one(size, args.iterations, variant)}
                runs.append(run)
                print(json.dumps(run), flush=True)
    lines = ["| size | variant | s/iteration (median) | set-up s/iteration (sphyr_setup) | solve s/iteration (sphyr_solve) | "
             "peak MB rank 0 / rank 1 | load average (1 min) |", "|---|---|---|---|---|---|---|"]
    for size in args.sizes.split(","):
        for name in VARIANTS:
            mine = [r for r in runs if r["size"] == size and r["variant"] == name]
            med = lambda key: statistics.median(r[key] for r in mine)  # noqa: E731
            memory = [max(r["memory"][rank] for r in mine) for rank in range(2)]
            lines.append(f"| {size} | {name} | {med('seconds'):.3f} | {med('setup'):.3f} | {med('solve'):.3f} | "
                         f"{memory[0]:.0f} / {memory[1]:.0f} | {min(r['load'] for r in mine):.1f}-"
                         f"{max(r['load'] for r in mine):.1f} |")
    text = (f"# The direct solver on 2 ranks: Cholesky on rank 0 against MUMPS\n\n`{' '.join(sys.argv)}` "
            f"({args.rounds} rounds interleaved, {args.iterations} iterations a run, {time.strftime('%Y-%m-%d %H:%M')})"
            f"\n\n" + "\n".join(lines) + "\n\n" + NOTE)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps(runs, indent=1) + "\n")
    Path(args.out + ".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
