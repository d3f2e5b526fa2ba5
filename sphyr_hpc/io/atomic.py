"""Atomic file writes: a file appears complete or not at all; and the one JSON form of numbers.

The text goes to a temporary file in the same folder, which then replaces the
target (``os.replace`` is atomic on POSIX).  The temporary file gets the
permissions a plain ``open`` would give (``mkstemp`` makes it 0600).

JSON has no infinity or NaN: :func:`json_safe` writes them as ``null`` (an
infinite compliance is ``null`` in every file sphyr_hpc writes) and NumPy
scalars as plain numbers.
"""

import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np


_PLAIN = (str, int, bool, type(None))  # exact types JSON takes as they are


def json_safe(value):
    """``value`` with non-finite floats as None and NumPy scalars as Python ones, recursively."""
    kind = type(value)
    if kind is dict:
        # A record's metrics (every row written): plain values decided here, without a call each.
        out = {}
        for key, item in value.items():
            kind = type(item)
            if kind is float:
                out[key] = item if math.isfinite(item) else None
            elif kind in _PLAIN:
                out[key] = item
            else:
                out[key] = json_safe(item)
        return out
    if kind is float:
        return value if math.isfinite(value) else None
    if kind in _PLAIN:
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json_atomic(path, data, indent=1):
    """``data`` as JSON (through :func:`json_safe`), written atomically."""
    write_text_atomic(path, json.dumps(json_safe(data), indent=indent, allow_nan=False) + "\n")


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temporary_beside(path, suffix=".tmp"):
    """``(descriptor, name)`` of a new temporary file next to ``path``, to replace it when complete."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, tmp


@contextmanager
def atomic_path(path, suffix=".tmp"):
    """The name of a temporary file beside ``path``, for a writer that takes a file name: it replaces
    ``path`` when the block ends, or is removed if the block raises."""
    fd, tmp = temporary_beside(path, suffix)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text_atomic(path, text, fsync=True):
    """Write ``text`` (UTF-8) to ``path`` atomically; ``fsync`` also makes it durable."""
    write_bytes_atomic(path, text.encode("utf-8"), fsync)


def write_bytes_atomic(path, data, fsync=True):
    """Write ``data`` (bytes) to ``path`` atomically; ``fsync`` also makes it durable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temporary_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
