"""The yardstick store on disk: one file per entry, written atomically, validated on every read.

An entry is what :mod:`sphyr_hpc.scoring.yardstick_store` keeps of one
yardstick (the optimum's exact float64 design and compliance, the inputs that
determined it, its provenance, and the ground truth's analysis its sample's
records read); this module knows files only: where an entry
lives, how it is encoded, how it is written and read, and what a reader must
refuse.

Layout: ``<store>/yardsticks/<first two hex digits>/<digest>.yst``, the digest
(64 hex digits) naming the entry's key.  The default store is
``$XDG_CACHE_HOME/sphyr_hpc``, else ``~/.cache/sphyr_hpc``
(:func:`default_location`).

Encoding (one entry, little-endian)::

    MAGIC (8 bytes) | FORMAT (u32) | header length n (u32) | header (n bytes, JSON)
    | payload (the arrays, one after the other) | checksum (16 bytes)

The header names every array (``arrays``: name, dtype, shape, in payload
order) besides what the caller put in it; the checksum is BLAKE2b (16 bytes)
of everything before it.  Reading an entry costs one ``read`` of the file,
one checksum, one small ``json.loads`` and a ``frombuffer`` per array: far
less than the SIMP runs it replaces (``benchmarks/store.py`` measures both).

Concurrency, on any file system (local, NFS, Lustre; no file locks): an entry
is written to a temporary file in its own folder, then renamed over its name
(``os.replace``, atomic on POSIX and on NFS/Lustre servers), so a reader opens
either the old whole file or the new whole file, never half of one; two writers
of one entry both write complete files and the last rename wins (both hold the
same yardstick).  No ``fsync``: a file cut short by a crash fails its checksum
and is recomputed like any damaged entry.  Every read is validated (magic,
format, length, checksum, the key it names, the algorithm version): a reader
never trusts an entry that fails, :class:`DamagedEntry` says why.
"""

import hashlib
import json
import math
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .atomic import write_bytes_atomic

MAGIC = b"SPHYRYS\x00"
# The encoding above; a reader refuses any other (an older entry is foreign: recomputed and replaced).
# 2: the header may also hold the sample's reference analysis (scoring/yardstick_store.py); 1: the yardstick alone.
FORMAT = 2
SUFFIX = ".yst"
ENTRIES = "yardsticks"  # the folder of a store that holds its entries
# Beside the yardsticks, the metrics of the completions scored against them, one table a sample
# (scoring/scored_store.py): the same encoding and the same rules, in a folder of their own.
SCORED_SUFFIX = ".ysc"
SCORED_ENTRIES = "scored"
CHECKSUM_BYTES = 16
_PREFIX = struct.Struct("<8sII")  # magic, format, header length
# A temporary file older than this was left by a writer that died (a write takes milliseconds).
STALE_TEMPORARY_SECONDS = 3600.0


class DamagedEntry(ValueError):
    """An entry a reader must not trust: truncated, damaged, foreign (another format or algorithm
    version) or naming another key."""


class OtherFormat(DamagedEntry):
    """A whole entry of another format (an older sphyr_hpc's): not trusted, but not damaged either."""


STORE_ENV = "SPHYR_HPC_STORE"  # the default store's folder instead of the cache folder; "none": no default store


def default_location():
    """``$XDG_CACHE_HOME/sphyr_hpc`` (when set and absolute, as the XDG spec asks), else ``~/.cache/sphyr_hpc``."""
    cache = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(cache) if cache and os.path.isabs(cache) else Path.home() / ".cache"
    return base / "sphyr_hpc"


def checksum(data):
    return hashlib.blake2b(data, digest_size=CHECKSUM_BYTES).digest()


def encode(header, arrays):
    """The bytes of one entry: ``header`` (a JSON-able dict) and ``arrays`` ({name: ndarray})."""
    header = dict(header)
    header["arrays"] = [[name, np.asarray(a).dtype.str, list(np.shape(a))] for name, a in arrays.items()]
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    parts = [_PREFIX.pack(MAGIC, FORMAT, len(text)), text]
    parts += [np.ascontiguousarray(a).tobytes() for a in arrays.values()]
    body = b"".join(parts)
    return body + checksum(body)


def _header_of(data):
    """The header of an entry's bytes (checked: magic, format, length); DamagedEntry otherwise."""
    if len(data) < _PREFIX.size:
        raise DamagedEntry(f"truncated: {len(data)} bytes")
    magic, version, length = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise DamagedEntry("not a yardstick entry (wrong magic bytes)")
    if version != FORMAT:
        raise OtherFormat(f"entry format {version}, this reader knows {FORMAT}")
    if len(data) < _PREFIX.size + length:
        raise DamagedEntry(f"truncated: {len(data)} bytes, the header alone needs {_PREFIX.size + length}")
    try:
        header = json.loads(data[_PREFIX.size:_PREFIX.size + length])
    except ValueError:
        raise DamagedEntry("unreadable header") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
        raise DamagedEntry("header without its arrays")
    return header, _PREFIX.size + length


def decode(data, digest=None, algorithm=None):
    """``(header, {name: array})`` of an entry's bytes; :class:`DamagedEntry` for anything a reader
    must not trust, including another ``digest`` or ``algorithm`` version than expected.  The arrays
    are the caller's own (writable copies)."""
    header, offset = _header_of(data)
    if len(data) < offset + CHECKSUM_BYTES or checksum(data[:-CHECKSUM_BYTES]) != data[-CHECKSUM_BYTES:]:
        raise DamagedEntry(f"checksum mismatch ({len(data)} bytes): damaged or truncated")
    if digest is not None and header.get("key") != digest:
        raise DamagedEntry(f"entry of another key ({str(header.get('key'))[:12]}...)")
    if algorithm is not None and header.get("algorithm") != algorithm:
        raise DamagedEntry(f"foreign version: yardstick algorithm {header.get('algorithm')!r}, "
                           f"this scorer's is {algorithm!r}")
    arrays = {}
    view = memoryview(data)
    try:
        for name, dtype, shape in header["arrays"]:
            dtype = np.dtype(dtype)
            if not all(type(n) is int and n >= 0 for n in shape):
                raise DamagedEntry(f"array {name!r} of shape {shape!r}")
            count = math.prod(shape)
            end = offset + count * dtype.itemsize
            if end > len(data) - CHECKSUM_BYTES:
                raise DamagedEntry(f"array {name!r} runs past the payload")
            arrays[name] = np.frombuffer(view[offset:end], dtype=dtype).reshape(shape).copy()
            offset = end
    except (TypeError, ValueError) as err:
        raise DamagedEntry(f"unreadable arrays ({err})") from None
    if offset != len(data) - CHECKSUM_BYTES:
        raise DamagedEntry("payload longer than its arrays")
    return header, arrays


@dataclass(frozen=True)
class StoredFile:
    """One file of a store's entries folder: an entry (``digest`` set) or a writer's temporary file."""

    path: Path
    digest: str
    size: int
    modified: float


class YardstickStore:
    """The entries under ``root`` (a folder; made when the first entry is written)."""

    folder, suffix = ENTRIES, SUFFIX

    def __init__(self, root):
        self.root = Path(root).expanduser()
        self.entries_folder = self.root / self.folder

    def __repr__(self):
        return f"YardstickStore({str(self.root)!r})"

    def path_of(self, digest):
        return self.entries_folder / digest[:2] / f"{digest}{self.suffix}"

    def read_bytes(self, digest):
        """The bytes of entry ``digest``, or None when there is none (OSError for a file that cannot be read)."""
        try:
            with open(self.path_of(digest), "rb") as handle:
                return handle.read()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read(self, digest, algorithm):
        """``(header, arrays)`` of entry ``digest``, None when absent; :class:`DamagedEntry` when it
        must not be trusted (an unreadable file too)."""
        try:
            data = self.read_bytes(digest)
        except OSError as err:
            raise DamagedEntry(f"cannot be read: {err.strerror or err}") from None
        return None if data is None else decode(data, digest, algorithm)

    def write(self, digest, data):
        """Entry ``digest`` (its bytes, :func:`encode`) in place, atomically (OSError if it cannot be written)."""
        write_bytes_atomic(self.path_of(digest), data, fsync=False)

    def files(self):
        """Every :class:`StoredFile` under the entries folder (entries and temporary files), sorted."""
        found = []
        if not self.entries_folder.is_dir():
            return found
        for folder in sorted(p for p in self.entries_folder.iterdir() if p.is_dir()):
            for path in sorted(folder.iterdir()):
                try:
                    stat = path.stat()
                except FileNotFoundError:  # renamed or removed meanwhile
                    continue
                named = path.name.endswith(self.suffix) and not path.name.startswith(".")
                digest = path.name[:-len(self.suffix)] if named else ""
                found.append(StoredFile(path, digest, stat.st_size, stat.st_mtime))
        return found

    @property
    def scored(self):
        """The :class:`ScoredTables` of this store (the same root)."""
        return ScoredTables(self.root)

    @staticmethod
    def header_of(path):
        """The header of the entry at ``path`` (its checksum checked); :class:`DamagedEntry` otherwise."""
        try:
            data = Path(path).read_bytes()
        except OSError as err:
            raise DamagedEntry(f"cannot be read: {err.strerror or err}") from None
        header, _ = decode(data)
        return header

    @staticmethod
    def is_stale_temporary(stored, now=None):
        return not stored.digest and (now or time.time()) - stored.modified > STALE_TEMPORARY_SECONDS

    @staticmethod
    def remove(path):
        """Remove ``path``; False when another process removed it first."""
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False


class ScoredTables(YardstickStore):
    """The tables of completions' metrics under ``root``: entries of the same encoding and rules as the
    yardsticks', in ``<store>/scored/<2 hex digits>/<digest>.ysc``."""

    folder, suffix = SCORED_ENTRIES, SCORED_SUFFIX

    def __repr__(self):
        return f"ScoredTables({str(self.root)!r})"


# -- which store: the commands' --store DIR / --no-store, the API's store= -------------------------
def open_store(store):
    """A :class:`~sphyr_hpc.io.yardstick_store.YardstickStore` of ``store``: True for the default
    location, a folder (str or path), a store itself; None or False for none."""
    if store is None or store is False:
        return None
    if store is True:
        configured = os.environ.get(STORE_ENV, "")
        if configured.lower() == "none":
            return None
        return YardstickStore(configured or default_location())
    if isinstance(store, YardstickStore):
        return store
    return YardstickStore(store)


def store_of_arguments(args):
    """The store a command's ``--store DIR`` / ``--no-store`` name (the default location otherwise)."""
    if getattr(args, "no_store", False):
        return None
    return open_store(args.store if getattr(args, "store", None) else True)


def add_arguments(parser):
    """``--store DIR`` and ``--no-store`` on a command's parser."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--store", metavar="DIR",
                       help=f"yardstick store: yardsticks computed once, ever, kept there (docs/store.md) "
                            f"(default: ${STORE_ENV} when set, where 'none' means no store; else "
                            f"$XDG_CACHE_HOME/sphyr_hpc; else ~/.cache/sphyr_hpc)")
    where.add_argument("--no-store", action="store_true",
                       help="compute every yardstick, read and write no store")
