"""What ``python -m sphyr_hpc.scaling`` runs: a design, then every size on every rank count, timed.

Every run is ``mpirun -n R python -m sphyr_hpc.optimize`` started here
(:func:`run_one`); :func:`run_scaling` writes the JSON, the Markdown table
and the plots.
"""


import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from ..io.atomic import write_text_atomic
from ..optimiser import memory, problems
from ..optimiser.problems import ProblemError
from ..reporting.html import plural
from ..reporting.scaling import baseline, plot
from ..runtime.messages import no_such
from ..runtime.node_memory import available
from ..runtime.process import UsageError, interrupted

REPO_MPIRUN = Path(__file__).resolve().parent.parent.parent / "bin" / "mpirun"
KEYS = ("nelx", "nely", "ranks", "dofs", "ksp_iterations", "seconds_per_iteration", "assembly_seconds",
        "setup_seconds", "solve_seconds", "update_seconds", "peak_memory_mb")


def parse_ranks(text):
    try:
        ranks = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise ProblemError(f"--ranks {text!r} is not a comma-separated list of integers") from None
    if not ranks or min(ranks) < 1:
        raise ProblemError(f"--ranks {text!r}: rank counts must be positive")
    return ranks


def parse_sizes(text):
    sizes = [problems.parse_size(v) for v in str(text).split(",") if v.strip()]
    if not sizes:
        raise ProblemError("--sizes is empty")
    return sizes


def mpirun_command(override=None):
    """The mpirun prefix (list) and the environment to run it with."""
    env = dict(os.environ)
    if override:
        return override.split(), env
    if REPO_MPIRUN.exists():
        return [str(REPO_MPIRUN)], env
    if shutil.which("mpirun") is None:
        raise ProblemError("mpirun not found: install Open MPI or pass --mpirun")
    if hasattr(os, "getuid") and os.getuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return ["mpirun", "--oversubscribe"], env


# How long a run that this study stops (an interrupt, its time limit) has to end by itself: an
# interrupted optimisation ends at the end of its iteration in progress, then writes its outputs.
STOP_SECONDS = 60.0


def _run(cmd, env, timeout, log):
    """(the finished process, its seconds).  The run is a session of its own, so that a Ctrl-C
    reaches this process only; an interrupt of this process (or the run's ``timeout``) is handed to
    the run as its signal (SIGTERM for the time limit), which ends it on its own interrupt path, all
    its ranks, before this process goes on: no run is left behind, none is killed half-way through
    a collective (``bin/mpirun`` hands the signal to its ranks)."""
    log("$ " + " ".join(cmd))
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc, signal.SIGTERM)
        raise
    except KeyboardInterrupt as interrupt:
        _stop(proc, interrupted(interrupt).signum)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), time.perf_counter() - started


def _stop(proc, signum):
    """End ``proc`` with ``signum`` and wait for it; after :data:`STOP_SECONDS`, kill its session."""
    try:
        proc.send_signal(signum)
        proc.communicate(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()


def make_design(args, size, workdir, env, log):
    """Density to start the timed runs from (a .npy path), or None for a uniform start."""
    if args.design:
        return args.design
    if args.design_iterations <= 0:
        return None
    path = os.path.join(workdir, "design.npy")
    cmd = [sys.executable, "-m", "sphyr_hpc.optimize", "--preset", args.preset, "--size", f"{size[0]}x{size[1]}",
           "--iterations", str(args.design_iterations), "--radius", str(args.radius), "--quiet",
           "--save-density", path] + (["--force"] if args.force else [])
    if args.volfrac is not None:
        cmd += ["--volfrac", str(args.volfrac)]
    proc, _ = _run(cmd, env, args.timeout, log)
    if proc.returncode != 0:
        raise RuntimeError(f"design run failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return path


def run_one(args, size, ranks, design, mpirun, env, workdir, petsc_args, log):
    """One timed run: the entry for the JSON list."""
    out = os.path.join(workdir, f"run_{size[0]}x{size[1]}_{ranks}.json")
    cmd = mpirun + ["-n", str(ranks), sys.executable, "-m", "sphyr_hpc.optimize", "--preset", args.preset,
                    "--size", f"{size[0]}x{size[1]}", "--iterations", str(args.iterations), "--tolerance", "0",
                    "--continuation", "none", "--radius", str(args.radius), "--solver", args.solver,
                    "--quiet", "--json", out] + (["--force"] if args.force else [])
    if args.volfrac is not None:
        cmd += ["--volfrac", str(args.volfrac)]
    if design:
        cmd += ["--initial", design]
    if not args.no_bandwidth:
        cmd += ["--bandwidth"]
    cmd += list(petsc_args)
    load_start = os.getloadavg()
    try:
        proc, wall = _run(cmd, env, args.timeout, log)
    except subprocess.TimeoutExpired:
        return {"nelx": size[0], "nely": size[1], "ranks": ranks, "error": f"timed out after {args.timeout} s"}
    load_end = os.getloadavg()
    entry = {"nelx": size[0], "nely": size[1], "ranks": ranks}
    if proc.returncode != 0 or not os.path.exists(out):
        entry["error"] = f"exit {proc.returncode}: {(proc.stdout + proc.stderr)[-3000:]}"
        return entry
    data = json.loads(Path(out).read_text())
    s = data["summary"]
    memory = s["peak_memory_mb_per_rank"]
    entry.update({
        "dofs": data["dofs"],
        "ksp_iterations": s["ksp_iterations_mean"],
        "seconds_per_iteration": s["seconds"],
        "assembly_seconds": s["sphyr_assembly_seconds"],
        "setup_seconds": s["sphyr_setup_seconds"],
        "solve_seconds": s["sphyr_solve_seconds"],
        "update_seconds": s["sphyr_update_seconds"],
        "peak_memory_mb": max(memory),
        "peak_memory_mb_per_rank": memory,
        "peak_memory_mb_total": sum(memory),
        "memory_gb_per_million_dofs": sum(memory) / 1024.0 / (data["dofs"] / 1e6),
        "ksp_iterations_max": s["ksp_iterations_max"],
        "iterations_timed": s["iterations_timed"],
        "first_iteration_seconds": s["first_iteration_seconds"],
        "setup_seconds_once": data["setup_seconds_once"],
        "compliance_first": data["history"][0]["compliance"] if data["history"] else None,
        "compliance_last": data["history"][-1]["compliance"] if data["history"] else None,
        "ksp_iterations_per_solve": [h["ksp_iterations"] for h in data["history"]],
        "hierarchy": data.get("hierarchy"),
        "solver": data.get("solver"),
        "load_average_start": list(load_start),
        "load_average_end": list(load_end),
        "wall_seconds": wall,
    })
    if data.get("bandwidth"):
        b = data["bandwidth"]
        entry.update({"copy_gb_per_second": b["copy_bytes_per_second"] / 1e9,
                      "mg_cg_gb_per_second": (b["mg_cg_bytes_per_second"] or 0.0) / 1e9,
                      "bandwidth_fraction": b["fraction_of_copy"]})
        if b.get("phases"):
            entry["phases"] = b["phases"]
    return entry


# -- reports ---------------------------------------------------------------------------------------
def markdown(entries, meta):
    base = baseline(entries)
    lines = [f"# SIMP scaling: {meta['preset']} preset, {plural(meta['iterations'], 'iteration')} a run, "
             f"solver {meta['solver']}", "",
             f"Machine: {meta['machine']}.  Timed iterations: all but the first of each run "
             "(means; event times max over ranks).  Memory: peak RSS (ru_maxrss) per rank.", "",
             "| size | ranks | DOFs | KSP its/solve (max) | s/iter | assembly | setup | solve | update | "
             "peak MB/rank | GB per 1M DOFs (all ranks) | speed-up | efficiency | MG-CG/copy bandwidth | "
             "load avg start/end |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in entries:
        size = f"{e['nelx']}x{e['nely']}"
        if "error" in e:
            lines.append(f"| {size} | {e['ranks']} | failed: {e['error'][:80]!r} |" + " |" * 12)
            continue
        t1 = base.get((e["nelx"], e["nely"]))
        speedup = f"{t1 / e['seconds_per_iteration']:.2f}" if t1 else "-"
        eff = f"{t1 / e['seconds_per_iteration'] / e['ranks']:.2f}" if t1 else "-"
        bw = (f"{e['mg_cg_gb_per_second']:.1f}/{e['copy_gb_per_second']:.1f} GB/s "
              f"({100 * e['bandwidth_fraction']:.0f}%)") if e.get("bandwidth_fraction") else "-"
        lines.append(
            f"| {size} | {e['ranks']} | {e['dofs']:,} | {e['ksp_iterations']:.1f} ({e['ksp_iterations_max']}) | "
            f"{e['seconds_per_iteration']:.3f} | {e['assembly_seconds']:.3f} | {e['setup_seconds']:.3f} | "
            f"{e['solve_seconds']:.3f} | {e['update_seconds']:.3f} | {e['peak_memory_mb']:.0f} | "
            f"{e['memory_gb_per_million_dofs']:.2f} | {speedup} | {eff} | {bw} | "
            f"{e['load_average_start'][0]:.2f}/{e['load_average_end'][0]:.2f} |")
    lines += phase_table(entries)
    return "\n".join(lines) + "\n"


PHASES = ("assembly", "setup", "solve", "update", "iteration")


def phase_table(entries):
    """Markdown lines: per run, the bytes each phase must move, the bound at the copy bandwidth,
    the measured seconds and measured / bound (sphyr_hpc.optimiser.measure)."""
    rows = [e for e in entries if e.get("phases")]
    if not rows:
        return []
    lines = ["", "Bytes each phase of a SIMP iteration must move (all ranks; the storage the run used), the bound "
             "they set at the copy bandwidth measured in that run (numpy copy, all ranks at once), and measured / "
             "bound (a model: `sphyr_hpc/optimiser/measure.py`):", "",
             "| size | ranks | copy GB/s | " + " | ".join(f"{p}: GB / bound s / s / ratio" for p in PHASES) + " |",
             "|---|---|---|" + "---|" * len(PHASES)]
    for e in rows:
        cells = []
        for name in PHASES:
            p = e["phases"][name]
            ratio = f"{p['measured_over_bound']:.1f}" if p.get("measured_over_bound") else "-"
            cells.append(f"{p['bytes'] / 1e9:.2f} / {p['bound_seconds']:.3f} / {p['seconds']:.3f} / {ratio}")
        lines.append(f"| {e['nelx']}x{e['nely']} | {e['ranks']} | {e.get('copy_gb_per_second', 0):.1f} | "
                     + " | ".join(cells) + " |")
    return lines


def check_settings(args):
    """Raise :class:`UsageError` for settings the runs could not use (before any run)."""
    try:
        sizes = parse_sizes(args.sizes)
        parse_ranks(args.ranks)
        if args.iterations < 2:
            raise ProblemError("--iterations must be at least 2 (the first iteration is not timed)")
        if args.preset not in problems.PRESETS:
            raise ProblemError(f"unknown preset {args.preset!r}: choose one of {', '.join(problems.PRESETS)}")
        for nelx, nely in sizes:
            problems.preset(args.preset, nelx, nely, args.volfrac)
        check_memory(args, sizes, parse_ranks(args.ranks))
        if args.design and not os.path.exists(args.design):
            raise ProblemError(f"--design: {no_such([args.design])}")
        mpirun_command(args.mpirun)
    except ProblemError as err:
        raise UsageError(str(err)) from None


def check_memory(args, sizes, ranks):
    """:class:`UsageError` naming the largest run whose estimated peak memory (its ranks all on this node,
    where ``mpirun -n R`` starts them) is over what the node has, unless ``--force`` (then a warning)."""
    from ..optimiser.driver import BANDWIDTH_BYTES

    node = available()
    extra = 0 if args.no_bandwidth else 2 * BANDWIDTH_BYTES  # --bandwidth's copy arrays
    over = []
    for nelx, nely in sorted(sizes, key=lambda size: -memory.grid_dofs(*size)):
        for r in ranks:
            here = None if node is None else replace(node, ranks=r)
            reason = memory.refusal(f"--sizes {nelx}x{nely}",
                                    memory.grid_dofs(nelx, nely), args.solver, r, here, extra)
            if reason:
                over.append(reason)
    if not over:
        return
    more = f" ({len(over) - 1} more of the study's runs are over too)" if len(over) > 1 else ""
    what, advice = over[0].split("; use ", 1)
    if not args.force:
        raise UsageError(f"{what}{more}; use {advice}")
    print(f"warning: {what}{more}; going on ({memory.FORCE})", file=sys.stderr, flush=True)


# What --resume must find unchanged in the earlier study's .meta.json to keep its finished runs.
RESUME_KEYS = ("preset", "iterations", "solver", "radius", "volfrac", "design", "design_iterations", "no_bandwidth")


def study_settings(args, petsc_args):
    return {**{key: getattr(args, key) for key in RESUME_KEYS}, "petsc_options": list(petsc_args)}


def finished_runs(args, settings):
    """``--resume``: the runs (entries without an error) the earlier study wrote to ``--json`` with the same
    settings; [] when there is none yet.  UsageError for a study of other settings."""
    meta_path = Path(args.json).with_suffix(".meta.json")
    if not Path(args.json).exists() or not meta_path.exists():
        return []
    try:
        entries = json.loads(Path(args.json).read_text())
        earlier = json.loads(meta_path.read_text()).get("settings")
    except (OSError, ValueError) as err:
        raise UsageError(f"--resume: cannot read the earlier study in {args.json} ({err}); drop --resume to start over")
    changed = sorted(key for key in settings if (earlier or {}).get(key) != json.loads(json.dumps(settings))[key])
    if changed:
        raise UsageError(f"--resume: {args.json} holds a study with other settings ({', '.join(changed)}); give the "
                         f"same ones, or drop --resume to start over")
    return [entry for entry in entries if "error" not in entry]


def output_paths(args):
    """Every file a study writes: the JSON, its .meta.json, the Markdown table and the plots."""
    prefix = plot_prefix(args)
    return [args.json, md_path(args), str(Path(args.json).with_suffix(".meta.json"))] + [
        f"{prefix}_{name}.png" for name in ("time", "ksp", "speedup")]


def md_path(args):
    return args.md or str(Path(args.json).with_suffix(".md"))


def plot_prefix(args):
    return args.plots or str(Path(args.json).with_suffix(""))


def _clock(seconds):
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


class _Eta:
    """Elapsed time and an estimate of the time left after each of a study's runs.  A run's time is
    taken as a start-up every run pays (Python, MPI, PETSc, the set-up: seconds whatever the size)
    plus its iterations, whose time grows with its ``costs`` entry (elements per rank): the start-up
    is the mean of the finished runs' time outside their iterations, the iterations' time per unit of
    cost is the finished runs' sum over their costs.  An estimate, said so."""

    def __init__(self, costs):
        self.costs, self.done, self.started = costs, 0, time.perf_counter()
        self.startup = self.iterating = 0.0

    def step(self, seconds, iterating):
        """The line after a run that took ``seconds`` in all, ``iterating`` of them in its iterations
        (0 for a run that failed)."""
        iterating = min(max(iterating, 0.0), seconds)
        self.done += 1
        self.startup += seconds - iterating
        self.iterating += iterating
        rest = self.costs[self.done:]
        left = len(rest) * self.startup / self.done + self.iterating / sum(self.costs[:self.done]) * sum(rest)
        return f"{_clock(time.perf_counter() - self.started)} elapsed, about {_clock(left)} left"


def run_scaling(args, petsc_args):
    """Run the study the (checked) arguments describe; the exit status."""
    def log(line):
        if not args.quiet:
            print(line, flush=True)

    sizes, ranks = parse_sizes(args.sizes), parse_ranks(args.ranks)
    mpirun, env = mpirun_command(args.mpirun)
    env.setdefault("PYTHONPATH", str(Path(__file__).resolve().parent.parent.parent))
    meta = {"preset": args.preset, "iterations": args.iterations, "solver": args.solver,
            "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, Python "
                       f"{platform.python_version()}",
            "petsc_options": petsc_args, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "load_average_start": list(os.getloadavg()), "settings": study_settings(args, petsc_args)}
    # --resume keeps the finished runs of the earlier study; every run is added to --json as it ends.
    entries = finished_runs(args, meta["settings"]) if args.resume else []
    finished = {(e["nelx"], e["nely"], e["ranks"]) for e in entries}
    if entries:
        log(f"resuming: {len(entries)} runs already in {args.json} are kept")
    write_text_atomic(str(Path(args.json).with_suffix(".meta.json")), json.dumps(meta, indent=1) + "\n")
    with tempfile.TemporaryDirectory(prefix="sphyr_scaling_") as workdir:
        smallest = min(sizes, key=lambda s: s[0] * s[1])
        runs = [(size, r) for size in sizes for r in ranks if (size[0], size[1], r) not in finished]
        design = make_design(args, smallest, workdir, env, log) if runs else None
        eta = _Eta([size[0] * size[1] / r for size, r in runs])
        for number, (size, r) in enumerate(runs, 1):
            started = time.perf_counter()
            entry = run_one(args, size, r, design, mpirun, env, workdir, petsc_args, log)
            entries.append(entry)
            write_text_atomic(args.json, json.dumps(entries, indent=1) + "\n")
            iterating = entry.get("seconds_per_iteration", 0.0) * args.iterations if "error" not in entry else 0.0
            done = f"  [{number}/{len(runs)}, {eta.step(time.perf_counter() - started, iterating)}]"
            if "error" in entry:
                log(f"{done} {size[0]}x{size[1]} on {r}: FAILED {entry['error'][-300:]}")
                continue
            log(f"{done} {size[0]}x{size[1]} on {r}: {entry['seconds_per_iteration']:.3f} s/iteration, "
                f"{entry['ksp_iterations']:.1f} KSP its/solve, {entry['peak_memory_mb']:.0f} MB/rank")
            for name, p in (entry.get("phases") or {}).items():
                ratio = p.get("measured_over_bound")
                log(f"    {name:9s} {p['bytes'] / 1e9:7.2f} GB to move, bound {p['bound_seconds']:.3f} s at "
                    f"{entry.get('copy_gb_per_second', 0):.1f} GB/s, measured {p['seconds']:.3f} s"
                    + (f", measured/bound {ratio:.1f}" if ratio else ""))
    meta["load_average_end"] = list(os.getloadavg())
    write_text_atomic(args.json, json.dumps(entries, indent=1) + "\n")
    write_text_atomic(md_path(args), markdown(entries, meta))
    write_text_atomic(str(Path(args.json).with_suffix(".meta.json")), json.dumps(meta, indent=1) + "\n")
    prefix = plot_prefix(args)
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    paths = plot(entries, prefix)
    log(f"-> {args.json}, {md_path(args)}, " + ", ".join(paths))
    return 1 if any("error" in e for e in entries) else 0
