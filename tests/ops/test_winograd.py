"""The Winograd F(2x2,3x3) route of Convolution (ops/winograd.py) against the im2col route:
forward, data, filter and bias gradients on drawn shapes, float32 and float64, serial and
parallel kernels; the filter tiles redone when the filter changes; the switch and shape rule."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ops import kernels, winograd
from nnabla_jit.testing.checks import double_context
from nnabla_jit.context import Context

# Measured on 18 drawn shapes against a float64 reference, max |error| / max |reference| of y
# and dx: Winograd float32 3.6e-7 (im2col float32 5.9e-7), Winograd float64 1.7e-15: F(2,3)'s
# transforms only add, subtract and halve. The bounds (on Winograd against im2col in the same
# dtype) leave room for other shapes and BLAS builds, and still catch any wrong tap.
TOL = {np.float32: 5e-6, np.float64: 1e-12}


def _context(dtype):
    return double_context() if dtype == np.float64 else Context(["cpu:float"])


def _drawn_shapes(n, seed):
    rng = np.random.RandomState(seed)
    for _ in range(n):
        B = int(rng.choice([1, 2, 3]))
        C, M = int(rng.randint(1, 65)), int(rng.randint(1, 65))
        H, W = int(rng.randint(1, 12)), int(rng.randint(1, 12))
        pad = (int(rng.randint(0, 3)), int(rng.randint(0, 3)))
        if H + 2 * pad[0] < 3 or W + 2 * pad[1] < 3:
            pad = (1, 1) if H > 0 and W > 0 else pad
        if H + 2 * pad[0] < 3 or W + 2 * pad[1] < 3:
            pad = (2, 2)
        yield (B, C, H, W), M, pad


def _conv_step(route, monkeypatch, dtype, x_shape, M, pad, bias=True, seed=0):
    """y, dx, dw, db of one forward + backward with the route ("force" or "0")."""
    monkeypatch.setenv("NNABLA_JIT_WINOGRAD", route)
    rng = np.random.RandomState(seed)
    with nn.context_scope(_context(dtype)):
        x = nn.Variable.from_numpy_array(rng.randn(*x_shape).astype(dtype), need_grad=True)
        w = nn.Variable.from_numpy_array(rng.randn(M, x_shape[1], 3, 3).astype(dtype), need_grad=True)
        b = nn.Variable.from_numpy_array(rng.randn(M).astype(dtype), need_grad=True) if bias else None
        y = F.convolution(x, w, b, pad=pad)
        assert (y.parent.op.wino is not None) == (route == "force")
        y.forward()
        y.backward(rng.randn(*y.shape).astype(dtype))
    out = [y.d.copy(), x.g.copy(), w.g.copy()] + ([b.g.copy()] if bias else [])
    assert all(a.dtype == dtype for a in out)
    return out


def _assert_close(got, want, dtype, what):
    for name, g, r in zip(("y", "dx", "dw", "db"), got, want):
        err = np.abs(g - r).max() / max(np.abs(r).max(), 1e-30)
        assert err <= TOL[dtype], "{} {}: relative error {:.2e}".format(what, name, err)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("parallel", [False, True])
def test_winograd_matches_im2col_on_drawn_shapes(monkeypatch, dtype, parallel):
    with kernels.parallel_threshold(0 if parallel else None):
        for x_shape, M, pad in _drawn_shapes(6, seed=1 + parallel):
            got = _conv_step("force", monkeypatch, dtype, x_shape, M, pad)
            want = _conv_step("0", monkeypatch, dtype, x_shape, M, pad)
            _assert_close(got, want, dtype, "x {} M {} pad {}".format(x_shape, M, pad))


def test_winograd_without_bias_and_with_lead_axes(monkeypatch):
    def run(route):
        monkeypatch.setenv("NNABLA_JIT_WINOGRAD", route)
        rng = np.random.RandomState(3)
        x = nn.Variable.from_numpy_array(rng.randn(2, 2, 5, 7, 6).astype(np.float32), need_grad=True)
        w = nn.Variable.from_numpy_array(rng.randn(4, 5, 3, 3).astype(np.float32), need_grad=True)
        y = F.convolution(x, w, base_axis=2, pad=(0, 1))
        y.forward()
        y.backward(rng.randn(*y.shape).astype(np.float32))
        return [y.d.copy(), x.g.copy(), w.g.copy()]
    _assert_close(run("force"), run("0"), np.float32, "base_axis 2")


def test_the_data_gradient_adds_into_an_accumulating_input(monkeypatch):
    """x feeds two convolutions: the second data gradient is added to the first."""
    def run(route):
        monkeypatch.setenv("NNABLA_JIT_WINOGRAD", route)
        rng = np.random.RandomState(4)
        x = nn.Variable.from_numpy_array(rng.randn(2, 6, 7, 5).astype(np.float32), need_grad=True)
        w1 = nn.Variable.from_numpy_array(rng.randn(5, 6, 3, 3).astype(np.float32))
        w2 = nn.Variable.from_numpy_array(rng.randn(5, 6, 3, 3).astype(np.float32))
        y = F.convolution(x, w1, pad=(1, 1)) * F.convolution(x, w2, pad=(1, 1))
        y.forward()
        y.backward(np.ones(y.shape, np.float32))
        return [y.d.copy(), x.g.copy()]
    _assert_close(run("force"), run("0"), np.float32, "two convolutions of x")


def test_filter_tiles_follow_the_filter_and_the_col_is_not_reused_stale(monkeypatch):
    """Two steps on the same buffers with new values in place: the second step's output uses
    the new filter (the tiles are redone) and its filter gradient the new input (no col kept
    from a step before: the Winograd forward makes none)."""
    def run(route):
        monkeypatch.setenv("NNABLA_JIT_WINOGRAD", route)
        rng = np.random.RandomState(5)
        x = nn.Variable.from_numpy_array(rng.randn(2, 3, 6, 6).astype(np.float32), need_grad=True)
        w = nn.Variable.from_numpy_array(rng.randn(4, 3, 3, 3).astype(np.float32), need_grad=True)
        y = F.convolution(x, w, pad=(1, 1))
        out = []
        for _ in range(2):
            y.forward()
            y.backward(np.ones(y.shape, np.float32))
            out += [y.d.copy(), x.g.copy(), w.g.copy()]
            w.d -= 0.1 * w.g
            x.d *= -2.0
        return out
    got, want = run("force"), run("0")
    assert not np.allclose(want[0], want[3])
    _assert_close(got[3:], want[3:], np.float32, "second step")


def test_filter_tiles_are_kept_while_the_filter_is_unchanged():
    tiles = winograd.FilterTiles(flip=False)
    w = np.random.RandomState(6).randn(2, 3, 3, 3)
    first = tiles.of(w).copy()
    tiles.U[...] = 0.0   # not recomputed for the same values ...
    assert not tiles.of(w).any()
    w[1, 2, 0, 1] += 1.0   # ... recomputed after any change
    again = tiles.of(w)
    assert not np.array_equal(again, first)
    np.testing.assert_allclose(again[:, 0], first[:, 0])


def test_switch_and_shape_rule(monkeypatch):
    x = nn.Variable((2, 32, 8, 8))
    w = nn.Variable((32, 32, 3, 3))
    monkeypatch.setenv("NNABLA_JIT_WINOGRAD", "0")
    assert F.convolution(x, w, pad=(1, 1)).parent.op.wino is None
    monkeypatch.delenv("NNABLA_JIT_WINOGRAD")
    assert F.convolution(x, nn.Variable((64, 32, 3, 3)), pad=(1, 1)).parent.op.wino is None  # off
    monkeypatch.setenv("NNABLA_JIT_WINOGRAD", "1")
    assert (F.convolution(x, w, pad=(1, 1)).parent.op.wino is not None) == winograd.wins(32, 32, 8, 8)
    wide = F.convolution(nn.Variable((1, 64, 16, 16)), nn.Variable((64, 64, 3, 3)), pad=(1, 1))
    assert wide.parent.op.wino is not None   # ResNet-18's second stage: Winograd measured faster
    rgb = F.convolution(nn.Variable((2, 3, 32, 32)), nn.Variable((32, 3, 3, 3)), pad=(1, 1))
    assert rgb.parent.op.wino is None   # 3 input channels: im2col measured faster
    for kw in (dict(stride=(2, 2)), dict(dilation=(2, 2)), dict(pad=(3, 3))):
        assert F.convolution(x, w, **kw).parent.op.wino is None
    monkeypatch.setenv("NNABLA_JIT_WINOGRAD", "force")
    assert F.convolution(x, nn.Variable((32, 16, 3, 3)), group=2).parent.op.wino is None
    assert F.convolution(x, nn.Variable((32, 32, 5, 5))).parent.op.wino is None
