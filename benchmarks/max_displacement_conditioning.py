"""How well-posed is a record's max_displacement?  Extended-precision answers for records two checkouts disagree on.

Two correct double-precision scorers may disagree on ``max_displacement``
beyond docs/scoring.md's "Parity" tolerance (1e-6 relative) when the largest
displacement sits on a node held by void (Emin) cells only: that displacement
is then ill-conditioned (Emin = 1e-9).  This benchmark scores the
``score_many`` subset (1_random_cell_easy, 3_random_row_easy, full_easy x
``--models`` models, built from the dataset with score_many's seed) with this
checkout and ``--compare``'s, takes every record whose fields break parity
between the two, and solves its design again in extended precision
(``numpy.longdouble``, 64-bit mantissa here: Gaussian elimination with partial pivoting on
the free DOFs and one step of refinement, K assembled in extended precision):

* ``reference (exact K0)``: the element matrix from its closed form in
  extended precision: the mathematical problem;
* ``reference (float64 K0)``: the element matrix every double-precision scorer
  uses, rounded to float64, then solved in extended precision: the problem a
  double-precision scorer is actually given.

The relative distance between the two references is what rounding the inputs
alone (16 digits) does to ``max_displacement``: where it exceeds the parity
tolerance, no double-precision implementation can be held to that tolerance
on that record.  Compliance is reported beside it (it is well-conditioned).

    .venv/bin/python benchmarks/max_displacement_conditioning.py --compare /work/wt/base17-9889ca1

Results: ``benchmarks/results/max_displacement_conditioning.{json,md}``.
"""

import argparse
import json
import os
import tempfile
from pathlib import Path

from _common import ROOT, SPHYR_DATA, commit_of, machine, machine_line, now, write_results

import numpy as np

import score_many
from sphyr_hpc.core import discretisation as fe
from sphyr_hpc.core import grid as grids
from sphyr_hpc.core import loadcase as loadcases
from sphyr_hpc.parity import differences

LD = np.longdouble


def exact_element_matrix(nu):
    """The unit-square Q4 element matrix from its closed form (Andreassen et al. 2011), in extended precision."""
    nu = LD(nu)
    k = np.array([LD(1) / 2 - nu / 6, LD(1) / 8 + nu / 8, -LD(1) / 4 - nu / 12, -LD(1) / 8 + 3 * nu / 8,
                  -LD(1) / 4 + nu / 12, -LD(1) / 8 - nu / 8, nu / 6, LD(1) / 8 - 3 * nu / 8], dtype=LD)
    pattern = np.array([[1, 2, 3, 4, 5, 6, 7, 8], [2, 1, 8, 7, 6, 5, 4, 3], [3, 8, 1, 6, 7, 4, 5, 2],
                        [4, 7, 6, 1, 8, 3, 2, 5], [5, 6, 7, 8, 1, 2, 3, 4], [6, 5, 4, 3, 2, 1, 8, 7],
                        [7, 4, 5, 2, 3, 8, 1, 6], [8, 3, 2, 5, 4, 7, 6, 1]]) - 1
    return (LD(1) / (1 - nu ** 2)) * k[pattern]


def _solve(A, b):
    """Gaussian elimination with partial pivoting in A's precision."""
    A, b = A.copy(), b.copy()
    n = b.size
    for i in range(n):
        p = i + int(np.argmax(np.abs(A[i:, i])))
        if p != i:
            A[[i, p]], b[[i, p]] = A[[p, i]], b[[p, i]]
        factor = A[i + 1:, i] / A[i, i]
        A[i + 1:, i:] -= np.outer(factor, A[i, i:])
        b[i + 1:] -= factor * b[i]
    x = np.zeros(n, dtype=A.dtype)
    for i in range(n - 1, -1, -1):
        x[i] = (b[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]
    return x


def extended_analysis(loadcase, rho, ke):
    """(max_displacement, compliance) of density array ``rho`` solved in extended precision with element matrix ``ke``."""
    E = LD(fe.EMIN) + np.asarray(rho, dtype=LD) ** 3 * (LD(1) - LD(fe.EMIN))
    nely, nelx = loadcase.shape
    edofs = fe.nodes_to_dofs(fe.element_nodes(nely, nelx))
    K = np.zeros((loadcase.n_dofs, loadcase.n_dofs), dtype=LD)
    for e, dofs in enumerate(edofs):
        K[np.ix_(dofs, dofs)] += E.ravel()[e] * ke
    f = loadcase.force_vector().astype(LD)
    free = np.setdiff1d(np.arange(loadcase.n_dofs), loadcase.fixed_dofs())
    Kf = K[np.ix_(free, free)]
    u = np.zeros(loadcase.n_dofs, dtype=LD)
    u[free] = _solve(Kf, f[free])
    u[free] += _solve(Kf, f[free] - Kf @ u[free])  # one refinement step, residual in extended precision
    return float(np.sqrt(u[0::2] ** 2 + u[1::2] ** 2).max()), float(f @ u)


def design(results, model, subject, index):
    """Load case and forced density array of a record, read back from the result file it came from."""
    record = json.loads((Path(results) / model / f"{subject}_results.json").read_text())[index]
    truth = grids.as_grid(record["ground_truth"])
    completion = grids.as_grid(record["completion"])
    lc = loadcases.from_grid(truth)
    rho, _ = grids.densities(completion)
    rho = np.clip(rho, 0.0, 1.0)
    rho[lc.structural_mask()] = 1.0  # docs/scoring.md: the ground truth's L/S cells forced solid
    return lc, rho


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--compare", required=True, metavar="DIR", help="the other checkout (with its .venv)")
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--data", default=str(SPHYR_DATA / "v1"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "max_displacement_conditioning.json"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "subset"
        count = score_many.build(args.data, results, args.models, score_many.SUBSET)
        runs = {}
        for checkout in (ROOT, Path(args.compare)):
            _, _, _, rows, _ = score_many.run(checkout, 1, results, Path(tmp) / f"out-{len(runs)}")
            runs[commit_of(checkout)] = {(r["model"], r["subject"], r["index"]): r for r in rows}
        (ours, mine), (theirs, other) = runs.items()
        exact, rounded = exact_element_matrix(fe.NU), fe.element_stiffness(fe.NU).astype(LD)
        entries = []
        for key in sorted(mine):
            found = differences(mine[key], other[key])
            if not found:
                continue
            lc, rho = design(results, *key)
            md_exact, c_exact = extended_analysis(lc, rho, exact)
            md_rounded, c_rounded = extended_analysis(lc, rho, rounded)
            a, b = mine[key]["max_displacement"], other[key]["max_displacement"]
            entry = {"record": "/".join(map(str, key)), "differences": found,
                     "fields_differing": sorted({d.split(":")[0] for d in found}),
                     f"max_displacement_{ours}": a, f"max_displacement_{theirs}": b,
                     "reference_exact_k0": md_exact, "reference_float64_k0": md_rounded,
                     "input_rounding_shift": abs(md_exact - md_rounded) / md_exact,
                     f"error_{ours}_vs_float64_reference": abs(a - md_rounded) / md_rounded,
                     f"error_{theirs}_vs_float64_reference": abs(b - md_rounded) / md_rounded,
                     f"compliance_error_{ours}_vs_exact_reference": abs(mine[key]["compliance"] - c_exact) / c_exact,
                     "parity_tolerance": 1e-6 * max(1.0, mine[key]["compliance"] / mine[key]["ground_truth_compliance"])}
            entries.append(entry)
            print(json.dumps(entry), flush=True)
    report = {"benchmark": "max_displacement_conditioning", "date": now(), "machine": machine(load_before),
              "records": count, "checkouts": [ours, theirs], "records_breaking_parity": len(entries),
              "only_max_displacement": all(e["fields_differing"] == ["max_displacement"] for e in entries),
              "longdouble_mantissa_bits": int(np.finfo(LD).nmant) + 1, "entries": entries}
    write_results(args.out, report, _markdown(report))


def _markdown(report):
    ours, theirs = report["checkouts"]
    lines = [f"# max_displacement conditioning ({report['date']})", "", machine_line(report["machine"]), "",
             f"{report['records']} records of the score_many subset scored by {ours} and {theirs} (one rank each); "
             f"{report['records_breaking_parity']} break the parity rules between the two, "
             f"{'all' if report['only_max_displacement'] else 'not all'} in max_displacement alone. Each is solved "
             f"again in extended precision ({report['longdouble_mantissa_bits']}-bit mantissa): with the exact "
             "element matrix, and with the element matrix rounded to float64 as every double-precision scorer has "
             "it. \"Input rounding shift\": how far rounding the element matrix to 16 digits moves the true "
             "max_displacement.", "",
             f"| record | {ours} | {theirs} | reference, exact K0 | reference, float64 K0 | input rounding shift | "
             f"{ours} error | {theirs} error | parity tolerance | compliance error ({ours}) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for e in report["entries"]:
        lines.append(f"| {e['record']} | {e[f'max_displacement_{ours}']:.12g} | {e[f'max_displacement_{theirs}']:.12g} | "
                     f"{e['reference_exact_k0']:.12g} | {e['reference_float64_k0']:.12g} | "
                     f"{e['input_rounding_shift']:.2e} | {e[f'error_{ours}_vs_float64_reference']:.2e} | "
                     f"{e[f'error_{theirs}_vs_float64_reference']:.2e} | {e['parity_tolerance']:.2e} | "
                     f"{e[f'compliance_error_{ours}_vs_exact_reference']:.1e} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
