"""Two checkouts optimising the same problem: are the designs byte-identical, with every solver, on 1 and 2 ranks?

For each solver and rank count: ``optimize --preset mbb --size SIZE --iterations N --tolerance 0
--solver S --save-density`` of the older checkout and of this one, each with its own ``bin/mpirun``
and ``.venv``, and the two ``.npy`` files compared byte for byte (``cmp``).  A change that should
move no bit (a refactor of the solvers) must print ``identical`` on every row.

    /usr/bin/python3 benchmarks/designs_identical.py --old DIR [--size 120x60] [--iterations 40]
        [--solvers mg,direct,gamg] [--ranks 1,2]

Results: ``benchmarks/results/designs_identical.{json,md}`` (``--out``).
"""

import argparse
import filecmp
import os
import subprocess
import tempfile
from pathlib import Path

from _common import ROOT, commit_of, machine, machine_line, now, write_results


def _design(tree, ranks, solver, size, iterations, out):
    cmd = [str(Path(tree) / "bin" / "mpirun"), "-n", str(ranks), str(Path(tree) / ".venv" / "bin" / "python"),
           "-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", size, "--iterations", str(iterations),
           "--tolerance", "0", "--solver", solver, "--save-density", str(out), "--quiet"]
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the older checkout (with bin/mpirun and .venv)")
    parser.add_argument("--size", default="120x60")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--solvers", default="mg,direct,gamg")
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "designs_identical"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sphyr_designs_") as work:
        for solver in args.solvers.split(","):
            for ranks in (int(r) for r in args.ranks.split(",")):
                paths = {label: Path(work) / f"{solver}-{ranks}-{label}.npy" for label in ("old", "new")}
                for label, tree in (("old", args.old), ("new", str(ROOT))):
                    _design(tree, ranks, solver, args.size, args.iterations, paths[label])
                rows.append({"solver": solver, "ranks": ranks,
                             "identical": filecmp.cmp(paths["old"], paths["new"], shallow=False)})
                print(rows[-1], flush=True)
    report = {"benchmark": "designs_identical", "date": now(), "machine": machine(load_before), "old": args.old,
              "old_commit": commit_of(args.old), "new_commit": commit_of(ROOT), "size": args.size,
              "iterations": args.iterations, "rows": rows}
    lines = ["# Designs of two checkouts, byte for byte", "",
             f"Run {report['date']}; old {report['old_commit']}, new {report['new_commit']}; "
             f"`/usr/bin/python3 benchmarks/designs_identical.py --old DIR --size {args.size} --iterations "
             f"{args.iterations} --solvers {args.solvers} --ranks {args.ranks}`: MBB, `--tolerance 0 "
             f"--save-density`, the .npy files compared.  {machine_line(report['machine'])}", "",
             "| solver | ranks | design identical |", "|---|---|---|"]
    lines += [f"| {r['solver']} | {r['ranks']} | {'yes' if r['identical'] else 'NO'} |" for r in rows]
    write_results(args.out + ".json", report, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
