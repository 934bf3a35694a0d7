"""ops/tiles.py's register-tile product against NumPy: every tile shape and the last columns,
operands read through offsets and strides (a transposed A), accumulation, and nothing written
outside the block."""
import numpy as np
import pytest
from numba import njit

from nnabla_jit.ops import tiles


@njit
def _product(A, a_off, a_row, a_k, B, b_off, ldb, C, c_off, ldc, M, N, K, accumulate):
    tiles.block_product(A, a_off, a_row, a_k, B, b_off, ldb, C, c_off, ldc, M, N, K, accumulate)


@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (3, 5, 7), (8, 32, 10), (9, 33, 0), (17, 49, 13),
                                     (32, 64, 400), (16, 16, 25), (27, 32, 100), (7, 47, 3)])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("accumulate", [False, True])
def test_block_product_matches_numpy(M, N, K, transposed, accumulate):
    rng = np.random.RandomState(M * 1000 + N * 10 + K)
    a = rng.randn(M, K).astype(np.float32)
    A = np.ascontiguousarray(a.T).ravel() if transposed else a.ravel()   # (i, k) at k*M + i, or i*K + k
    a_row, a_k = (1, M) if transposed else (K, 1)
    ldb, ldc = N + 3, N + 5   # rows longer than the block: the tiles must stay inside it
    B = rng.randn(2 + K * ldb).astype(np.float32)
    C = rng.randn(1 + M * ldc + 4).astype(np.float32)
    before = C.copy()
    _product(A, 0, a_row, a_k, B, 2, ldb, C, 1, ldc, M, N, K, accumulate)
    b = B[2:2 + K * ldb].reshape(K, ldb)[:, :N]
    block = C[1:1 + M * ldc].reshape(M, ldc)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if accumulate:
        want += before[1:1 + M * ldc].reshape(M, ldc)[:, :N]
    np.testing.assert_allclose(block[:, :N], want, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(want).max()))
    outside = np.ones(C.size, bool)
    outside[1:1 + M * ldc] = ~np.pad(np.ones((M, N), bool), ((0, 0), (0, ldc - N))).ravel()
    np.testing.assert_array_equal(C[outside], before[outside])
