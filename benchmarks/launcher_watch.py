"""What watching the launcher costs (sphyr_hpc/runtime/launcher.py): side by side, interleaved.

Two commands on 2 ranks (``bin/mpirun -n 2``), the whole command timed (start-up
included):

* ``score``: the bundled examples (144 records), ``--no-store --quiet --overwrite``,
  report included, as users run it;
* ``optimize``: ``--preset mbb --size 2048x1024 --iterations N`` (default 3,
  ``--tolerance 0``), CG + multigrid.

Each in three configurations: ``--old`` (a checkout without the watchdog, such as
main), this checkout, and this checkout with the watchdog switched off
(``benchmarks/_unwatched.py`` runs the command with ``launcher.watched`` replaced by
a block that watches nothing): this checkout against the unwatched run is the
watchdog's own cost, against ``--old`` everything this checkout changes on the way.
Every round runs every configuration once, in an order rotated every round (the
machine is shared, so the evidence is the per-round ratios and their median).

    /usr/bin/python3 benchmarks/launcher_watch.py --old DIR [--rounds 5] [--iterations 3]

Results: ``benchmarks/results/launcher_watch.{json,md}``.

On a loaded machine whole commands vary by more than the watchdog can cost, so
``--idle SECONDS`` measures the watchdog itself instead: the CPU seconds a process
spends over SECONDS of sleep inside ``launcher.watched()`` (with a launcher's rank
variable set) and outside it, in alternating rounds; the difference over the
number of looks is the CPU cost of one look (results:
``benchmarks/results/launcher_watch_idle.{json,md}``).
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import ROOT, commit_of, machine, machine_line, now, write_results


def _command(tree, unwatched, job, out):
    python = [str(Path(tree) / ".venv" / "bin" / "python")]
    if unwatched:
        python.append(str(ROOT / "benchmarks" / "_unwatched.py"))
    else:
        python.append("-m")
    if job == "score":
        args = ["sphyr_hpc.score", "--no-store", "--quiet", "--overwrite", "--out", str(out)]
    else:
        args = ["sphyr_hpc.optimize", "--preset", "mbb", "--size", "2048x1024", "--iterations",
                str(job[1]), "--tolerance", "0", "--quiet", "--json", str(out / "optimize.json")]
    return [str(Path(tree) / "bin" / "mpirun"), "-n", "2", *python, *args]


def _timed(cmd, cwd):
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds


IDLE = """
import os, sys, time
os.environ["OMPI_COMM_WORLD_SIZE"] = "1"
from sphyr_hpc.runtime import launcher
seconds, watched = float(sys.argv[1]), sys.argv[2] == "watched"
cpu = time.process_time()
with (launcher.watched() if watched else open(os.devnull)):
    time.sleep(seconds)
print(time.process_time() - cpu)
"""


def idle(seconds, rounds, out):
    """CPU seconds over ``seconds`` of sleep, watched and not, alternating; the cost of one look."""
    from sphyr_hpc.runtime.launcher import WATCH_SECONDS

    python = str(ROOT / ".venv" / "bin" / "python")
    load_before = os.getloadavg()
    cpu = {"watched": [], "unwatched": []}
    for round_ in range(rounds):
        for name in (("watched", "unwatched") if round_ % 2 == 0 else ("unwatched", "watched")):
            done = subprocess.run([python, "-c", IDLE, str(seconds), name], cwd=ROOT, capture_output=True,
                                  text=True, check=True)
            cpu[name].append(float(done.stdout))
    looks = seconds / WATCH_SECONDS
    per_look = (statistics.median(cpu["watched"]) - statistics.median(cpu["unwatched"])) / looks
    report = {"date": now(), "commit": commit_of(), "seconds": seconds, "rounds": rounds,
              "watch_seconds": WATCH_SECONDS, "cpu_seconds": cpu, "cpu_seconds_per_look": per_look,
              "machine": machine(load_before)}
    lines = ["# The launcher watchdog's own CPU cost", "",
             f"`/usr/bin/python3 benchmarks/launcher_watch.py --idle {seconds:g} --rounds {rounds}`: a process "
             f"sleeping {seconds:g} s inside `launcher.watched()` (a look every {WATCH_SECONDS} s: "
             f"{looks:.0f} looks) and outside it, alternating.", "", machine_line(report["machine"]), "",
             "| | CPU seconds per run (median) | per round |", "|---|---|---|"]
    for name, values in cpu.items():
        lines.append(f"| {name} | {statistics.median(values):.4f} | {', '.join(f'{v:.4f}' for v in values)} |")
    lines += ["", f"One look: {per_look * 1e6:.1f} us of CPU, {per_look / WATCH_SECONDS * 100:.4f} % of a core "
              f"(a {WATCH_SECONDS} s period)."]
    write_results(out, report, "\n".join(lines) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="a checkout without the watchdog (bin/mpirun, .venv)")
    parser.add_argument("--idle", type=float, help="measure the watchdog alone over this many seconds of sleep")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "launcher_watch.json"))
    args = parser.parse_args(argv)
    if args.idle:
        return idle(args.idle, args.rounds, ROOT / "benchmarks" / "results" / "launcher_watch_idle.json")
    if not args.old:
        parser.error("--old is required (or --idle)")
    load_before = os.getloadavg()
    configs = [("old", args.old, False), ("watched", str(ROOT), False), ("unwatched", str(ROOT), True)]
    jobs = {"score": "score", "optimize": ("optimize", args.iterations)}
    seconds = {(job, name): [] for job in jobs for name, _, _ in configs}
    with tempfile.TemporaryDirectory(prefix="sphyr_watch_") as work:
        for round_ in range(args.rounds):
            order = configs[round_ % 3:] + configs[:round_ % 3]
            for job, spec in jobs.items():
                for name, tree, unwatched in order:
                    out = Path(work) / f"{job}-{name}"
                    out.mkdir(exist_ok=True)
                    seconds[(job, name)].append(_timed(_command(tree, unwatched, spec, out), tree))
            print(f"round {round_ + 1}: " + ", ".join(f"{j}/{n} {s[-1]:.2f}" for (j, n), s in seconds.items()),
                  flush=True)
    ratios = {}
    for job in jobs:
        w, u, o = (seconds[(job, n)] for n in ("watched", "unwatched", "old"))
        ratios[job] = {"watched_over_unwatched": [a / b for a, b in zip(w, u)],
                       "watched_over_old": [a / b for a, b in zip(w, o)]}
    report = {"date": now(), "commit": commit_of(), "old": {"checkout": args.old, "commit": commit_of(args.old)},
              "rounds": args.rounds, "iterations": args.iterations, "machine": machine(load_before),
              "seconds": {f"{j}/{n}": s for (j, n), s in seconds.items()}, "ratios": ratios}
    lines = ["# The launcher watchdog's cost, side by side", "",
             f"`/usr/bin/python3 benchmarks/launcher_watch.py --old OLD --rounds {args.rounds} --iterations "
             f"{args.iterations}`: 2 ranks, the whole command timed; {report['commit']} watched, the same "
             f"unwatched (`benchmarks/_unwatched.py`), and {report['old']['commit']} (no watchdog), interleaved "
             f"(order rotated every round).  The machine is shared: per-round ratios are the evidence.", "",
             machine_line(report["machine"]), "",
             "| command | watched / unwatched (median) | per round | watched / old (median) | per round | "
             "median seconds watched, unwatched, old |", "|---|---|---|---|---|---|"]
    for job in jobs:
        r = ratios[job]
        med = [statistics.median(seconds[(job, n)]) for n in ("watched", "unwatched", "old")]
        lines.append(f"| {'score, bundled examples' if job == 'score' else f'optimize mbb 2048x1024, {args.iterations} iterations'} | "
                     f"{statistics.median(r['watched_over_unwatched']):.3f} | "
                     f"{', '.join(f'{x:.3f}' for x in r['watched_over_unwatched'])} | "
                     f"{statistics.median(r['watched_over_old']):.3f} | "
                     f"{', '.join(f'{x:.3f}' for x in r['watched_over_old'])} | "
                     f"{', '.join(f'{x:.1f}' for x in med)} |")
    write_results(args.out, report, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
