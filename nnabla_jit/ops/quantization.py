"""Quantization layers: simulated quantizers with straight-through gradients, binary and INQ
weight layers.

Quantizers compute in floating point (as nnabla does, "for simulation purposes"). Their
gradient is nnabla's straight-through estimator: ``dy`` passes unchanged, or, with
``ste_fine_grained``, only where the input lies inside the representable range. One kernel
pair serves every "pass inside [lo, hi]" estimator (:class:`_RangeSTE`).

The weight layers (BinaryConnect, BinaryWeight, INQ) write their quantized weights into the
``binary_weight`` / ``alpha`` / ``weight`` / ``indicator`` inputs during forward, as nnabla does,
and differentiate as the affine map with the float weights (``dW = x^T dy``). Inputs written
in place are taken in their stored type (``keep_input_dtypes``), so the writes reach the
variables even when the compute type differs.
"""
import math

import numpy as np
from numba import njit, prange

from .. import random as nn_random
from .blas import add_row_vector, gemm, sum_rows
from .common import checked_affine_dims, normalize_axis
from .convolution import ConvGeometry, check_bias, init_for_accum, init_for_bias
from .elementwise import elementwise
from .kernels import parallel_kernel
from .registry import Op, accumulate, register


# ------------------------------------------------------------------ backward kernels
# ------------------------------------------------------------------ straight-through estimators
def range_ste_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dx, dy = input_grads[0].reshape(-1), output_grads[0].reshape(-1)
    if op.range is None:
        accumulate(dx, dy, accum[0])
    else:
        op.bw_kernel(inputs[0].reshape(-1), dy, dx, op.range[0], op.range[1], accum[0])


def identity_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        accumulate(input_grads[0], output_grads[0], accum[0])


# ------------------------------------------------------------------ min-max
@njit(cache=True)
def min_max_quantize_backward_kernel(x, dy, qindex, lo, hi, dx, d_min, d_max, fine_grained,
                                     want_dx, want_dq, accum_dx):
    """dx: dy inside [lo, hi] (or everywhere); d_min / d_max: sums of dy below / above it."""
    for i in range(x.size):
        k = qindex[i]
        v = x[i]
        if want_dx:
            g = dy[i] if (not fine_grained or lo[k] <= v <= hi[k]) else 0.0
            if accum_dx:
                dx[i] += g
            else:
                dx[i] = g
        if want_dq:
            if v < lo[k]:
                d_min[k] += dy[i]
            elif v > hi[k]:
                d_max[k] += dy[i]


def min_max_quantize_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    x, qr_min, qr_max, ql_min, ql_max = inputs
    scale, lo, hi = nudged_range(qr_min, qr_max, ql_min, ql_max)
    # qr_min / qr_max get gradients only when they are trained (no x statistics, no EMA).
    trained = not op.x_min_max and not op.ema
    dq = []
    for k in (1, 2):
        g = input_grads[k] if propagate_down[k] else None
        if g is not None and not accum[k]:
            g.fill(0)
        dq.append(g.reshape(-1) if g is not None and trained else np.zeros(lo.size, lo.dtype))
    dx = input_grads[0].reshape(-1) if propagate_down[0] else x.reshape(-1)
    min_max_quantize_backward_kernel(
        x.reshape(-1), output_grads[0].reshape(-1), op.qindex, lo.reshape(-1), hi.reshape(-1),
        dx, dq[0], dq[1], op.ste_fine_grained, propagate_down[0],
        trained and (propagate_down[1] or propagate_down[2]), accum[0])


# ------------------------------------------------------------------ linear quantization
@njit(cache=True)
def quantize_linear_backward_kernel(dy, scale, sindex, dx, accum):
    for i in range(dy.size):
        g = dy[i] / scale[sindex[i]]
        if accum:
            dx[i] += g
        else:
            dx[i] = g


def quantize_linear_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        quantize_linear_backward_kernel(output_grads[0].reshape(-1), inputs[1].reshape(-1),
                                        op.sindex, input_grads[0].reshape(-1), accum[0])


# ------------------------------------------------------------------ quantized affine layers
def _affine_backward(op, x, dy, w_for_dx, input_grads, propagate_down, accum):
    """dx = dy w_for_dx^T, dW = x^T dy (the float weight, input 1), db = sum(dy)."""
    n, d, m = op.dims
    dy2 = dy.reshape(n, m)
    if propagate_down[0]:
        gemm(dy2, w_for_dx.reshape(d, m), input_grads[0].reshape(n, d), trans_b=True,
             accumulate=accum[0])
    if propagate_down[1]:
        gemm(x.reshape(n, d), dy2, input_grads[1].reshape(d, m), trans_a=True, accumulate=accum[1])
    b = op.bias_index
    if b is not None and propagate_down[b]:
        sum_rows(dy2, input_grads[b].reshape(m), accum[b])


def binary_connect_affine_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                   accum):
    _affine_backward(op, inputs[0], output_grads[0], inputs[2], input_grads, propagate_down, accum)


def binary_weight_affine_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                  accum):
    n, d, m = op.dims
    dy = output_grads[0].reshape(n, m)
    if propagate_down[0]:   # the output scale alpha applies to dx only; dW ignores it (nnabla)
        gemm(dy * inputs[3].reshape(1, m), inputs[2].reshape(d, m), input_grads[0].reshape(n, d),
             trans_b=True, accumulate=accum[0])
    pd = list(propagate_down)
    pd[0] = False
    _affine_backward(op, inputs[0], dy, inputs[2], input_grads, pd, accum)


def inq_affine_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    _affine_backward(op, inputs[0], output_grads[0], inputs[1], input_grads, propagate_down, accum)


def affine_dims(x_shape, w_shape, base_axis):
    xs, ws = tuple(x_shape), tuple(w_shape)
    base_axis %= len(xs)
    return xs, ws, (int(np.prod(xs[:base_axis])), ws[0], int(np.prod(ws[1:])))


# ------------------------------------------------------------------ quantized convolutions
def quantized_convolution_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                   accum):
    geo, dy = op.geo, output_grads[0]
    if propagate_down[0]:
        geo.map_to_image(dy, op.forward_filter(inputs), input_grads[0],
                         init=init_for_accum(accum[0]))
    if propagate_down[1]:
        geo.filter_grad(inputs[0], dy, input_grads[1], accum[1], reuse_col=True)
    b = op.bias_index
    if b is not None and propagate_down[b]:
        axes = tuple(a for a in range(dy.ndim) if a != op.channel_axis)
        accumulate(input_grads[b], dy.sum(axis=axes), accum[b])


elementwise("BinarySigmoid", "where(x > 0, 1.0, 0.0)", dx="where(abs(x) < 1, 0.5 * dy, 0.0)")
elementwise("BinaryTanh", "where(x > 0, 1.0, -1.0)", dx="where(abs(x) < 1, dy, 0.0)")


def broadcast_index(op, what, shape, target):
    """For each element of an array of shape ``target`` (flat, C order), the flat index of the
    element of an array of ``shape`` that broadcasting pairs it with."""
    if len(shape) > len(target) or any(s not in (1, t) for s, t in zip(shape[::-1], target[::-1])):
        op.fail("{} of shape {} cannot be broadcast to the input shape {}", what, shape, target)
    size = int(np.prod(shape, dtype=np.int64))
    return np.ascontiguousarray(np.broadcast_to(np.arange(size, dtype=np.int64).reshape(shape),
                                                target)).reshape(-1)


# ------------------------------------------------------------------ straight-through estimators
# The per-element formulas below are shared by the CPU kernels and the CUDA kernels of
# ``cuda_ops/quantization.py`` (which compile their ``py_func`` as device functions): leaves
# that call no other numba function.
@njit(inline="always")
def fixed_point_value(v, lo, hi, delta):
    """v rounded to a multiple of delta (half away from zero), clipped to [lo, hi]."""
    if v > hi:
        return hi
    if v < lo:
        return lo
    if v >= 0:
        return math.floor(v / delta + 0.5) * delta
    return -math.floor(-v / delta + 0.5) * delta


@njit(inline="always")
def range_ste_value(v, dy, lo, hi):
    """The straight-through gradient: dy where lo <= v <= hi, else 0."""
    return dy if lo <= v <= hi else 0.0


@parallel_kernel
def ste_range_backward_kernel(x, dy, dx, lo, hi, accum):
    """dx (+)= dy where lo <= x <= hi, else 0 (flat arrays)."""
    for i in prange(x.size):
        g = range_ste_value(x[i], dy[i], lo, hi)
        if accum:
            dx[i] += g
        else:
            dx[i] = g


class _RangeSTE(Op):
    """A quantizer whose gradient is dy inside ``pass_range(**args)`` (None: everywhere)."""

    pass_range = None   # function of the op's arguments -> (lo, hi) or None

    def setup(self, x):
        self.range = type(self).pass_range(**self.args)
        self.size = int(np.prod(x, dtype=np.int64))
        self.bw_kernel = ste_range_backward_kernel.for_size(self.size)
        return [x]

    backward = range_ste_backward

    def grad_depends_input_data(self, i, j):
        return self.range is not None


def fixed_point_bounds(sign, n, delta):
    """(min, max) of the fixed-point grid: +-(2^(n-1) - 1) delta signed, [0, (2^n - 1) delta]."""
    hi = (2.0 ** (n - 1 if sign else n) - 1) * delta
    return (-hi if sign else 0.0), hi


def fixed_point_pass_range(sign=True, n=8, delta=0.0625, ste_fine_grained=True):
    return fixed_point_bounds(sign, n, delta) if ste_fine_grained else None


@parallel_kernel
def fixed_point_kernel(x, y, lo, hi, delta):
    for i in prange(x.size):
        y[i] = fixed_point_value(x[i], lo, hi, delta)


@register
class FixedPointQuantize(_RangeSTE):
    """Round to multiples of ``delta`` and clip to the n-bit range."""
    pass_range = staticmethod(fixed_point_pass_range)

    def setup(self, x):
        if self.n < 1 or (self.sign and self.n < 2):
            self.fail("n={} bits leave no bits for the value (sign={})", self.n, self.sign)
        if self.delta <= 0:
            self.fail("delta={} must be positive", self.delta)
        self.bounds = fixed_point_bounds(self.sign, self.n, self.delta)
        return super().setup(x)

    def forward(self, inputs, outputs):
        fixed_point_kernel.for_size(self.size)(inputs[0].reshape(-1), outputs[0].reshape(-1),
                                               self.bounds[0], self.bounds[1], self.delta)


def pow2_levels(sign, with_zero, n, m):
    """(smallest, largest) power of two of the grid; zero and the sign each take one bit."""
    bits = n - int(bool(sign)) - int(bool(with_zero))
    # Beyond 64 bits the smallest power underflows to 0.0 all the same; capping keeps a huge
    # n from building a huge Python integer 2 ** bits.
    return 2.0 ** (m - (2.0 ** min(bits, 64) - 1)) if bits > 0 else None, 2.0 ** m


def pow2_pass_range(sign=True, with_zero=True, n=8, m=1, ste_fine_grained=True):
    """Where the gradient passes: |x| below the rounding threshold of 2^m (the geometric mean
    of 2^m and 2^(m+1)), and x >= 0 when unsigned."""
    if not ste_fine_grained:
        return None
    hi = 2.0 ** (m + 0.5)
    return (-hi if sign else 0.0), hi


@njit(inline="always")
def pow2_value(v, signed, with_zero, p_min, p_max):
    """sign(v) 2^round(log2|v|) clipped to [p_min, p_max] in magnitude; inputs below the
    rounding threshold of p_min (and negatives when unsigned) become 0 (with_zero) or p_min."""
    a = abs(v)
    if (not signed and v < 0) or a < p_min * 2.0 ** -0.5:
        q = 0.0 if with_zero else p_min
        return -q if (signed and v < 0) else q
    e = math.log2(a)
    q = 2.0 ** (math.floor(e + 0.5) if e >= 0 else -math.floor(-e + 0.5))
    q = min(max(q, p_min), p_max)
    return q if v >= 0 else -q


@parallel_kernel
def pow2_kernel(x, y, signed, with_zero, p_min, p_max):
    for i in prange(x.size):
        y[i] = pow2_value(x[i], signed, with_zero, p_min, p_max)


@register
class Pow2Quantize(_RangeSTE):
    """Round to signed powers of two in [2^(m - 2^bits + 1), 2^m] (log-domain quantization)."""
    pass_range = staticmethod(pow2_pass_range)

    def setup(self, x):
        self.levels = pow2_levels(self.sign, self.with_zero, self.n, self.m)
        if self.levels[0] is None:
            self.fail("n={} bits must be positive when considering zero (with_zero={}, 1 bit) and "
                      "sign (sign={}, 1 bit)", self.n, self.with_zero, self.sign)
        return super().setup(x)

    def forward(self, inputs, outputs):
        pow2_kernel.for_size(self.size)(inputs[0].reshape(-1), outputs[0].reshape(-1), self.sign,
                                        self.with_zero, self.levels[0], self.levels[1])


@njit(cache=True)
def prune_kernel(x, y, rate):
    """Zero the elements with |x| below the rate-quantile of |x| (all of them when rate == 1)."""
    if rate >= 1.0:
        y[:] = 0.0
        return
    magnitudes = np.sort(np.abs(x))
    threshold = magnitudes[int((x.size - 1) * rate)]
    for i in range(x.size):
        y[i] = 0.0 if abs(x[i]) < threshold else x[i]


@register
class Prune(Op):
    """Zero the smallest ``rate`` fraction of |x|; the gradient passes unchanged."""

    def setup(self, x):
        if not 0.0 <= self.rate <= 1.0:
            self.fail("rate={} must be in [0, 1]", self.rate)
        return [x]

    def forward(self, inputs, outputs):
        if inputs[0].size:
            prune_kernel(inputs[0].reshape(-1), outputs[0].reshape(-1), self.rate)

    backward = identity_backward

    def grad_depends_input_data(self, i, j):
        return False


# ------------------------------------------------------------------ min-max (with zero point)
def round_half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def nudged_range(qr_min, qr_max, ql_min, ql_max):
    """scale and the range [qr_min', qr_max'] moved so that real 0 falls on an integer level."""
    scale = (qr_max - qr_min) / (ql_max - ql_min)
    zero_point = np.clip(round_half_away(ql_min - qr_min / scale), ql_min, ql_max)
    return scale, (ql_min - zero_point) * scale, (ql_max - zero_point) * scale


@njit(inline="always")
def min_max_quantize_value(v, lo, hi, scale):
    """v clipped to [lo, hi] and rounded to the grid lo + k scale (shared with the CUDA
    kernel: a leaf)."""
    v = min(max(v, lo), hi)
    return math.floor((v - lo) / scale + 0.5) * scale + lo


@parallel_kernel
def min_max_quantize_kernel(x, qindex, lo, hi, scale, y):
    for i in prange(x.size):
        k = qindex[i]
        y[i] = min_max_quantize_value(x[i], lo[k], hi[k], scale[k])


@register
class MinMaxQuantize(Op):
    """Uniform quantization of x into the nudged range [qr_min, qr_max] with levels
    [ql_min, ql_max]; x_min_max / ema update qr_min and qr_max in place during forward."""
    no_grad_inputs = (3, 4)
    refused_grad_inputs = (3, 4)
    keep_input_dtypes = (1, 2)

    def setup(self, x, qr_min, qr_max, ql_min, ql_max):
        qs = [tuple(qr_min), tuple(qr_max), tuple(ql_min), tuple(ql_max)]
        if any(q != qs[0] for q in qs):
            self.fail("qr_min {}, qr_max {}, ql_min {} and ql_max {} must have the same shape",
                      *qs)
        self.qindex = broadcast_index(self, "qr_min", qs[0], tuple(x))
        padded = (1,) * (len(x) - len(qs[0])) + qs[0]
        self.stat_axes = tuple(a for a, s in enumerate(padded) if s == 1)
        self.size = int(np.prod(x, dtype=np.int64))
        return [x]

    def update_range(self, x, qr_min, qr_max):
        """x_min_max / ema statistics, then qr_max >= qr_min + eps; written into the inputs."""
        if self.x_min_max:
            lo = x.min(axis=self.stat_axes, keepdims=True).reshape(qr_min.shape) if x.size else qr_min
            hi = x.max(axis=self.stat_axes, keepdims=True).reshape(qr_max.shape) if x.size else qr_max
            if self.ema:
                lo = self.decay * qr_min + (1 - self.decay) * lo
                hi = self.decay * qr_max + (1 - self.decay) * hi
            qr_min[...] = lo
            qr_max[...] = hi
        np.copyto(qr_max, qr_min + self.eps, where=qr_max - qr_min < self.eps)

    def forward(self, inputs, outputs):
        x, qr_min, qr_max, ql_min, ql_max = inputs
        self.update_range(x, qr_min, qr_max)
        scale, lo, hi = nudged_range(qr_min, qr_max, ql_min, ql_max)
        min_max_quantize_kernel.for_size(self.size)(
            x.reshape(-1), self.qindex, lo.reshape(-1), hi.reshape(-1), scale.reshape(-1),
            outputs[0].reshape(-1))

    backward = min_max_quantize_backward


# ------------------------------------------------------------------ ONNX-style linear quantization
INT8, UINT8 = 1, 2   # nnabla's dtype codes (numpy's type numbers)


def quantized_range(dtype, narrow_range):
    lo, hi = (-128, 127) if dtype == INT8 else (0, 255)
    return lo + int(bool(narrow_range)), hi


def check_quantization_params(op, x, scale, zero_point):
    if not len(x) == len(scale) == len(zero_point):
        op.fail("x {}, scale {} and zero_point {} must have the same number of dimensions",
                x, scale, zero_point)
    return (broadcast_index(op, "scale", tuple(scale), tuple(x)),
            broadcast_index(op, "zero_point", tuple(zero_point), tuple(x)))


# Leaves shared with the CUDA kernel of QuantizeLinear (which rounds half to even its own way:
# numba.cuda has no rint).
@njit(inline="always")
def scalar_round_half_away(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


@njit(inline="always")
def saturate_quantized(v, z, lo, hi):
    """The rounded v plus the rounded zero point z (itself saturated), saturated to [lo, hi]."""
    return min(max(v + min(max(z, lo), hi), lo), hi)


@parallel_kernel
def quantize_linear_kernel(x, scale, zero_point, sindex, zindex, y, lo, hi, half_to_even):
    for i in prange(x.size):
        v = x[i] / scale[sindex[i]]
        z = zero_point[zindex[i]]
        if half_to_even:
            v = np.rint(v)
            z = np.rint(z)
        else:
            v = scalar_round_half_away(v)
            z = scalar_round_half_away(z)
        y[i] = saturate_quantized(v, z, lo, hi)


@register
class QuantizeLinear(Op):
    """y = saturate(round(x / scale) + round(zero_point)) into the int8/uint8 range (as floats)."""
    no_grad_inputs = (1, 2)
    refused_grad_inputs = (1, 2)

    def setup(self, x, scale, zero_point):
        if self.dtype not in (INT8, UINT8):
            self.fail("dtype={} is not supported: use 1 (int8) or 2 (uint8)", self.dtype)
        self.sindex, self.zindex = check_quantization_params(self, x, scale, zero_point)
        self.range = quantized_range(self.dtype, self.narrow_range)
        self.size = int(np.prod(x, dtype=np.int64))
        return [x]

    def forward(self, inputs, outputs):
        x, scale, zero_point = inputs
        quantize_linear_kernel.for_size(self.size)(
            x.reshape(-1), scale.reshape(-1), zero_point.reshape(-1), self.sindex, self.zindex,
            outputs[0].reshape(-1), self.range[0], self.range[1], self.round_mode == "HALF_TO_EVEN")

    backward = quantize_linear_backward

    def grad_depends_input_data(self, i, j):
        return j == 1


@register
class DequantizeLinear(elementwise("DequantizeLinear", "(x0 - x2) * x1", dx0="dy * x1",
                                   refused_grad_inputs=(1, 2))):
    """y = (x - zero_point) * scale; only x gets a gradient (dy * scale)."""

    def setup(self, x, scale, zero_point):
        check_quantization_params(self, x, scale, zero_point)
        return super().setup(x, scale, zero_point)


# ------------------------------------------------------------------ binary and INQ weight layers
class _QuantizedAffine(Op):
    """Affine with a quantized copy of the weight: subclasses say which input holds the
    weight used forward (``forward_weight``) and fill it in ``quantize(inputs)``."""

    forward_weight = 1

    def affine_setup(self, x, w, bias):
        self.dims = checked_affine_dims(self, x, w, bias)
        self.bias_index = self.input_index("bias") if self.has_input("bias") else None
        return [tuple(x[:self.base_axis]) + tuple(w[1:])]

    def check_same_shape(self, name, shape, w):
        if tuple(shape) != tuple(w):
            self.fail("{} of shape {} must have the shape of weight {}", name, shape, w)

    def forward(self, inputs, outputs):
        self.quantize(inputs)
        n, d, m = self.dims
        y = outputs[0].reshape(n, m)
        gemm(inputs[0].reshape(n, d), inputs[self.forward_weight].reshape(d, m), y)
        self.scale_output(inputs, y)
        if self.bias_index is not None:
            add_row_vector(y, inputs[self.bias_index].reshape(m))

    def scale_output(self, inputs, y):
        pass


@njit(inline="always")
def binary_value(v, zero_to):
    """sign(v), with ``zero_to`` for 0 (shared with the CUDA kernel: a leaf)."""
    return 1.0 if v > 0 else (-1.0 if v < 0 else zero_to)


@njit(cache=True)
def binarize_kernel(w, wb, zero_to):
    for i in range(w.size):
        wb[i] = binary_value(w[i], zero_to)


@register
class BinaryConnectAffine(_QuantizedAffine):
    """y = x sign(W) + b; sign(W) (0 -> quantize_zero_to) is written into binary_weight."""
    forward_weight = 2
    no_grad_inputs = (2,)
    keep_input_dtypes = (2,)

    def setup(self, x, weight, binary_weight, bias=None):
        self.check_same_shape("binary_weight", binary_weight, weight)
        return self.affine_setup(x, weight, bias)

    def quantize(self, inputs):
        binarize_kernel(inputs[1].reshape(-1), inputs[2].reshape(-1), self.quantize_zero_to)

    backward = binary_connect_affine_backward

    def grad_depends_input_data(self, i, j):
        return (i == 0 and j == 2) or (i == 1 and j == 0)


@njit(cache=True)
def mean_abs_rows(w, alpha):
    """alpha[m] = mean over d of |w[d, m]|."""
    alpha[:] = 0.0
    for d in range(w.shape[0]):
        for m in range(w.shape[1]):
            alpha[m] += abs(w[d, m])
    alpha /= max(w.shape[0], 1)


@register
class BinaryWeightAffine(_QuantizedAffine):
    """y = (x sign(W)) * alpha + b with alpha = mean |W| per output (XNOR-Net weights);
    sign(W) and alpha are written into binary_weight and alpha."""
    forward_weight = 2
    no_grad_inputs = (2, 3)
    keep_input_dtypes = (2, 3)

    def setup(self, x, weight, binary_weight, alpha, bias=None):
        self.check_same_shape("binary_weight", binary_weight, weight)
        if int(np.prod(alpha, dtype=np.int64)) != int(np.prod(weight[1:], dtype=np.int64)):
            self.fail("alpha of shape {} must have one element per output {} (weight shape {})",
                      alpha, tuple(weight[1:]), weight)
        return self.affine_setup(x, weight, bias)

    def quantize(self, inputs):
        _, d, m = self.dims
        binarize_kernel(inputs[1].reshape(-1), inputs[2].reshape(-1), self.quantize_zero_to)
        mean_abs_rows(inputs[1].reshape(d, m), inputs[3].reshape(m))

    def scale_output(self, inputs, y):
        y *= inputs[3].reshape(1, -1)

    backward = binary_weight_affine_backward

    def grad_depends_input_data(self, i, j):
        return (i == 0 and j in (2, 3)) or (i == 1 and j == 0)


def inq_quantize(w, num_bits):
    """Incremental Network Quantization's grid: 0 and +-2^k for n2 <= k <= n1, where
    n1 = floor(log2(4 max|w| / 3)) and n2 = n1 + 1 - 2^(num_bits - 1) / 2; a weight goes to the
    power of two below it unless it reaches 1.5 times that, and to 0 below 2^(n2 - 1)."""
    top = float(np.abs(w).max()) if w.size else 0.0
    if top == 0.0:
        return np.zeros_like(w)
    n1 = math.floor(math.log2(4.0 * top / 3.0))
    n2 = n1 + 1 - 2 ** (num_bits - 1) // 2
    a = np.abs(w).astype(np.float64)
    with np.errstate(divide="ignore"):
        below = 2.0 ** np.floor(np.log2(np.where(a > 0, a, 1.0)))
    q = np.where(a >= 1.5 * below, 2 * below, below)
    q = np.clip(q, 2.0 ** n2, 2.0 ** n1)
    q = np.where(a < 2.0 ** (n2 - 1), 0.0, q)
    return (np.sign(w) * q).astype(w.dtype)


class _INQ:
    """The INQ schedule shared by INQAffine and INQConvolution: at each forward whose count is
    in ``inq_iterations`` half of the learnable weights (the largest, or a random half) are
    quantized and fixed (all of them at the last entry); fixed weights are restored to their
    quantized values at every forward, so solver updates to them are undone."""


    def inq_setup(self, weight, indicator):
        if tuple(indicator) != tuple(weight):
            self.fail("indicator_fixedweights of shape {} must have the shape of weight {}",
                      indicator, weight)
        if self.num_bits < 2:
            self.fail("num_bits={} must be at least 2 (zero and the sign take one bit each)",
                      self.num_bits)
        self.iteration = 0
        self.fixed_values = None
        self.rng = nn_random.get_rng(self.seed) if self.seed >= 0 else None

    def quantize(self, inputs):
        w, fixed = inputs[1].reshape(-1), inputs[2].reshape(-1)
        if self.fixed_values is None:   # weights marked fixed before the first forward
            self.fixed_values = inq_quantize(w, self.num_bits)
        is_fixed = fixed == 1
        w[is_fixed] = self.fixed_values[is_fixed]   # first, so a new grid sees them
        if self.recomputing:   # the weights fixed by the first run are in the inputs already
            return
        if self.iteration in self.inq_iterations:
            learnable = np.flatnonzero(fixed != 1)
            if self.iteration == self.inq_iterations[-1]:
                chosen = learnable
            elif self.selection_algorithm == "largest_abs":
                order = np.argsort(-np.abs(w[learnable]), kind="stable")
                chosen = learnable[order[:learnable.size // 2]]
            else:
                rng = self.rng or nn_random.get_rng(-1)
                chosen = learnable[rng.randint(0, 2, learnable.size) == 1]
            self.fixed_values[chosen] = inq_quantize(w, self.num_bits)[chosen]
            fixed[chosen] = 1
            w[chosen] = self.fixed_values[chosen]
        self.iteration += 1


@register
class INQAffine(_INQ, _QuantizedAffine):
    """Affine whose weights are progressively fixed to powers of two (INQ)."""
    keep_input_dtypes = (1, 2)
    no_grad_inputs = (2,)

    def setup(self, x, weight, indicator_fixedweights, bias=None):
        self.inq_setup(weight, indicator_fixedweights)
        return self.affine_setup(x, weight, bias)

    backward = inq_affine_backward

    def grad_depends_input_data(self, i, j):
        return (i == 0 and j == 1) or (i == 1 and j == 0)


# ------------------------------------------------------------------ quantized convolutions
class _QuantizedConvolution(Op):
    """Convolution (no channel_last) with a quantized filter: subclasses write the quantized
    weights in ``quantize(inputs)`` and give the filter used forward by ``forward_filter``;
    dx is the convolution's with that filter, dW = corr(x, dy) goes to the float weight."""

    n_filter_inputs = 3   # x, weight and its quantized companions before the optional bias

    def conv_setup(self, x, w, bias):
        self.geo = ConvGeometry(self, x, w, self.pad, self.stride, self.dilation, self.group, False,
                                self.base_axis)
        check_bias(self, bias, self.geo.M, w)
        self.channel_axis = normalize_axis(self, self.base_axis, len(x), "base_axis")
        self.bias_index = self.input_index("bias") if self.has_input("bias") else None
        return [self.geo.map_shape]

    def forward(self, inputs, outputs):
        self.quantize(inputs)
        w = self.forward_filter(inputs)
        bias = inputs[self.bias_index] if self.bias_index is not None else None
        self.geo.image_to_map(inputs[0], w, outputs[0], bias, init_for_bias(bias))

    backward = quantized_convolution_backward

    def grad_depends_input_data(self, i, j):
        return (i == 0 and 1 <= j < self.n_filter_inputs) or (i == 1 and j == 0)


@register
class BinaryConnectConvolution(_QuantizedConvolution):
    """y = conv(x, sign(W)) + b; sign(W) (0 -> quantize_zero_to) is written into binary_weight."""
    no_grad_inputs = (2,)
    keep_input_dtypes = (2,)

    def setup(self, x, weight, binary_weight, bias=None):
        if tuple(binary_weight) != tuple(weight):
            self.fail("binary_weight of shape {} must have the shape of weight {}", binary_weight,
                      weight)
        return self.conv_setup(x, weight, bias)

    def quantize(self, inputs):
        binarize_kernel(inputs[1].reshape(-1), inputs[2].reshape(-1), self.quantize_zero_to)

    def forward_filter(self, inputs):
        return inputs[2]


@register
class BinaryWeightConvolution(_QuantizedConvolution):
    """y = conv(x, sign(W)) * alpha + b with alpha = mean |W| per output channel; sign(W) and
    alpha are written into binary_weight and alpha."""
    no_grad_inputs = (2, 3)
    keep_input_dtypes = (2, 3)
    n_filter_inputs = 4

    def setup(self, x, weight, binary_weight, alpha, bias=None):
        if tuple(binary_weight) != tuple(weight):
            self.fail("binary_weight of shape {} must have the shape of weight {}", binary_weight,
                      weight)
        if int(np.prod(alpha, dtype=np.int64)) != weight[0]:
            self.fail("alpha of shape {} must have one element per output channel {} (weight "
                      "shape {})", alpha, weight[0], weight)
        return self.conv_setup(x, weight, bias)

    def quantize(self, inputs):
        w = inputs[1]
        binarize_kernel(w.reshape(-1), inputs[2].reshape(-1), self.quantize_zero_to)
        mean_abs_rows(np.ascontiguousarray(w.reshape(w.shape[0], -1).T), inputs[3].reshape(-1))

    def forward_filter(self, inputs):
        wb = inputs[2]
        return wb * inputs[3].reshape((-1,) + (1,) * (wb.ndim - 1))   # the scale folded in


@register
class INQConvolution(_INQ, _QuantizedConvolution):
    """Convolution whose weights are progressively fixed to powers of two (INQ)."""
    keep_input_dtypes = (1, 2)
    no_grad_inputs = (2,)

    def setup(self, x, weight, indicator_fixedweights, bias=None):
        self.inq_setup(weight, indicator_fixedweights)
        return self.conv_setup(x, weight, bias)

    def forward_filter(self, inputs):
        return inputs[1]

    def grad_depends_input_data(self, i, j):
        return (i == 0 and j == 1) or (i == 1 and j == 0)

