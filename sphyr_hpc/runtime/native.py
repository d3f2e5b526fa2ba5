"""The package's C kernels: one extension module built by the install, made by cffi from their header.

The kernels (``q4_apply.c`` and ``stencil_apply.c`` beside the solvers that call them,
``oc_volume.c`` and ``filter_stencil.c`` beside the optimiser's) are declared in one header,
``sphyr_hpc/runtime/kernels.h``, and compiled when the package is installed into the extension
module ``sphyr_hpc.runtime._kernels`` (``setup.py``; docs/install.md), whose functions cffi made
from the header's declarations.  So no prototype is typed here or at a call site: the header is the
interface, and the build checks the kernels against it.  :func:`native_function` gives a kernel by
its name in the header, called with its parameters in the header's order, each pointer as an
address (``array.ctypes.data``, 0 for NULL); a call with the wrong number or kind of arguments
raises TypeError.  Nothing is compiled at run time, so no C compiler is needed to run.

Without the extension (a build without a C compiler or cffi, a pure-Python install, a module that
does not load), :func:`library` raises :class:`NativeUnavailable` with a one-line reason; its
callers fall back to PETSc or NumPy.
"""

import functools
import importlib

EXTENSION = "sphyr_hpc.runtime._kernels"
# The module's function for kernel f is CALL + f (setup.py: it takes each pointer as an address).
CALL = "call_"


class NativeUnavailable(RuntimeError):
    """The compiled kernels are not installed here, or cannot be loaded."""


@functools.lru_cache(maxsize=4)
def _opened(name):
    """``(module, None)`` of the extension module ``name``, or ``(None, reason)``."""
    try:
        return importlib.import_module(name), None
    except ImportError as err:
        if isinstance(err, ModuleNotFoundError) and err.name == name:
            return None, (f"the compiled kernels ({name}) are not installed (the install builds them where it "
                          f"finds a C compiler and cffi: docs/install.md)")
        first = (str(err).strip().splitlines() or ["no message"])[0]
        return None, f"the compiled kernels ({name}) cannot be imported: {first}"


def library():
    """The extension module of the compiled kernels (raises :class:`NativeUnavailable`); its
    ``__file__`` is the compiled library."""
    found, reason = _opened(EXTENSION)
    if found is None:
        raise NativeUnavailable(reason)
    return found


def kernels():
    """The names of the kernels the installed extension declares (kernels.h), sorted."""
    return sorted(name[len(CALL):] for name in dir(library().lib) if name.startswith(CALL))


def source_digest():
    """SHA-256 (64 hex digits) of the kernels' sources the installed extension was built from, or
    None without it."""
    module, _ = _opened(EXTENSION)
    return None if module is None else module.ffi.string(module.lib.SOURCE_DIGEST).decode("ascii")


def native_function(name):
    """The compiled kernel ``name``, as its header declares it (raises :class:`NativeUnavailable`)."""
    try:
        return getattr(library().lib, CALL + name)
    except AttributeError:
        raise NativeUnavailable(f"the compiled kernels have no {name}: they are older than the package; "
                                f"reinstall sphyr_hpc to build them again") from None


__all__ = ["CALL", "EXTENSION", "NativeUnavailable", "kernels", "library", "native_function", "source_digest"]
