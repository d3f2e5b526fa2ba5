"""Checkpoints of an optimisation run: a folder that ``optimize --resume`` continues from.

A checkpoint folder holds two kinds of file:

* ``state_<iteration>.h5``: the run's fields at the end of one iteration (the design, its physical
  densities, the optimiser's arrays, the solver's warm start), each a PETSc Vec on a DMDA written
  by PETSc's HDF5 viewer.  The viewer stores a DMDA's vector in natural order (the grid's rows
  and columns, not the ranks' slabs), so any number of ranks reads it back.
* ``checkpoint.json``: which state file is current, and everything that is not a field: the
  iteration, the penalty, the optimiser's scalars, the history so far, the fields file's steps
  and the settings the run was started with (``--resume`` refuses other settings).

A checkpoint is written in that order: the state file under a temporary name, renamed once
complete, then ``checkpoint.json`` replaced atomically (:mod:`sphyr_hpc.io.atomic`), then the
older state files removed.  ``checkpoint.json`` is the commit: a run killed at any moment
(``kill -9``, a node failure) leaves the previous checkpoint whole.
"""

import json
import os
from pathlib import Path

from .atomic import write_json_atomic

FORMAT = 1
RECORD_NAME = "checkpoint.json"
STATE_PREFIX = "state_"


class CheckpointError(Exception):
    """A checkpoint folder that cannot be resumed (unreadable, another format, other settings)."""


def record_path(directory):
    return Path(directory) / RECORD_NAME


def read_record(directory):
    """The folder's ``checkpoint.json`` as a dict, or None when the folder holds no checkpoint.

    Light (no MPI, no PETSc): the command checks a ``--resume`` with it before any work."""
    path = record_path(directory)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path}: not a readable checkpoint ({err})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT or "state" not in record:
        raise CheckpointError(f"{path}: not a checkpoint of this version (format {FORMAT} expected)")
    if not (Path(directory) / record["state"]).exists():
        raise CheckpointError(f"{path}: its state file {record['state']} is missing")
    return record


def differences(saved, settings):
    """The names of the settings that differ between a checkpoint's and this run's."""
    saved = json.loads(json.dumps(saved))  # both as JSON gives them: tuples are lists
    settings = json.loads(json.dumps(settings))
    return sorted(key for key in set(saved) | set(settings) if saved.get(key) != settings.get(key))


def _through_viewer(PETSc, path, mode, comm, vectors, action):
    """Each of ``vectors`` named by its key and, in key order, written (``action`` "view", ``mode``
    "w") or read ("load", "r") through one HDF5 viewer of ``path`` (collective)."""
    viewer = PETSc.Viewer().createHDF5(str(path), mode, comm=comm)
    try:
        for key in sorted(vectors):
            vectors[key].setName(key)
            getattr(vectors[key], action)(viewer)
    finally:
        viewer.destroy()


def save(directory, comm, PETSc, iteration, vectors, record):
    """Write one checkpoint (collective on the PETSc communicator ``comm``).

    ``vectors``: ``{name: Vec}``, each a global vector of a DMDA; ``record``: the JSON-able rest.
    """
    directory = Path(directory)
    mpi = comm.tompi4py()
    name = f"{STATE_PREFIX}{int(iteration):06d}.h5"
    temporary = directory / f".{name}.tmp"
    if mpi.rank == 0:
        directory.mkdir(parents=True, exist_ok=True)
    mpi.Barrier()
    _through_viewer(PETSc, temporary, "w", comm, vectors, "view")
    mpi.Barrier()
    error = None
    if mpi.rank == 0:
        try:
            with open(temporary, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(temporary, directory / name)
            write_json_atomic(record_path(directory), {**record, "format": FORMAT, "state": name,
                                                       "iteration": int(iteration), "vectors": sorted(vectors)})
            for old in directory.glob(f"{STATE_PREFIX}*.h5"):
                if old.name != name:
                    old.unlink()
        except OSError as err:
            error = err
    error = mpi.bcast(error, root=0)
    if error is not None:
        raise error


def load(directory, record, comm, PETSc, vectors):
    """Read the checkpoint's fields into ``vectors`` (``{name: Vec}`` of the right DMDAs; collective)."""
    missing = sorted(set(vectors) - set(record.get("vectors", ())))
    if missing:
        raise CheckpointError(f"{record_path(directory)}: no {', '.join(missing)} in {record['state']}")
    _through_viewer(PETSc, Path(directory) / record["state"], "r", comm, vectors, "load")
