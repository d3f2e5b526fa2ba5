"""The process underneath every layer: PETSc and its options, MPI task distribution, progress,
log events, the bounded cache, exit statuses and interrupts.  Imports numpy, petsc4py and mpi4py only."""
