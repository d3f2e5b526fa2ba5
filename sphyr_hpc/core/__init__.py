"""Grids (text -> cells), load cases, the Q4/SIMP discretisation, the analysis of one design and
the metric formulas.  Imports :mod:`sphyr_hpc.runtime` only."""
