"""Write the field files that ``examples/fields_screenshots.py`` renders with ParaView.

    .venv/bin/python examples/fields_data.py [--out build/fields] [--record 4]
        [--nelx 120 --nely 40 --iterations 150 --every 5]

(a) Scores record ``--record`` of ``examples/results/baseline-random/full_easy.json``
    with :class:`sphyr_hpc.scoring.scorer.Scorer`, takes the yardstick optimum the
    score was measured against, and writes the completion, the ground truth
    and the optimum with :func:`sphyr_hpc.scoring.record_fields.write_record_fields`
    (``<out>/record/``); the metrics go to ``<out>/record/metrics.json``.
(b) Runs one SIMP optimisation (:func:`sphyr_hpc.optimiser.simp.run_simp`)
    on a ``nely x nelx`` cantilever -- the left edge clamped, a load at
    mid-height of the right edge -- with a
    :class:`sphyr_hpc.io.fields.HistoryWriter` as its callback, every
    ``--every`` iterations plus the final, consistent state
    (``<out>/history/cantilever.xdmf``).

Runs on one rank; (b) also under ``bin/mpirun -n 2`` (then (a) is done by rank 0).
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sphyr_hpc.core import grid as grids  # noqa: E402
from sphyr_hpc.core import loadcase as loadcases  # noqa: E402
from sphyr_hpc.runtime.petsc import petsc  # noqa: E402
from sphyr_hpc.io import fields  # noqa: E402
from sphyr_hpc.io.records import read_result_file  # noqa: E402
from sphyr_hpc.scoring import record_fields as scored_fields  # noqa: E402

RESULTS = ROOT / "examples" / "results" / "baseline-random" / "full_easy.json"


def record_fields(out, index):
    """(a): score one record, write its three designs; returns the paths."""
    from sphyr_hpc.io.atomic import json_safe
    from sphyr_hpc.scoring.scorer import Scorer

    sample = read_result_file(RESULTS)[index]
    gt = sample.ground_truth
    lc = loadcases.from_grid(gt, gravity=sample.gravity)
    scorer = Scorer()
    try:
        metrics = scorer.score(sample.completion, gt, sample.input_grid, sample.gravity)
        rho_gt, _ = grids.densities(gt)
        rho_gt[lc.structural_mask()] = 1.0
        rho_out, _ = grids.densities(sample.completion)
        free = grids.mask_of(sample.input_grid, grids.MASK)
        # The same call Scorer.score makes: a cache hit, the yardstick the score was measured against.
        optimum = scorer.optimum(lc, free, rho_gt, float(rho_gt.mean()), (rho_gt,))
    finally:
        scorer.close()
    designs = {"completion": rho_out, "ground_truth": rho_gt, "optimum": optimum.densities}
    paths = scored_fields.write_record_fields(out / "record", sample.model, sample.subject, sample.index, lc, designs,
                                       masked=free)
    summary = {"model": sample.model, "subject": sample.subject, "index": sample.index,
               "files": {k: str(p) for k, p in paths.items()}, "metrics": json_safe(metrics)}
    (out / "record" / "metrics.json").write_text(json.dumps(summary, indent=1))
    return summary


def cantilever(nely, nelx):
    """The left edge clamped, a load at mid-height of the right edge (gravity down)."""
    return loadcases.LoadCase(nely, nelx, ((nely // 2, nelx - 1),), tuple((r, 0) for r in range(nely)))


def history(out, nely, nelx, iterations, every, volume_fraction=0.4):
    """(b): one SIMP run written as a temporal collection."""
    from sphyr_hpc.optimiser import simp
    from sphyr_hpc.optimiser.filter import DensityFilter
    from sphyr_hpc.solvers.elasticity import elasticity_system

    PETSc = petsc()
    lc = cantilever(nely, nelx)
    free, pinned = simp.design_space(lc, np.ones(lc.shape, dtype=bool), np.zeros(lc.shape))
    start = time.perf_counter()
    with elasticity_system(lc, comm=PETSc.COMM_WORLD, prefix="fields_example_") as system:
        density_filter = DensityFilter(system)
        try:
            with fields.HistoryWriter(out / "history" / "cantilever", system, every=every) as writer:
                result = simp.run_simp(system, density_filter, volume_fraction, free, pinned,
                                       simp.SimpSettings(max_iterations=iterations), callback=writer)
                writer.write_step(result.iterations, result.densities, result.compliance, force=True)
                steps = writer.iterations
        finally:
            density_filter.close()
    return {"file": str(out / "history" / "cantilever.xdmf"), "iterations": result.iterations,
            "converged": result.converged, "compliance": result.compliance, "steps": steps,
            "seconds": time.perf_counter() - start, "ranks": PETSc.COMM_WORLD.getSize()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "fields")
    parser.add_argument("--record", type=int, default=4)
    parser.add_argument("--nely", type=int, default=40)
    parser.add_argument("--nelx", type=int, default=120)
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument("--every", type=int, default=5)
    args, _ = parser.parse_known_args(argv)
    rank = petsc().COMM_WORLD.getRank()
    if rank == 0:
        summary = record_fields(args.out, args.record)
        m = summary["metrics"]
        print(f"(a) {summary['model']}/{summary['subject']}[{summary['index']}]: topology_score "
              f"{m['topology_score']:.3f}, compliance {m['compliance']}, optimal {m['optimal_compliance']:.4g}")
        for name, path in summary["files"].items():
            print(f"    {name}: {path}")
    run = history(args.out, args.nely, args.nelx, args.iterations, args.every)
    if rank == 0:
        print(f"(b) {args.nely}x{args.nelx} cantilever: {run['iterations']} iterations "
              f"(converged {run['converged']}), compliance {run['compliance']:.4g}, "
              f"{len(run['steps'])} steps, {run['seconds']:.1f} s on {run['ranks']} rank(s): {run['file']}")
        (args.out / "history" / "run.json").write_text(json.dumps(run, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
