"""The build: the package (its metadata is in setup.cfg) and its C kernels, one extension module.

The kernels (the C files of KERNELS) are compiled into the extension sphyr_hpc.runtime._kernels,
which sphyr_hpc/runtime/native.py opens with ctypes; nothing is compiled at run time.  The flags are
portable by default (-O3 -std=c99; on x86-64 each kernel is also built for AVX2 and AVX-512 and the
CPU's version is chosen when the library is loaded: sphyr_hpc/runtime/kernels.h).
SPHYR_HPC_MARCH=native (or any other -march value) at build time builds for that CPU alone
(docs/install.md).  The extension is optional: where it cannot be built (no C compiler) the install
goes on without it and the package runs without its kernels (one warning line where a large grid's
solver would have used them).
"""

import hashlib
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

KERNELS = ("sphyr_hpc/solvers/q4_apply.c", "sphyr_hpc/solvers/stencil_apply.c",
           "sphyr_hpc/optimiser/oc_volume.c", "sphyr_hpc/optimiser/filter_stencil.c")
HEADER = "sphyr_hpc/runtime/kernels.h"
MODULE = "sphyr_hpc/runtime/_kernels.c"
# ISO C mode keeps -ffp-contract=off: no multiply-add is fused, so every build gives the same results.
# -Wno-psabi: GCC's note that 64-byte vectors pass differently with AVX-512; they pass only between
# static helpers inlined into each kernel, never across the library's interface.
FLAGS = ["-O3", "-std=c99", "-Wno-psabi"]


def source_digest():
    """SHA-256 of the kernels' sources (path and text, in KERNELS order, then the header): the
    module's SOURCE_DIGEST, part of the scored store's code digest (sphyr_hpc/scoring/scored_store.py)."""
    digest = hashlib.sha256()
    for path in (*KERNELS, HEADER):
        with open(path, "rb") as source:
            digest.update(path.encode("utf-8") + b"\0" + source.read())
    return digest.hexdigest()


def kernels_extension():
    march = os.environ.get("SPHYR_HPC_MARCH", "").strip()
    macros = [("SPHYR_KERNELS_DIGEST", f'"{source_digest()}"')]
    flags = list(FLAGS)
    if march:  # one CPU: no multi-versioning (kernels.h)
        flags.append(f"-march={march}")
        macros.append(("SPHYR_HPC_ONE_TARGET", None))
    return Extension("sphyr_hpc.runtime._kernels", sources=[MODULE, *KERNELS], depends=[HEADER],
                     include_dirs=["sphyr_hpc/runtime"], define_macros=macros, extra_compile_args=flags,
                     optional=True)


class build_kernels(build_ext):
    """build_ext compiling every time: its check of what is up to date compares files, not the flags,
    so a build for one CPU after a portable one (or the other way) would keep the first."""

    def finalize_options(self):
        super().finalize_options()
        self.force = True


setup(ext_modules=[kernels_extension()], cmdclass={"build_ext": build_kernels})
