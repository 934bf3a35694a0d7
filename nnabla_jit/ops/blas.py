"""Matrix products through BLAS (scipy's sgemm/dgemm), writing in place into C-ordered arrays.

A C-ordered (m, n) array is a Fortran-ordered (n, m) array, so ``out = op(a) @ op(b)`` is
computed as ``out^T = op(b)^T @ op(a)^T`` on the transposed views: no copies, and ``beta=1``
accumulates into ``out`` as a backward pass with ``accum`` needs.
"""
import numpy as np
from numba import njit, prange
from scipy.linalg import blas

from .kernels import parallel_kernel

_GEMM = {np.dtype(np.float32): blas.sgemm, np.dtype(np.float64): blas.dgemm}


def gemm(a, b, out, trans_a=False, trans_b=False, accumulate=False):
    """out (+)= op(a) @ op(b) for 2-d C-contiguous arrays."""
    f = _GEMM.get(out.dtype)
    if (f is None or a.dtype != out.dtype or b.dtype != out.dtype or not a.flags.c_contiguous
            or not b.flags.c_contiguous or not out.flags.c_contiguous or out.size == 0):
        pa = a.T if trans_a else a
        pb = b.T if trans_b else b
        if accumulate:
            out += pa @ pb
        else:
            np.matmul(pa, pb, out=out)
        return
    if a.shape[0] == 0 or a.shape[1] == 0:
        if not accumulate:
            out.fill(0)
        return
    f(1.0, b.T, a.T, beta=1.0 if accumulate else 0.0, c=out.T, overwrite_c=True,
      trans_a=trans_b, trans_b=trans_a)


@parallel_kernel
def add_row_vector(y, b):
    """y[n, m] += b[m]."""
    for n in prange(y.shape[0]):
        for m in range(y.shape[1]):
            y[n, m] += b[m]


@njit(cache=True)
def sum_rows(x, out, accum):
    """out[m] (+)= sum over n of x[n, m]."""
    if not accum:
        out[:] = 0.0
    for n in range(x.shape[0]):
        for m in range(x.shape[1]):
            out[m] += x[n, m]
