"""What a SIMP iteration on a large grid must move through memory, phase by phase (a model).

:func:`phase_bytes` counts, for the system as it was set up (the storage of
every operator read from PETSc), the bytes each phase of one SIMP iteration
must read or write at least, summed over all ranks:

* ``assembly``: every stored value of every multigrid operator written once
  (8 bytes), the moduli read once;
* ``setup`` (PC set-up): per smoothed level the Chebyshev eigenvalue estimate
  (``esteig_steps`` CG steps: a MatMult and ~10 vector passes each, 8 for the
  fused smoother's own) and the Jacobi diagonal (one read of the operator;
  the fused smoother's comes with the assembly); with PCMG's own Galerkin
  products (AIJ) also one read of A_fine, P and one write of A_coarse per
  level.  The coarsest factorisation is not counted (a few thousand DOFs);
* ``solve``: the CG iterations times one MG-CG iteration: CG's MatMult and
  ~12 vector passes, and per visit of a smoothed level (W-cycles below a
  V on the finest level: 2^(depth-1) visits,
  :func:`~sphyr_hpc.solvers.hierarchy.level_visits`) ``2 m`` Chebyshev
  steps (a MatMult and ~7 vector passes each; the finest level's fused
  steps, :class:`~sphyr_hpc.solvers.fused.ChebyshevSmoother`, the moduli
  or stencils and 6 vector passes each), the residual (a MatMult and b read),
  restriction and interpolation;
* ``update``: element energies (the displacements read once, an energy
  written), sensitivities, the filter's two applications and the
  optimality-criteria bisection (3 arrays of the free cells read a pass,
  ``oc_volume.c``; the passes the run made, counted by the
  ``sphyr_bisection_pass`` event, where a volume bound decides most of the
  ``bisection_steps`` steps with none), 8-byte values.

A MatMult moves the stored matrix (AIJ: 12 bytes a nonzero and 4 a row;
BAIJ/SBAIJ: 8 bytes a stored value, 4 a stored 2x2 block and 4 a block row)
and x and y once each; the finest level applied from the moduli (``shell``,
:mod:`sphyr_hpc.solvers.matfree`) stores no matrix: it reads the moduli around
the owned nodes (8 bytes an element) and x in place (its halo, the ring of
nodes around each rank's box, is not counted), and its assembly writes the
moduli box and the diagonal.  A level held as node stencils
(:mod:`sphyr_hpc.solvers.stencil`) reads its 19 values a node (no index) and x
in place (its ring not counted); its assembly writes them and the diagonal.
Their smoothing and estimates, fused like the finest level's, count as the
finest level's do.  An interpolation applied from the grids
(:mod:`sphyr_hpc.solvers.transfer`) reads no stored matrix: x and y once
each.  It is a lower bound: caches are assumed to catch every reuse within a
MatMult (SBAIJ reads x and updates y twice), and Python's own
temporaries are not counted.  :func:`bounds` divides by the measured copy
bandwidth (bytes read + written per second, all ranks at once).
"""

import numpy as np

from ..solvers.matfree import operator_of
from ..solvers.hierarchy import level_visits
from ..solvers.multigrid import fused_smoothers

VECTOR_PASSES_CG = 12         # r.z, ||r||, x += a p, r -= a w, p = z + b p (reads and writes, 8 bytes each)
VECTOR_PASSES_CHEBYSHEV = 7   # Jacobi scaling and the three-term update, a step
VECTOR_PASSES_FUSED = 6       # the fused step (matfree.ChebyshevSmoother): x and d read and written, b, D^-1
VECTOR_PASSES_ESTEIG = 10     # a CG step of the eigenvalue estimate
VECTOR_PASSES_ESTEIG_FUSED = 8  # matfree's fused CG step: r read and written, Kp, D^-1; D^-1, r, p read, p written
ESTEIG_STEPS = 10             # multigrid.configure_mg: -mg_levels_esteig_ksp_max_it default
UPDATE_ARRAYS = 12            # energies 3, sensitivity 3, filter 2 x 2, change 2 (8 bytes a cell)
BISECTION_ARRAYS = 3          # scaled, the design, dv: oc_volume.c's pass (numpy's fallback moves 7)


def matrix_bytes(A):
    """Bytes one pass over A's stored entries reads (values and indices), all ranks; for a shell,
    the element moduli it reads."""
    if A.getType() == "python":  # our kernels': a FusedOperator or a GridTransfer
        return A.getPythonContext().stored_bytes
    info = A.getInfo(A.InfoType.GLOBAL_SUM)
    nz = float(info["nz_used"])
    rows = A.getSize()[0]
    kind = A.getType()
    if "baij" in kind:  # BAIJ, SBAIJ: nz counts the stored values; 2x2 blocks
        bs = max(A.getBlockSize(), 1)
        return 8.0 * nz + 4.0 * nz / bs**2 + 4.0 * rows / bs
    return 12.0 * nz + 4.0 * rows


def matmult_bytes(A):
    m, n = A.getSize()
    return matrix_bytes(A) + 8.0 * (m + n)


def _written_by_assembly(A):
    """Bytes assembling A writes: every stored value, or a shell's moduli box and diagonal."""
    if operator_of(A) is not None:
        return matrix_bytes(A) + 8.0 * A.getSize()[0]
    return 8.0 * float(A.getInfo(A.InfoType.GLOBAL_SUM)["nz_used"])


def bisection_steps():
    """Steps of the optimality-criteria bisection settling on a multiplier near 1 (the rules' bounds)."""
    from .simp import _bisect

    count = [0]

    def over(middle):
        count[0] += 1
        return middle < 1.0

    _bisect(-np.inf, np.inf, over)
    return count[0]


def _levels(system):
    """(operator, smoother KSP or None) per level, finest first, and the interpolations finest pair first."""
    pc = system.ksp.getPC()
    n = pc.getMGLevels()
    ops = []
    for level in range(n - 1, -1, -1):
        ksp = pc.getMGCoarseSolve() if level == 0 else pc.getMGSmoother(level)
        ops.append((ksp.getOperators()[0], None if level == 0 else ksp))
    interps = [pc.getMGInterpolation(level) for level in range(n - 1, 0, -1)]
    return ops, interps


def phase_bytes(system, ksp_iterations, n_free, bisection_passes=None):
    """Bytes per SIMP iteration by phase (dict), all ranks; None unless CG + PCMG.  ``bisection_passes``:
    the optimality-criteria bisection's passes over the cells a SIMP iteration made (the run's
    ``sphyr_bisection_pass`` events), else every step of :func:`bisection_steps` counted."""
    pc = system.ksp.getPC()
    if pc.getType() != "mg":
        return None
    ops, interps = _levels(system)
    cycle_type = getattr(system.method, "mg_cycle", "v")
    finest_type = getattr(system.method, "mg_finest_cycle", cycle_type)
    galerkin_products = getattr(system.method, "coarse", None) is None
    n_elements = system.loadcase.n_elements
    fine = ops[0][0]
    n_fine = fine.getSize()[0]
    fused = [smoother for smoother, _ in fused_smoothers(system.ksp)]

    assembly = 8.0 * n_elements
    setup = 0.0
    cycle = matmult_bytes(fine) + 8.0 * VECTOR_PASSES_CG * n_fine
    for depth, (A, smoother) in enumerate(ops):
        n = A.getSize()[0]
        if depth == 0 or not galerkin_products:
            assembly += _written_by_assembly(A)
        if smoother is None:
            continue  # the coarsest: factorised, not counted
        steps = smoother.getTolerances()[3]
        if smoother in fused:
            # The fused CG steps (D^-1 comes with the assembly); one pass a Chebyshev step: the
            # moduli, x and d read and written, b and D^-1 read.
            setup += ESTEIG_STEPS * (matmult_bytes(A) + 8.0 * VECTOR_PASSES_ESTEIG_FUSED * n)
            smoothing = matrix_bytes(A) + 8.0 * VECTOR_PASSES_FUSED * n
        else:  # KSPCG's steps and PCJACOBI's read of the diagonal; KSPCHEBYSHEV's product and passes
            setup += ESTEIG_STEPS * (matmult_bytes(A) + 8.0 * VECTOR_PASSES_ESTEIG * n) + matrix_bytes(A)
            smoothing = matmult_bytes(A) + 8.0 * VECTOR_PASSES_CHEBYSHEV * n
        visits = level_visits(depth, cycle_type, finest_type)
        per_visit = 2 * steps * smoothing + matmult_bytes(A) + 8.0 * n  # the residual: b - A x
        if depth < len(interps):
            per_visit += 2 * matmult_bytes(interps[depth])
            if galerkin_products:
                coarse = ops[depth + 1][0]
                setup += matrix_bytes(A) + matrix_bytes(interps[depth]) + matrix_bytes(coarse)
        cycle += visits * per_visit
    solve = ksp_iterations * cycle
    passes = bisection_steps() if bisection_passes is None else bisection_passes
    update = 8.0 * UPDATE_ARRAYS * n_elements + 8.0 * BISECTION_ARRAYS * passes * n_free
    return {"assembly": assembly, "setup": setup, "solve": solve, "update": update,
            "mg_cg_iteration": cycle}


def bounds(phases, seconds, copy_bytes_per_second):
    """Per phase: bytes, the bound (bytes / copy bandwidth), measured seconds and measured / bound."""
    out = {}
    total_bytes = total_seconds = 0.0
    for name in ("assembly", "setup", "solve", "update"):
        b = phases[name]
        s = seconds.get(name)
        bound = b / copy_bytes_per_second
        out[name] = {"bytes": b, "bound_seconds": bound, "seconds": s,
                     "measured_over_bound": s / bound if s is not None and bound > 0 else None}
        total_bytes += b
        total_seconds += s or 0.0
    bound = total_bytes / copy_bytes_per_second
    total_seconds = seconds.get("iteration", total_seconds)  # the whole iteration, also what no phase holds
    out["iteration"] = {"bytes": total_bytes, "bound_seconds": bound, "seconds": total_seconds,
                        "measured_over_bound": total_seconds / bound if bound > 0 else None}
    return out
