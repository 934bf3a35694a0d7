"""Matrix products through BLAS (scipy's sgemm/dgemm), writing in place into C-ordered arrays.

A C-ordered (m, n) array is a Fortran-ordered (n, m) array, so ``out = op(a) @ op(b)`` is
computed as ``out^T = op(b)^T @ op(a)^T`` on the transposed views: no copies, and ``beta=1``
accumulates into ``out`` as a backward pass with ``accum`` needs.

Threads: scipy's OpenBLAS is set to one thread and large products are split into blocks that
numba's threads multiply side by side, each with its own BLAS call. Two thread pools on the same cores (OpenBLAS's and
numba's) spin against each other between kernels; with one pool a training step on 2 cores ran
several times faster. ``NNABLA_JIT_BLAS_THREADS=keep`` leaves OpenBLAS as it was.
"""
import ctypes
import importlib.machinery
import importlib.util
import os
import sys

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import get_cython_function_address, intrinsic

from ..deferred_compile import defer
from .kernels import parallel_kernel


_SCIPY_BLAS = ("scipy.linalg._fblas", "scipy.linalg.cython_blas")


def _load_scipy_blas():
    """scipy.linalg's ``_fblas`` (gemm called from Python) and ``cython_blas`` (gemm's address
    for the kernels). When scipy.linalg is not imported yet they are loaded from their files
    under their own names: importing scipy.linalg imports the whole of it (0.15 s of every
    process's start, and of its compile worker's, for two extension modules that need only
    NumPy). A later ``import scipy.linalg`` uses these same modules (_LinkOnImport)."""
    if "scipy.linalg" not in sys.modules:
        spec = importlib.util.find_spec("scipy")
        folder = os.path.join(list(spec.submodule_search_locations)[0], "linalg") if spec else ""
        for name in _SCIPY_BLAS:
            files = [os.path.join(folder, name.rsplit(".", 1)[1] + suffix)
                     for suffix in importlib.machinery.EXTENSION_SUFFIXES]
            found = next((f for f in files if os.path.exists(f)), None)
            if name in sys.modules or found is None:
                continue   # (a scipy laid out otherwise: imported the usual way below)
            module_spec = importlib.util.spec_from_file_location(name, found)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            try:
                module_spec.loader.exec_module(module)
            except Exception:
                del sys.modules[name]
                raise
        if any(name in sys.modules for name in _SCIPY_BLAS):
            sys.meta_path.insert(0, _LinkOnImport())
    return [importlib.import_module(name) for name in _SCIPY_BLAS]


class _LinkOnImport:
    """Import finder for scipy.linalg alone: a package imported normally has its submodules as
    attributes (``scipy.linalg.cython_blas``), which submodules already in sys.modules do not
    get; this sets them once the package is loaded, then leaves sys.meta_path."""

    def find_spec(self, name, path=None, target=None):
        if name != "scipy.linalg":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_link(module):
            exec_module(module)
            for child in _SCIPY_BLAS:
                if child in sys.modules:
                    setattr(module, child.rsplit(".", 1)[1], sys.modules[child])
        spec.loader.exec_module = exec_and_link
        return spec


_fblas, _ = _load_scipy_blas()
_GEMM = {np.dtype(np.float32): _fblas.sgemm, np.dtype(np.float64): _fblas.dgemm}
PARALLEL_FLOPS = 1 << 22   # multiply-adds below which one BLAS call beats splitting
# OpenBLAS multiplies without packing its operands (its "small matrix" kernels, on SkylakeX and
# other cores) while M N K <= 100^3. A float32 product whose inner dimension is short (the col
# of a 5x5 or 3x3 convolution of 1-3 input channels) or whose output is small (that
# convolution's filter gradient) runs 1.3-1.9x faster cut into blocks under that size than as
# one packed call (one thread, benchmarks/README.md "Convolution GEMM orientation").
SMALL_MNK = 100 ** 3
SMALL_SIDE = 32   # an inner dimension up to this, or an output of up to this squared


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


# BLAS's own gemm, called from numba threads through its address (Fortran convention: every
# argument a pointer). The address is an argument, not a global, so the kernel caches on disk.
_SGEMM = get_cython_function_address("scipy.linalg.cython_blas", "sgemm")
_DGEMM = get_cython_function_address("scipy.linalg.cython_blas", "dgemm")
_N, _T = 78, 84   # ord("N"), ord("T")


@intrinsic
def _call_gemm(typingctx, address, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Call the gemm at ``address`` with 13 pointer arguments (all given as integers)."""
    def codegen(context, builder, signature, args):
        ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [ptr] * 13)
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(fn, [builder.inttoptr(v, ptr) for v in args[1:]])
        return context.get_dummy_value()
    return types.void(*([types.intp] * 14)), codegen


@njit(parallel=True, cache=True)
def _gemm_blocks(a, b, out, trans_a, trans_b, beta, n_blocks, address):
    """out (+)= op(a) @ op(b) in blocks of out's rows or columns (the longer side), one BLAS
    call per block on numba's threads. In BLAS's column-major view out^T = op(b)^T op(a)^T, so
    a block of out is a sub-matrix reached by a pointer offset and the full leading dimension."""
    m, n = out.shape
    k = a.shape[0] if trans_a else a.shape[1]
    by_columns = n >= m
    length = n if by_columns else m
    for blk in prange(n_blocks):
        lo = blk * length // n_blocks
        hi = (blk + 1) * length // n_blocks
        if hi <= lo:
            continue
        dims = np.empty(6, np.int32)        # M, N, K, lda, ldb, ldc
        dims[0] = hi - lo if by_columns else n
        dims[1] = m if by_columns else hi - lo
        dims[2] = k
        dims[3] = b.shape[1]
        dims[4] = a.shape[1]
        dims[5] = n
        flags = np.empty(2, np.uint8)
        flags[0] = _T if trans_b else _N
        flags[1] = _T if trans_a else _N
        scale = np.empty(2, out.dtype)
        scale[0] = 1.0
        scale[1] = beta
        if by_columns:
            pa = b[lo:].ctypes.data if trans_b else b[:, lo:].ctypes.data
            pb = a.ctypes.data
            pc = out[:, lo:].ctypes.data
        else:
            pa = b.ctypes.data
            pb = a[:, lo:].ctypes.data if trans_a else a[lo:].ctypes.data
            pc = out[lo:].ctypes.data
        d, f, sc = dims.ctypes.data, flags.ctypes.data, scale.ctypes.data
        i4, s8 = 4, out.itemsize
        _call_gemm(address, f, f + 1, d, d + i4, d + 2 * i4, sc, pa, d + 3 * i4, pb, d + 4 * i4,
                   sc + s8, pc, d + 5 * i4)


@njit(parallel=True, cache=True)
def _gemm_inner_blocks(a, b, out, trans_a, trans_b, beta, n_blocks, address, n_parts):
    """out (+)= op(a) @ op(b) with the inner dimension cut into ``n_blocks`` blocks, each one BLAS
    call adding into one of ``n_parts`` partial products (one per thread), summed at the end.
    In BLAS's column-major view out^T = op(b)^T op(a)^T: a block of the inner dimension is a
    sub-matrix of a and of b reached by a pointer offset and the full leading dimensions."""
    m, n = out.shape
    k = a.shape[0] if trans_a else a.shape[1]
    partial = np.empty((n_parts, m, n), out.dtype)
    for part in prange(n_parts):
        dims = np.empty(6, np.int32)        # M, N, K, lda, ldb, ldc
        flags = np.empty(2, np.uint8)
        scale = np.empty(2, out.dtype)
        flags[0] = _T if trans_b else _N
        flags[1] = _T if trans_a else _N
        scale[0] = 1.0
        dest = partial[part]
        first = True
        for blk in range(part * n_blocks // n_parts, (part + 1) * n_blocks // n_parts):
            lo = blk * k // n_blocks
            hi = (blk + 1) * k // n_blocks
            if hi <= lo:
                continue
            dims[0] = n
            dims[1] = m
            dims[2] = hi - lo
            dims[3] = b.shape[1]
            dims[4] = a.shape[1]
            dims[5] = n
            scale[1] = 0.0 if first else 1.0
            first = False
            pa = b[:, lo:].ctypes.data if trans_b else b[lo:].ctypes.data
            pb = a[lo:].ctypes.data if trans_a else a[:, lo:].ctypes.data
            d, f, sc = dims.ctypes.data, flags.ctypes.data, scale.ctypes.data
            i4, s8 = 4, out.itemsize
            _call_gemm(address, f, f + 1, d, d + i4, d + 2 * i4, sc, pa, d + 3 * i4, pb, d + 4 * i4,
                       sc + s8, dest.ctypes.data, d + 5 * i4)
        if first:
            dest[:] = 0.0
    for i in range(m):
        for j in range(n):
            acc = out[i, j] * beta if beta != 0.0 else 0.0
            for part in range(n_parts):
                acc += partial[part, i, j]
            out[i, j] = acc


def _gemm_one_call(a, b, out, trans_a, trans_b, beta, n_blocks, address, n_parts=1):
    """What _gemm_blocks and _gemm_inner_blocks compute, in one BLAS call: runs until their
    parallel compilation is in the cache (deferred_compile.py)."""
    _GEMM[out.dtype](1.0, b.T, a.T, beta=beta, c=out.T, overwrite_c=True, trans_a=trans_b,
                     trans_b=trans_a)


defer(_gemm_blocks, _gemm_one_call)
defer(_gemm_inner_blocks, _gemm_one_call)


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
    work = out.size * inner
    if out.dtype == np.float32 and work > SMALL_MNK:   # blocks for OpenBLAS's small kernels
        address, blocks = _SGEMM, -(-work // SMALL_MNK)
        beta = 1.0 if accumulate else 0.0
        if inner <= SMALL_SIDE and max(out.shape) >= 16:
            _gemm_blocks(a, b, out, trans_a, trans_b, beta, max(blocks, _threads()), address)
            return
        if out.size <= SMALL_SIDE * SMALL_SIDE and inner >= 16 * blocks:
            _gemm_inner_blocks(a, b, out, trans_a, trans_b, beta, blocks, address, min(blocks, _threads()))
            return
    if work >= PARALLEL_FLOPS and max(out.shape) >= 16:
        _gemm_blocks(a, b, out, trans_a, trans_b, 1.0 if accumulate else 0.0, _threads(),
                     _SGEMM if out.dtype == np.float32 else _DGEMM)
        return
    f(1.0, b.T, a.T, beta=1.0 if accumulate else 0.0, c=out.T, overwrite_c=True,
      trans_a=trans_b, trans_b=trans_a)


def _threads():
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
