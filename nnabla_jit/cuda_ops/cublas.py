"""Matrix products through cuBLAS (NVIDIA's maintained GEMMs, tensor cores included), reached
through CuPy's bindings, on the memory of numba device arrays: no copy and no CuPy array, the
raw pointers of ``__cuda_array_interface__`` go to one ``cublasGemmStridedBatchedEx``.

Row-major to cuBLAS's column-major: a row-major (rows, cols) matrix is, read column-major, its
transpose, so ``c = op(a) op(b)`` is computed as ``c^T = op(b)^T op(a)^T``: cuBLAS's A is our
b, its B our a, m = cols, n = rows, k = the inner size, and each leading dimension is the row
stride of the matrix as stored (so a view with padded rows, like ``dw[:, :, :n]``, needs no copy).

Types: float64 computes in float64, float32 in float32 (TF32 tensor cores only with
``NNABLA_JIT_CUBLAS_TF32=1``: 10-bit mantissas would not match the CPU's results within float32
tolerance), float16 storage computes in float32 (tensor cores).

Streams: numba launches every kernel on the legacy default stream; the GEMM runs there too (on
CuPy's null stream, entered for the call if the caller made another stream current), so it is
ordered after the kernels that wrote its operands and before those that read its output.

Importing this module imports neither CuPy nor numba.cuda; :func:`gemm` does on first use.
"""
import os

import numpy as np
from numba import config

from . import device

__all__ = ["unavailable_reason", "gemm", "TF32"]

TF32 = os.environ.get("NNABLA_JIT_CUBLAS_TF32", "0") == "1"

# cuBLAS's and CUDA's enum values (cublas_api.h, library_types.h), used where CuPy's module
# does not name them
_OP_N, _OP_T = 0, 1
_COMPUTE_32F, _COMPUTE_64F, _COMPUTE_32F_FAST_TF32 = 68, 70, 77
_GEMM_DEFAULT = -1
_POINTER_MODE_HOST = 0
_R_16F, _R_32F, _R_64F = 2, 0, 1

_state = {}   # "cupy", "cublas": the modules once imported; "error": why they could not be


def _load():
    """CuPy and its cuBLAS bindings (ImportError when they cannot be imported)."""
    if "cupy" in _state:
        return _state["cupy"], _state["cublas"]
    if config.ENABLE_CUDASIM:
        raise ImportError("numba's CUDA simulator has no cuBLAS")
    try:
        import cupy
        from cupy.cuda import cublas as cublas_bindings
    except Exception as e:   # a broken CuPy raises more than ImportError (a missing libcublas)
        raise ImportError("CuPy cannot be imported: {}: {}".format(type(e).__name__, e)) from e
    _state["cupy"], _state["cublas"] = cupy, cublas_bindings
    return cupy, cublas_bindings


def unavailable_reason():
    """Why products cannot go through cuBLAS here; None when they can."""
    try:
        _load()
    except ImportError as e:
        return str(e)
    return None


def _types(dtype):
    """(CUDA data type, cuBLAS compute type, NumPy type of alpha and beta) of ``dtype``, or
    None for a type this route leaves to the tiled kernel."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return _R_32F, (_COMPUTE_32F_FAST_TF32 if TF32 else _COMPUTE_32F), np.float32
    if dtype == np.float64:
        return _R_64F, _COMPUTE_64F, np.float64
    if dtype == np.float16:
        return _R_16F, _COMPUTE_32F, np.float32
    return None


# Every step multiplies the same buffers: a device array's layout (its pointer and strides,
# read through ``__cuda_array_interface__``, which builds a dict and asks numba for the current
# context), the batch kinds of the maps and the alpha / beta scalars are kept
# (NNABLA_JIT_CUDA_GEMM_CACHE=0: read on every product).
GEMM_CACHE = device.switch("GEMM_CACHE")
LAYOUT_ATTR = "_nnabla_jit_gemm_layout"
_KINDS = {}       # (a host map's type, its bytes) -> its kind
_SCALARS = {}     # (NumPy type, accum) -> (alpha, beta)
KEPT_MAX = 1024   # kinds kept; the table starts again when full


def _kept_layout(x):
    """:func:`_layout`, kept on the device array ``x`` (its memory and shape never change)."""
    held = getattr(x, "__dict__", None) if GEMM_CACHE else None
    if held is None:
        return _layout(x)
    layout = held.get(LAYOUT_ATTR, _layout)
    if layout is _layout:
        layout = held[LAYOUT_ATTR] = _layout(x)
    return layout


def _kept_kind(host_map):
    """:func:`_kind`, kept per map contents."""
    if not GEMM_CACHE:
        return _kind(host_map)
    key = (host_map.dtype.str, host_map.tobytes())
    kind = _KINDS.get(key)
    if kind is None:
        if len(_KINDS) >= KEPT_MAX:
            _KINDS.clear()
        kind = _KINDS[key] = _kind(host_map)
    return kind


def _scalars(scalar, accum):
    """alpha = 1 and beta = 1 (accumulating) or 0, as one-element host arrays of ``scalar``."""
    pair = _SCALARS.get((scalar, accum)) if GEMM_CACHE else None
    if pair is None:
        pair = np.ones(1, scalar), np.full(1, 1 if accum else 0, scalar)
        if GEMM_CACHE:
            _SCALARS[(scalar, bool(accum))] = pair
    return pair


def _layout(x):
    """(pointer, batch stride, row stride) of the 3-d device array ``x`` in elements, or None
    when its rows are not contiguous or overlap."""
    face = x.__cuda_array_interface__
    item = x.dtype.itemsize
    z, rows, cols = x.shape
    strides = face.get("strides")
    if strides is None:
        return face["data"][0], rows * cols, cols
    sz, sr, sc = (s // item for s in strides)
    if any(s % item for s in strides) or (cols > 1 and sc != 1):
        return None
    row_stride = sr if rows > 1 else cols
    if row_stride < cols:
        return None
    return face["data"][0], sz, row_stride


def _kind(host_map):
    """"broadcast" (every batch reads batch 0), "same" (batch z reads batch z) or "gather"."""
    if not host_map.any():
        return "broadcast"
    if np.array_equal(host_map, np.arange(host_map.size)):
        return "same"
    return "gather"


def gemm(a, b, c, trans_a, trans_b, accum, a_map, b_map):
    """``c[z] (+)= op(a[a_map[z]]) @ op(b[b_map[z]])`` (3-d numba device arrays, host maps)
    through cuBLAS; False, doing nothing, when this route does not take the product (see
    ``blas.matmul``). ImportError when CuPy cannot be imported."""
    types = _types(c.dtype)
    if types is None or a.dtype != c.dtype or b.dtype != c.dtype or 0 in a.shape + b.shape:
        return False
    layouts = _kept_layout(a), _kept_layout(b), _kept_layout(c)
    if None in layouts:
        return False
    cupy, cublas_bindings = _load()
    (pa, za, lda), (pb, zb, ldb), (pc, zc, ldc) = layouts
    z, rows, cols = c.shape
    inner = a.shape[1] if trans_a else a.shape[2]
    data_type, compute_type, scalar = types
    alpha, beta = _scalars(scalar, bool(accum))
    item = c.dtype.itemsize
    handle = cupy.cuda.device.get_cublas_handle()
    handle = int(getattr(handle, "handle", handle))   # an int, or a Handle holding one

    def run(b_ptr, b_stride, a_ptr, a_stride, c_ptr, count):
        cublas_bindings.setPointerMode(handle, _POINTER_MODE_HOST)
        cublas_bindings.gemmStridedBatchedEx(
            handle, _OP_T if trans_b else _OP_N, _OP_T if trans_a else _OP_N, cols, rows, inner,
            alpha.ctypes.data, b_ptr, data_type, ldb, b_stride, a_ptr, data_type, lda, a_stride,
            beta.ctypes.data, c_ptr, data_type, ldc, zc, count, compute_type, _GEMM_DEFAULT)

    def launch():
        kinds = _kept_kind(a_map), _kept_kind(b_map)
        if "gather" not in kinds:   # one call: a broadcast operand has batch stride 0
            run(pb, 0 if kinds[1] == "broadcast" else zb, pa, 0 if kinds[0] == "broadcast" else za,
                pc, z)
            return
        for k in range(z):   # arbitrary broadcasting (BatchMatmul): one GEMM per batch
            run(pb + int(b_map[k]) * zb * item, 0, pa + int(a_map[k]) * za * item, 0,
                pc + k * zc * item, 1)

    if cupy.cuda.get_current_stream().ptr != 0:
        with cupy.cuda.Stream.null:
            launch()
    else:
        launch()
    return True
