"""``python -m sphyr_hpc.scaling``: SIMP iterations timed over grid sizes and rank counts.

Usage::

    python -m sphyr_hpc.scaling --sizes 128x64,256x128,512x256,1024x512 --ranks 1,2 \\
        --iterations 10 --json OUT.json [--md OUT.md] [--plots PREFIX] [--preset mbb]
        [--design-iterations 100 | --design FILE.npy] [-- PETSc options for every run]

Run it serially: for every size and rank count it starts ``mpirun -n R python
-m sphyr_hpc.optimize`` itself (``bin/mpirun`` of the repository when there is
one, else ``mpirun --oversubscribe`` with running as root allowed; ``--mpirun``
overrides).

Designs.  Timing SIMP on a uniform start would time easy solves.  So, unless
``--design-iterations 0``, the preset is first optimised at the smallest size
(serially, ``--design-iterations`` iterations with continuation) and every
timed run starts from that density, resampled to its grid, at the final
penalty (no continuation, ``--tolerance 0``): the N timed iterations solve
designs with voids and 0/1 contrast at every size.  ``--design FILE.npy``
uses a given density instead.

Output: ``--json`` holds a list with one object per (size, ranks): ``nelx``,
``nely``, ``ranks``, ``dofs``, ``ksp_iterations`` (mean per solve),
``seconds_per_iteration``, ``assembly_seconds``, ``setup_seconds``,
``solve_seconds``, ``update_seconds`` (means per iteration of the PETSc log
events ``sphyr_assembly``/``sphyr_setup``/``sphyr_solve``/``sphyr_update``,
max over ranks), ``peak_memory_mb`` (per rank, ``ru_maxrss``, max over ranks),
and more: ``peak_memory_mb_total``, ``memory_gb_per_million_dofs``,
``ksp_iterations_max``, ``first_iteration_seconds``, the multigrid hierarchy,
the copy bandwidth and the fraction of it the MG-CG solve moved, and the load
average before and after the run.  Means are over the iterations after the
first (whose set-up also builds the symbolic Galerkin products).  A Markdown
table (``--md``) adds speed-up and parallel efficiency against 1 rank, and
three plots (``--plots PREFIX``): ``PREFIX_time.png`` (seconds per iteration
against DOFs), ``PREFIX_ksp.png`` (KSP iterations against DOFs),
``PREFIX_speedup.png`` (speed-up against ranks).

Exit status: 0 when every run succeeded, 1 when some failed (recorded with its
``error``), 2 on a usage error.
"""

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import problems
from ._petsc import split_petsc_args
from .cli import Parser, UsageError, report_usage_error
from .io.atomic import write_text_atomic
from .solvers.elasticity import SOLVERS
from .problems import ProblemError

REPO_MPIRUN = Path(__file__).resolve().parent.parent / "bin" / "mpirun"
KEYS = ("nelx", "nely", "ranks", "dofs", "ksp_iterations", "seconds_per_iteration", "assembly_seconds",
        "setup_seconds", "solve_seconds", "update_seconds", "peak_memory_mb")


def build_parser():
    p = Parser(prog="python -m sphyr_hpc.scaling",
               description="Time SIMP iterations over grid sizes and MPI rank counts.\n\n"
                           "Runs `mpirun -n R python -m sphyr_hpc.optimize` itself for every size and rank count\n"
                           "(run this command without mpirun), each from one design optimised first at the\n"
                           "smallest size, and writes the timings as JSON, a Markdown table and three plots.",
               epilog="PETSc options (single dash, anywhere: -sphyr_ksp_rtol 1e-8 -log_view) go to every run,\n"
                      "as in every other command.\n"
                      "Exit status: 0 every run succeeded, 1 some failed (recorded with its error), 2 usage error.")
    p.add_argument("--sizes", required=True, help="comma-separated NELXxNELY, e.g. 128x64,256x128")
    p.add_argument("--ranks", default="1,2", help="comma-separated rank counts")
    p.add_argument("--iterations", type=int, default=10,
                   help="SIMP iterations a run (the first is not timed: at least 2)")
    p.add_argument("--json", required=True, help="output JSON (a list, one object per size and rank count)")
    p.add_argument("--md", help="Markdown table with speed-up and efficiency (default: the JSON path with .md)")
    p.add_argument("--plots", help="PNG prefix: PREFIX_time/_ksp/_speedup.png (default: the JSON path without "
                                   ".json)")
    p.add_argument("--preset", default="mbb", help=f"problem preset: {', '.join(problems.PRESETS)}")
    p.add_argument("--volfrac", type=float, help="volume fraction (default: the preset's)")
    p.add_argument("--radius", type=float, default=1.5, help="density filter radius in elements")
    p.add_argument("--solver", default="mg", choices=SOLVERS,
                   help="linear solver of the timed runs, at every size")
    p.add_argument("--design-iterations", type=int, default=100,
                   help="iterations of the design run at the smallest size (0: a uniform start)")
    p.add_argument("--design", help="start every run from this .npy density instead of a design run")
    p.add_argument("--no-bandwidth", action="store_true",
                   help="skip measuring the copy bandwidth (and the fraction of it MG-CG moves)")
    p.add_argument("--mpirun", help="mpirun command (default: the repository's bin/mpirun, else mpirun "
                                    "--oversubscribe)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed a run before it is stopped")
    p.add_argument("--quiet", action="store_true", help="no line per run")
    return p


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


def _run(cmd, env, timeout, log):
    log("$ " + " ".join(cmd))
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, time.perf_counter() - started


def make_design(args, size, workdir, env, log):
    """Density to start the timed runs from (a .npy path), or None for a uniform start."""
    if args.design:
        return args.design
    if args.design_iterations <= 0:
        return None
    path = os.path.join(workdir, "design.npy")
    cmd = [sys.executable, "-m", "sphyr_hpc.optimize", "--preset", args.preset, "--size", f"{size[0]}x{size[1]}",
           "--iterations", str(args.design_iterations), "--radius", str(args.radius), "--quiet",
           "--save-density", path]
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
                    "--quiet", "--json", out]
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
    return entry


# -- reports ---------------------------------------------------------------------------------------
def _baseline(entries):
    return {(e["nelx"], e["nely"]): e["seconds_per_iteration"] for e in entries
            if e.get("ranks") == 1 and "error" not in e}


def markdown(entries, meta):
    base = _baseline(entries)
    lines = [f"# SIMP scaling: {meta['preset']} preset, {meta['iterations']} iterations a run, "
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
    return "\n".join(lines) + "\n"


def plot(entries, prefix):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [e for e in entries if "error" not in e]
    ranks = sorted({e["ranks"] for e in ok})
    paths = []
    for key, ylabel, name in (("seconds_per_iteration", "seconds per SIMP iteration", "time"),
                              ("ksp_iterations", "MG-CG iterations per solve (mean)", "ksp")):
        fig, ax = plt.subplots(figsize=(6, 4))
        for r in ranks:
            pts = sorted((e["dofs"], e[key]) for e in ok if e["ranks"] == r)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{r} rank{'s' if r > 1 else ''}")
        ax.set_xscale("log")
        if key == "seconds_per_iteration":
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel("DOFs")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = f"{prefix}_{name}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    base = _baseline(ok)
    fig, ax = plt.subplots(figsize=(6, 4))
    for (nelx, nely), t1 in sorted(base.items(), key=lambda kv: kv[0][0] * kv[0][1]):
        pts = sorted((e["ranks"], t1 / e["seconds_per_iteration"])
                     for e in ok if (e["nelx"], e["nely"]) == (nelx, nely))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{nelx}x{nely}")
    if ranks:
        ax.plot(ranks, ranks, "k--", lw=0.8, label="ideal")
    ax.set_xlabel("MPI ranks")
    ax.set_ylabel("speed-up (time per iteration, 1 rank / R ranks)")
    ax.set_xticks(ranks)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = f"{prefix}_speedup.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    paths.append(path)
    return paths


def main(argv=None):
    argv, petsc_args = split_petsc_args(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as err:
        return report_usage_error(parser.prog, f"{err} (see --help)")
    from ._petsc import require

    require(parser.prog)  # the runs need them; say so now, not once per run

    def log(line):
        if not args.quiet:
            print(line, flush=True)

    try:
        sizes = parse_sizes(args.sizes)
        ranks = parse_ranks(args.ranks)
        if args.iterations < 2:
            raise ProblemError("--iterations must be at least 2 (the first iteration is not timed)")
        if args.preset not in problems.PRESETS:
            raise ProblemError(f"unknown preset {args.preset!r}: choose one of {', '.join(problems.PRESETS)}")
        for nelx, nely in sizes:
            problems.preset(args.preset, nelx, nely, args.volfrac)
        if args.design and not os.path.exists(args.design):
            raise ProblemError(f"--design {args.design}: no such file")
        mpirun, env = mpirun_command(args.mpirun)
    except ProblemError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    env.setdefault("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    meta = {"preset": args.preset, "iterations": args.iterations, "solver": args.solver,
            "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, Python "
                       f"{platform.python_version()}",
            "petsc_options": petsc_args, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "load_average_start": list(os.getloadavg())}
    entries = []
    with tempfile.TemporaryDirectory(prefix="sphyr_scaling_") as workdir:
        smallest = min(sizes, key=lambda s: s[0] * s[1])
        design = make_design(args, smallest, workdir, env, log)
        for size in sizes:
            for r in ranks:
                entry = run_one(args, size, r, design, mpirun, env, workdir, petsc_args, log)
                entries.append(entry)
                if "error" in entry:
                    log(f"  {size[0]}x{size[1]} on {r}: FAILED {entry['error'][-300:]}")
                else:
                    log(f"  {size[0]}x{size[1]} on {r}: {entry['seconds_per_iteration']:.3f} s/iteration, "
                        f"{entry['ksp_iterations']:.1f} KSP its/solve, {entry['peak_memory_mb']:.0f} MB/rank")
    meta["load_average_end"] = list(os.getloadavg())
    write_text_atomic(args.json, json.dumps(entries, indent=1) + "\n")
    md_path = args.md or str(Path(args.json).with_suffix(".md"))
    write_text_atomic(md_path, markdown(entries, meta))
    write_text_atomic(str(Path(args.json).with_suffix(".meta.json")), json.dumps(meta, indent=1) + "\n")
    prefix = args.plots or str(Path(args.json).with_suffix(""))
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    paths = plot(entries, prefix)
    log(f"-> {args.json}, {md_path}, " + ", ".join(paths))
    return 1 if any("error" in e for e in entries) else 0


if __name__ == "__main__":
    sys.exit(main())
