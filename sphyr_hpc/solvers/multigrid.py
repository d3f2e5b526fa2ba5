"""CG + geometric multigrid on the DMDA hierarchy for large systems.

Defaults (all overridable under the system's options prefix): CG, PCMG with
Galerkin coarse operators built from the DMDA's interpolation, Chebyshev/Jacobi
smoothing, LU on the coarsest level (Redundant on several ranks).  The number
of levels is the largest that keeps the coarsest grid at least 2 elements wide
and every level an exact coarsening (the element counts divisible by
2^(levels-1)), capped at 8.
"""

MAX_LEVELS = 8
RTOL = 1e-8


def mg_levels(nelx, nely, max_levels=MAX_LEVELS):
    """Number of multigrid levels a nelx x nely element grid supports."""
    levels = 1
    while levels < max_levels:
        factor = 2**levels
        if nelx % factor or nely % factor or nelx // factor < 2 or nely // factor < 2:
            break
        levels += 1
    return levels


def configure_mg(ksp, system):
    """Set CG + PCMG on ``ksp``; returns the option defaults to apply before setFromOptions."""
    PETSc = system.PETSc
    nely, nelx = system.loadcase.shape
    ksp.setType(PETSc.KSP.Type.CG)
    ksp.setTolerances(rtol=RTOL, max_it=2000)
    ksp.setDM(system.da)
    ksp.setDMActive(False)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    pc = ksp.getPC()
    pc.setType(PETSc.PC.Type.MG)
    levels = mg_levels(nelx, nely)
    defaults = {
        "pc_mg_levels": levels,
        "pc_mg_galerkin": "both",
        "mg_levels_ksp_type": "chebyshev",
        "mg_levels_pc_type": "jacobi",
        "mg_levels_ksp_max_it": 2,
        "mg_coarse_ksp_type": "preonly",
        "mg_coarse_pc_type": "lu" if system.comm.getSize() == 1 else "redundant",
    }
    return defaults


def set_default_options(prefix, defaults):
    """Put ``defaults`` into the options database where the user has not.

    Returns the keys added, for :func:`clear_default_options` to remove once
    ``setFromOptions`` has read them, so they do not leak to later solvers.
    """
    opts = system_options(prefix)
    added = [key for key in defaults if not opts.hasName(key)]
    for key in added:
        opts.setValue(key, defaults[key])
    return added


def clear_default_options(prefix, added):
    opts = system_options(prefix)
    for key in added:
        opts.delValue(key)


def system_options(prefix):
    from .._petsc import petsc

    return petsc().Options(prefix)
