"""From densities to 0/1 designs: binarisation and the swap polish (docs/scoring.md, "Binarising", "Swap polish").

Both act on natural (nely, nelx) arrays that every rank holds; the polish's
compliance evaluations are collective solves on the system, so every rank
takes the same decisions.
"""

import math

import numpy as np

from ..core import discretisation as fe
from ..core.analysis import compliance_of, solid_compliance

MAX_PASSES = 3
MAX_EVALUATIONS = 6000
SOURCE_LIMIT = 16
TARGET_LIMIT = 24
IMPROVEMENT = 1e-12


def binarise(densities, free, target=None):
    """Volume-preserving 0/1 rounding of the free cells (never overspends)."""
    d = np.asarray(densities, dtype=float)
    free = np.asarray(free, dtype=bool)
    binary = np.where(free, (d >= 0.5).astype(float), d)
    if not free.any():
        return binary
    total = d[free].sum() if target is None else target
    n_solid = int(math.floor(total + 1e-9))
    ranked = np.sort(d[free])[::-1]
    if n_solid <= 0:
        threshold = np.inf
    elif n_solid >= ranked.size:
        threshold = -np.inf
    else:
        threshold = ranked[n_solid - 1]
    binary[free] = (d[free] >= threshold).astype(float)
    return binary


def neighbour_energy(energies, solid):
    """Largest energy of any solid cell among each cell's 8 neighbours (0 outside)."""
    padded = np.zeros((energies.shape[0] + 2, energies.shape[1] + 2))
    padded[1:-1, 1:-1] = np.where(solid, energies, 0.0)
    best = np.zeros_like(energies)
    nely, nelx = energies.shape
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            if dr or dc:
                best = np.maximum(best, padded[1 + dr:1 + dr + nely, 1 + dc:1 + dc + nelx])
    return best


def _ranked(mask, scores, limit, descending):
    cells = np.flatnonzero(mask.ravel())
    keys = scores.ravel()[cells]
    order = np.argsort(-keys if descending else keys, kind="stable")
    return cells[order][:limit]


def polish(system, design, free, penal=fe.PENAL, max_passes=MAX_PASSES, max_evaluations=MAX_EVALUATIONS,
           source_limit=SOURCE_LIMIT, target_limit=TARGET_LIMIT, screen=True, solid=None):
    """Best-improvement single-cell material swaps; returns (design, compliance).  ``solid``: the
    all-solid design's compliance at ``penal`` on ``system`` where the caller knows it (solved otherwise).

    Each pass ranks sources and targets, then scans the swaps in order, keeping
    the running best (a swap counts when it beats it by more than 1e-12).  On a
    serial direct solver the scan is screened with low-rank updates of the
    pass's factorisation (:class:`_SwapScreen`): a swap whose estimate cannot
    beat the running best is skipped, every other one is solved in full, so the
    swaps chosen and the compliances returned are those of the plain scan.
    """
    design = np.array(design, dtype=float).reshape(system.loadcase.shape)
    free = np.asarray(free, dtype=bool)
    evaluations = 0
    screened = screen and getattr(system, "solver", None) == "direct" and getattr(system, "in_place", False)
    if screened:
        # Low-rank estimates are only trusted on a design that carries its load
        # (see discretisation.SINGULARITY_RATIO); a near-mechanism is scanned in full.
        trust_below = fe.SINGULARITY_RATIO * (solid_compliance(system, penal) if solid is None else solid)
    best = None
    for _ in range(max_passes):
        # The pass's factorisation and displacements are the current design's (the screen and the
        # energies read them); the first pass's compliance is also where the scan starts.
        current = compliance_of(system, design, penal)
        if best is None:
            best = current
        energies = system.gather(system.unit_energies())
        solid = design > 0.5
        sources = _ranked(solid & free, energies, source_limit, descending=False)
        targets = _ranked(~solid & free, neighbour_energy(energies, solid), target_limit, descending=True)
        if sources.size == 0 or targets.size == 0:
            break
        estimate = None
        if screened and current <= trust_below:
            estimate = _SwapScreen(system, design, current, sources, targets, penal).estimates
        best_swap = None
        flat = design.ravel()
        for i, source in enumerate(sources):
            for j, target in enumerate(targets):
                if evaluations >= max_evaluations:
                    break
                evaluations += 1
                if estimate is not None and estimate[i, j] >= best - IMPROVEMENT + SCREEN_MARGIN * (
                        abs(best) + abs(estimate[i, j] - current)):
                    continue  # cannot beat the running best: the full solve would say the same
                candidate = flat.copy()
                candidate[source] = 0.0
                candidate[target] = 1.0
                c = compliance_of(system, candidate.reshape(design.shape), penal)
                if c < best - IMPROVEMENT:
                    best = c
                    best_swap = (source, target)
            if evaluations >= max_evaluations:
                break
        if best_swap is None:
            break
        flat = flat.copy()
        flat[best_swap[0]] = 0.0
        flat[best_swap[1]] = 1.0
        design = flat.reshape(design.shape)
    if best is None:  # no pass at all
        best = compliance_of(system, design, penal)
    return design, best


# Error allowed to a screening estimate, relative to |best| + |estimate - current|.
# A target cell amid void has nodes held by Emin = 1e-9 stiffness, which costs the
# update ~9 digits: the worst error measured on the v1 full_easy answers was 6e-9.
SCREEN_MARGIN = 1e-6


class _SwapScreen:
    """Compliance of every (source, target) swap by a Woodbury update of K(design).

    The unit element matrix is V diag(w) V^T (its 5 non-rigid modes), so a swap
    changes K by W D W^T with W the two cells' modes scattered to their free
    DOFs (10 columns) and D their modulus changes times w.  With Z = K^{-1} W
    (solved once per cell with the pass's factorisation) and y = W^T u:
    c' = c - y^T (D^{-1} + W^T Z)^{-1} y, for all swaps at once.
    """

    def __init__(self, system, design, compliance, sources, targets, penal):
        lc = system.loadcase
        w, v = np.linalg.eigh(system.ke)
        keep = w > 1e-10 * w.max()
        w, v = w[keep], v[:, keep]
        k = w.size
        cells = np.concatenate([sources, targets])
        edofs = fe.nodes_to_dofs(fe.element_nodes(*lc.shape))[cells]
        fixed = np.zeros(lc.n_dofs, dtype=bool)
        fixed[lc.fixed_dofs()] = True
        W = np.zeros((lc.n_dofs, cells.size * k))
        for n, dofs in enumerate(edofs):
            W[dofs, n * k:(n + 1) * k] = v
        W[fixed] = 0.0
        Z = system.factor_solve(W)
        # W's rows are zero outside the swapped cells' DOFs: W^T Z and W^T u from those rows only.
        touched = np.unique(edofs)
        G = W[touched].T @ Z[touched]
        y = W[touched].T @ system.natural_displacements()[touched]
        rho = design.ravel()[cells]
        delta = fe.simp_modulus(1.0 - rho, penal) - fe.simp_modulus(rho, penal)  # 1 -> 0 and 0 -> 1
        d_inv = (1.0 / (delta[:, None] * w[None, :])).ravel()
        blocks = np.arange(cells.size * k).reshape(cells.size, k)
        ns, nt = sources.size, targets.size
        idx = np.concatenate([np.repeat(blocks[:ns], nt, axis=0), np.tile(blocks[ns:], (ns, 1))], axis=1)
        M = G[idx[:, :, None], idx[:, None, :]]
        M[:, np.arange(2 * k), np.arange(2 * k)] += d_inv[idx]
        yy = y[idx]
        correction = np.einsum("pi,pi->p", yy, np.linalg.solve(M, yy[:, :, None])[:, :, 0])
        self.estimates = (compliance - correction).reshape(ns, nt)
