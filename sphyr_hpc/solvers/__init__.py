"""PETSc solvers of the linear-elastic system of a load case on a DMDA (:mod:`.elasticity` chooses one)."""
