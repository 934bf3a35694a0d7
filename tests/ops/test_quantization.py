"""Quantization layers against NumPy references: simulated quantizers with nnabla's
straight-through gradients, linear (ONNX) quantization, and the binary / INQ weight layers."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import (check_backward, check_double_backward, check_forward,
                                check_function, check_grad_rule, strategies as nst)


def _var(a, need_grad=False, dtype=np.float32):
    return nn.Variable.from_numpy_array(np.asarray(a, dtype), need_grad=need_grad)


def _grad_of(fn, xs, dy, wrt=0):
    """The gradient backward writes into input ``wrt`` of fn(*xs) for the output gradient dy."""
    vs = [_var(x, need_grad=(k == wrt), dtype=np.float64) for k, x in enumerate(xs)]
    with nn.context_scope(nn.Context(["cpu:double"])):
        y = fn(*vs)
        y.forward()
        vs[wrt].g = 0
        y.backward(dy)
    return vs[wrt].g.copy()


def check_ste(fn, xs, reference, mask, wrt=0, seed=0):
    """Forward against ``reference``; backward, grad rule and double backward against the
    straight-through gradient dy * mask (not central differences: the forward is a staircase)."""
    check_forward(fn, xs, reference)
    dy = np.random.RandomState(seed).uniform(-1, 1, reference(*xs).shape)
    np.testing.assert_allclose(_grad_of(fn, xs, dy, wrt), dy * mask, atol=1e-12)
    check_grad_rule(fn, xs, wrt=[wrt])
    check_double_backward(fn, xs, wrt=[wrt])


def away_from_steps(x, steps, margin=1e-3):
    """x moved off the discontinuities ``steps`` (so differences and masks are unambiguous)."""
    for s in np.atleast_1d(steps):
        x = np.where(np.abs(x - s) < margin, s + 2 * margin, x)
    return x


# ------------------------------------------------------------------------------ binary
@given(nst.arrays(nst.shapes(1, 3), low=-2, high=2))
def test_binary_sigmoid(x):
    x = away_from_steps(x, [-1, 0, 1])
    check_ste(F.binary_sigmoid, [x], lambda a: (a > 0).astype(float), 0.5 * (np.abs(x) < 1))


@given(nst.arrays(nst.shapes(1, 3), low=-2, high=2))
def test_binary_tanh(x):
    x = away_from_steps(x, [-1, 0, 1])
    check_ste(F.binary_tanh, [x], lambda a: np.where(a > 0, 1.0, -1.0), (np.abs(x) < 1) * 1.0)


# ------------------------------------------------------------------------------ fixed point
def fixed_point_ref(x, sign, n, delta):
    top = (2 ** (n - 1) - 1) * delta if sign else (2 ** n - 1) * delta
    low = -top if sign else 0.0
    q = np.sign(x) * np.floor(np.abs(x) / delta + 0.5) * delta
    return np.clip(q, low, top), low, top


@given(nst.arrays(nst.shapes(1, 3), low=-10, high=10), st.booleans(), st.integers(2, 8),
       st.sampled_from([0.0625, 0.5, 1.0]), st.booleans())
def test_fixed_point_quantize(x, sign, n, delta, fine):
    _, low, top = fixed_point_ref(x, sign, n, delta)
    x = away_from_steps(x, np.arange(-2 ** n, 2 ** n + 1) * delta + delta / 2)
    x = away_from_steps(x, [low, top])
    mask = ((x >= low) & (x <= top)) * 1.0 if fine else np.ones_like(x)
    check_ste(lambda v: F.fixed_point_quantize(v, sign, n, delta, ste_fine_grained=fine), [x],
              lambda a: fixed_point_ref(a, sign, n, delta)[0], mask)


def test_fixed_point_quantize_values():
    x = np.array([-9, -1.03125, -0.03125, 0, 0.09375, 7.94, 20])
    y = F.fixed_point_quantize(_var(x))
    y.forward()
    np.testing.assert_allclose(y.d, [-7.9375, -1.0625, -0.0625, 0, 0.125, 7.9375, 7.9375])


def test_fixed_point_quantize_wrapper_and_errors():
    x = _var(np.ones(3))
    assert F.fixed_point_quantize(x, quantize=False) is x
    with pytest.raises(ValueError, match="FixedPointQuantize.*delta"):
        F.fixed_point_quantize(x, delta=0.0)
    with pytest.raises(ValueError, match="FixedPointQuantize.*n=1"):
        F.fixed_point_quantize(x, sign=True, n=1)


# ------------------------------------------------------------------------------ pow2
def pow2_ref(x, sign, with_zero, n, m):
    bits = n - int(sign) - int(with_zero)
    p_max, p_min = 2.0 ** m, 2.0 ** (m - (2 ** bits - 1))
    a = np.abs(x)
    with np.errstate(divide="ignore"):
        q = 2.0 ** np.round(np.log2(np.where(a > 0, a, 1e-300)))
    q = np.clip(q, p_min, p_max)
    small = a < p_min * 2 ** -0.5
    if not sign:
        small |= x < 0
    q = np.where(small, 0.0 if with_zero else p_min, q)
    return np.where((x < 0) & sign, -q, q)


@given(nst.arrays(nst.shapes(1, 3), low=-5, high=5), st.booleans(), st.booleans(),
       st.integers(3, 6), st.integers(-2, 2), st.booleans())
def test_pow2_quantize(x, sign, with_zero, n, m, fine):
    x = np.where(np.abs(x) < 0.05, 0.3, x)
    x = away_from_steps(x, [s * 2.0 ** (k + 0.5) for k in range(-20, 5) for s in (-1, 1)])
    top = 2.0 ** (m + 0.5)
    mask = (np.abs(x) < top) & ((x >= 0) | sign) if fine else np.ones_like(x)
    check_ste(lambda v: F.pow2_quantize(v, sign, with_zero, n, m, ste_fine_grained=fine), [x],
              lambda a: pow2_ref(a, sign, with_zero, n, m), mask * 1.0)


def test_pow2_quantize_values():
    x = np.array([-5, -1.5, -0.3, 0, 0.2, 0.36, 0.71, 1.41, 1.42, 3])
    y = F.pow2_quantize(_var(x), n=3, m=0)
    y.forward()
    np.testing.assert_allclose(y.d, [-1, -1, 0, 0, 0, 0.5, 1, 1, 1, 1])
    y = F.pow2_quantize(_var(x), sign=False, with_zero=False, n=3, m=0)
    y.forward()
    np.testing.assert_allclose(y.d, [2 ** -7] * 4 + [0.25, 0.5, 1, 1, 1, 1])


def test_pow2_quantize_needs_value_bits():
    with pytest.raises(ValueError, match="Pow2Quantize.*n=2"):
        F.pow2_quantize(_var(np.ones(2)), sign=True, with_zero=True, n=2)
    assert F.pow2_quantize(_var(np.ones(2)), quantize=False).shape == (2,)


# ------------------------------------------------------------------------------ prune
def prune_ref(x, rate):
    if rate >= 1:
        return np.zeros_like(x)
    threshold = np.sort(np.abs(x).ravel())[int((x.size - 1) * rate)]
    return np.where(np.abs(x) < threshold, 0.0, x)


@given(nst.arrays(nst.shapes(1, 3)), st.sampled_from([0.0, 0.3, 0.5, 0.9, 1.0]))
def test_prune(x, rate):
    check_ste(lambda v: F.prune(v, rate), [x], lambda a: prune_ref(a, rate), np.ones_like(x))


def test_prune_rate_must_be_a_fraction():
    with pytest.raises(ValueError, match="Prune.*rate"):
        F.prune(_var(np.ones(3)), rate=1.5)


# ------------------------------------------------------------------------------ min-max
def min_max_ref(x, qr_min, qr_max, ql_min, ql_max, eps):
    qr_max = np.where(qr_max - qr_min < eps, qr_min + eps, qr_max)
    scale = (qr_max - qr_min) / (ql_max - ql_min)
    zp_f = ql_min - qr_min / scale
    zero_point = np.clip(np.sign(zp_f) * np.floor(np.abs(zp_f) + 0.5), ql_min, ql_max)
    lo, hi = (ql_min - zero_point) * scale, (ql_max - zero_point) * scale
    y = np.floor((np.clip(x, lo, hi) - lo) / scale + 0.5) * scale + lo
    return y, lo, hi


def _min_max_inputs(seed, per_channel):
    rng = np.random.RandomState(seed)
    x = rng.randn(2, 3, 2) * 2
    q = (1, 3, 1) if per_channel else (1, 1, 1)
    return [x, -np.abs(rng.randn(*q)) - 0.5, np.abs(rng.randn(*q)) + 0.5, np.zeros(q),
            np.full(q, 15.0)]


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("fine", [True, False])
def test_min_max_quantize_trained_range(per_channel, fine):
    xs = _min_max_inputs(1 + per_channel, per_channel)
    y, lo, hi = min_max_ref(*xs, 0.01)
    xs[0] = away_from_steps(xs[0], np.concatenate([lo.ravel(), hi.ravel()]))

    def fn(*v):
        return F.min_max_quantize(*v, ste_fine_grained=fine)
    check_forward(fn, xs, lambda *a: min_max_ref(*a, 0.01)[0])
    y, lo, hi = min_max_ref(*xs, 0.01)
    dy = np.random.RandomState(0).uniform(-1, 1, y.shape)
    inside = (xs[0] >= lo) & (xs[0] <= hi)
    np.testing.assert_allclose(_grad_of(fn, xs, dy, 0), dy * inside if fine else dy, atol=1e-12)
    axes = (0, 2) if per_channel else (0, 1, 2)
    np.testing.assert_allclose(_grad_of(fn, xs, dy, 1), (dy * (xs[0] < lo)).sum(axes, keepdims=True),
                               atol=1e-12)
    np.testing.assert_allclose(_grad_of(fn, xs, dy, 2), (dy * (xs[0] > hi)).sum(axes, keepdims=True),
                               atol=1e-12)
    check_grad_rule(fn, xs, wrt=[0, 1, 2])
    check_double_backward(fn, xs, wrt=[0, 1, 2])


@pytest.mark.parametrize("ema", [False, True])
def test_min_max_quantize_updates_the_range_from_x(ema):
    x, qr_min, qr_max, ql_min, ql_max = _min_max_inputs(3, True)
    vm, vM = _var(qr_min, True), _var(qr_max, True)
    xv = _var(x, True)
    y = F.min_max_quantize(xv, vm, vM, _var(ql_min), _var(ql_max), decay=0.9, x_min_max=True, ema=ema)
    y.forward()
    lo, hi = x.min((0, 2), keepdims=True), x.max((0, 2), keepdims=True)
    if ema:
        lo, hi = 0.9 * qr_min + 0.1 * lo, 0.9 * qr_max + 0.1 * hi
    np.testing.assert_allclose(vm.d, lo, rtol=1e-5)
    np.testing.assert_allclose(vM.d, hi, rtol=1e-5)
    np.testing.assert_allclose(y.d, min_max_ref(x, lo, hi, ql_min, ql_max, 0.01)[0], atol=1e-5)
    vm.g, vM.g = 7, 7
    y.backward(np.ones(y.shape))
    np.testing.assert_array_equal(vm.g, 7)   # statistics are not trained
    np.testing.assert_array_equal(vM.g, 7)


def test_min_max_quantize_widens_a_too_narrow_range():
    vm, vM = _var([[0.3]]), _var([[0.3]])
    y = F.min_max_quantize(_var(np.full((1, 4), 0.3)), vm, vM, _var([[0.0]]), _var([[255.0]]))
    y.forward()
    np.testing.assert_allclose(vM.d, 0.31, rtol=1e-6)


def test_min_max_quantize_wrapper_and_errors():
    x = _var(np.ones((2, 3)))
    q = [_var(np.zeros((1, 1))) for _ in range(4)]
    assert F.min_max_quantize(x, *q, quantize=False) is x
    with pytest.raises(ValueError, match="MinMaxQuantize.*same shape"):
        F.min_max_quantize(x, _var(np.zeros((1, 3))), *q[1:])


# ------------------------------------------------------------------------------ linear quantization
def quantize_linear_ref(x, scale, zero_point, round_mode="HALF_AWAY_FROM_ZERO",
                        narrow_range=False, dtype=np.int8):
    info = np.iinfo(dtype)
    lo, hi = info.min + int(narrow_range), info.max
    if round_mode == "HALF_TO_EVEN":
        rnd = np.rint
    else:
        def rnd(v):
            return np.sign(v) * np.floor(np.abs(v) + 0.5)
    zp = np.clip(rnd(zero_point), lo, hi)
    return np.clip(rnd(x / scale) + zp, lo, hi)


@given(nst.arrays(nst.shapes(2, 3, min_side=2), low=-300, high=300),
       st.sampled_from(["HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN"]), st.booleans(),
       st.sampled_from([np.int8, np.uint8]))
def test_quantize_linear(x, round_mode, narrow_range, dtype):
    x = np.round(x * 2) / 2   # half-integers exercise the rounding modes
    scale = np.full((1,) * x.ndim, 1.0)
    scale.flat[0] = 2.0
    zero_point = np.full((1,) * x.ndim, 3.5)

    def fn(a, s, z):
        return F.quantize_linear(a, s, z, round_mode, narrow_range, dtype)
    check_forward(fn, [x, scale, zero_point],
                  lambda a, s, z: quantize_linear_ref(a, s, z, round_mode, narrow_range, dtype))


def test_quantize_linear_per_channel_and_gradient():
    rng = np.random.RandomState(0)
    x = rng.uniform(-50, 50, (2, 3, 4))
    scale, zp = rng.uniform(0.5, 2, (1, 3, 1)), np.array([[[-3.0], [0.0], [7.4]]])
    check_forward(lambda a, s, z: F.quantize_linear(a, s, z), [x, scale, zp], quantize_linear_ref)
    dy = rng.uniform(-1, 1, x.shape)
    np.testing.assert_allclose(_grad_of(F.quantize_linear, [x, scale, zp], dy), dy / scale)
    check_grad_rule(F.quantize_linear, [x, scale, zp], wrt=[0])
    check_double_backward(F.quantize_linear, [x, scale, zp], wrt=[0])


def test_quantize_linear_errors():
    x = _var(np.ones((2, 3)))
    with pytest.raises(ValueError, match="QuantizeLinear.*dtype"):
        F.quantize_linear(x, _var(np.ones((1, 1))), _var(np.zeros((1, 1))), dtype=np.int16)
    with pytest.raises(ValueError, match="QuantizeLinear.*same number of dimensions"):
        F.quantize_linear(x, _var(np.ones(1)), _var(np.zeros(1)))
    with pytest.raises(ValueError, match="QuantizeLinear.*scale of shape"):
        F.quantize_linear(x, _var(np.ones((1, 2))), _var(np.zeros((1, 1))))


@given(nst.arrays(nst.shapes(2, 3, min_side=2), low=-100, high=100))
def test_dequantize_linear(x):
    shape = (1,) * (x.ndim - 1) + (x.shape[-1],)
    rng = np.random.RandomState(x.size)
    scale, zp = rng.uniform(0.1, 2, shape), rng.uniform(-5, 5, shape)
    check_function(F.dequantize_linear, [x, scale, zp], lambda a, s, z: (a - z) * s, wrt=[0])
    with pytest.raises(ValueError, match="DequantizeLinear"):
        F.dequantize_linear(_var(x), _var(np.ones(2)), _var(np.ones(2)))


# ------------------------------------------------------------------------------ binary weight layers
def _binarize(w, zero_to=1.0):
    return np.where(w > 0, 1.0, np.where(w < 0, -1.0, zero_to))


def _affine_case(seed, bias):
    """x, W (one exact zero for quantize_zero_to; the rest away from the sign step), the
    binary weight buffer and an optional bias."""
    rng = np.random.RandomState(seed)
    x, w = rng.randn(2, 3), away_from_steps(rng.randn(3, 4), [0.0], 0.05)
    w[0, 0] = 0
    return [x, w, np.zeros_like(w)] + ([rng.randn(4)] if bias else [])


def _without_zero(inputs, k=1):
    """The inputs with the exact zero of the weight moved off the step (for differences)."""
    inputs = list(inputs)
    w = inputs[k].copy()
    w.flat[0] = 0.5
    inputs[k] = w
    return inputs


@pytest.mark.parametrize("bias", [True, False])
def test_binary_connect_affine(bias):
    xs = _affine_case(0, bias)
    wv = _var(xs[2])

    def fn(x, w, *b):
        return F.binary_connect_affine(x, w, wv, *b, quantize_zero_to=0.5)

    def ref(x, w, *b):
        return x @ _binarize(w, 0.5) + (b[0] if b else 0)
    inputs = [xs[0], xs[1]] + xs[3:]
    check_forward(fn, inputs, ref)
    np.testing.assert_array_equal(wv.d, _binarize(xs[1], 0.5))
    inputs = _without_zero(inputs)
    check_backward(fn, inputs, wrt=[0] + ([2] if bias else []))   # exact for x and b
    dy = np.random.RandomState(1).randn(2, 4)
    np.testing.assert_allclose(_grad_of(fn, inputs, dy, 1), xs[0].T @ dy)   # W: straight through
    check_grad_rule(fn, inputs)
    check_double_backward(fn, inputs)


@pytest.mark.parametrize("bias", [True, False])
def test_binary_weight_affine(bias):
    xs = _affine_case(2, bias)
    wv, av = _var(xs[2]), _var(np.zeros(4))

    def fn(x, w, *b):
        return F.binary_weight_affine(x, w, wv, av, *b)

    def ref(x, w, *b):
        return (x @ _binarize(w)) * np.abs(w).mean(0) + (b[0] if b else 0)
    inputs = [xs[0], xs[1]] + xs[3:]
    check_forward(fn, inputs, ref)
    np.testing.assert_allclose(av.d, np.abs(xs[1]).mean(0), rtol=1e-6)
    inputs = _without_zero(inputs)
    check_backward(fn, inputs, wrt=[0] + ([2] if bias else []))
    dy = np.random.RandomState(1).randn(2, 4)
    np.testing.assert_allclose(_grad_of(fn, inputs, dy, 1), xs[0].T @ dy)
    check_grad_rule(fn, inputs)
    check_double_backward(fn, inputs)


def test_binary_affine_shape_errors():
    x, w = _var(np.ones((2, 3))), _var(np.ones((3, 4)))
    with pytest.raises(ValueError, match="BinaryConnectAffine.*binary_weight"):
        F.binary_connect_affine(x, w, _var(np.ones((4, 3))))
    with pytest.raises(ValueError, match="BinaryWeightAffine.*alpha"):
        F.binary_weight_affine(x, w, _var(np.ones((3, 4))), _var(np.ones(3)))
    with pytest.raises(ValueError, match="BinaryConnectAffine.*weight of shape"):
        F.binary_connect_affine(x, _var(np.ones((2, 4))), _var(np.ones((2, 4))))


# ------------------------------------------------------------------------------ INQ
def inq_ref(w, num_bits):
    n1 = np.floor(np.log2(4 * np.abs(w).max() / 3))
    n2 = n1 + 1 - 2 ** (num_bits - 1) / 2
    a = np.abs(w)
    below = 2.0 ** np.floor(np.log2(np.maximum(a, 1e-300)))
    q = np.clip(np.where(a >= 1.5 * below, 2 * below, below), 2 ** n2, 2 ** n1)
    return np.sign(w) * np.where(a < 2 ** (n2 - 1), 0, q)


def test_inq_affine_fixes_half_of_the_learnable_weights_per_step():
    rng = np.random.RandomState(0)
    w0 = rng.randn(5, 3) * 0.5
    x, w, fixed = _var(np.eye(5)), _var(w0, True), _var(np.zeros((5, 3)), dtype=np.int32)
    y = F.inq_affine(x, w, fixed, num_bits=3, inq_iterations=(1, 2, 4))
    counts = []
    for step in range(5):
        y.forward()
        counts.append(int(fixed.d.sum()))
        np.testing.assert_allclose(y.d, w.d, rtol=1e-6)   # x is the identity
        if step == 1:
            first = fixed.d.astype(bool)
            order = np.argsort(-np.abs(w0).ravel())[:7]
            assert set(np.flatnonzero(first)) == set(order)   # the largest 7 of 15
            np.testing.assert_allclose(w.d[first], inq_ref(w0.astype(np.float32), 3)[first])
            kept = w.d.copy()
            w.d = w.d + 0.3   # a solver step moves every weight ...
    np.testing.assert_allclose(w.d[first], kept[first])   # ... but fixed ones are restored
    assert counts == [0, 7, 11, 11, 15]


def test_inq_affine_random_selection_is_seeded():
    rng = np.random.RandomState(0)
    w0 = rng.randn(20, 10)

    def run():
        fixed = _var(np.zeros(w0.shape), dtype=np.int32)
        y = F.inq_affine(_var(np.eye(20)), _var(w0), fixed, inq_iterations=(0, 5),
                         selection_algorithm="random", seed=3)
        y.forward()
        return fixed.d.copy()
    a, b = run(), run()
    np.testing.assert_array_equal(a, b)
    assert 50 < a.sum() < 150


def test_inq_affine_gradients():
    rng = np.random.RandomState(1)
    x, w, b = rng.randn(2, 3), rng.randn(3, 4), rng.randn(4)
    fixed = np.zeros((3, 4), np.int32)

    def fn(x, w, b):
        return F.inq_affine(x, w, _var(fixed, dtype=np.int32), b)
    check_function(fn, [x, w, b], lambda x, w, b: x @ w + b)


def test_inq_errors():
    x, w = _var(np.ones((2, 3))), _var(np.ones((3, 4)))
    with pytest.raises(ValueError, match="INQAffine.*num_bits"):
        F.inq_affine(x, w, _var(np.zeros((3, 4)), dtype=np.int32), num_bits=1)
    with pytest.raises(ValueError, match="INQAffine.*indicator"):
        F.inq_affine(x, w, _var(np.zeros((4, 3)), dtype=np.int32))


# ------------------------------------------------------------------------------ convolutions
def conv_ref(x, w, b=None, pad=(0, 0), stride=(1, 1), group=1):
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    M, Cg, kh, kw = w.shape
    oh = (xp.shape[2] - kh) // stride[0] + 1
    ow = (xp.shape[3] - kw) // stride[1] + 1
    y = np.zeros((x.shape[0], M, oh, ow))
    Mg = M // group
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride[0] * (oh - 1) + 1:stride[0],
                       j:j + stride[1] * (ow - 1) + 1:stride[1]]
            for g in range(group):
                y[:, g * Mg:(g + 1) * Mg] += np.einsum(
                    "mc,bchw->bmhw", w[g * Mg:(g + 1) * Mg, :, i, j], patch[:, g * Cg:(g + 1) * Cg])
    return y + (0 if b is None else b.reshape(1, -1, 1, 1))


def _conv_case(seed, bias, group=1):
    rng = np.random.RandomState(seed)
    x, w = rng.randn(1, 2 * group, 4, 3), away_from_steps(rng.randn(2 * group, 2, 2, 2), [0.0], 0.05)
    return [x, w] + ([rng.randn(2 * group)] if bias else [])


@pytest.mark.parametrize("bias,group", [(True, 1), (False, 2)])
def test_binary_connect_convolution(bias, group):
    inputs = _conv_case(3, bias, group)
    wv = _var(np.zeros_like(inputs[1]))
    kw = dict(pad=(1, 0), stride=(1, 2), group=group)

    def fn(x, w, *b):
        return F.binary_connect_convolution(x, w, wv, *b, **kw)
    check_forward(fn, inputs, lambda x, w, *b: conv_ref(x, _binarize(w), b[0] if b else None,
                                                        (1, 0), (1, 2), group))
    check_backward(fn, inputs, wrt=[0] + ([2] if bias else []))
    out_shape = conv_ref(inputs[0], inputs[1], None, (1, 0), (1, 2), group).shape
    dy = np.random.RandomState(1).randn(*out_shape)
    wx = _grad_of(lambda x, w, *b: F.convolution(x, w, None, pad=(1, 0), stride=(1, 2), group=group),
                  inputs[:2], dy, 1)
    np.testing.assert_allclose(_grad_of(fn, inputs, dy, 1), wx, atol=1e-12)
    check_grad_rule(fn, inputs)
    check_double_backward(fn, inputs)


def test_binary_weight_convolution():
    inputs = _conv_case(4, True)
    wv, av = _var(np.zeros_like(inputs[1])), _var(np.zeros(2))

    def fn(x, w, b):
        return F.binary_weight_convolution(x, w, wv, av, b, pad=(1, 1))

    def ref(x, w, b):
        alpha = np.abs(w).reshape(2, -1).mean(1)
        scaled = conv_ref(x, _binarize(w), None, (1, 1)) * alpha.reshape(1, -1, 1, 1)
        return scaled + b.reshape(1, -1, 1, 1)
    check_forward(fn, inputs, ref)
    check_backward(fn, inputs, wrt=[0, 2])
    check_grad_rule(fn, inputs)
    check_double_backward(fn, inputs)


def test_inq_convolution():
    x, w = _conv_case(5, False)

    def fn(x, w):
        return F.inq_convolution(x, w, _var(np.zeros(w.shape), dtype=np.int32), pad=(0, 1))
    check_function(fn, [x, w], lambda x, w: conv_ref(x, w, None, (0, 1)))
    fixed = _var(np.zeros(w.shape), dtype=np.int32)
    wv = _var(w)
    y = F.inq_convolution(_var(x), wv, fixed, inq_iterations=(0,))
    y.forward()
    np.testing.assert_allclose(wv.d, inq_ref(w.astype(np.float32), 4), rtol=1e-6)
    np.testing.assert_allclose(y.d, conv_ref(x, wv.d.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_quantized_convolution_shape_errors():
    x, w = _var(np.ones((1, 2, 4, 4))), _var(np.ones((3, 2, 2, 2)))
    with pytest.raises(ValueError, match="BinaryConnectConvolution.*binary_weight"):
        F.binary_connect_convolution(x, w, _var(np.ones((3, 2, 2, 1))))
    with pytest.raises(ValueError, match="BinaryWeightConvolution.*alpha"):
        F.binary_weight_convolution(x, w, _var(np.ones((3, 2, 2, 2))), _var(np.ones(2)))
    with pytest.raises(ValueError, match="INQConvolution.*indicator"):
        F.inq_convolution(x, w, _var(np.ones((3, 2, 2)), dtype=np.int32))
