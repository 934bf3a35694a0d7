"""The matrix product on the device, shared by Affine, BatchMatmul, the convolutions' GEMMs
and the recurrent, signal and geometric families: ``matmul`` is the one place it is chosen.

``c[z] (+)= op(a[a_batch[z]]) @ op(b[b_batch[z]])`` over 3-d (batch, rows, cols) arrays, where
``op`` transposes when asked: transposed operands are read in place, and broadcast batches are
named by the index maps, so no operand is copied.

Two routes (``BACKEND``, chosen at import, ``use_backend`` switches it):

* ``"cublas"``: cuBLAS through CuPy (``cublas.py``: one strided-batched GEMM on the device
  arrays' own memory), when CuPy is installed and the simulator is off, unless
  ``NNABLA_JIT_CUDA_BLAS=numba``. A product cuBLAS cannot take as it is (mixed types, a
  matrix whose last axis is not contiguous, an empty dimension) runs the tiled kernel.
* ``"numba"``: the tiled kernel below, always under the simulator and where CuPy is absent.
  Each block computes a TILE x TILE tile of c, staging TILE-wide slices of a and b through
  shared memory; it accumulates in float64.
"""
import functools
import importlib.util
import os
import warnings

import numpy as np
from numba import config, float64

from . import cublas, device
from .device import store
from .registry import kernel

cuda = None  # numba.cuda, bound by device.load()

# numba's simulator runs every thread of a block as a Python thread: at the tiny sizes it is
# tested on, 16 x 16 tiles are mostly idle padding, and 4 x 4 ones run the same code far faster.
TILE = 4 if config.ENABLE_CUDASIM else 16
MAX_GRID_Z = 65535   # CUDA's limit on the grid's z dimension (the batches of one launch)
MAX_GRID_Y = 65535   # and on its y dimension (the row tiles of one launch)

ENV_VAR = "NNABLA_JIT_CUDA_BLAS"   # "numba": the tiled kernel even where CuPy is installed
BACKENDS = ("cublas", "numba")


def _initial_backend():
    """cuBLAS where CuPy is installed (not imported here: ``import nnabla_jit`` stays light),
    the simulator is off and the environment does not ask for the tiled kernel."""
    wanted = os.environ.get(ENV_VAR, "cublas").strip().lower()
    if wanted not in BACKENDS:
        raise ValueError("{}={!r}: expected one of {}".format(ENV_VAR, wanted, BACKENDS))
    if wanted == "numba" or config.ENABLE_CUDASIM or importlib.util.find_spec("cupy") is None:
        return "numba"
    return "cublas"


BACKEND = _initial_backend()   # the route of matmul: "cublas" or "numba"


def use_backend(name):
    """Route later products through ``name`` ("cublas" or "numba"); returns the previous one.
    "cublas" needs CuPy and a GPU (not the simulator): ImportError saying why otherwise."""
    global BACKEND
    if name not in BACKENDS:
        raise ValueError("blas.use_backend: name={!r}, expected one of {}".format(name, BACKENDS))
    if name == "cublas":
        reason = cublas.unavailable_reason()
        if reason is not None:
            raise ImportError("blas.use_backend('cublas'): " + reason)
    previous, BACKEND = BACKEND, name
    return previous


@kernel
def matmul_kernel(a, b, c, a_batch, b_batch, trans_a, trans_b, accum, z0):
    tile_a = cuda.shared.array((TILE, TILE), float64)
    tile_b = cuda.shared.array((TILE, TILE), float64)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    z = z0 + cuda.blockIdx.z
    za = a_batch[z]
    zb = b_batch[z]
    rows = c.shape[1]
    cols = c.shape[2]
    inner = a.shape[1] if trans_a else a.shape[2]
    acc = 0.0
    for k0 in range(0, inner, TILE):
        ka = k0 + tx
        if row < rows and ka < inner:
            tile_a[ty, tx] = a[za, ka, row] if trans_a else a[za, row, ka]
        else:
            tile_a[ty, tx] = 0.0
        kb = k0 + ty
        if kb < inner and col < cols:
            tile_b[ty, tx] = b[zb, col, kb] if trans_b else b[zb, kb, col]
        else:
            tile_b[ty, tx] = 0.0
        cuda.syncthreads()
        for k in range(TILE):
            acc += tile_a[ty, k] * tile_b[k, tx]
        cuda.syncthreads()
    if row < rows and col < cols:
        store(c, (z, row, col), acc, accum)


def matmul(a, b, c, trans_a=False, trans_b=False, accum=False, a_batch=None, b_batch=None):
    """c (+)= op(a) @ op(b) for 3-d device arrays; ``a_batch`` / ``b_batch``: the batch of a
    and b that each batch of c uses (default: batch 0, one matrix broadcast to all)."""
    global BACKEND
    z, rows, cols = c.shape
    if c.size == 0:
        return
    if a_batch is None:
        a_batch = batch_map(z, (1,), (z,))
    if b_batch is None:
        b_batch = batch_map(z, (1,), (z,))
    maps = _HOST_MAPS.get(id(a_batch)), _HOST_MAPS.get(id(b_batch))
    if BACKEND == "cublas" and None not in maps:   # maps made elsewhere: the tiled kernel
        try:
            if cublas.gemm(a, b, c, trans_a, trans_b, accum, maps[0][1], maps[1][1]):
                return
        except ImportError as e:   # CuPy installed but not importable: the tiled kernel from now on
            warnings.warn("nnabla_jit: cuBLAS through CuPy is unusable ({}); matrix products "
                          "run the numba tiled kernel".format(e), RuntimeWarning)
            BACKEND = "numba"
    tiled_matmul(a, b, c, trans_a, trans_b, accum, a_batch, b_batch)


def tiled_matmul(a, b, c, trans_a, trans_b, accum, a_batch, b_batch):
    """:func:`matmul` through the tiled kernel (the maps given); more rows than one grid's
    tiles (a pointwise channel-last convolution's B * O) in slices of rows."""
    z, rows, cols = c.shape
    step = MAX_GRID_Y * TILE
    if rows > step:
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            tiled_matmul(a[:, :, r0:r1] if trans_a else a[:, r0:r1], b, c[:, r0:r1], trans_a,
                         trans_b, accum, a_batch, b_batch)
        return
    for z0 in range(0, z, MAX_GRID_Z):
        grid = ((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE, min(z - z0, MAX_GRID_Z))
        device.configured(matmul_kernel, grid, (TILE, TILE))(
            a, b, c, a_batch, b_batch, bool(trans_a), bool(trans_b), bool(accum), z0)


@functools.lru_cache(maxsize=256)
def batch_map(n, batch_shape, out_batch_shape):
    """Device array: for each of the ``n`` batches of the output (``out_batch_shape``, C
    order), the index of the batch of an operand of ``batch_shape`` it reads (NumPy
    broadcasting)."""
    count = int(np.prod(batch_shape, dtype=np.int64))
    index = np.arange(count, dtype=np.int64).reshape(batch_shape)
    full = np.broadcast_to(index, out_batch_shape).reshape(n)
    mapped = device.upload(full)
    _HOST_MAPS[id(mapped)] = (mapped, full)   # holding ``mapped`` keeps its id unique
    return mapped


_HOST_MAPS = {}   # id of a batch_map device array -> (that array, its host copy)
