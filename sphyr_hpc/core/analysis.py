"""Analysis of one design under its load case (docs/scoring.md, "Analysis").

Physical measurements only, no reference answer: compliance, whether the
design carries its load, volume fraction and the largest displacement.
"""

import math
from dataclasses import dataclass

import numpy as np

from . import discretisation as fe


@dataclass(frozen=True)
class Analysis:
    compliance: float
    volume_fraction: float
    max_displacement: float
    load_carrying: bool
    solid_compliance: float


def compliance_of(system, rho, penal=fe.PENAL):
    """Compliance of a natural density array on ``system`` (collective)."""
    return system.solve(system.slab_of(fe.simp_modulus(rho, penal)))


def clipped_volume_fraction(rho):
    """``(densities clipped to [0, 1], their volume fraction)``, as :func:`analyse` reports it."""
    rho = fe.clip(np.asarray(rho, dtype=float), 0.0, 1.0)
    return rho, float(rho.sum()) / rho.size  # rho.mean(): the same sum, divided the same way


def analyse(system, rho, solid_compliance, penal=fe.PENAL):
    """Solve the load case for the natural density array ``rho``."""
    rho, volume_fraction = clipped_volume_fraction(rho)
    compliance = compliance_of(system, rho, penal)
    carrying = bool(
        math.isfinite(compliance)  # Python or NumPy floats: math's test, without NumPy's ufunc call
        and math.isfinite(solid_compliance)
        and compliance <= fe.SINGULARITY_RATIO * solid_compliance
    )
    return Analysis(
        compliance=float(compliance),
        volume_fraction=volume_fraction,
        max_displacement=system.max_displacement(),
        load_carrying=carrying,
        solid_compliance=float(solid_compliance),
    )


def solid_compliance(system, penal=fe.PENAL):
    """Compliance of the all-solid design: the stiffest possible (a solve: keep it where it is reused)."""
    return compliance_of(system, np.ones(system.loadcase.shape), penal)
