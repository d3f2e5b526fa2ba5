"""The long runs the README promises a time for, timed as a user runs them (whole commands, 2 ranks).

Each command is the one the README and docs/optimize.md print; its wall-clock seconds (start-up
included) go to benchmarks/results/long_runs.{json,md}. tests/test_doc_outputs.py checks that every
time the README gives for these runs is a range holding the measured value.

    .venv/bin/python benchmarks/long_runs.py [--only NAME ...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine, machine_line, now, write_results

PY = str(ROOT / ".venv" / "bin" / "python")
MPI = [str(ROOT / "bin" / "mpirun"), "-n", "2", PY]
RUNS = {
    "mbb_300x100": [MPI + ["-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", "300x100", "--volfrac", "0.5",
                           "--radius", "4", "--png", "mbb_300x100.png"]],
    "upscaled_320x320": [[PY, "-m", "sphyr_hpc.generate", "--dataset", str(ROOT / "examples/data/v1/full_easy.jsonl"),
                          "--index", "3", "--upscale", "32", "--out", "sample.json"],
                         MPI + ["-m", "sphyr_hpc.optimize", "sample.json", "--png", "sample.png",
                                "--fields", "sample-history"]],
    "scaling_1024x512": [[PY, "-m", "sphyr_hpc.scaling", "--sizes", "128x64,256x128,512x256,1024x512",
                          "--ranks", "1,2", "--iterations", "10", "--json", "scaling.json"]],
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(RUNS), default=sorted(RUNS))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "long_runs.json"))
    args = parser.parse_args()
    out = Path(args.out)
    report = json.loads(out.read_text()) if out.exists() else {"runs": {}}
    load = os.getloadavg()
    for name in args.only:
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            for argv in RUNS[name]:
                run = subprocess.run(argv, cwd=folder, capture_output=True, text=True,
                                     env=dict(os.environ, SPHYR_HPC_STORE="none"))
                if run.returncode != 0:
                    sys.exit(f"{name}: {' '.join(argv)} exited {run.returncode}\n{run.stderr[-2000:]}")
            seconds = time.perf_counter() - start
        report["runs"][name] = {"seconds": round(seconds, 1), "commands": [" ".join(a) for a in RUNS[name]],
                                "date": now(), "loadavg_before": load, "loadavg_after": os.getloadavg()}
        print(f"{name}: {seconds:.1f} s", flush=True)
    report["machine"] = machine(load)
    lines = ["# The README's long runs, timed (2 ranks)", "",
             "`.venv/bin/python benchmarks/long_runs.py`: each run's commands as the docs print them, wall clock.", "",
             "| run | seconds | date | load average before, after |", "|---|---:|---|---|"]
    for name, run in sorted(report["runs"].items()):
        lines.append(f"| {name} | {run['seconds']} | {run['date']} | {tuple(round(v, 1) for v in run['loadavg_before'])}, "
                     f"{tuple(round(v, 1) for v in run['loadavg_after'])} |")
    lines += ["", machine_line(report["machine"]), ""]
    write_results(out, report, "\n".join(lines))


if __name__ == "__main__":
    main()
