"""sphyr_hpc: the SPhyR structural scorer and SIMP topology optimisation on PETSc/MPI.

Layers, each importing only those below it (``tests/tools/import_cycles.py`` checks it):
:mod:`~sphyr_hpc.runtime` (PETSc and its options, MPI tasks, progress, exit statuses) ->
:mod:`~sphyr_hpc.core` (grids, load cases, discretisation, analysis, metric formulas) ->
:mod:`~sphyr_hpc.solvers` -> :mod:`~sphyr_hpc.io` (files only) -> :mod:`~sphyr_hpc.optimiser` ->
:mod:`~sphyr_hpc.scoring` -> :mod:`~sphyr_hpc.reporting` -> :mod:`~sphyr_hpc.jobs` (what a command
runs) -> this top level: the API (:mod:`~sphyr_hpc.api`), one thin module per command
(``python -m sphyr_hpc`` lists them) and :mod:`~sphyr_hpc.cli`, the runner they share.
PETSc is imported through :func:`sphyr_hpc.runtime.petsc.petsc`.

The published scorer's Python interface (:mod:`~sphyr_hpc.api`) is importable from
here: ``from sphyr_hpc import get_structural_metrics, clear_reference_cache,
StructuralMetrics`` (and ``score_records``; ``prompt_of(record, subject)``, the prompt a model
is shown).  It is loaded on first use, so
``import sphyr_hpc`` starts neither MPI nor PETSc, and neither it nor the API changes the process's
environment: the BLAS thread and MPI settings a command runs with are its own
(:func:`sphyr_hpc.runtime.process.command_environment`).
"""

from .runtime.process import PROCESS_STARTED  # noqa: F401  (when sphyr_hpc was first imported)

__version__ = "0.1.0"

_API = ("get_structural_metrics", "clear_reference_cache", "StructuralMetrics", "score_records",
        "ScoredRecord", "reference_cache_info", "REFERENCE_CACHE_SIZE", "STRUCTURAL_METRIC_KEYS", "prompt_of")


def __getattr__(name):  # PEP 562: the API module is imported when one of its names is first asked for
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_API))
