"""The whole serial test suite and the parity contract under several BLAS kernels on one machine.

The rounding of every BLAS product and factorisation depends on the BLAS/LAPACK
kernel the CPU selects at run time (with fused multiply-add or without), so a
test suite that passes on one machine can fail on the next.  This script shows
that it does not: once per kernel it runs the whole serial test suite
(``pytest tests/``, the MPI tests skip on one rank) and the scoring command on
the bundled examples checked by ``python -m sphyr_hpc.parity``:

- the machine's own choice (no override);
- OpenBLAS forced to a core type with ``OPENBLAS_CORETYPE``, by default
  Prescott, Sandybridge (no FMA), Haswell and Zen (FMA), each only where this
  CPU can run it; ``--kernels all`` adds Core2, Nehalem, SkylakeX, Cooperlake
  and Debian's reference BLAS and LAPACK (packages libblas3, liblapack3), put
  in front of the alternatives with ``LD_LIBRARY_PATH`` for that run only (the
  machine's configuration is not changed).

Each run first records which kernel it really loaded (threadpoolctl's OpenBLAS
architecture, or the BLAS library mapped into the process), so a forced kernel
that is silently ignored shows up in the table.

    .venv/bin/python benchmarks/parity_kernels.py [--kernels Prescott,Sandybridge,Haswell,Zen|all]
        [--out benchmarks/results/parity_kernels.json]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, commit_of, machine, now, write_results

REFERENCE_BLAS = ("/usr/lib/x86_64-linux-gnu/blas", "/usr/lib/x86_64-linux-gnu/lapack")
# (name, OPENBLAS_CORETYPE, CPU flags it needs)
OPENBLAS_KERNELS = (
    ("Prescott", "Prescott", ()),
    ("Core2", "Core2", ()),
    ("Nehalem", "Nehalem", ()),
    ("Sandybridge", "Sandybridge", ("avx",)),
    ("Haswell", "Haswell", ("avx2", "fma")),
    ("Zen", "Zen", ("avx2", "fma")),
    ("SkylakeX", "SkylakeX", ("avx512f", "avx512bw", "avx512vl")),
    ("Cooperlake", "Cooperlake", ("avx512f", "avx512bw", "avx512vl", "avx512_bf16")),
)
PROBE = """
import numpy, scipy.linalg, threadpoolctl
from sphyr_hpc.runtime.petsc import petsc
petsc()
blas = [i for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
maps = {line.split()[-1] for line in open("/proc/self/maps") if "libblas" in line or "liblapack" in line}
print(json.dumps({"openblas": [b.get("architecture") for b in blas], "libraries": sorted(maps)}))
"""


def cpu_flags():
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


DEFAULT_KERNELS = "native,Prescott,Sandybridge,Haswell,Zen"


def kernels(chosen):
    """(name, environment changes, reason it cannot run here or None) of the chosen kernels."""
    flags = cpu_flags()
    clean = {"OPENBLAS_CORETYPE": None, "OPENBLAS_L2_SIZE": None}
    if chosen == "all" or "native" in chosen.split(","):
        yield "native (no override)", {}, None
    for name, coretype, needs in OPENBLAS_KERNELS:
        if chosen != "all" and name not in chosen.split(","):
            continue
        missing = [f for f in needs if f not in flags]
        yield (f"OpenBLAS {name}", {**clean, "OPENBLAS_CORETYPE": coretype},
               f"CPU lacks {', '.join(missing)}" if missing else None)
    if chosen != "all":
        return
    library_path = ":".join(REFERENCE_BLAS + tuple(filter(None, [os.environ.get("LD_LIBRARY_PATH")])))
    absent = [d for d in REFERENCE_BLAS if not Path(d).is_dir()]
    yield ("reference BLAS + LAPACK (netlib)", {**clean, "LD_LIBRARY_PATH": library_path},
           f"missing {', '.join(absent)} (apt-get install libblas3 liblapack3)" if absent else None)


def environment(changes):
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(cmd, env):
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    return done, time.perf_counter() - start


def pytest_counts(output):
    """{'passed': n, 'failed': n, ...} from pytest's closing line."""
    last = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", last[-1])} if last else {}


def one_kernel(python, name, changes):
    env = environment(changes)
    probe, _ = run([python, "-c", "import json\n" + PROBE], env)
    loaded = json.loads(probe.stdout) if probe.returncode == 0 else {"error": probe.stderr[-500:]}
    row = {"kernel": name, "environment": {k: v for k, v in changes.items() if v is not None}, "loaded": loaded}
    done, seconds = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], env)
    row["suite"] = {**pytest_counts(done.stdout), "exit": done.returncode, "seconds": round(seconds, 1)}
    if done.returncode:
        row["suite"]["failures"] = [l for l in done.stdout.splitlines() if l.startswith(("FAILED", "ERROR"))][:40]
    with tempfile.TemporaryDirectory() as out:
        done, seconds = run([python, "-m", "sphyr_hpc.score", "examples/results", "--out", out, "--quiet"], env)
        check, _ = run([python, "-m", "sphyr_hpc.parity", f"{out}/results.jsonl", "examples/results"], env)
    row["score_cli"] = {"exit": done.returncode, "parity_exit": check.returncode, "seconds": round(seconds, 1),
                        "parity": check.stdout.strip().splitlines()[-2:]}
    return row


def loaded_text(loaded):
    if "error" in loaded:
        return "probe failed"
    if loaded["openblas"]:
        return "OpenBLAS " + "/".join(filter(None, loaded["openblas"]))
    return ", ".join(Path(p).parent.name + "/" + Path(p).name for p in loaded["libraries"]) or "?"


def most_used(parity_lines):
    """'field share' of the field closest to its tolerance, from the parity command's last line."""
    shares = re.findall(r"(\w+) ([0-9.e+-]+)", parity_lines[-1].split(":", 1)[-1]) if parity_lines else []
    if not shares:
        return "?"
    field, share = max(shares, key=lambda pair: float(pair[1]))
    return f"{field} {float(share):.2f}"


def markdown(report):
    lines = [
        "# Parity under several BLAS kernels",
        "",
        f"{report['date']}, commit {report.get('commit', '?')}, {report['machine']['platform']}, "
        f"{report['machine']['cpus']} CPUs, CPU: {report['cpu']}. Made by `benchmarks/parity_kernels.py`.",
        "",
        "Each row runs the whole serial test suite (`pytest tests/`; the MPI tests skip on one rank) and "
        "`python -m sphyr_hpc.score examples/results` checked by `python -m sphyr_hpc.parity`, "
        "with the kernel the process really loaded. \"Most tolerance used\": the field and record "
        "closest to failing, as a share of its tolerance (1 would fail).",
        "",
        "| kernel | loaded | passed | failed | skipped | score CLI vs published | most tolerance used | seconds |",
        "|---|---|---:|---:|---:|---|---|---:|",
    ]
    for row in report["kernels"]:
        if "skipped" in row:
            lines.append(f"| {row['kernel']} | not run: {row['skipped']} | | | | | | |")
            continue
        r = row["suite"]
        summary = row["score_cli"]["parity"][0] if row["score_cli"]["parity"] else "?"
        total = r["seconds"] + row["score_cli"]["seconds"]
        lines.append(f"| {row['kernel']} | {loaded_text(row['loaded'])} | {r.get('passed', 0)} | "
                     f"{r.get('failed', 0) + r.get('error', 0) + r.get('errors', 0)} | {r.get('skipped', 0)} | "
                     f"{summary} | {most_used(row['score_cli']['parity'])} | {total:.0f} |")
    failures = [(row["kernel"], f) for row in report["kernels"] for f in row.get("suite", {}).get("failures", [])]
    if failures:
        lines += ["", "Failures:", ""] + [f"- {kernel}: `{f}`" for kernel, f in failures]
    lines += ["", f"All kernels pass: **{report['all_pass']}**", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "parity_kernels.json"))
    parser.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"),
                        help="the interpreter that runs the tests")
    parser.add_argument("--kernels", default=DEFAULT_KERNELS,
                        help="'native' (no override) and OpenBLAS core types to force, comma-separated, or 'all' "
                             "(adds the rest and the reference BLAS)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    rows = []
    for name, changes, reason in kernels(args.kernels):
        if reason:
            rows.append({"kernel": name, "skipped": reason})
        else:
            rows.append(one_kernel(args.python, name, changes))
            r = rows[-1]
            print(f"{name}: {loaded_text(r['loaded'])}; suite {r['suite']}; score CLI {r['score_cli']}",
                  file=sys.stderr, flush=True)
    ran = [r for r in rows if "skipped" not in r]
    all_pass = bool(ran) and all(
        r["suite"]["exit"] == 0 and r["score_cli"]["parity_exit"] == 0 for r in ran)
    report = {"date": now(), "commit": commit_of(ROOT), "machine": machine(load_before), "cpu": model,
              "kernels": rows, "all_pass": all_pass}
    write_results(args.out, report, markdown(report))
    print(markdown(report))
    return 0 if all_pass else 1


if __name__ == "__main__":
    sys.exit(main())
