"""``y = A x`` for a SciPy CSR matrix without SciPy's per-call checks, for one rank's hot loops.

SciPy's ``A @ x`` validates its operands and allocates the result on every
call, ~3 us, which on SPhyR's grids is longer than the product itself and is
paid ~200k times a benchmark.  :func:`matvec` calls the very kernel ``A @ x``
ends in (``csr_matvec``: every row summed in its stored order from zero, then
added to ``out``), so the sums are the same; it falls back to ``A @ x`` when
that kernel is not where SciPy 1.x keeps it or the operands are not the
plain float64/int32 the kernel takes.
"""

import numpy as np

try:  # SciPy's compiled sparse kernels; private, hence the fallback
    from scipy.sparse._sparsetools import csr_matvec as _kernel
except ImportError:  # pragma: no cover - another SciPy layout
    _kernel = None


def matvec(A, x, out=None):
    """``A @ x`` (into ``out`` if given: ``out`` += A x, so pass zeros, or a base to add to)."""
    if (_kernel is None or x.dtype != np.float64 or A.data.dtype != np.float64
            or not x.flags.c_contiguous or A.indices.dtype != A.indptr.dtype):
        y = A @ x
        if out is None:
            return y
        out += y
        return out
    if out is None:
        out = np.zeros(A.shape[0])
    _kernel(A.shape[0], A.shape[1], A.indptr, A.indices, A.data, x, out)
    return out
