"""From densities to 0/1 designs: binarisation (SPEC 6) and the swap polish (SPEC 7).

Both act on natural (nely, nelx) arrays that every rank holds; the polish's
compliance evaluations are collective solves on the system, so every rank
takes the same decisions.
"""

import math

import numpy as np

from .. import discretisation as fe
from ..analysis import compliance_of

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
           source_limit=SOURCE_LIMIT, target_limit=TARGET_LIMIT):
    """Best-improvement single-cell material swaps; returns (design, compliance)."""
    design = np.array(design, dtype=float).reshape(system.loadcase.shape)
    free = np.asarray(free, dtype=bool)
    best = compliance_of(system, design, penal)
    evaluations = 0
    for _ in range(max_passes):
        compliance_of(system, design, penal)
        energies = system.gather(system.unit_energies())
        solid = design > 0.5
        sources = _ranked(solid & free, energies, source_limit, descending=False)
        targets = _ranked(~solid & free, neighbour_energy(energies, solid), target_limit, descending=True)
        if sources.size == 0 or targets.size == 0:
            break
        best_swap = None
        flat = design.ravel()
        for source in sources:
            for target in targets:
                if evaluations >= max_evaluations:
                    break
                candidate = flat.copy()
                candidate[source] = 0.0
                candidate[target] = 1.0
                c = compliance_of(system, candidate.reshape(design.shape), penal)
                evaluations += 1
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
    return design, best
