"""cuda_ops/cublas.py's mapping of row-major batched products onto cuBLAS's column-major
``gemmStridedBatchedEx``, checked here without a GPU: CuPy is replaced by a stand-in whose GEMM
follows cuBLAS's definition on host memory (column-major operands at raw pointers, leading
dimensions, batch strides, alpha and beta read through host pointers), and the "device arrays"
are NumPy arrays exposing ``__cuda_array_interface__``. The real cuBLAS runs in
tests/cuda/test_cuda_blas.py on a GPU (benchmarks/gpu_check.py)."""
import ctypes

import numpy as np
import pytest

from nnabla_jit.cuda_ops import cublas

_DTYPES = {cublas._R_16F: np.float16, cublas._R_32F: np.float32, cublas._R_64F: np.float64}


class FakeDeviceArray:
    """A NumPy array seen as a device array (through the interface only)."""

    def __init__(self, host):
        self.host = host
        self.shape, self.dtype, self.size = host.shape, host.dtype, host.size

    @property
    def __cuda_array_interface__(self):
        contiguous = self.host.flags.c_contiguous
        return {"data": (self.host.ctypes.data, False), "shape": self.shape,
                "strides": None if contiguous else self.host.strides,
                "typestr": self.dtype.str, "version": 3}


def _matrix(ptr, dtype, rows, cols, ld):
    """The column-major rows x cols matrix at ``ptr`` with leading dimension ld."""
    item = np.dtype(dtype).itemsize
    count = rows + (cols - 1) * ld
    base = np.frombuffer((ctypes.c_char * (count * item)).from_address(ptr), dtype)
    return np.lib.stride_tricks.as_strided(base, (rows, cols), (item, ld * item))


class FakeCublas:
    """cuBLAS's gemmStridedBatchedEx as documented, on host memory."""

    def __init__(self):
        self.calls = []
        self.pointer_mode = None

    def setPointerMode(self, handle, mode):
        self.pointer_mode = mode

    def gemmStridedBatchedEx(self, handle, transa, transb, m, n, k, alpha, A, Atype, lda,
                             strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC,
                             batch, compute, algo):
        assert self.pointer_mode == cublas._POINTER_MODE_HOST
        assert Atype == Btype == Ctype
        dtype = _DTYPES[Ctype]
        scalar = np.float64 if compute == cublas._COMPUTE_64F else np.float32
        assert compute in (cublas._COMPUTE_32F, cublas._COMPUTE_64F)
        assert (compute == cublas._COMPUTE_64F) == (dtype == np.float64)
        alpha_v = np.frombuffer((ctypes.c_char * 8).from_address(alpha), scalar, 1)[0]
        beta_v = np.frombuffer((ctypes.c_char * 8).from_address(beta), scalar, 1)[0]
        # the leading dimensions cuBLAS requires
        assert lda >= max(1, m if transa == cublas._OP_N else k)
        assert ldb >= max(1, k if transb == cublas._OP_N else n)
        assert ldc >= max(1, m)
        item = np.dtype(dtype).itemsize
        self.calls.append(batch)
        for z in range(batch):
            a_shape = (m, k) if transa == cublas._OP_N else (k, m)
            b_shape = (k, n) if transb == cublas._OP_N else (n, k)
            a = _matrix(A + z * strideA * item, dtype, *a_shape, lda).astype(np.float64)
            b = _matrix(B + z * strideB * item, dtype, *b_shape, ldb).astype(np.float64)
            c = _matrix(C + z * strideC * item, dtype, m, n, ldc)
            a = a if transa == cublas._OP_N else a.T
            b = b if transb == cublas._OP_N else b.T
            product = alpha_v * (a @ b)
            if beta_v != 0:   # beta 0: C is not read (it may hold NaN)
                product = product + beta_v * c.astype(np.float64)
            c[...] = product.astype(dtype)


class FakeStream:
    ptr = 0


class FakeCupy:
    class cuda:
        class device:
            @staticmethod
            def get_cublas_handle():
                return 7

        @staticmethod
        def get_current_stream():
            return FakeStream()


@pytest.fixture
def fake(monkeypatch):
    bindings = FakeCublas()
    monkeypatch.setitem(cublas._state, "cupy", FakeCupy)
    monkeypatch.setitem(cublas._state, "cublas", bindings)
    return bindings


def _reference(a, b, c0, trans_a, trans_b, accum, a_map, b_map):
    a = a.transpose(0, 2, 1) if trans_a else a
    b = b.transpose(0, 2, 1) if trans_b else b
    out = np.stack([a[i].astype(np.float64) @ b[j].astype(np.float64)
                    for i, j in zip(a_map, b_map)])
    return out + (c0 if accum else 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("accum", [False, True])
def test_transposes_accum_and_types(fake, dtype, trans_a, trans_b, accum):
    rng = np.random.RandomState(0)
    z, rows, inner, cols = 3, 4, 5, 2
    a = rng.randn(z, *((inner, rows) if trans_a else (rows, inner))).astype(dtype)
    b = rng.randn(z, *((cols, inner) if trans_b else (inner, cols))).astype(dtype)
    c0 = rng.randn(z, rows, cols).astype(dtype)
    c = c0.copy()
    same = np.arange(z)
    assert cublas.gemm(FakeDeviceArray(a), FakeDeviceArray(b), FakeDeviceArray(c), trans_a,
                       trans_b, accum, same, same)
    assert fake.calls == [z]   # one strided-batched call
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c, _reference(a, b, c0, trans_a, trans_b, accum, same, same),
                               rtol=tol, atol=tol)


def test_broadcast_operand_and_gathered_batches(fake):
    rng = np.random.RandomState(1)
    a = rng.randn(2, 3, 4).astype(np.float32)
    w = rng.randn(1, 4, 5).astype(np.float32)
    c = np.full((2, 3, 5), np.nan, np.float32)   # not read without accum
    assert cublas.gemm(FakeDeviceArray(a), FakeDeviceArray(w), FakeDeviceArray(c), False, False,
                       False, np.arange(2), np.zeros(2, np.int64))
    np.testing.assert_allclose(c, _reference(a, w, 0, False, False, False, [0, 1], [0, 0]),
                               rtol=1e-5, atol=1e-5)
    b = rng.randn(3, 4, 5).astype(np.float32)
    out = np.zeros((6, 3, 5), np.float32)
    a_map, b_map = np.repeat(np.arange(2), 3), np.tile(np.arange(3), 2)   # (2, 1) x (1, 3)
    fake.calls.clear()
    assert cublas.gemm(FakeDeviceArray(a), FakeDeviceArray(b), FakeDeviceArray(out), False,
                       False, False, a_map, b_map)
    assert fake.calls == [1] * 6   # one GEMM per batch
    np.testing.assert_allclose(out, _reference(a, b, 0, False, False, False, a_map, b_map),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a_broadcast", [True, False], ids=["filter first", "filter second"])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_one_broadcast_operand_transposed_and_accumulated(fake, a_broadcast, trans_a, trans_b):
    """The convolution's batched products (cuda_ops/convolution.py): one filter against each
    sample's col or map, either side, either transposed, onto the output (beta = 1: a bias laid
    out first, or INIT_ADD): one strided-batched call with batch stride 0 for the filter."""
    rng = np.random.RandomState(4)
    z, rows, inner, cols = 3, 4, 5, 2
    a = rng.randn(1 if a_broadcast else z, *((inner, rows) if trans_a else (rows, inner)))
    b = rng.randn(z if a_broadcast else 1, *((cols, inner) if trans_b else (inner, cols)))
    c0 = rng.randn(z, rows, cols).astype(np.float32)
    c = c0.copy()
    a_map, b_map = (np.zeros(z, np.int64), np.arange(z)) if a_broadcast else \
        (np.arange(z), np.zeros(z, np.int64))
    assert cublas.gemm(FakeDeviceArray(a.astype(np.float32)), FakeDeviceArray(b.astype(np.float32)),
                       FakeDeviceArray(c), trans_a, trans_b, True, a_map, b_map)
    assert fake.calls == [z]
    np.testing.assert_allclose(c, _reference(a.astype(np.float32), b.astype(np.float32), c0,
                                             trans_a, trans_b, True, a_map, b_map),
                               rtol=1e-5, atol=1e-5)


def test_views_with_padded_rows(fake):
    """Operands and output as column slices of wider arrays: the row stride is the leading
    dimension, the columns beyond the view are left alone."""
    rng = np.random.RandomState(2)
    wide_a = rng.randn(2, 3, 7).astype(np.float32)
    b = rng.randn(2, 5, 4).astype(np.float32)
    wide_c = rng.randn(2, 3, 6).astype(np.float32)
    before = wide_c.copy()
    a, c = wide_a[:, :, :5], wide_c[:, :, 1:5]
    same = np.arange(2)
    assert cublas.gemm(FakeDeviceArray(a), FakeDeviceArray(b), FakeDeviceArray(c), False, False,
                       True, same, same)
    np.testing.assert_allclose(wide_c[:, :, 1:5],
                               _reference(a, b, before[:, :, 1:5], False, False, True, same, same),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(wide_c[:, :, [0, 5]], before[:, :, [0, 5]])


def test_float16_storage_computes_in_float32(fake):
    rng = np.random.RandomState(3)
    a = rng.randn(1, 2, 3).astype(np.float16)
    b = rng.randn(1, 3, 2).astype(np.float16)
    c = np.zeros((1, 2, 2), np.float16)
    assert cublas.gemm(FakeDeviceArray(a), FakeDeviceArray(b), FakeDeviceArray(c), False, False,
                       False, np.zeros(1, np.int64), np.zeros(1, np.int64))
    np.testing.assert_allclose(c, _reference(a, b, 0, False, False, False, [0], [0]), rtol=2e-3,
                               atol=2e-3)


def test_products_left_to_the_tiled_kernel(fake):
    """Mixed types, integer types, a strided last axis and an empty dimension: False, nothing
    called."""
    f32 = np.ones((1, 2, 2), np.float32)
    zeros = np.zeros(1, np.int64)
    cases = [(f32, f32.astype(np.float64), np.zeros((1, 2, 2), np.float32)),
             (f32.astype(np.int32), f32.astype(np.int32), np.zeros((1, 2, 2), np.int32)),
             (np.ones((1, 2, 4), np.float32)[:, :, ::2], f32, np.zeros((1, 2, 2), np.float32)),
             (np.ones((1, 2, 0), np.float32), np.ones((1, 0, 2), np.float32),
              np.zeros((1, 2, 2), np.float32))]
    for a, b, c in cases:
        assert not cublas.gemm(FakeDeviceArray(a), FakeDeviceArray(b), FakeDeviceArray(c), False,
                               False, False, zeros, zeros)
    assert fake.calls == []


@pytest.mark.parametrize("kept", [True, False])
def test_repeated_products_reuse_the_kept_layouts(fake, monkeypatch, kept):
    """NNABLA_JIT_CUDA_GEMM_CACHE: the layouts, batch kinds and scalars read once; a product
    repeated on the same arrays (accumulating, then not) computes what a fresh one does."""
    monkeypatch.setattr(cublas, "GEMM_CACHE", kept)
    monkeypatch.setattr(cublas, "_KINDS", {})
    monkeypatch.setattr(cublas, "_SCALARS", {})
    rng = np.random.RandomState(2)
    a, b = rng.randn(2, 3, 4).astype(np.float32), rng.randn(1, 4, 5).astype(np.float32)
    c = np.zeros((2, 3, 5), np.float32)
    da, db, dc = FakeDeviceArray(a), FakeDeviceArray(b), FakeDeviceArray(c)
    same, broadcast = np.arange(2), np.zeros(2, np.int64)
    for accum in (False, True, True, False):
        before = c.copy()
        assert cublas.gemm(da, db, dc, False, False, accum, same, broadcast)
        np.testing.assert_allclose(c, _reference(a, b, before, False, False, accum, same,
                                                 broadcast), rtol=1e-5, atol=1e-5)
    assert (cublas.LAYOUT_ATTR in dc.__dict__) == kept
    assert len(cublas._KINDS) == (2 if kept else 0) and len(cublas._SCALARS) == (2 if kept else 0)
    # another map of the same size is its own kind
    gathered = np.array([1, 0])
    cublas.gemm(da, db, dc, False, False, False, gathered, broadcast)
    np.testing.assert_allclose(c, _reference(a, b, c, False, False, False, gathered, broadcast),
                               rtol=1e-5, atol=1e-5)
