"""Yardsticks kept across runs: what keys an entry, what it holds, and how a scorer uses the store.

A sample's yardstick (docs/scoring.md, "Yardstick") depends only on the
sample and the optimiser, so it is computed once, ever, per store
(docs/store.md):

* key: :func:`yardstick_digest`, the SHA-256 of everything that determines the
  yardstick: :data:`~sphyr_hpc.optimiser.yardstick.YARDSTICK_ALGORITHM_VERSION`,
  the load case (shape, load and support cells, gravity: the ground truth's
  structure), the masked cells, the pinned densities and the seeds (the ground
  truth's cells, rounded as the in-memory cache rounds them:
  :class:`~sphyr_hpc.optimiser.yardstick.YardstickKey`), the volume fraction,
  penalty, filter radius, penalty schedule, SIMP iteration limit and
  tolerance, the SIMP solver (direct or multigrid) and any ``-sphyr_`` PETSc
  option given;
* entry: the optimum's exact float64 densities and compliance (a record's
  ``optimal_compliance``, its ratios and its optimum grid are computed from
  these and nothing else, so a stored yardstick gives byte-identical records),
  the candidate count and polish flag, the inputs (so ``python -m
  sphyr_hpc.store check`` can recompute it), and its provenance (package and
  algorithm version, the dataset it was first computed for, when); and the
  sample's reference analysis (``reference``: the ground truth's compliance,
  volume fraction, largest displacement, solid compliance and load-carrying
  flag, exact float64 as hex, :func:`reference_fields`), so a run that reads
  the entry solves nothing for the sample.  It is tied to the exact ground
  truth by a fingerprint (:func:`reference_fingerprint`: the key rounds the
  densities) and only a score run writes it: an entry without it (or of other
  inputs) still serves its yardstick, and the run analyses the ground truth
  and adds it;
* use: :class:`StoredYardsticks` wraps a yardstick's computation: read the
  entry (validated; a damaged, truncated or foreign one is recomputed and
  replaced, with one warning line per process), else compute and write it,
  counting which was which for run.json and the report;
  :meth:`StoredYardsticks.reference` reads yardstick and reference analysis
  together.
"""

import functools
import hashlib
import json
import math
import sys
import time

import numpy as np

from ..core.analysis import Analysis
from ..io.yardstick_store import DamagedEntry, encode
from ..optimiser import simp
from ..optimiser.yardstick import PENAL_SCHEDULE, YARDSTICK_ALGORITHM_VERSION, YardstickResult
from ..solvers.condensed import ANALYSIS_MAX_DOFS
from ..solvers.sizing import simp_solver

# PETSc options under these prefixes change a yardstick's solves: part of its key when given.
SOLVER_OPTION_PREFIX = "sphyr_"
# ``check``: a recomputed compliance agrees with the stored one within the parity rule's relative
# tolerance (docs/scoring.md, "Parity": 1e-6 x max(1, c / c_gt), and a yardstick is never above c_gt).
CHECK_RELATIVE_TOLERANCE = 1e-6
# The reference analysis's floats, kept exactly (float.hex); its ``load_carrying`` is kept as a bool.
REFERENCE_FLOATS = ("compliance", "volume_fraction", "max_displacement", "solid_compliance")


@functools.lru_cache(maxsize=1)
def package_version():
    from importlib import metadata

    try:
        return metadata.version("sphyr_hpc")
    except metadata.PackageNotFoundError:
        return "unknown"


def solver_options():
    """The ``-sphyr_*`` PETSc options in the database now, sorted ``[[name, value], ...]`` (usually none)."""
    from ..runtime.petsc import petsc

    found = petsc().Options().getAll()
    return sorted([name, str(value)] for name, value in found.items() if name.startswith(SOLVER_OPTION_PREFIX))


def _loadcase_fields(lc):
    return {"nely": int(lc.nely), "nelx": int(lc.nelx), "load_cells": [list(map(int, c)) for c in lc.load_cells],
            "support_cells": [list(map(int, c)) for c in lc.support_cells],
            "gravity": [float(g) for g in lc.gravity], "total_load": float(lc.total_load),
            "extra_fixed_dofs": [int(d) for d in lc.extra_fixed_dofs],
            **({"nodal_forces": [[int(d), float(f)] for d, f in lc.nodal_forces]} if lc.nodal_forces else {})}


def _parameters(key, mg_min_dofs, options):
    lc = key.loadcase
    return {"algorithm": YARDSTICK_ALGORITHM_VERSION, "loadcase": _loadcase_fields(lc),
            "volume_fraction": key.volume_fraction, "penal": key.penal, "radius": key.radius,
            "schedule": list(PENAL_SCHEDULE), "max_iterations": simp.MAX_ITERATIONS, "tolerance": simp.TOLERANCE,
            "simp_solver": simp_solver(lc.n_dofs, mg_min_dofs), "petsc_options": options,
            "seeds": len(key.seeds)}


def yardstick_digest(key, mg_min_dofs, options=()):
    """The store key of the yardstick of ``key`` (a :class:`~sphyr_hpc.optimiser.yardstick.YardstickKey`):
    64 hex digits."""
    digest = hashlib.sha256(json.dumps(_parameters(key, mg_min_dofs, list(options)), sort_keys=True,
                                       separators=(",", ":")).encode("utf-8"))
    for part in (key.free, key.pinned) + tuple(key.seeds):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def reference_fingerprint(truth, free, solver_prefix):
    """What a sample's reference analysis depends on besides its entry's key (32 hex digits): the
    ground truth's exact densities (the key rounds them to 1e-6), the free cells, the condensed
    analysis's size limit and the solvers' options prefix."""
    digest = hashlib.blake2b(json.dumps([ANALYSIS_MAX_DOFS, solver_prefix]).encode("utf-8"), digest_size=16)
    for part in (np.asarray(truth, dtype=np.float64), np.asarray(free, dtype=bool)):
        digest.update(repr(part.shape).encode("ascii"))
        digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()


def reference_fields(fingerprint, analysis):
    """The ``reference`` an entry's header keeps of ``analysis`` (an :class:`~sphyr_hpc.core.analysis.Analysis`)."""
    fields = {name: float(getattr(analysis, name)).hex() for name in REFERENCE_FLOATS}
    return dict(fields, fingerprint=fingerprint, load_carrying=bool(analysis.load_carrying))


def analysis_of(header, fingerprint):
    """The reference :class:`~sphyr_hpc.core.analysis.Analysis` an entry holds for ``fingerprint``; None
    when it holds none or one of other inputs; :class:`DamagedEntry` when it cannot be read."""
    kept = header.get("reference")
    if kept is None or (isinstance(kept, dict) and kept.get("fingerprint") != fingerprint):
        return None
    try:
        values = {name: float.fromhex(kept[name]) for name in REFERENCE_FLOATS}
        if not isinstance(kept["load_carrying"], bool):
            raise TypeError("load_carrying is not a bool")
        return Analysis(load_carrying=kept["load_carrying"], **values)
    except (KeyError, TypeError, ValueError) as err:
        raise DamagedEntry(f"unreadable reference analysis ({err!r})") from None


def with_reference(header, arrays, reference):
    """The bytes of an entry read (``header``, ``arrays``) with ``reference`` (``(fingerprint, analysis)``) added."""
    header = {name: value for name, value in header.items() if name != "arrays"}
    header["reference"] = reference_fields(*reference)
    return encode(header, arrays)


def entry_bytes(digest, result, inputs, mg_min_dofs, options, dataset, reference=None):
    """The encoded entry of ``result`` (a :class:`YardstickResult`) computed from ``inputs``
    (``(loadcase, free, pinned, volume_fraction, seeds, penal, radius)``, as given to the optimiser),
    with ``reference`` (``(fingerprint, analysis)``) when given."""
    lc, free, pinned, vf, seeds, penal, radius = inputs
    header = {"key": digest, "algorithm": YARDSTICK_ALGORITHM_VERSION, "package": package_version(),
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "dataset": dataset or "",
              "loadcase": _loadcase_fields(lc), "volume_fraction": float(vf), "penal": float(penal),
              "radius": float(radius), "mg_min_dofs": mg_min_dofs, "petsc_options": list(options),
              "compliance": float(result.compliance).hex(), "candidates": int(result.candidates),
              "polished": bool(result.polished)}
    if reference is not None:
        header["reference"] = reference_fields(*reference)
    arrays = {"densities": np.asarray(result.densities, dtype=np.float64),
              "free": np.asarray(free, dtype=bool), "pinned": np.asarray(pinned, dtype=np.float64),
              "seeds": np.asarray([np.asarray(s, dtype=np.float64).reshape(lc.shape) for s in seeds],
                                  dtype=np.float64).reshape((len(seeds),) + tuple(lc.shape))}
    return encode(header, arrays)


def result_of(header, arrays):
    """The :class:`YardstickResult` an entry holds (:class:`DamagedEntry` if it is not one)."""
    try:
        shape = (int(header["loadcase"]["nely"]), int(header["loadcase"]["nelx"]))
        densities = arrays["densities"]
        if densities.dtype != np.float64 or densities.shape != shape:
            raise DamagedEntry(f"design of shape {densities.shape}, the load case is {shape}")
        return YardstickResult(densities, float.fromhex(header["compliance"]), int(header["candidates"]),
                               bool(header["polished"]))
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, DamagedEntry):
            raise
        raise DamagedEntry(f"incomplete entry ({err!r})") from None


def inputs_of(header, arrays):
    """``(loadcase, free, pinned, volume_fraction, seeds, penal, radius, mg_min_dofs)`` an entry was computed from."""
    from ..core.loadcase import LoadCase

    lc = header["loadcase"]
    loadcase = LoadCase(lc["nely"], lc["nelx"], tuple(map(tuple, lc["load_cells"])),
                        tuple(map(tuple, lc["support_cells"])), tuple(lc["gravity"]), lc["total_load"],
                        tuple(lc["extra_fixed_dofs"]), tuple(map(tuple, lc.get("nodal_forces", ()))))
    return (loadcase, arrays["free"], arrays["pinned"], header["volume_fraction"], tuple(arrays["seeds"]),
            header["penal"], header["radius"], header["mg_min_dofs"])


class StoredYardsticks:
    """A scorer's way to its yardsticks: through ``store`` (a YardstickStore, or None: computed only).

    :meth:`get` reads or computes one; ``from_store``, ``computed`` and
    ``replaced`` (damaged or foreign entries recomputed) count what happened.
    ``dataset`` labels the entries written (provenance: ``store list`` shows it).
    A problem with the store (an entry replaced, a store that cannot be written)
    is one warning line on stderr for the first one; ``warn=False`` keeps it in
    ``warning`` instead, for a job that prints one line for all its ranks
    (:func:`merged`).
    """

    def __init__(self, store=None, dataset="", warn=True):
        self.store = store
        self.dataset = dataset
        self.warn = warn
        self.from_store = self.computed = self.replaced = 0
        # Distinct completions whose metrics came from the store's tables and were computed
        # (scoring/scored_store.py).
        self.scored_from_store = self.scored_computed = 0
        self.warning = None
        self._writable = True

    def counts(self):
        return {"from_store": self.from_store, "computed": self.computed, "replaced": self.replaced}

    def scored_counts(self):
        return {"from_store": self.scored_from_store, "computed": self.scored_computed}

    def _warn(self, message):
        if self.warning is None:  # the first: later ones are counted (run.json), not printed
            self.warning = f"warning: yardstick store {self.store.root}: {message}"
            if self.warn:
                print(self.warning, file=sys.stderr, flush=True)

    def digest(self, key, mg_min_dofs):
        return yardstick_digest(key, mg_min_dofs, solver_options())

    def has(self, key, mg_min_dofs):
        """True when the store holds an entry of ``key`` (not read: :meth:`get` validates it)."""
        return self.store is not None and self.store.path_of(self.digest(key, mg_min_dofs)).is_file()

    def get(self, key, inputs, mg_min_dofs, compute, reference=None):
        """The yardstick of ``key``: the stored one when it can be trusted, else ``compute()`` (kept).

        ``inputs``: ``(loadcase, free, pinned, volume_fraction, seeds, penal, radius)`` given to the optimiser.
        ``reference``: ``(fingerprint, analysis)`` of the sample's ground truth (:func:`reference_fingerprint`),
        kept in the entry: written with a computed yardstick, added to a stored entry without it.
        """
        if self.store is None:
            self.computed += 1
            return compute()
        options = solver_options()
        digest = yardstick_digest(key, mg_min_dofs, options)
        try:
            entry = self.store.read(digest, YARDSTICK_ALGORITHM_VERSION)
            if entry is not None:
                result = result_of(*entry)
                complete = reference is None or analysis_of(entry[0], reference[0]) is not None
                self.from_store += 1
                if not complete:
                    self._write(digest, lambda: with_reference(*entry, reference))
                return result
        except DamagedEntry as err:
            self.replaced += 1
            self._warn(f"entry {digest[:12]} {err}; recomputed and replaced")
        result = compute()
        self.computed += 1
        self._write(digest, lambda: entry_bytes(digest, result, inputs, mg_min_dofs, options, self.dataset,
                                                reference))
        return result

    def reference(self, key, mg_min_dofs, fingerprint, accept=lambda analysis: True):
        """``(yardstick, analysis)`` from the entry of ``key`` when it holds both, the analysis of
        ``fingerprint`` and ``accept(analysis)`` true (counted as from the store); None otherwise: absent,
        damaged or foreign (:meth:`get` then reads it again, counts and replaces it), or without this
        reference analysis."""
        if self.store is None:
            return None
        try:
            entry = self.store.read(self.digest(key, mg_min_dofs), YARDSTICK_ALGORITHM_VERSION)
            analysis = None if entry is None else analysis_of(entry[0], fingerprint)
            if analysis is None or not accept(analysis):
                return None
            result = result_of(*entry)
        except DamagedEntry:
            return None
        self.from_store += 1
        return result, analysis

    def _write(self, digest, data):
        """Entry ``digest``, ``data()`` its bytes, unless the store proved not writable."""
        self.write_to(self.store, digest, data)

    def write_to(self, entries, digest, data):
        """Entry ``digest`` of ``entries`` (the store's yardsticks or its scored tables), ``data()`` its
        bytes, unless the store proved not writable."""
        if not self._writable:
            return
        try:
            entries.write(digest, data())
        except OSError as err:
            self._writable = False
            self._warn(f"cannot be written ({err.strerror or err}): yardsticks are computed, not kept")


def summed(parts):
    """Counts of every rank (dicts of the same keys), summed."""
    return {name: sum(part[name] for part in parts) for name in parts[0]}


def merged(comm, stored):
    """``(counts, warning)`` of every rank's ``stored`` (a :class:`StoredYardsticks`), on every rank:
    the counts summed, the first rank's warning (None when no rank has one)."""
    parts = comm.allgather((stored.counts(), stored.warning))
    counts = summed([part for part, _ in parts])
    warning = next((w for _, w in parts if w is not None), None)
    if warning is not None and counts["replaced"] > 1:
        warning += f" ({counts['replaced']} entries in all)"
    return counts, warning


def agree(stored, recomputed):
    """Why a recomputed yardstick compliance breaks parity with the stored one (None when it does not)."""
    if not (math.isfinite(stored) and math.isfinite(recomputed)):
        return None if stored == recomputed else f"compliance {recomputed!r}, stored {stored!r}"
    if not math.isclose(stored, recomputed, rel_tol=CHECK_RELATIVE_TOLERANCE, abs_tol=0.0):
        return (f"compliance {recomputed!r}, stored {stored!r} (relative "
                f"{abs(stored - recomputed) / abs(stored):.3g} > {CHECK_RELATIVE_TOLERANCE:g})")
    return None


def format_counts(counts, store, completions=None):
    """One line: how many yardsticks came from the store and how many were computed (and, with a store,
    how many distinct completions' metrics: ``completions``)."""
    where = f"store {store.root}" if store is not None else "no store"
    line = f"yardsticks: {counts['from_store']} from the store, {counts['computed']} computed ({where})"
    if counts.get("replaced"):
        line += f"; {counts['replaced']} damaged or foreign entries recomputed and replaced"
    if store is not None and completions is not None:
        line += (f"; distinct completions: {completions['from_store']} from the store, "
                 f"{completions['computed']} computed")
    return line
