"""SIGINT and SIGTERM at random points of ``optimize``: how every run ends.

For every solver (mg, direct, gamg), rank count (1, 2), with and without ``--checkpoint`` and
both signals, ``--tries`` runs of ``optimize --preset mbb --size SIZE`` are each sent the signal
at a random moment (uniform over ``--window`` seconds from the start: the start, the set-up, the
iterations) and counted by how they end: the status (130/143 expected; 0 if the run finished
first), the interrupt messages printed (one expected), OpenMPI's banners (MPI_ABORT, ORTE,
"mpirun"), backtraces (Python's Traceback, a segmentation fault's), hangs (not ended
``--timeout`` seconds after the signal: killed), and whether the design was written where
``--save-density`` asked.

    python3 benchmarks/optimize_interrupts.py --tries 20 --out benchmarks/results/optimize_interrupts
    python3 benchmarks/optimize_interrupts.py --root /work/old --tries 5   # another checkout

Writes OUT.json (every run) and OUT.md (the counts), and prints the table.
"""

import argparse
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
BANNERS = ("MPI_ABORT", "ORTE", "mpirun", "prterun")
BACKTRACES = ("Traceback", "Segmentation fault", "Process received signal", "Backtrace")


def one_run(root, ranks, solver, checkpoint, sig, delay, size, timeout, work):
    """Start one run, signal it after ``delay`` seconds, and say how it ended."""
    python = str(Path(root) / ".venv" / "bin" / "python")
    density = Path(work) / "design.npy"
    args = [python, "-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", size, "--iterations", "1000",
            "--tolerance", "0", "--solver", solver, "--save-density", str(density), "--quiet"]
    if checkpoint:
        args += ["--checkpoint", str(Path(work) / "checkpoint")]
    command = ([str(Path(root) / "bin" / "mpirun"), "-n", str(ranks)] if ranks > 1 else []) + args
    proc = subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    time.sleep(delay)
    finished_first = proc.poll() is not None
    if not finished_first:
        proc.send_signal(sig)
    hang = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hang = True
        for pid in _session(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        out, err = proc.communicate()
    return {"ranks": ranks, "solver": solver, "checkpoint": checkpoint, "signal": sig.name, "delay": round(delay, 2),
            "status": proc.returncode, "finished_first": finished_first, "hang": hang,
            "messages": err.count(": interrupted ("), "banner": any(b in err for b in BANNERS),
            "backtrace": any(b in err for b in BACKTRACES), "design_written": density.exists(),
            "stderr_tail": err[-3000:]}


def _session(sid):
    """Every process of the session ``sid`` (bin/mpirun's mpirun and ranks included)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def clean(run):
    """A run that ended as documented: one message, 128 + the signal, no banner, no backtrace, no hang."""
    expected = 128 + signal.Signals[run["signal"]]
    return (not run["hang"] and not run["banner"] and not run["backtrace"] and run["messages"] == 1
            and run["status"] == expected)


def table(runs):
    lines = ["| ranks | solver | checkpoint | signal | runs | clean | finished first | other statuses | "
             "messages != 1 | banners | backtraces | hangs | design written |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    key = lambda r: (r["ranks"], r["solver"], r["checkpoint"], r["signal"])  # noqa: E731
    for group, members in itertools.groupby(sorted(runs, key=key), key=key):
        members = [m for m in members]
        signalled = [m for m in members if not m["finished_first"]]
        expected = 128 + signal.Signals[group[3]]
        statuses = Counter(m["status"] for m in signalled if m["status"] != expected)
        lines.append(f"| {group[0]} | {group[1]} | {'yes' if group[2] else 'no'} | {group[3]} | {len(signalled)} | "
                     f"{sum(clean(m) for m in signalled)} | {len(members) - len(signalled)} | "
                     f"{', '.join(f'{s}: {n}' for s, n in sorted(statuses.items())) or '-'} | "
                     f"{sum(m['messages'] != 1 for m in signalled)} | {sum(m['banner'] for m in signalled)} | "
                     f"{sum(m['backtrace'] for m in signalled)} | {sum(m['hang'] for m in signalled)} | "
                     f"{sum(m['design_written'] for m in signalled)} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=str(HERE), help="the checkout to run (its .venv and bin/mpirun)")
    p.add_argument("--tries", type=int, default=20, help="runs of every solver, rank count, checkpoint, signal")
    p.add_argument("--size", default="192x96")
    p.add_argument("--window", type=float, default=8.0, help="the signal comes uniformly within this many seconds")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds after the signal before a run is a hang")
    p.add_argument("--solvers", default="mg,direct,gamg")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--seed", type=int, default=48)
    p.add_argument("--out", default=str(HERE / "benchmarks" / "results" / "optimize_interrupts"))
    args = p.parse_args()
    rng = random.Random(args.seed)
    cases = [(r, s, c, g) for r in map(int, args.ranks.split(",")) for s in args.solvers.split(",")
             for c in (False, True) for g in (signal.SIGINT, signal.SIGTERM)]
    runs = []
    started = time.time()
    load_start = os.getloadavg()
    for attempt in range(args.tries):  # round by round: every case sees the same machine
        for ranks, solver, checkpoint, sig in cases:
            with tempfile.TemporaryDirectory(prefix="sphyr_interrupts_") as work:
                run = one_run(args.root, ranks, solver, checkpoint, sig, rng.uniform(0.0, args.window), args.size,
                              args.timeout, work)
            runs.append(run)
            if not clean(run) and not run["finished_first"]:
                print(f"not clean: {json.dumps({k: v for k, v in run.items() if k != 'stderr_tail'})}\n"
                      f"{run['stderr_tail']}", flush=True)
        print(f"round {attempt + 1}/{args.tries} done, {time.time() - started:.0f} s, load {os.getloadavg()[0]:.1f}",
              flush=True)
    meta = {"root": args.root, "size": args.size, "window": args.window, "tries": args.tries, "seed": args.seed,
            "load_average_start": load_start, "load_average_end": os.getloadavg(),
            "seconds": time.time() - started, "command": " ".join(sys.argv)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1) + "\n")
    text = (f"# SIGINT/SIGTERM at random points of optimize\n\n`{meta['command']}` (checkout {args.root}, "
            f"--size {args.size}, the signal uniform within {args.window:g} s of the start; load average "
            f"{load_start[0]:.1f} at start, {meta['load_average_end'][0]:.1f} at end, {meta['seconds']:.0f} s).\n"
            f"\"clean\": one message, 128 + the signal, no banner, no backtrace, no hang.\n\n{table(runs)}\n")
    Path(args.out + ".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
