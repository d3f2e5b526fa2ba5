/* The extension module sphyr_hpc.runtime._kernels: the package's C kernels (setup.py links them in) as
 * one library that the install builds.  Python calls none of it as a module: the module has no
 * functions, only SOURCE_DIGEST, the SHA-256 of the kernels' sources it was built from (setup.py).
 * sphyr_hpc/runtime/native.py imports it to find its file, then opens that file with ctypes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT,
    "_kernels",
    "The C kernels of sphyr_hpc, called through ctypes (sphyr_hpc.runtime.native).",
    0,
    NULL,
};

PyMODINIT_FUNC PyInit__kernels(void)
{
    PyObject *module = PyModule_Create(&kernels_module);
    if (module && PyModule_AddStringConstant(module, "SOURCE_DIGEST", SPHYR_KERNELS_DIGEST) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
