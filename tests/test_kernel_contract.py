"""The C kernels' one contract: sphyr_hpc/runtime/kernels.h declares every function the package calls,
the build holds each definition to its declaration (a mismatch is a compile error), and Python reaches
the kernels only through the extension module cffi made from those declarations (setup.py,
sphyr_hpc/runtime/native.py)."""

import re
import runpy
import shutil
import subprocess
import sysconfig

import numpy as np
import pytest
from mpi4py import MPI

from conftest import ROOT
from sphyr_hpc.runtime import native

ONE_RANK = pytest.mark.skipif(MPI.COMM_WORLD.size > 1, reason="serial test")
BUILD = runpy.run_path(str(ROOT / "setup.py"), run_name="sphyr_hpc_build")  # its functions, no setup()
HEADER = ROOT / BUILD["HEADER"]


def _declared():
    return {name for _, name, _ in BUILD["declarations"](HEADER.read_text(encoding="utf-8"))}


def _exported(path):
    """The functions a kernel source defines that are not static (a definition starts its line)."""
    return set(re.findall(r"^(?:void|double|int64_t)\s+(\w+)\s*\(", path.read_text(encoding="utf-8"), flags=re.M))


@ONE_RANK
def test_every_function_the_kernel_sources_export_is_declared_in_the_header_and_callable():
    exported = set().union(*(_exported(ROOT / path) for path in BUILD["KERNELS"]))
    assert {"q4_apply", "stencil_apply", "oc_volume", "filter_stencil"} <= exported
    assert exported == _declared()
    assert set(native.kernels()) == exported  # the installed module was made from this header
    for name in exported:
        assert callable(native.native_function(name))


@ONE_RANK
def test_no_python_module_types_a_kernel_prototype():
    for path in (ROOT / "sphyr_hpc").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"argtypes|restype|ctypes\.c_", text), path
        for call in re.findall(r"native_function\(([^()]*)\)", text):
            assert re.fullmatch(r'"\w+"|name', call.strip()), f"{path}: native_function({call})"


@ONE_RANK
def test_kernels_compute_with_the_header_s_parameters_in_its_order():
    rng = np.random.default_rng(7)
    r, w, p = rng.standard_normal((3, 37))
    dinv = rng.uniform(0.5, 2.0, 37)
    r0, p0 = r.copy(), p.copy()
    dot = native.native_function("cg_residual")(r.size, 0.25, r.ctypes.data, w.ctypes.data, dinv.ctypes.data)
    np.testing.assert_allclose(r, r0 - 0.25 * w, rtol=1e-15, atol=0)
    assert dot == pytest.approx(np.sum(r * r * dinv), rel=1e-13)
    native.native_function("cg_direction")(r.size, 0.5, r.ctypes.data, dinv.ctypes.data, p.ctypes.data)
    np.testing.assert_allclose(p, dinv * r + 0.5 * p0, rtol=1e-15, atol=0)
    assert native.native_function("q4_work_size")(64) > 0


@ONE_RANK
def test_a_call_that_does_not_fit_the_header_raises_type_error():
    r = np.zeros(4)
    direction = native.native_function("cg_direction")
    with pytest.raises(TypeError, match="expected 5 arguments, got 3"):
        direction(4, 0.5, r.ctypes.data)
    with pytest.raises(TypeError):
        direction(4.0, 0.5, r.ctypes.data, r.ctypes.data, r.ctypes.data)  # a real where the header has int64_t
    with pytest.raises(TypeError):
        direction(4, 0.5, r, r, r)  # an array where the header has a pointer: its address is wanted


def test_the_header_reader_passes_pointers_as_addresses_and_refuses_other_forms():
    ((result, name, params),) = BUILD["declarations"](
        "/* a comment */\n#define X 1\nvoid cg_direction(int64_t n, double beta, const double *r, double *p);")
    assert (result, name) == ("void", "cg_direction")
    assert params == [("int64_t", "n", False), ("double", "beta", False), ("const double *", "r", True),
                      ("double *", "p", True)]
    cdef, source = BUILD["module_source"]("double oc_volume(int64_t n, const double *x);")
    assert "double call_oc_volume(int64_t n, uintptr_t x);" in cdef.splitlines()
    assert "return oc_volume(n, (void *)x);" in source
    for unreadable in ("float f(int64_t n);", "void f(double **x);", "void f(int n);", "SPHYR_KERNEL void f(int64_t n);"):
        with pytest.raises(BUILD["CompileError"]):
            BUILD["declarations"](unreadable)


def _compile(tmp_path, text):
    """gcc with the build's flags on one C file that includes kernels.h: (exit status, messages)."""
    source = tmp_path / "scratch.c"
    source.write_text(text, encoding="utf-8")
    done = subprocess.run([shutil.which("gcc"), "-c", *BUILD["FLAGS"], f"-I{HEADER.parent}",
                           f"-I{sysconfig.get_path('include')}", str(source), "-o", str(tmp_path / "scratch.o")],
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr


@ONE_RANK
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc (bin/setup installs it)")
def test_a_definition_that_differs_from_the_header_or_is_missing_from_it_fails_the_build(tmp_path):
    right = '#include "kernels.h"\nvoid cg_direction(int64_t n, double beta, const double *r, ' \
            'const double *dinv, double *p) { p[0] = n * beta * r[0] * dinv[0]; }\n'
    assert _compile(tmp_path, right) == (0, "")
    status, said = _compile(tmp_path, right.replace("double *p)", "float *p)"))
    assert status != 0 and "conflicting types for" in said and "cg_direction" in said
    status, said = _compile(tmp_path, right + "double cg_extra(int64_t n) { return n; }\n")
    assert status != 0 and "no previous prototype for" in said and "cg_extra" in said
    status, said = _compile(tmp_path, '#include "kernels.h"\nvoid f(double *p);\n'
                                      'static void g(float *q) { f(q); }\nvoid h(float *q);\nvoid h(float *q) { g(q); }\n')
    assert status != 0 and "incompatible-pointer-types" in said
