"""A run stopped by SIGTERM and one killed by ``kill -9``, each resumed from its checkpoint, against the
uninterrupted run (docs/optimize.md, "Checkpoints").

    python3 benchmarks/checkpoint_resume.py                     # mbb 1024x512, 2 ranks, 30 iterations
    python3 benchmarks/checkpoint_resume.py --size 256x128 --iterations 20

Runs ``bin/mpirun -n 2 python -m sphyr_hpc.optimize --preset mbb`` four ways: uninterrupted;
SIGTERM to ``bin/mpirun`` (which hands it to the ranks) once the log shows iteration
``--term-at``, then ``--resume`` on 2 ranks; ``kill -9`` of every rank and of mpirun once the log
shows ``--kill-at``, then ``--resume`` on 2 ranks, and the same checkpoint resumed on 1 rank.
Every run solves to ``-sphyr_ksp_rtol 1e-12`` so that the 1-rank resumption (other smoothers'
sums) is compared with the 2-rank run to rounding, not to the solver's tolerance.  Reports the
final compliance, the largest density difference and the history's iterations of each.
Results: ``benchmarks/results/checkpoint_resume.{json,md}``.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, children, commit_of, machine, machine_line, now, write_results  # noqa: E402

import numpy as np  # noqa: E402

PYTHON = str(ROOT / ".venv" / "bin" / "python")
MPIRUN = str(ROOT / "bin" / "mpirun")
PETSC_OPTIONS = ["-sphyr_ksp_rtol", "1e-12"]


def command(args, ranks, *extra):
    return [MPIRUN, "-n", str(ranks), PYTHON, "-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", args.size,
            "--iterations", str(args.iterations), "--tolerance", "0", "--solver", "mg", "--checkpoint-every", str(args.every),
            *PETSC_OPTIONS, *extra]


def run(cmd, log):
    print("$ " + " ".join(cmd), flush=True)
    with open(log, "w") as handle:
        return subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT).returncode


def interrupted(args, how, at, folder, log):
    """The run with --checkpoint ``folder``, stopped by ``how`` (TERM or KILL) at iteration ``at``."""
    cmd = command(args, 2, "--checkpoint", str(folder))
    print("$ " + " ".join(cmd) + f"   # {how} at iteration {at}", flush=True)
    with open(log, "w") as handle:
        proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT)
    seen = 0
    while proc.poll() is None:
        found = re.findall(r"^it +(\d+)", Path(log).read_text(), re.M)
        seen = int(found[-1]) if found else 0
        if seen >= at:
            break
        time.sleep(0.05)
    else:
        raise SystemExit(f"{how}: the run ended before iteration {at}")
    if how == "KILL":
        launchers = children(proc.pid)
        for pid in [r for launcher in launchers for r in children(launcher)] + launchers:
            os.kill(pid, signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGTERM)
    status = proc.wait()
    record = json.loads((Path(folder) / "checkpoint.json").read_text())
    return {"signal": how, "at_iteration": seen, "exit_status": status, "checkpoint_iteration": record["iteration"]}


def outcome(work, name, reference=None):
    data = json.loads((work / f"{name}.json").read_text())
    density = np.load(work / f"{name}.npy")
    its = [h["iteration"] for h in data["history"]]
    row = {"run": name, "compliance": data["compliance"], "iterations": its[-1], "ranks": data["ranks"],
           "history_whole": its == list(range(1, len(its) + 1))}
    if reference is not None:
        ref_density, ref_compliance = reference
        row["density_identical"] = bool(np.array_equal(density, ref_density))
        row["max_density_difference"] = float(np.abs(density - ref_density).max())
        row["compliance_relative_difference"] = abs(data["compliance"] - ref_compliance) / ref_compliance
    return row, density


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="1024x512")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--every", type=int, default=5, help="--checkpoint-every")
    parser.add_argument("--term-at", type=int, default=12)
    parser.add_argument("--kill-at", type=int, default=18)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "checkpoint_resume.json"))
    args = parser.parse_args()
    load = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="sphyr_hpc-checkpoint-"))
    outputs = lambda name: ["--json", str(work / f"{name}.json"), "--save-density", str(work / f"{name}.npy"),
                            "--quiet"]
    stops = []
    assert run(command(args, 2, *outputs("uninterrupted")), work / "uninterrupted.log") == 0
    stops.append(interrupted(args, "TERM", args.term_at, work / "term", work / "term.log"))
    assert run(command(args, 2, "--checkpoint", str(work / "term"), "--resume", *outputs("term_resumed_2_ranks")),
               work / "term_resumed.log") == 0
    stops.append(interrupted(args, "KILL", args.kill_at, work / "kill", work / "kill.log"))
    shutil.copytree(work / "kill", work / "kill_1")
    assert run(command(args, 2, "--checkpoint", str(work / "kill"), "--resume", *outputs("kill_resumed_2_ranks")),
               work / "kill_resumed.log") == 0
    assert run(command(args, 1, "--checkpoint", str(work / "kill_1"), "--resume",
                       *outputs("kill_resumed_1_rank")), work / "kill_resumed_1.log") == 0
    reference, density = outcome(work, "uninterrupted")
    rows = [reference] + [outcome(work, name, (density, reference["compliance"]))[0]
                          for name in ("term_resumed_2_ranks", "kill_resumed_2_ranks", "kill_resumed_1_rank")]
    report = {"date": now(), "commit": commit_of(), "size": args.size, "iterations": args.iterations,
              "checkpoint_every": args.every, "petsc_options": PETSC_OPTIONS, "stops": stops, "runs": rows,
              "machine": machine(load)}
    lines = [f"# Checkpoint and --resume: mbb {args.size} on 2 ranks, {args.iterations} iterations", "",
             f"`python3 benchmarks/checkpoint_resume.py --size {args.size} --iterations {args.iterations}` "
             f"({report['date']}, commit {report['commit']}); every run `--solver mg --tolerance 0 --checkpoint-every "
             f"{args.every} {' '.join(PETSC_OPTIONS)}`.", ""]
    for stop in stops:
        lines.append(f"- {stop['signal']} at iteration {stop['at_iteration']}: exit status {stop['exit_status']}, "
                     f"checkpoint of iteration {stop['checkpoint_iteration']}")
    lines += ["", "| run | ranks | compliance | history 1..N whole | design identical | max density diff | "
              "compliance rel. diff |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['ranks']} | {r['compliance']!r} | {r['history_whole']} | "
                     f"{r.get('density_identical', '')} | {r.get('max_density_difference', '')} | "
                     f"{r.get('compliance_relative_difference', '')} |")
    lines += ["", machine_line(report["machine"]), ""]
    write_results(args.out, report, "\n".join(lines))
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
