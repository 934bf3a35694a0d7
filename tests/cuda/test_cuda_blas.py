"""blas.matmul against NumPy through each route this machine has: the numba tiled kernel
always, cuBLAS (through CuPy) where CuPy and a GPU are there -- so a run on a GPU checks both
(benchmarks/gpu_check.py), and the simulator the tiled kernel."""
import numpy as np
import pytest

from nnabla_jit.cuda_ops import blas, cublas, device

ROUTES = ["numba"] + (["cublas"] if cublas.unavailable_reason() is None else [])


@pytest.fixture(params=ROUTES)
def route(request):
    previous = blas.use_backend(request.param)
    yield request.param
    blas.use_backend(previous)


def _product(a, b, trans_a, trans_b, a_map, b_map):
    a = a.transpose(0, 2, 1) if trans_a else a
    b = b.transpose(0, 2, 1) if trans_b else b
    return np.stack([a[i].astype(np.float64) @ b[j].astype(np.float64)
                     for i, j in zip(a_map, b_map)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_a,trans_b,accum", [(False, False, False), (True, False, True),
                                                   (False, True, True), (True, True, False)])
def test_matmul_transposes_and_accum(route, dtype, trans_a, trans_b, accum):
    cuda = device.load()
    rng = np.random.RandomState(0)
    rows, inner, cols = 3, 5, 4
    a = rng.randn(2, *((inner, rows) if trans_a else (rows, inner))).astype(dtype)
    b = rng.randn(2, *((cols, inner) if trans_b else (inner, cols))).astype(dtype)
    c0 = rng.randn(2, rows, cols).astype(dtype)
    c = cuda.to_device(c0)
    same = blas.batch_map(2, (2,), (2,))
    blas.matmul(cuda.to_device(a), cuda.to_device(b), c, trans_a, trans_b, accum, same, same)
    expected = _product(a, b, trans_a, trans_b, [0, 1], [0, 1]) + (c0 if accum else 0)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c.copy_to_host(), expected, rtol=tol, atol=tol)


def test_matmul_broadcast_and_gathered_batches(route):
    """A broadcast operand (map of zeros: the default), and maps from NumPy broadcasting
    ((2, 1) against (1, 3) batches: neither the same batch nor batch 0)."""
    cuda = device.load()
    rng = np.random.RandomState(1)
    a = rng.randn(2, 3, 4).astype(np.float32)
    b = rng.randn(3, 4, 2).astype(np.float32)
    c = cuda.device_array((6, 3, 2), np.float32)
    a_map, b_map = blas.batch_map(6, (2, 1), (2, 3)), blas.batch_map(6, (1, 3), (2, 3))
    blas.matmul(cuda.to_device(a), cuda.to_device(b), c, a_batch=a_map, b_batch=b_map)
    expected = _product(a, b, False, False, [0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2])
    np.testing.assert_allclose(c.copy_to_host(), expected, rtol=1e-5, atol=1e-5)
    w = rng.randn(1, 4, 2).astype(np.float32)
    blas.matmul(cuda.to_device(a), cuda.to_device(w), c[:2], a_batch=blas.batch_map(2, (2,), (2,)))
    np.testing.assert_allclose(c[:2].copy_to_host(), _product(a, w, False, False, [0, 1], [0, 0]),
                               rtol=1e-5, atol=1e-5)


def test_matmul_into_a_view_with_padded_rows(route):
    """c a column slice of a wider array (the recurrent gradient's dw[:, :, :n_in]): the
    columns beyond it are left alone."""
    cuda = device.load()
    rng = np.random.RandomState(2)
    a = rng.randn(1, 3, 5).astype(np.float32)
    b = rng.randn(1, 5, 2).astype(np.float32)
    wide = rng.randn(1, 3, 4).astype(np.float32)
    target = cuda.to_device(wide)
    blas.matmul(cuda.to_device(a), cuda.to_device(b), target[:, :, :2], accum=True)
    expected = wide.copy()
    expected[:, :, :2] += _product(a, b, False, False, [0], [0])
    np.testing.assert_allclose(target.copy_to_host(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("trans_a", [False, True])
def test_tiled_matmul_takes_more_rows_than_one_grid_in_slices(monkeypatch, trans_a):
    """Rows beyond the grid's y limit of tiles (here 2 tiles) run in slices of rows."""
    monkeypatch.setattr(blas, "MAX_GRID_Y", 2)
    grids = []
    configured = device.configured
    monkeypatch.setattr(device, "configured",
                        lambda kern, grid, block: grids.append(grid) or
                        configured(kern, grid, block))
    cuda = device.load()
    rng = np.random.RandomState(4)
    rows, inner, cols = 2 * 2 * blas.TILE + 3, 3, 2
    a = rng.randn(2, *((inner, rows) if trans_a else (rows, inner))).astype(np.float32)
    b = rng.randn(1, inner, cols).astype(np.float32)
    c0 = rng.randn(2, rows, cols).astype(np.float32)
    c = cuda.to_device(c0)
    same = blas.batch_map(2, (2,), (2,))
    blas.tiled_matmul(cuda.to_device(a), cuda.to_device(b), c, trans_a, False, True, same,
                      blas.batch_map(2, (1,), (2,)))
    expected = _product(a, b, trans_a, False, [0, 1], [0, 0]) + c0
    np.testing.assert_allclose(c.copy_to_host(), expected, rtol=1e-5, atol=1e-5)
    assert [grid[1] for grid in grids] == [2, 2, 1]   # the simulator would not refuse more


def check_cublas_float16_storage_computes_in_float32():
    cuda = device.load()
    previous = blas.use_backend("cublas")
    try:
        rng = np.random.RandomState(3)
        a = rng.randn(1, 8, 64).astype(np.float16)
        b = rng.randn(1, 64, 8).astype(np.float16)
        c = cuda.device_array((1, 8, 8), np.float16)
        blas.matmul(cuda.to_device(a), cuda.to_device(b), c)
        expected = _product(a, b, False, False, [0], [0])
        # float16 accumulation over 64 terms would be off by ~1e-1; float32 by the final rounding
        np.testing.assert_allclose(c.copy_to_host().astype(np.float64), expected, rtol=2e-3,
                                   atol=2e-2)
    finally:
        blas.use_backend(previous)


if "cublas" in ROUTES:   # defined only here: the simulator's run must show no skips
    test_cublas_float16_storage_computes_in_float32 = \
        check_cublas_float16_storage_computes_in_float32
