"""The quantizers on the device against the CPU kernels."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import assert_same_on_cuda, cuda_context, run, written_on_device

rng = np.random.RandomState(0)


def spread(*shape):
    """Values over several powers of two, both signs, with ties of the fixed-point grid and
    range edges (no log2 ties: float32 and the simulator's float64 log2 round those apart)."""
    x = (rng.uniform(-1, 1, shape) * 2.0 ** rng.randint(-9, 4, shape)).astype(np.float32)
    x.flat[:6] = [0.0, 0.03125, -0.09375, 7.9375, -8.5, 3.0]
    return x


CASES = [
    ("fixed point signed, fine-grained STE", lambda x: F.fixed_point_quantize(x, n=5, delta=0.0625)),
    ("fixed point unsigned, plain STE",
     lambda x: F.fixed_point_quantize(x, sign=False, n=4, delta=0.25, ste_fine_grained=False)),
    ("pow2 signed with zero", lambda x: F.pow2_quantize(x, n=5, m=1)),
    ("pow2 unsigned without zero, plain STE",
     lambda x: F.pow2_quantize(x, sign=False, with_zero=False, n=4, m=2, ste_fine_grained=False)),
    ("gradients accumulate",
     lambda x: F.pow2_quantize(x, n=5) + F.fixed_point_quantize(x, n=5) * 2.0),
]


@pytest.mark.parametrize("name, build", CASES, ids=[c[0] for c in CASES])
def test_quantizers(name, build):
    assert_same_on_cuda(build, spread(3, 8))


def test_no_gradient_asked():
    """propagate_down False: only the other input's gradient is written."""
    assert_same_on_cuda(lambda x, w: F.fixed_point_quantize(x, n=5) * w, spread(2, 4),
                        spread(2, 4), no_grad=(0,))


def min_max_arrays(qshape=(1, 3, 1)):
    x = spread(2, 3, 4) * 4.0
    qr_min = np.full(qshape, -1.0, np.float32) + signed_ranges(qshape)
    qr_max = np.full(qshape, 1.5, np.float32) + signed_ranges(qshape)
    return x, qr_min, qr_max, np.zeros(qshape, np.float32), np.full(qshape, 255.0, np.float32)


def signed_ranges(shape):
    return rng.uniform(-0.3, 0.3, shape).astype(np.float32)


@pytest.mark.parametrize("kw, qshape", [
    (dict(), (1, 3, 1)),                                  # trained range: dq_min / dq_max
    (dict(ste_fine_grained=False), (1, 1, 1)),
    (dict(x_min_max=True), (1, 3, 1)),                     # batch extremes per channel
    (dict(x_min_max=True, ema=True, decay=0.9), (1, 1, 1)),   # x's rank, as nnabla needs
], ids=["trained range", "plain STE", "x min max", "x min max ema"])
def test_min_max_quantize(kw, qshape):
    """The output, the input gradients and the range written in place match the CPU's."""
    arrays = min_max_arrays(qshape)
    trained = not kw.get("x_min_max")
    no_grad = (3, 4) if trained else (1, 2, 3, 4)
    build = lambda *v: F.min_max_quantize(*v, **kw)   # noqa: E731
    y_cpu, v_cpu = run(nn.Context(), build, arrays, no_grad)
    y_gpu, v_gpu = run(cuda_context(), build, arrays, no_grad)
    assert written_on_device(y_gpu.data)
    np.testing.assert_allclose(y_gpu.d, y_cpu.d, rtol=1e-5, atol=1e-6)
    for a, b in zip(v_gpu, v_cpu):
        np.testing.assert_allclose(a.d, b.d, rtol=1e-5, atol=1e-6)   # qr_min / qr_max updated
        if a.need_grad:
            np.testing.assert_allclose(a.g, b.g, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("round_mode, dtype, narrow", [
    ("HALF_AWAY_FROM_ZERO", 1, False), ("HALF_TO_EVEN", 2, True)])
def test_quantize_linear(round_mode, dtype, narrow):
    """Ties (x / scale = k + 0.5) and saturation both ways; dx = dy / scale."""
    x = np.array([[-300.0, -2.5, -1.5, -0.5], [0.25, 0.75, 1.3, 400.0]], np.float32)
    scale = np.array([[1.0], [0.5]], np.float32)
    zero_point = np.array([[2.5], [3.0]], np.float32)
    assert_same_on_cuda(
        lambda x, s, z: F.quantize_linear(x, s, z, round_mode=round_mode, narrow_range=narrow,
                                          dtype=dtype), x, scale, zero_point, no_grad=(1, 2))


def binary_layer_arrays(weight_shape, x_shape, weighted, bias):
    w = spread(*weight_shape)
    w.flat[0] = 0.0   # sign(0) -> quantize_zero_to
    arrays = [signed_ranges(x_shape) * 3, w, np.zeros(weight_shape, np.float32)]
    if weighted:
        n_out = weight_shape[1] if len(weight_shape) == 2 else weight_shape[0]
        arrays.append(np.zeros((n_out,), np.float32))
    if bias:
        arrays.append(signed_ranges((weight_shape[1] if len(weight_shape) == 2
                                     else weight_shape[0],)))
    return arrays


BINARY_CASES = [
    ("binary connect affine", lambda x, w, wb, b: F.binary_connect_affine(x, w, wb, b),
     (6, 3), (2, 2, 3), False, True),
    ("binary weight affine, no bias",
     lambda x, w, wb, a: F.binary_weight_affine(x, w, wb, a, quantize_zero_to=-1.0),
     (6, 3), (2, 6), True, False),
    ("binary connect convolution",
     lambda x, w, wb: F.binary_connect_convolution(x, w, wb, pad=(1, 0)),
     (3, 2, 2, 2), (1, 2, 3, 3), False, False),
    ("binary weight convolution",
     lambda x, w, wb, a, b: F.binary_weight_convolution(x, w, wb, a, b, stride=(2, 1)),
     (2, 2, 2, 2), (1, 2, 4, 3), True, True),
]


@pytest.mark.parametrize("name, build, w_shape, x_shape, weighted, bias", BINARY_CASES,
                         ids=[c[0] for c in BINARY_CASES])
def test_binary_layers(name, build, w_shape, x_shape, weighted, bias):
    """Output, gradients of x / weight / bias, and the binarized weight (and alpha) written in
    place, against the CPU."""
    arrays = binary_layer_arrays(w_shape, x_shape, weighted, bias)
    no_grad = (2, 3) if weighted else (2,)
    y_cpu, v_cpu = run(nn.Context(), build, arrays, no_grad)
    y_gpu, v_gpu = run(cuda_context(), build, arrays, no_grad)
    assert written_on_device(y_gpu.data)
    np.testing.assert_allclose(y_gpu.d, y_cpu.d, rtol=1e-5, atol=1e-5)
    for a, b in zip(v_gpu, v_cpu):
        np.testing.assert_allclose(a.d, b.d, rtol=1e-5, atol=1e-6)
        if a.need_grad:
            assert written_on_device(a.grad)
            np.testing.assert_allclose(a.g, b.g, rtol=1e-5, atol=1e-5)
