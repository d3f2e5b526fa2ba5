"""The package's C kernels: one extension module built by the install, called through ctypes.

The kernels (``q4_apply.c`` and ``stencil_apply.c`` beside the solvers that call them,
``oc_volume.c`` and ``filter_stencil.c`` beside the optimiser's) are compiled when the package is
installed, into the extension module ``sphyr_hpc.runtime._kernels`` (``setup.py``;
docs/install.md).  Nothing is compiled at run time, so no C compiler is needed to run.  The module
has no Python functions: it is imported only to find its file, which :func:`library` opens with
ctypes, and each kernel is a plain C function over NumPy buffers (:func:`native_function`).

Without the extension (a build without a C compiler, a pure-Python install, a module that does not
load), :func:`library` raises :class:`NativeUnavailable` with a one-line reason; its callers fall
back to PETSc or NumPy.
"""

import ctypes
import functools
import importlib

EXTENSION = "sphyr_hpc.runtime._kernels"


class NativeUnavailable(RuntimeError):
    """The compiled kernels are not installed here, or cannot be loaded."""


@functools.lru_cache(maxsize=4)
def _opened(name):
    """``(module, library, None)`` of the extension module ``name``, or ``(None, None, reason)``."""
    try:
        module = importlib.import_module(name)
    except ImportError as err:
        if isinstance(err, ModuleNotFoundError) and err.name == name:
            return None, None, (f"the compiled kernels ({name}) are not installed (the install builds "
                                f"them where it finds a C compiler: docs/install.md)")
        first = (str(err).strip().splitlines() or ["no message"])[0]
        return None, None, f"the compiled kernels ({name}) cannot be imported: {first}"
    path = getattr(module, "__file__", None)
    if not path:
        return None, None, f"{name} is not a compiled module"
    try:
        return module, ctypes.CDLL(path), None
    except OSError as err:
        return None, None, f"cannot load the compiled kernels {path}: {err}"


def library():
    """The ctypes library of the compiled kernels (raises :class:`NativeUnavailable`)."""
    _, found, reason = _opened(EXTENSION)
    if found is None:
        raise NativeUnavailable(reason)
    return found


def source_digest():
    """SHA-256 (64 hex digits) of the kernels' sources the installed extension was built from, or
    None without it."""
    module, _, _ = _opened(EXTENSION)
    return getattr(module, "SOURCE_DIGEST", None)


def native_function(name, restype, *argtypes):
    """The compiled kernel ``name`` with its ctypes signature (raises :class:`NativeUnavailable`)."""
    try:
        function = getattr(library(), name)
    except AttributeError:
        raise NativeUnavailable(f"the compiled kernels have no {name}: they are older than the package; "
                                f"reinstall sphyr_hpc to build them again") from None
    function.argtypes = list(argtypes)
    function.restype = restype
    return function


__all__ = ["EXTENSION", "NativeUnavailable", "library", "native_function", "source_digest"]
