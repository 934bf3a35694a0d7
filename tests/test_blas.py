"""The GEMM every layer uses: transposes, accumulation, one BLAS call or parallel row blocks."""
import subprocess
import sys

import numpy as np
import pytest

from nnabla_jit.ops import blas


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("size", [(3, 4, 5), (160, 220, 140), (140, 220, 160)])   # one call / blocks
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm(trans_a, trans_b, accumulate, size, dtype):
    m, k, n = size
    rng = np.random.RandomState(0)
    a = rng.randn(*((k, m) if trans_a else (m, k))).astype(dtype)
    b = rng.randn(*((n, k) if trans_b else (k, n))).astype(dtype)
    out = rng.randn(m, n).astype(dtype)
    want = (a.T if trans_a else a) @ (b.T if trans_b else b) + (out if accumulate else 0)
    blas.gemm(a, b, out, trans_a, trans_b, accumulate)
    np.testing.assert_allclose(out, want, rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-4)


def test_large_products_take_the_blocked_path(monkeypatch):
    calls = []
    original = blas._gemm_blocks
    monkeypatch.setattr(blas, "_gemm_blocks", lambda *args: calls.append(1) or original(*args))
    a, b = np.ones((200, 300), np.float32), np.ones((300, 100), np.float32)
    out = np.empty((200, 100), np.float32)
    blas.gemm(a, b, out)
    assert calls and np.all(out == 300)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("size, path", [((40, 25, 1100), "_gemm_blocks"),          # short inner dimension
                                        ((1100, 27, 37), "_gemm_blocks"),
                                        ((16, 4001, 25), "_gemm_inner_blocks"),    # small output
                                        ((3, 70001, 5), "_gemm_inner_blocks")])
def test_small_kernel_blocks(monkeypatch, trans_a, trans_b, accumulate, size, path):
    """float32 products past OpenBLAS's small-matrix size with a short inner dimension, or a
    small output, run as blocks under it (cut across the output, or along the inner dimension
    into partial products summed): the same product, every transpose, with accumulation."""
    calls = []
    original = getattr(blas, path)
    monkeypatch.setattr(blas, path, lambda *args: calls.append(1) or original(*args))
    m, k, n = size
    rng = np.random.RandomState(1)
    a = rng.randn(*((k, m) if trans_a else (m, k))).astype(np.float32)
    b = rng.randn(*((n, k) if trans_b else (k, n))).astype(np.float32)
    out = rng.randn(m, n).astype(np.float32)
    want = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b) + (out if accumulate else 0)
    blas.gemm(a, b, out, trans_a, trans_b, accumulate)
    assert calls
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3 * np.sqrt(k))


def test_scipy_blas_without_importing_scipy_linalg():
    """import nnabla_jit loads scipy's two BLAS modules, not the whole of scipy.linalg; a later
    import of scipy.linalg (and of its BLAS submodules) gives what it gives without us."""
    script = (
        "import sys, nnabla_jit\n"
        "assert 'scipy.linalg' not in sys.modules\n"
        "import scipy.linalg.cython_blas, scipy.linalg as L, numpy as np\n"
        "from nnabla_jit.ops import blas\n"
        "assert L.cython_blas is sys.modules['scipy.linalg.cython_blas']\n"
        "assert L._fblas is sys.modules['scipy.linalg._fblas']\n"
        "assert L.blas.sgemm is blas._GEMM[np.dtype(np.float32)]\n"
        "assert not any(type(f).__name__ == '_LinkOnImport' for f in sys.meta_path)\n"
        "assert np.allclose(L.solve(2 * np.eye(3), np.ones(3)), 0.5)\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr
