"""Memory bandwidth of a read-only stream against a copy, every rank at once.

    bin/mpirun -n 2 .venv/bin/python benchmarks/read_vs_copy_bandwidth.py [--mb 256] [--repeats 8]
        [--out benchmarks/results/read_vs_copy_bandwidth]

The bound of ``python -m sphyr_hpc.optimize --bandwidth`` divides the bytes a phase reads plus
writes by a copy's bytes read plus written per second (``np.copyto``, all ranks at once).  A
matrix product mostly reads; this measures how much of that figure a read alone reaches: each
rank times ``np.copyto(b, a)`` (counted as 2 x the array's bytes) and ``a.dot(a)`` (1 x) over
``--mb`` MB arrays, the best of ``--repeats``, all ranks starting together.  Results (sums over
the ranks): ``{out}.json`` and ``{out}.md``.
"""

import argparse
import json
import os
import platform
import time

import numpy as np
from mpi4py import MPI

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best_seconds(comm, operation, repeats):
    best = float("inf")
    for _ in range(repeats):
        comm.Barrier()
        started = time.perf_counter()
        operation()
        best = min(best, time.perf_counter() - started)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=256)
    p.add_argument("--repeats", type=int, default=8)
    p.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "read_vs_copy_bandwidth"))
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    a = np.random.default_rng(comm.rank).random(args.mb * 2**20 // 8)
    b = np.empty_like(a)
    copy = best_seconds(comm, lambda: np.copyto(b, a), args.repeats)
    read = best_seconds(comm, lambda: a.dot(a), args.repeats)
    copy_rate = comm.allreduce(2 * a.nbytes / copy)
    read_rate = comm.allreduce(a.nbytes / read)
    if comm.rank:
        return
    report = {"ranks": comm.size, "mb_per_rank": args.mb, "repeats": args.repeats, "machine": platform.machine(),
              "copy_gb_per_second": copy_rate / 1e9, "read_gb_per_second": read_rate / 1e9,
              "read_over_copy": read_rate / copy_rate}
    with open(args.out + ".json", "w") as fh:
        json.dump(report, fh, indent=1)
    with open(args.out + ".md", "w") as fh:
        fh.write("# Read-only stream against copy, all ranks at once\n\n"
                 f"Command: `bin/mpirun -n {comm.size} .venv/bin/python benchmarks/read_vs_copy_bandwidth.py "
                 f"--mb {args.mb} --repeats {args.repeats}`; best of {args.repeats}, sums over the ranks.\n\n"
                 "| stream | GB/s (bytes read + written) |\n|---|---|\n"
                 f"| `np.copyto(b, a)` | {copy_rate / 1e9:.1f} |\n"
                 f"| `a.dot(a)` | {read_rate / 1e9:.1f} |\n\n"
                 f"A read alone reaches {100 * read_rate / copy_rate:.0f}% of the copy's figure.\n")
    print(f"copy {copy_rate / 1e9:.1f} GB/s, read {read_rate / 1e9:.1f} GB/s "
          f"({100 * read_rate / copy_rate:.0f}%) -> {args.out}.md")


if __name__ == "__main__":
    main()
