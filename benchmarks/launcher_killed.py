"""``kill -9`` of mpirun's process group during a 2-rank ``score``, then ``--resume`` at once.

The run: 119 records of 8 models (model folders built from the bundled example
results, 11 easy and 16 hard subject files), ``bin/mpirun -n 2 ... score
--no-store --quiet``.  Once results.jsonl holds ``--after`` lines, mpirun's whole
process group gets SIGKILL (``kill -9 -PGID``: what a user killing a hung mpirun,
or a scheduler killing the launcher, does).  Open MPI starts the ranks in process
groups of their own, so they are not in it.  Recorded: the rank processes alive
0.5, 1 and 2 s after the kill and when the last one ended, and the ``--resume``
started right after the kill (refused or not, its exit status and first stderr
lines); then the
resumed results.jsonl is compared with an uninterrupted run's: every record once,
none twice, and ``python -m sphyr_hpc.parity`` (SPEC 11) on the two.

    /usr/bin/python3 benchmarks/launcher_killed.py [--checkout DIR ...] [--after 5]

Results: ``benchmarks/results/launcher_killed.{json,md}``.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, children, commit_of, machine, machine_line, now, process_name, write_results

MODELS = 8
# When the rank processes of the killed run are counted, in seconds after the kill.
LOOKS = (0.5, 1.0, 2.0)


def build_eight_models(examples, root):
    """8 model folders of the bundled example results' subject files: 119 records."""
    import shutil

    subjects = sorted(p.stem for p in (examples / "baseline-empty").glob("*.json"))
    easy = [s for s in subjects if "easy" in s]
    hard = [s for s in subjects if "hard" in s]
    plan = ([("baseline-empty", s) for s in easy[:8]] + [("baseline-random", s) for s in easy[:3]]
            + [("baseline-random", s) for s in hard[:8]] + [("baseline-empty", s) for s in hard[:8]])
    models = {f"model-{k}": set() for k in range(MODELS)}
    total = 0
    for source, subject in plan:
        name = min((n for n in models if subject not in models[n]), key=lambda n: (len(models[n]), n))
        models[name].add(subject)
        (root / name).mkdir(parents=True, exist_ok=True)
        shutil.copy(examples / source / f"{subject}.json", root / name / f"{subject}.json")
        total += len(json.loads((examples / source / f"{subject}.json").read_text()))
    return total


def _lines(path):
    return path.read_text().splitlines() if path.exists() else []


def _alive(pids):
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def score_cmd(tree, inputs, out, *extra):
    return [str(tree / "bin" / "mpirun"), "-n", "2", str(tree / ".venv" / "bin" / "python"), "-m",
            "sphyr_hpc.score", str(inputs), "--no-store", "--quiet", "--out", str(out), *extra]


def killed_and_resumed(tree, inputs, out, after):
    """One kill -9 of mpirun's group, the ranks watched, and the resume started at once."""
    proc = subprocess.Popen(score_cmd(tree, inputs, out), cwd=tree, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "results.jsonl"
    deadline = time.time() + 600
    mpirun = ranks = None
    while time.time() < deadline and proc.poll() is None:
        if mpirun is None:
            mpirun = next((c for c in children(proc.pid) if process_name(c) == "mpirun"), None)
        elif not ranks:
            ranks = children(mpirun)
        if len(_lines(log)) >= after:
            break
        time.sleep(0.01)
    ranks = children(mpirun) or ranks
    at_kill = len(_lines(log))
    os.killpg(os.getpgid(mpirun), signal.SIGKILL)
    killed = time.monotonic()
    resume = subprocess.Popen(score_cmd(tree, inputs, out, "--resume"), cwd=tree, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    alive_at, gone, released = {}, None, None
    while time.monotonic() - killed < 120 and (len(alive_at) < len(LOOKS) or gone is None):
        alive = _alive(ranks)
        if gone is None and not alive:
            gone = round(time.monotonic() - killed, 2)
            lock = out / ".sphyr_hpc.lock"
            released = not lock.exists() or not lock.read_text().strip()
        for look in LOOKS:
            if look not in alive_at and time.monotonic() - killed >= look:
                alive_at[look] = len(alive)
        time.sleep(0.02)
    _, err = resume.communicate(timeout=900)
    proc.wait(timeout=60)
    return {"lines_at_kill": at_kill, "rank_pids": ranks,
            "ranks_alive_after_kill": {f"{look} s": alive_at[look] for look in LOOKS},
            "ranks_alive_2s_after_kill": alive_at[2.0], "ranks_gone_after_s": gone,
            "lock_emptied_by_the_ranks": released, "resume_status": resume.returncode,
            "resume_refused": "another run is writing" in err, "resume_stderr": err.strip().splitlines()[:12]}


def checked(tree, out, reference):
    """The resumed run's records against the uninterrupted run's: counts, duplicates and SPEC 11 parity."""
    rows = [json.loads(line) for line in _lines(out / "results.jsonl")]
    keys = [(r["model"], r["subject"], r["index"]) for r in rows]
    ref = {(r["model"], r["subject"], r["index"]) for r in map(json.loads, _lines(reference / "results.jsonl"))}
    parity = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-m", "sphyr_hpc.parity",
                             str(out / "results.jsonl"), str(reference / "results.jsonl")],
                            cwd=tree, capture_output=True, text=True)
    return {"records": len(rows), "distinct": len(set(keys)), "missing": len(ref - set(keys)),
            "extra": len(set(keys) - ref), "parity_status": parity.returncode,
            "parity": (parity.stdout + parity.stderr).strip().splitlines()[-3:]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", default=None,
                        help="a checkout to run (with bin/mpirun and .venv); default: this one")
    parser.add_argument("--after", type=int, default=5, help="kill once results.jsonl holds this many lines")
    parser.add_argument("--rounds", type=int, default=1, help="kill-and-resume rounds per checkout, interleaved")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "launcher_killed.json"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    trees = [Path(t).resolve() for t in (args.checkout or [ROOT])]
    runs = []
    with tempfile.TemporaryDirectory(prefix="sphyr_killed_") as work:
        work = Path(work)
        inputs = work / "eight"
        total = build_eight_models(ROOT / "examples" / "results", inputs)
        reference = work / "reference"
        done = subprocess.run(score_cmd(trees[-1], inputs, reference, "--no-report"), cwd=trees[-1],
                              capture_output=True, text=True)
        if done.returncode not in (0, 1):
            raise SystemExit(f"the uninterrupted run exited {done.returncode}:\n{done.stderr[-2000:]}")
        for n, tree in [(n, t) for _ in range(args.rounds) for n, t in enumerate(trees)]:
            out = work / f"out-{n}-{len(runs)}"
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=tree,
                                   capture_output=True, text=True).stdout.strip()
            run = {"checkout": str(tree), "commit": commit_of(tree) + ("+" if dirty else "")}
            run.update(killed_and_resumed(tree, inputs, out, args.after))
            run.update(checked(tree, out, reference))
            runs.append(run)
            print(json.dumps(run, indent=1), file=sys.stderr)
    report = {"date": now(), "records": total, "models": MODELS, "machine": machine(load_before), "runs": runs}
    lines = ["# kill -9 of mpirun's process group during a 2-rank score, then --resume at once", "",
             f"{total} records of {MODELS} models, `bin/mpirun -n 2 ... score --no-store --quiet`; SIGKILL to "
             f"mpirun's process group once results.jsonl holds {args.after} lines; the `--resume` started "
             f"right after.  `/usr/bin/python3 benchmarks/launcher_killed.py --checkout OLD --checkout NEW`.", "",
             machine_line(report["machine"]), "",
             "(`+`: the checkout's uncommitted changes on top of the commit.)", "",
             "| commit | lines at kill | ranks alive 0.5 s / 1 s / 2 s after | ranks gone after (s) | "
             "lock emptied by the ranks | resume refused | resume status | records | distinct | missing | parity status |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        alive = " / ".join(str(n) for n in r["ranks_alive_after_kill"].values())
        lines.append(f"| {r['commit']} | {r['lines_at_kill']} | {alive} | {r['ranks_gone_after_s']} | "
                     f"{r['lock_emptied_by_the_ranks']} | {r['resume_refused']} | {r['resume_status']} | "
                     f"{r['records']} | {r['distinct']} | {r['missing']} | {r['parity_status']} |")
    for r in runs:
        lines += ["", f"`--resume` of {r['commit']}, stderr:", "", "```", *r["resume_stderr"], "```",
                  "", f"parity of {r['commit']}:", "", "```", *r["parity"], "```"]
    lines += ["", "Resumes refused (another run still held the folder), per commit:", ""]
    for commit in dict.fromkeys(r["commit"] for r in runs):
        mine = [r for r in runs if r["commit"] == commit]
        lines.append(f"- {commit}: {sum(r['resume_refused'] for r in mine)} of {len(mine)}")
    write_results(args.out, report, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
