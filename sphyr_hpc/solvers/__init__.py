"""PETSc solvers: the linear-elastic system of a load case on a DMDA."""

from .elasticity import ElasticitySystem, SolverError  # noqa: F401
