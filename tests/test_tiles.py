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


@njit
def _table_product(A, a_rows, a_k, B, b_rows, ldb, C, ldc, M, N, K, accumulate):
    tiles.table_product(A, a_rows, a_k, B, b_rows, ldb, C, ldc, M, N, K, accumulate)


@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (3, 5, 7), (8, 32, 10), (9, 33, 0), (17, 49, 13),
                                     (16, 16, 25), (27, 64, 100), (7, 47, 3)])
@pytest.mark.parametrize("table, accumulate", [("a", False), ("a", True), ("b", False)])   # B: no accumulate
def test_table_product_matches_numpy(M, N, K, table, accumulate):
    """Rows of one operand found through a table of offsets into a flat array (windows that
    overlap, in any order), the other operand strided; the block of C and nothing else."""
    rng = np.random.RandomState(M * 1000 + N * 10 + K + (table == "a"))
    ldc = N + 5
    C = rng.randn(M * ldc + 4).astype(np.float32)
    before = C.copy()
    no_rows = np.zeros(0, np.int64)
    if table == "a":   # row i of A: K elements from image[a_rows[i]] on
        image = rng.randn(K + 3 * M + 8).astype(np.float32)
        a_rows = rng.permutation(3 * M + 8)[:M].astype(np.int64)
        a = np.stack([image[r:r + K] for r in a_rows]) if M else np.zeros((0, K), np.float32)
        ldb = N + 3
        B = rng.randn(K * ldb + 1).astype(np.float32)
        b = B[:K * ldb].reshape(K, ldb)[:, :N]
        _table_product(image, a_rows, 1, B, no_rows, ldb, C, ldc, M, N, K, accumulate)
    else:              # row k of B: N elements from image[b_rows[k]] on; A's rows K + 2 apart
        image = rng.randn(N + 2 * K + 8).astype(np.float32)
        b_rows = rng.randint(0, 2 * K + 8, K).astype(np.int64)
        b = np.stack([image[r:r + N] for r in b_rows]) if K else np.zeros((0, N), np.float32)
        A = rng.randn(M * (K + 2)).astype(np.float32)
        a = A.reshape(M, K + 2)[:, :K]
        _table_product(A, no_rows, K + 2, image, b_rows, 0, C, ldc, M, N, K, False)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if accumulate:
        want += before[:M * ldc].reshape(M, ldc)[:, :N]
    block = C[:M * ldc].reshape(M, ldc)
    np.testing.assert_allclose(block[:, :N], want, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(want).max()))
    outside = np.ones(C.size, bool)
    outside[:M * ldc] = ~np.pad(np.ones((M, N), bool), ((0, 0), (0, ldc - N))).ravel()
    np.testing.assert_array_equal(C[outside], before[outside])
