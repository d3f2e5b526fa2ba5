"""A model of one SIMP iteration on N ranks, fitted to the 1- and 2-rank runs here, projected to 8-1024.

    /usr/bin/python3 benchmarks/large_grids_model.py [--fit benchmarks/results/large_grids_side_by_side.json]
        [--size 2048x1024] [--sizes-per-rank ...]

It is a model, not a measurement.  Per SIMP iteration on N ranks (the grid
split as the DMDA splits it, the multigrid levels as
``sphyr_hpc.solvers.hierarchy.hierarchy`` builds them for that split):

    T(N) = T_bytes + T_halo + T_reduce + T_coarse

* ``T_bytes = B / N / (beta_core * eta)``: B the bytes the phases must move
  (``sphyr_hpc/optimiser/measure.py``, per DOF from the fit run), beta_core
  a core's share of the copy bandwidth, eta the fraction of it reached (fitted:
  bound / measured of the fit run);
* ``T_halo``: every MatMult, restriction and interpolation on level l
  exchanges the rank's subdomain edge (2 DOFs a node, 8 bytes) with up to 8
  neighbours: ``alpha * 8 + bytes / beta_link`` a time, times the cycle's
  visits of level l per MG-CG iteration (``hierarchy.level_visits``: W-cycles
  below a V on the finest level, 2^(l-1)), plus the eigenvalue estimates of set-up;
* ``T_reduce``: CG's 2 inner products per iteration, the bisection's ~55
  sums and the estimates' inner products, ``alpha * log2 N`` each;
* ``T_coarse``: the coarsest level, LU redundant on every rank: an allgather
  of its right-hand side and a banded triangular solve per visit (2^(L-2)
  visits a cycle), the factorisation once per SIMP iteration
  (n * bandwidth^2 flops at ``coarse_flops``).

alpha (latency) and beta_link are not measurable on one 2-core machine; the
defaults are typical InfiniBand figures (2 us, 10 GB/s) and the cluster run
that would check them is named in docs/performance.md.
"""

import argparse
import json
import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

RANKS = (1, 2, 8, 32, 128, 512, 1024)
BISECTION_SUMS = 55
ESTEIG_STEPS = 10
SMOOTH_STEPS = 2


def split(n_ranks, nelx, nely):
    """A px x py process grid as PETSc picks it (px/py close to nelx/nely) and the node counts per rank."""
    best = None
    for px in range(1, n_ranks + 1):
        if n_ranks % px:
            continue
        py = n_ranks // px
        cost = abs(math.log((nelx / px) / (nely / py)))
        if best is None or cost < best[0]:
            best = (cost, px, py)
    _, px, py = best

    def counts(n, p):
        return [n // p + (1 if i < n % p else 0) for i in range(p)]
    return px, py, counts(nelx + 1, px), counts(nely + 1, py)


def levels_for(n_ranks, nelx, nely):
    from sphyr_hpc.solvers.hierarchy import hierarchy

    px, py, xc, yc = split(n_ranks, nelx, nely)
    if min(xc) < 2 or min(yc) < 2:
        return px, py, None
    return px, py, hierarchy((nely, nelx), (xc, yc))


def project(fit, nelx, nely, n_ranks, alpha=2e-6, beta_link=10e9, coarse_flops=1e9, beta_core=None):
    """Seconds per SIMP iteration and its parts on ``n_ranks`` (a dict), or None if the grid cannot be split."""
    from sphyr_hpc.solvers import plan as mgplan
    from sphyr_hpc.solvers.hierarchy import level_visits

    px, py, levels = levels_for(n_ranks, nelx, nely)
    if levels is None:
        return None
    dofs = 2 * (nelx + 1) * (nely + 1)
    bytes_per_dof = fit["bytes_per_dof"]
    beta_core = beta_core or fit["beta_core"]
    t_bytes = bytes_per_dof * dofs / n_ranks / (beta_core * fit["eta"])
    its = fit["ksp_iterations"]
    n_levels = len(levels)
    t_halo = 0.0
    t_reduce = (2 * its + BISECTION_SUMS + 2 * ESTEIG_STEPS * (n_levels - 1)) * alpha * math.log2(max(n_ranks, 1))
    if n_ranks > 1:
        for depth, level in enumerate(levels[:-1]):
            sub_x = len(level.x_pos) / px
            sub_y = len(level.y_pos) / py
            edge_bytes = 2 * (sub_x + sub_y + 2) * 2 * 8
            per_exchange = 8 * alpha + edge_bytes / beta_link
            visits = level_visits(depth, "w", mgplan.FINEST_CYCLE)
            per_iteration = visits * (2 * SMOOTH_STEPS + 1 + 2) + (1 if depth == 0 else 0)
            t_halo += (its * per_iteration + ESTEIG_STEPS) * per_exchange
    coarse = levels[-1]
    n_c = coarse.n_dofs
    bandwidth = 2 * (len(coarse.x_pos) + 1)
    solve_flops = 4.0 * n_c * bandwidth
    visits = level_visits(n_levels - 1, "w", mgplan.FINEST_CYCLE)
    gather = (alpha * math.log2(n_ranks) + n_c * 8 / beta_link) if n_ranks > 1 else 0.0
    t_coarse = its * visits * (solve_flops / coarse_flops + gather) + n_c * bandwidth**2 / coarse_flops
    total = t_bytes + t_halo + t_reduce + t_coarse
    return {"ranks": n_ranks, "process_grid": f"{px}x{py}", "levels": n_levels, "coarse_dofs": n_c,
            "dofs_per_rank": dofs / n_ranks, "seconds": total, "bytes": t_bytes, "halo": t_halo, "reduce": t_reduce,
            "coarse": t_coarse, "dominant": max(("bytes", t_bytes), ("halo", t_halo), ("reduce", t_reduce),
                                                ("coarse", t_coarse), key=lambda kv: kv[1])[0]}


def fit_from(report, size):
    """bytes per DOF, eta and beta_core from the new tree's 1- or 2-rank run at ``size``."""
    runs = [r for r in report["runs"] if r.get("phases") and r.get("size") == size
            and r["label"].startswith("new round")]
    if not runs:
        raise SystemExit(f"no run of this tree at {size} with phases in the fit file")
    best = min(runs, key=lambda r: r["seconds_per_iteration"])
    it = best["phases"]["iteration"]
    return {"bytes_per_dof": it["bytes"] / best["dofs"], "eta": it["bound_seconds"] / it["seconds"],
            "beta_core": best["copy_gb_per_second"] * 1e9 / best["ranks"], "ksp_iterations": best["ksp_iterations"],
            "fit_ranks": best["ranks"], "fit_seconds": best["seconds_per_iteration"], "fit_label": best["label"]}


def markdown(fit, rows, size, weak):
    lines = [f"Fit ({fit['fit_label']}, {size}, {fit['fit_ranks']} ranks, {fit['fit_seconds']:.2f} s/iteration): "
             f"{fit['bytes_per_dof']:.0f} bytes per DOF per SIMP iteration, {fit['beta_core'] / 1e9:.1f} GB/s copy "
             f"bandwidth a core, {100 * fit['eta']:.0f}% of it reached, {fit['ksp_iterations']:.1f} MG-CG iterations. "
             "Assumed: latency 2 us, link 10 GB/s, coarse LU at 1 GFlop/s.", "",
             f"Strong scaling, {size}:", "",
             "| ranks | process grid | levels | coarse DOFs | s/iteration | bytes | halo | reductions | coarse | "
             "dominant |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(_row(r))
    lines += ["", "Weak scaling, ~2.1M DOFs a rank (1024x1024 elements a rank):", "",
              "| ranks | grid | process grid | levels | coarse DOFs | s/iteration | bytes | halo | reductions | coarse | "
              "dominant |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for grid, r in weak:
        lines.append(_row(r, grid))
    return "\n".join(lines) + "\n"


def _row(r, grid=None):
    cells = [str(r["ranks"])] + ([grid] if grid else []) + [
        r["process_grid"], str(r["levels"]), f"{r['coarse_dofs']:,}", f"{r['seconds']:.3f}", f"{r['bytes']:.3f}",
        f"{r['halo']:.4f}", f"{r['reduce']:.4f}", f"{r['coarse']:.4f}", r["dominant"]]
    return "| " + " | ".join(cells) + " |"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fit", default=os.path.join(REPO, "benchmarks", "results", "large_grids_side_by_side.json"))
    p.add_argument("--size", default="2048x1024")
    p.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "large_grids_model"))
    args = p.parse_args(argv)
    with open(args.fit) as fh:
        fit = fit_from(json.load(fh), args.size)
    nelx, nely = (int(v) for v in args.size.split("x"))
    rows = [r for r in (project(fit, nelx, nely, n) for n in RANKS) if r]
    weak = []
    for n in RANKS:
        px, py, _, _ = split(n, 2 * 1024, 1024)
        gx, gy = 1024 * px, 1024 * py
        r = project(fit, gx, gy, n)
        if r:
            weak.append((f"{gx}x{gy}", r))
    text = markdown(fit, rows, args.size, weak)
    with open(args.out + ".md", "w") as fh:
        fh.write(text)
    with open(args.out + ".json", "w") as fh:
        json.dump({"fit": fit, "strong": rows, "weak": [dict(r, grid=g) for g, r in weak]}, fh, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
