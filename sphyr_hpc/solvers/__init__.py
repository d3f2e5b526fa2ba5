"""PETSc solvers: the linear-elastic system of a load case on a DMDA."""

from .elasticity import ElasticitySystem, PartitionError, SolverError  # noqa: F401
