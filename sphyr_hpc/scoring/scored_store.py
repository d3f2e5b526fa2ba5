"""Completions' metrics kept across runs, one table a sample, beside the sample's yardstick.

A benchmark's leaderboard is scored again whenever a model joins it, and every
earlier model's completions would be analysed again although nothing about
them changed.  So the store keeps, for each sample (ground truth, input grid,
gravity, scorer settings), the metrics of every distinct completion it has
scored (docs/store.md, "Scored completions"):

* key of a table: :func:`sample_digest`, the SHA-256 of the sample's cells as
  text (a completion's reconstruction metrics compare texts, so full_easy's
  ``1`` and full_hard's ``1.0`` are two tables although one yardstick), the
  scorer's settings, the ``-sphyr_`` PETSc options given, and
  :func:`code_digest`, a digest of the source of every module that computes a
  metric (``core``, ``solvers``, ``optimiser``, ``scoring``): a scorer whose code
  differs in any byte never reads another's metrics, however small the change;
* a row: a digest of the completion's cells, whether it poses a problem, the
  text of its metrics as its record holds them (``json_safe``, then the results
  log's encoder: a record of a stored completion is that text and its grids),
  and the metrics themselves as JSON when they differ from the record's (a
  non-finite float, which a record writes as null).  Exact: a float's text reads
  back to the same bits, and a row is kept only when its texts read back equal
  in value and type, so a stored completion gives a byte-identical record;
* use: :class:`ScoredTable` answers a completion from the table and collects
  what this run computed; :meth:`ScoredTable.flush` (at the end of a sample's
  task) reads the table again, adds the new rows and writes it whole,
  atomically.  Two runs adding to one table at once: the last write wins and
  the other's new rows are computed again by a later run (a table is a cache,
  never the only copy of anything).  A damaged or foreign table is ignored,
  recomputed and replaced, like a yardstick entry.
"""

import functools
import hashlib
import json
import time
from pathlib import Path

from ..io.yardstick_store import DamagedEntry, encode
from ..runtime import native
from .yardstick_store import package_version

# Rows a table keeps (the latest written): many more than the models of any published benchmark.
TABLE_ROWS = 4096
# The folders whose code computes a record's metrics (see code_digest).
METRIC_CODE = ("core", "solvers", "optimiser", "scoring")


@functools.lru_cache(maxsize=1)
def code_digest():
    """SHA-256 (64 hex digits) of the source of every Python module of :data:`METRIC_CODE`, in path
    order, then of the C kernels' sources the installed extension was built from (its digest,
    :func:`~sphyr_hpc.runtime.native.source_digest`; ``none`` without it, where NumPy and PETSc
    compute in their place): an install carries the kernels compiled, not their sources."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for folder in METRIC_CODE:
        for path in sorted((root / folder).glob("*.py")):
            digest.update(f"{folder}/{path.name}\0".encode("utf-8"))
            digest.update(path.read_bytes())
    digest.update(f"kernels\0{native.source_digest() or 'none'}".encode("utf-8"))
    return digest.hexdigest()


def sample_digest(ground_truth, input_grid, gravity, config, options, reference):
    """The key of a sample's table (64 hex digits): its grids as text, gravity, the scorer's
    ``config`` (:class:`~sphyr_hpc.scoring.scorer.ScoringConfig`), PETSc ``options``, :func:`code_digest`,
    and ``reference``: ``(analysis, optimum)`` of the ground truth, whose exact compliances every
    record of the sample reads (a table belongs to the yardstick its rows were scored against, even
    when a store shared between machines has that yardstick recomputed)."""
    analysis, optimum = reference
    pinned = [float(analysis.compliance).hex(), float(analysis.volume_fraction).hex(), float(optimum.compliance).hex()]
    text = json.dumps([code_digest(), repr(config), list(options), pinned, [list(row) for row in ground_truth or ()],
                       [list(row) for row in input_grid or ()], repr(gravity)], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def completion_digest(completion):
    """A completion's row key (32 hex digits) from its cells (rows of text cells): the row count, then
    cells joined by a unit separator, rows by a record separator (JSON instead for the rare cell holding
    either)."""
    text = "\x1e".join(["\x1f".join(row) for row in completion])
    cells, rows = sum(map(len, completion)), len(completion)
    if text.count("\x1f") + rows != cells or text.count("\x1e") + 1 != max(rows, 1):
        text = json.dumps([list(row) for row in completion], separators=(",", ":"))
    text = f"{len(completion)}\x1d{text}"  # the row count: [] and [[""]] differ
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _same(a, b):
    """True when ``b`` (read back from JSON) equals ``a`` in value and in type, all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a.hex() == b.hex() if a == a else b != b
    return a == b


def row_texts(metrics, fields, items):
    """``(fields text, metrics text)`` a row keeps of a completion: ``fields`` (``json_safe(metrics)``) as its
    record's ``items`` text holds them, and ``metrics`` as JSON when they differ from ``fields`` (else None);
    None when either would not read back equal in value and type."""
    text = "{" + items + "}"
    try:
        if not _same(fields, json.loads(text)):
            return None
        if _same(metrics, fields):
            return text, None
        kept = json.dumps(metrics, separators=(",", ":"))
        return (text, kept) if _same(metrics, json.loads(kept)) else None
    except (TypeError, ValueError):
        return None


def rows_of(header):
    """``{completion digest: (posed, fields text, metrics text or None)}`` of a table's header
    (:class:`DamagedEntry` if unreadable)."""
    rows = header.get("completions")
    try:
        found = {digest: (posed, text, kept) for digest, posed, text, kept in rows}
    except (TypeError, ValueError):
        raise DamagedEntry("unreadable completions") from None
    if not all(isinstance(p, bool) and isinstance(t, str) and (k is None or isinstance(k, str))
               for p, t, k in found.values()):
        raise DamagedEntry("unreadable completions")
    return found


class ScoredTable:
    """One sample's table in ``stored``'s store (a :class:`~sphyr_hpc.scoring.yardstick_store.StoredYardsticks`):
    read on first use, added to by :meth:`add`, written by :meth:`flush`."""

    def __init__(self, stored, digest):
        self._stored = stored
        self._tables = stored.store.scored
        self.digest = digest
        self._rows = None
        self._new = {}

    def _read(self):
        """The table's rows on disk ({} when absent, damaged or of other code: then replaced at flush)."""
        try:
            entry = self._tables.read(self.digest, code_digest())
            return {} if entry is None else rows_of(entry[0])
        except DamagedEntry:
            return {}

    def get(self, key):
        """``(posed, fields, items, metrics)`` of the completion of ``key`` (:func:`completion_digest`) from
        the table (see :meth:`add`), or None (then :meth:`add` it)."""
        if self._rows is None:
            self._rows = self._read()
        found = self._rows.get(key)
        if found is None:
            return None
        posed, text, kept = found
        fields = json.loads(text)
        return posed, fields, text[1:-1], fields if kept is None else json.loads(kept)

    def add(self, key, posed, fields, items, metrics):
        """Keep the completion of ``key`` (:func:`completion_digest`) this run computed (written by
        :meth:`flush`): whether it ``posed`` a problem, its record's ``fields`` (``json_safe(metrics)``)
        and their ``items`` text (:func:`~sphyr_hpc.io.results_log.encode_items`), and its ``metrics``."""
        texts = row_texts(metrics, fields, items)
        if texts is not None:
            self._new[key] = (bool(posed),) + texts

    def flush(self):
        """Write the table with this run's rows added (the rows on disk now, then the new ones, the last
        :data:`TABLE_ROWS` kept); nothing when this run added none."""
        if not self._new:
            return
        rows = self._read()
        rows.update(self._new)
        self._rows, self._new = rows, {}
        kept = list(rows.items())[-TABLE_ROWS:]
        header = {"key": self.digest, "algorithm": code_digest(), "package": package_version(),
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "dataset": self._stored.dataset,
                  "completions": [[digest] + list(row) for digest, row in kept]}
        self._stored.write_to(self._tables, self.digest, lambda: encode(header, {}))
