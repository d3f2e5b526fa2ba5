"""Checkpoints of a SIMP run and its resumption: what the loop of ``run_simp`` saves and restores.

:class:`RunCheckpoint` is handed to :func:`~sphyr_hpc.optimiser.simp.run_simp` (``checkpoint=``)
by the driver.  After every iteration the loop calls :meth:`RunCheckpoint.after_iteration`, which
writes a checkpoint (:mod:`sphyr_hpc.io.checkpoint`) every ``every`` iterations, after the last
one, and when SIGTERM or SIGINT has arrived on any rank: the driver runs the loop inside
:func:`~sphyr_hpc.runtime.process.signals_deferred`, so a signal waits for the end of the
iteration, every rank learns of it at once (:func:`~sphyr_hpc.runtime.process.agreed_interrupt`),
the checkpoint is written, and :class:`~sphyr_hpc.runtime.process.Interrupted` then takes the
command's one interrupt path.

What a checkpoint holds is everything the next iteration reads: the design and its physical
densities, the optimiser's own state (:meth:`~sphyr_hpc.optimiser.update.Update.state`: nothing for
OC, the asymptotes, the two previous designs and the last multiplier for MMA), the solver's warm
start (the last two solutions an iterative solve extrapolates from), the iteration (the
continuation's penalty follows from it) and the history.  A resumed run therefore takes the very
same steps as the uninterrupted one: on the same number of ranks the same designs bit for bit; on
another the ranks' sums differ by rounding.
"""

from dataclasses import dataclass, field

from ..io import checkpoint
from ..runtime.process import agreed_interrupt, raise_agreed_interrupt

DEFAULT_EVERY = 10


@dataclass
class CheckpointSettings:
    """``--checkpoint DIR``: where, how often, the settings a resume must share, and the record read
    back (None: a new run)."""

    directory: str
    every: int = DEFAULT_EVERY
    settings: dict = field(default_factory=dict)
    record: dict = None


class RunCheckpoint:
    """The checkpoint hooks of one run on ``system`` (collective; see the module's docstring)."""

    def __init__(self, options, system, iteration_log, writer=None, log=None):
        self.options, self.system, self.iteration_log = options, system, iteration_log
        self.writer, self.log = writer, log or (lambda line: None)
        self.PETSc = system.PETSc
        self.mpi = system.comm.tompi4py()

    # -- the record's JSON part ---------------------------------------------------------------------
    def _record(self, iteration, converged, update, scalars, solutions):
        return {"settings": self.options.settings, "optimizer": update.name, "optimizer_scalars": scalars,
                "penal": self.iteration_log.history[-1]["penal"], "converged": bool(converged),  # (saved after one)
                "solver_solutions": int(solutions), "history": self.iteration_log.history,
                "fields_steps": self.writer.steps if self.writer is not None else None}

    def _element_vectors(self, arrays):
        """``{name: Vec}`` on the element DMDA holding the slabs ``arrays`` (``{name: slab}``)."""
        vectors = {}
        for name, slab in arrays.items():
            vec = self.system.da_elem.createGlobalVec()
            vec.array[:] = slab
            vectors[name] = vec
        return vectors

    # -- the hooks ------------------------------------------------------------------------------------
    def restore(self, design, physical, update, history):
        """``(design, physical, iteration, converged, history)`` to start the loop from: a resumed run's
        as saved, with the optimiser's and the solver's state put back; a new run's as given."""
        record = self.options.record
        if record is None:
            return design, physical, 0, False, history
        if record.get("optimizer", "oc") != update.name:
            raise checkpoint.CheckpointError(f"{checkpoint.record_path(self.options.directory)}: a run of the "
                                             f"update {record.get('optimizer')}, not {update.name}")
        names = ["design", "physical"] + [name for name in record.get("vectors", ()) if name.startswith("optimizer_")]
        elements = self._element_vectors({name: design for name in names})
        solutions, warm = self.system.warm_state()
        try:
            checkpoint.load(self.options.directory, record, self.system.comm, self.PETSc, {**elements, **warm})
            arrays = {name: vec.array_r.copy() for name, vec in elements.items()}
        finally:
            for vec in elements.values():
                vec.destroy()
        self.system.load_warm_state(record["solver_solutions"])
        update.load_state({name[len("optimizer_"):]: arrays[name] for name in names[2:]},
                          record.get("optimizer_scalars") or {})
        self.iteration_log.resume(record["history"])
        history = [(row["iteration"], row["compliance"], row["change"]) for row in record["history"]]
        self.log(f"resumed from {checkpoint.record_path(self.options.directory)}: iteration {record['iteration']}, "
                 f"penalty {record['penal']:g}")
        return arrays["design"], arrays["physical"], int(record["iteration"]), bool(record["converged"]), history

    def after_iteration(self, iteration, design, physical, update, converged, last):
        """Write the checkpoint when it is due (at the end: ``converged`` or ``last``, the iteration
        limit), or when an interrupt has arrived (then raise it)."""
        signum = agreed_interrupt(self.mpi)
        if not (signum or converged or last or iteration % self.options.every == 0):
            return
        self.save(iteration, design, physical, update, converged=converged)
        raise_agreed_interrupt(signum)

    def save(self, iteration, design, physical, update, converged=False):
        arrays, scalars = update.state()
        solutions, warm = self.system.warm_state()
        elements = self._element_vectors({"design": design, "physical": physical,
                                          **{f"optimizer_{name}": value for name, value in arrays.items()}})
        try:
            checkpoint.save(self.options.directory, self.system.comm, self.PETSc, iteration, {**elements, **warm},
                       self._record(iteration, converged, update, scalars, solutions))
        finally:
            for vec in elements.values():
                vec.destroy()
        self.log(f"checkpoint: iteration {iteration} -> {checkpoint.record_path(self.options.directory)}")
