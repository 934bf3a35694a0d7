"""A tiled matrix product on the device (numba.cuda has no cuBLAS), shared by Affine and
BatchMatmul.

``c[z] (+)= op(a[a_batch[z]]) @ op(b[b_batch[z]])`` over 3-d (batch, rows, cols) arrays, where
``op`` transposes when asked: transposed operands are read in place, and broadcast batches are
named by the index maps, so no operand is copied. Each block computes a TILE x TILE tile of
c, staging TILE-wide slices of a and b through shared memory; it accumulates in float64.
"""
import functools

import numpy as np
from numba import config, float64

from . import device
from .registry import kernel

cuda = None  # numba.cuda, bound by device.load()

# numba's simulator runs every thread of a block as a Python thread: at the tiny sizes it is
# tested on, 16 x 16 tiles are mostly idle padding, and 4 x 4 ones run the same code far faster.
TILE = 4 if config.ENABLE_CUDASIM else 16
MAX_GRID_Z = 65535   # CUDA's limit on the grid's z dimension (the batches of one launch)


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
        if accum:
            c[z, row, col] += acc
        else:
            c[z, row, col] = acc


def matmul(a, b, c, trans_a=False, trans_b=False, accum=False, a_batch=None, b_batch=None):
    """c (+)= op(a) @ op(b) for 3-d device arrays; ``a_batch`` / ``b_batch``: the batch of a
    and b that each batch of c uses (default: batch 0, one matrix broadcast to all)."""
    z, rows, cols = c.shape
    if c.size == 0:
        return
    if a_batch is None:
        a_batch = batch_map(z, (1,), (z,))
    if b_batch is None:
        b_batch = batch_map(z, (1,), (z,))
    for z0 in range(0, z, MAX_GRID_Z):
        grid = ((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE, min(z - z0, MAX_GRID_Z))
        matmul_kernel[grid, (TILE, TILE)](a, b, c, a_batch, b_batch, bool(trans_a),
                                          bool(trans_b), bool(accum), z0)


@functools.lru_cache(maxsize=256)
def batch_map(n, batch_shape, out_batch_shape):
    """Device array: for each of the ``n`` batches of the output (``out_batch_shape``, C
    order), the index of the batch of an operand of ``batch_shape`` it reads (NumPy
    broadcasting)."""
    count = int(np.prod(batch_shape, dtype=np.int64))
    index = np.arange(count, dtype=np.int64).reshape(batch_shape)
    full = np.broadcast_to(index, out_batch_shape).reshape(n)
    return device.upload(full)
