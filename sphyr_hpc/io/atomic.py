"""Atomic file writes: a file appears complete or not at all.

The text goes to a temporary file in the same folder, which then replaces the
target (``os.replace`` is atomic on POSIX).  The temporary file gets the
permissions a plain ``open`` would give (``mkstemp`` makes it 0600).
"""

import os
import tempfile
from pathlib import Path


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path, text, fsync=True):
    """Write ``text`` (UTF-8) to ``path`` atomically; ``fsync`` also makes it durable."""
    write_bytes_atomic(path, text.encode("utf-8"), fsync)


def write_bytes_atomic(path, data, fsync=True):
    """Write ``data`` (bytes) to ``path`` atomically; ``fsync`` also makes it durable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
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
