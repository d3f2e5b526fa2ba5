"""The build: the package (its metadata is in setup.cfg) and its C kernels, one extension module.

The kernels (the C files of KERNELS) are declared in HEADER, and every one includes it.  cffi reads
the declarations (API mode) and writes the extension module sphyr_hpc.runtime._kernels, which calls
them; the kernels are compiled and linked into it, so the C compiler checks every definition and
every call against the header (kernels.h says how; mismatches are errors, not warnings: FLAGS).
sphyr_hpc/runtime/native.py hands the module's functions to the package; nothing is compiled at run
time.  The flags are portable by default (-O3 -std=c99; on x86-64 each kernel is also built for AVX2
and AVX-512 and the CPU's version is chosen when the library is loaded: kernels.h).
SPHYR_HPC_MARCH=native (or any other -march value) at build time builds for that CPU alone
(docs/install.md).  The extension is optional: where it cannot be built (no C compiler, no cffi)
the install goes on without it and the package runs without its kernels (one warning line where a
large grid's solver would have used them).
"""

import hashlib
import importlib.util
import os
import re
import shutil
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError

KERNELS = ("sphyr_hpc/solvers/q4_apply.c", "sphyr_hpc/solvers/stencil_apply.c",
           "sphyr_hpc/optimiser/oc_volume.c", "sphyr_hpc/optimiser/mma_dual.c",
           "sphyr_hpc/optimiser/filter_stencil.c")
HEADER = "sphyr_hpc/runtime/kernels.h"
EXTENSION = "sphyr_hpc.runtime._kernels"
# ISO C mode keeps -ffp-contract=off: no multiply-add is fused, so every build gives the same results.
# -Wno-psabi: GCC's note that 64-byte vectors pass differently with AVX-512; they pass only between
# static helpers inlined into each kernel, never across the library's interface.
# The -Werror=: what GCC only warns about but breaks the contract of kernels.h.
FLAGS = ["-O3", "-std=c99", "-Wno-psabi", "-Werror=missing-prototypes", "-Werror=incompatible-pointer-types",
         "-Werror=int-conversion", "-Werror=implicit-function-declaration", "-Werror=return-type"]
# Python calls kernel f as f's module function CALL + f, which takes each pointer as an address.
CALL = "call_"
_SCALARS = ("int64_t", "double")


def source_digest():
    """SHA-256 of the kernels' sources (path and text, in KERNELS order, then the header): the
    module's SOURCE_DIGEST, part of the scored store's code digest (sphyr_hpc/scoring/scored_store.py)."""
    digest = hashlib.sha256()
    for path in (*KERNELS, HEADER):
        with open(path, "rb") as source:
            digest.update(path.encode("utf-8") + b"\0" + source.read())
    return digest.hexdigest()


def declarations(header):
    """``[(result, name, [(type, name, is_pointer), ...]), ...]``: the functions the header declares,
    read from its text without comments and preprocessor lines (the plain form kernels.h keeps to)."""
    text = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
    text = re.sub(r"^[ \t]*#(?:.*\\\n)*.*$", " ", text, flags=re.M)
    found = []
    for declaration in filter(None, (" ".join(d.split()) for d in text.split(";"))):
        match = re.fullmatch(rf"({'|'.join(('void', *_SCALARS))}) (\w+) ?\((.*)\)", declaration)
        if not match:
            raise CompileError(f"{HEADER}: not a kernel declaration kernels.h allows: {declaration}")
        result, name, listed = match.groups()
        params = []
        for param in listed.split(","):
            kind = re.fullmatch(rf" ?((?:const )?({'|'.join(_SCALARS)}) ?(\*)?) ?(\w+) ?", param)
            if not kind:
                raise CompileError(f"{HEADER}: {name}: a parameter kernels.h does not allow: {param.strip()}")
            params.append((kind.group(1).strip(), kind.group(4), kind.group(3) is not None))
        found.append((result, name, params))
    return found


def module_source(header):
    """(cdef, C source) of the extension module: for each kernel f of the header, f itself (the C
    compiler checks its definition against the header) called by ``CALL + f``, which takes each
    pointer as an address (uintptr_t) and passes it on as f's own parameter type."""
    cdef, source = ["static const char *const SOURCE_DIGEST;"], [
        f'#include "{os.path.basename(HEADER)}"', "static const char *const SOURCE_DIGEST = SPHYR_KERNELS_DIGEST;",
        f"PyMODINIT_FUNC PyInit_{EXTENSION.rpartition('.')[2]}(void);"]  # cffi defines it
    for result, name, params in declarations(header):
        outer = ", ".join(f"uintptr_t {p}" if pointer else f"{kind} {p}" for kind, p, pointer in params)
        inner = ", ".join(f"(void *){p}" if pointer else p for _, p, pointer in params)
        cdef.append(f"{result} {CALL}{name}({outer});")
        body = f"{name}({inner});" if result == "void" else f"return {name}({inner});"
        source.append(f"static {result} {CALL}{name}({outer}) {{ {body} }}")
    return "\n".join(cdef), "\n".join(source)


def kernels_extension():
    march = os.environ.get("SPHYR_HPC_MARCH", "").strip()
    macros = [("SPHYR_KERNELS_DIGEST", f'"{source_digest()}"')]
    flags = list(FLAGS)
    if march:  # one CPU: no multi-versioning (kernels.h)
        flags.append(f"-march={march}")
        macros.append(("SPHYR_HPC_ONE_TARGET", None))
    return Extension(EXTENSION, sources=list(KERNELS), depends=[HEADER], include_dirs=[os.path.dirname(HEADER)],
                     define_macros=macros, extra_compile_args=flags, optional=True)  # build_kernels


class build_kernels(build_ext):
    """build_ext that writes the extension module's C source with cffi first, and compiles every time:
    its check of what is up to date compares files, not the flags, so a build for one CPU after a
    portable one (or the other way) would keep the first."""

    def finalize_options(self):
        super().finalize_options()
        self.force = True

    def build_extension(self, ext):
        if ext.name == EXTENSION:
            missing = self._missing()
            if missing:  # the one way the install goes on without the kernels (optional: nothing to copy)
                self.warn(f"the C kernels are not built: {missing}; sphyr_hpc runs without them "
                          f"(docs/install.md, \"The C kernels\")")
                return
            ext.optional = False  # from here on, a kernel that does not compile fails the install
            import cffi

            with open(HEADER, encoding="utf-8") as header:
                cdef, source = module_source(header.read())
            ffi = cffi.FFI()
            ffi.cdef(cdef)
            ffi.set_source(EXTENSION, source)
            generated = os.path.join(self.build_temp, "_kernels.c")
            os.makedirs(self.build_temp, exist_ok=True)
            ffi.emit_c_code(generated)
            ext.sources = [generated, *KERNELS]
        super().build_extension(ext)

    def _missing(self):
        """What building the kernels needs and this machine lacks (a C compiler, Python's headers,
        cffi), or None.  With all three, a kernel that does not compile fails the install."""
        compiler = getattr(self.compiler, "compiler_so", None) or [None]
        if compiler[0] is None or shutil.which(compiler[0]) is None:
            return "no C compiler"
        if not os.path.isfile(os.path.join(sysconfig.get_path("include"), "Python.h")):
            return "no Python.h (Debian: python3-dev)"
        if importlib.util.find_spec("cffi") is None:
            return "no cffi (Debian: python3-cffi)"
        return None


# pip and setuptools run this file as __main__; tests/test_kernel_contract.py reads its functions.
if __name__ == "__main__":
    setup(ext_modules=[kernels_extension()], cmdclass={"build_ext": build_kernels})
