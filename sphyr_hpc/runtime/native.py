"""C kernels of the package, compiled on first use and loaded with ctypes.

A kernel is one C file beside the module that uses it.  It is compiled with the
machine's C compiler (``$CC``, else ``cc``) and ``-O3 -march=native`` into a
per-user cache (``$SPHYR_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/sphyr_hpc``,
else ``~/.cache/sphyr_hpc``), named by a SHA-256 of the source, the compiler,
the flags and the CPU (a cache shared by different machines never hands one
another's instructions to a CPU without them).  Ranks that compile at the same
time each write their own file and move it into place atomically.

Without a compiler, or when compiling fails, :func:`load` raises
:class:`NativeUnavailable` with a one-line reason; its callers fall back to
pure PETSc.
"""

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

CFLAGS = ("-O3", "-march=native", "-std=c99", "-shared", "-fPIC")
# Seconds a compilation may take before it counts as failed.
COMPILE_TIMEOUT = 120


class NativeUnavailable(RuntimeError):
    """A C kernel that cannot be compiled or loaded here."""


def cache_dir():
    """Where compiled kernels are kept (see the module docstring)."""
    explicit = os.environ.get("SPHYR_KERNEL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "sphyr_hpc"


def _cpu():
    """The CPU's model and instruction-set flags (Linux), else what platform says."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    wanted = [line for line in text.splitlines() if line.startswith(("model name", "flags", "Features"))]
    return "\n".join(dict.fromkeys(wanted))  # the first CPU's lines (all cores repeat them)


@functools.lru_cache(maxsize=None)
def load(source):
    """The ctypes library of the C file ``source`` (a path), compiled here if not cached."""
    source = Path(source)
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise NativeUnavailable(f"no C compiler ({compiler!r} not found) for {source.name}")
    key = hashlib.sha256("\0".join([source.read_text(), compiler, *CFLAGS, platform.machine(), _cpu()])
                         .encode()).hexdigest()[:20]
    target = cache_dir() / f"{source.stem}-{key}.so"
    if not target.exists():
        _compile(compiler, source, target)
    try:
        return ctypes.CDLL(str(target))
    except OSError as err:
        raise NativeUnavailable(f"cannot load {target}: {err}") from None


def _compile(compiler, source, target):
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=".so")
        os.close(fd)
    except OSError as err:
        raise NativeUnavailable(f"cannot write the kernel cache {target.parent}: {err.strerror}; "
                                f"set SPHYR_KERNEL_CACHE to a writable folder") from None
    try:
        done = subprocess.run([compiler, *CFLAGS, "-o", partial, str(source)], capture_output=True,
                              text=True, timeout=COMPILE_TIMEOUT)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no message"])[0]
            raise NativeUnavailable(f"{compiler} could not compile {source.name}: {first}")
        os.replace(partial, target)
    except subprocess.TimeoutExpired:
        raise NativeUnavailable(f"{compiler} took over {COMPILE_TIMEOUT} s on {source.name}") from None
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


__all__ = ["NativeUnavailable", "cache_dir", "load"]
