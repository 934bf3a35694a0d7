"""Matrix products through BLAS (scipy's sgemm/dgemm), writing in place into C-ordered arrays.

A C-ordered (m, n) array is a Fortran-ordered (n, m) array, so ``out = op(a) @ op(b)`` is
computed as ``out^T = op(b)^T @ op(a)^T`` on the transposed views: no copies, and ``beta=1``
accumulates into ``out`` as a backward pass with ``accum`` needs.

Threads: scipy's OpenBLAS is set to one thread and large products are split into row blocks
that numba's threads multiply side by side. Two thread pools on the same cores (OpenBLAS's and
numba's) spin against each other between kernels; with one pool a training step on 2 cores ran
several times faster. ``NNABLA_JIT_BLAS_THREADS=keep`` leaves OpenBLAS as it was.
"""
import ctypes
import os

import numpy as np
from numba import njit, prange
from scipy.linalg import blas

from .kernels import parallel_kernel

_GEMM = {np.dtype(np.float32): blas.sgemm, np.dtype(np.float64): blas.dgemm}
PARALLEL_FLOPS = 1 << 22   # multiply-adds below which one BLAS call beats splitting


def _limit_scipy_openblas():
    """Set scipy's bundled OpenBLAS to one thread (Linux: found among the loaded libraries)."""
    if os.environ.get("NNABLA_JIT_BLAS_THREADS") == "keep":
        return
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line and "scipy.libs" in line}
    except OSError:
        return
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in ("scipy_openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
                       "openblas_set_num_threads"):
            setter = getattr(lib, symbol, None)
            if setter is not None:
                setter(1)
                break


_limit_scipy_openblas()


@njit(parallel=True, cache=True)
def _gemm_row_blocks(a, b, out, trans_a, accumulate, n_blocks):
    """out[rows] (+)= op(a)[rows] @ b, the rows split into blocks multiplied in parallel.
    ``b`` is already op(b); op(a)'s rows are a's columns when ``trans_a``."""
    m = out.shape[0]
    for blk in prange(n_blocks):
        r0 = blk * m // n_blocks
        r1 = (blk + 1) * m // n_blocks
        if trans_a:   # op(a)'s rows are columns of a: gather them contiguously first
            block = np.dot(np.ascontiguousarray(a[:, r0:r1]).T, b)
        else:
            block = np.dot(a[r0:r1], b)
        if accumulate:
            out[r0:r1] += block
        else:
            out[r0:r1] = block


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
    inner = a.shape[0] if trans_a else a.shape[1]
    if out.shape[0] >= 8 and out.size * inner >= PARALLEL_FLOPS:
        _gemm_row_blocks(a, b.T if trans_b else b, out, trans_a, accumulate, 2 * _threads())
        return
    f(1.0, b.T, a.T, beta=1.0 if accumulate else 0.0, c=out.T, overwrite_c=True,
      trans_a=trans_b, trans_b=trans_a)


def _threads():
    import numba
    return numba.get_num_threads()


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
