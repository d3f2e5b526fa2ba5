"""The design update of a SIMP run: one interface for every way a run steps its design.

:func:`~sphyr_hpc.optimiser.simp.run_simp` makes one :class:`Update` before its loop, by the name
its settings give (:func:`~sphyr_hpc.optimiser.simp.make_update`): ``"oc"`` (optimality criteria,
:mod:`sphyr_hpc.optimiser.simp`), ``"oc88"`` (the 88-line code's OC, its filter and stopping rule)
or ``"mma"`` (the method of moving asymptotes, :mod:`sphyr_hpc.optimiser.mma`).  Every iteration
it calls :meth:`Update.step` with the design, its physical densities and the unit energies of the
iteration's solve, and stops when :meth:`Update.stops` says so at the final penalty.  A checkpoint
saves :meth:`Update.state` and a resumed run puts it back with :meth:`Update.load_state`.
"""

import abc
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class UpdateContext:
    """What an update works on, fixed for a run: this rank's slabs and the collective sums' communicator.

    ``dv``: the filtered volume sensitivity ``H^T (free / Hs)``; ``is_free``: the design variables;
    ``pinned``: every other cell's density; ``target``: the volume (in cells) the run ends at.
    """

    mpi: object
    dv: np.ndarray
    is_free: np.ndarray
    pinned: np.ndarray
    density_filter: object
    target: float
    move_limit: float

    @property
    def free_s(self):
        """The chain rule's 0/1 weights: ``is_free`` itself (a product with a boolean is the product with
        1.0 or 0.0; a float copy was one more slab-sized array at the run's peak memory)."""
        return self.is_free


class Update(abc.ABC):
    """One way of stepping a SIMP run's design (see the module's docstring)."""

    name = None  # the settings' name of this update: "oc", "oc88" or "mma"

    def __init__(self, context):
        self.context = context

    @abc.abstractmethod
    def step(self, design, physical, energies, p):
        """``(new design, new physical densities, largest change of a free cell over the ranks)`` from
        this iteration's unit energies at penalty ``p`` (collective)."""

    def stops(self, change, tolerance):
        """Whether a run at its final penalty has converged after a step that changed a cell by ``change``."""
        return change < tolerance

    def state(self):
        """``(arrays, scalars)`` a checkpoint saves: slabs, and JSON-able numbers.  Nothing by default
        (a step that depends on the design and the sensitivities only)."""
        return {}, {}

    def load_state(self, arrays, scalars):
        """A resumed run: put back what :meth:`state` saved."""
