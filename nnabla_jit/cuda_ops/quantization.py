"""CUDA kernels of the elementwise quantizers FixedPointQuantize, Pow2Quantize and
MinMaxQuantize, QuantizeLinear and of their gradients: one thread per element running the CPU
kernels' per-element formulas (``ops/quantization.py``'s ``*_value`` functions, compiled here
as device functions).

MinMaxQuantize's range update (x_min_max / ema) writes qr_min and qr_max in place on the device
(the batch extremes by ``reduction.reduce``), then one thread per range computes the CPU's
``nudged_range``; the gradients of a trained range are sums of dy below / above it (atomic adds).

The binary weight layers (BinaryConnect / BinaryWeight Affine and Convolution) write sign(W)
(and alpha = mean |W| per output) into their inputs on the device, then run the Affine /
Convolution launchers with that weight; INQAffine / INQConvolution stay on the host (their
schedule sorts the weights and draws from the numpy stream).
"""
import math

import numpy as np
from numba import float64

from ..ops import quantization as cpu_quantizers
from ..ops.reduction import MAX, MIN
from . import affine, convolution, device, reduction
from .device import store
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

fixed_point_value = device_function(cpu_quantizers.fixed_point_value.py_func)
pow2_value = device_function(cpu_quantizers.pow2_value.py_func)
range_ste_value = device_function(cpu_quantizers.range_ste_value.py_func)
min_max_quantize_value = device_function(cpu_quantizers.min_max_quantize_value.py_func)
scalar_round_half_away = device_function(cpu_quantizers.scalar_round_half_away.py_func)
saturate_quantized = device_function(cpu_quantizers.saturate_quantized.py_func)
binary_value = device_function(cpu_quantizers.binary_value.py_func)


@kernel
def fixed_point_kernel(x, y, lo, hi, delta):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = fixed_point_value(x[i], lo, hi, delta)


@kernel
def pow2_kernel(x, y, signed, with_zero, p_min, p_max):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = pow2_value(x[i], signed, with_zero, p_min, p_max)


@kernel
def range_ste_backward_kernel(x, dy, dx, lo, hi, has_range, accum):
    """dx (+)= dy inside [lo, hi] (everywhere without ``has_range``)."""
    i = cuda.grid(1)
    if i < dx.size:
        g = range_ste_value(x[i], dy[i], lo, hi) if has_range else dy[i]
        store(dx, i, g, accum)


def _flat(a):
    return a.reshape(a.size)


@forward("FixedPointQuantize")
def fixed_point_forward(op, inputs, outputs):
    lo, hi = op.bounds
    device.launch(fixed_point_kernel, outputs[0].size, _flat(inputs[0]), _flat(outputs[0]),
                  lo, hi, float(op.delta))


@forward("Pow2Quantize")
def pow2_forward(op, inputs, outputs):
    device.launch(pow2_kernel, outputs[0].size, _flat(inputs[0]), _flat(outputs[0]),
                  bool(op.sign), bool(op.with_zero), op.levels[0], op.levels[1])


@backward("FixedPointQuantize", "Pow2Quantize")
def range_ste_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dx = _flat(input_grads[0])
    # without a range the input is not read (and may not be held): dx stands in for it
    x = dx if op.range is None else _flat(inputs[0])
    lo, hi = op.range if op.range is not None else (0.0, 0.0)
    device.launch(range_ste_backward_kernel, dx.size, x, _flat(output_grads[0]), dx,
                  float(lo), float(hi), op.range is not None, accum[0])


# ---------------------------------------------------------------------------- MinMaxQuantize
@kernel
def range_update_kernel(qr_min, qr_max, x_min, x_max, from_x, ema, decay, eps):
    """Per range q: the batch extremes (with ``from_x``; averaged into the old range with
    ``ema``) into qr_min / qr_max, then qr_max >= qr_min + eps (the CPU's ``update_range``)."""
    q = cuda.grid(1)
    if q < qr_min.size:
        if from_x:
            lo = x_min[q]
            hi = x_max[q]
            if ema:
                lo = decay * qr_min[q] + (1.0 - decay) * lo
                hi = decay * qr_max[q] + (1.0 - decay) * hi
            qr_min[q] = lo
            qr_max[q] = hi
        if qr_max[q] - qr_min[q] < eps:
            qr_max[q] = qr_min[q] + eps


@kernel
def nudged_range_kernel(qr_min, qr_max, ql_min, ql_max, grid):
    """grid[0..2, q] = scale, lo, hi: the range moved so that real 0 falls on a level (the
    CPU's ``nudged_range``, rounding half away from zero)."""
    q = cuda.grid(1)
    if q < qr_min.size:
        scale = (qr_max[q] - qr_min[q]) / (ql_max[q] - ql_min[q])
        z = ql_min[q] - qr_min[q] / scale
        z = math.floor(z + 0.5) if z >= 0 else -math.floor(-z + 0.5)
        z = min(max(z, ql_min[q]), ql_max[q])
        grid[0, q] = scale
        grid[1, q] = (ql_min[q] - z) * scale
        grid[2, q] = (ql_max[q] - z) * scale


@kernel
def min_max_quantize_kernel(x, qindex, grid, y):
    i = cuda.grid(1)
    if i < y.size:
        k = qindex[i]
        y[i] = min_max_quantize_value(x[i], grid[1, k], grid[2, k], grid[0, k])


@kernel
def min_max_quantize_backward_kernel(x, dy, qindex, grid, dx, d_min, d_max, fine_grained,
                                     want_dx, want_dq, accum_dx):
    """dx (+)= dy inside [lo, hi] (everywhere unless fine-grained); d_min / d_max += dy below
    / above it (atomic)."""
    i = cuda.grid(1)
    if i < x.size:
        k = qindex[i]
        v = x[i]
        lo = grid[1, k]
        hi = grid[2, k]
        if want_dx:
            g = dy[i] if (not fine_grained or lo <= v <= hi) else 0.0
            store(dx, i, g, accum_dx)
        if want_dq:
            if v < lo:
                cuda.atomic.add(d_min, k, dy[i])
            elif v > hi:
                cuda.atomic.add(d_max, k, dy[i])


def _index_map(op, name):
    """The op's broadcast index map ``name`` (qindex, sindex, zindex) on the device."""
    return device.kept(op, name, getattr(op, name))


def _nudged_grid(op, inputs):
    qr_min, qr_max, ql_min, ql_max = [_flat(a) for a in inputs[1:5]]
    grid = device.workspace("min-max grid", 3 * qr_min.size, qr_min.dtype).reshape(
        3, qr_min.size)
    device.launch(nudged_range_kernel, qr_min.size, qr_min, qr_max, ql_min, ql_max, grid)
    return grid


@forward("MinMaxQuantize", updates=lambda op: (1, 2))
def min_max_quantize_forward(op, inputs, outputs):
    x, qr_min, qr_max = inputs[0], inputs[1], inputs[2]
    n_ranges = qr_min.size
    from_x = bool(op.x_min_max) and x.size > 0
    extremes = device.workspace("min-max extremes", 2 * n_ranges, x.dtype).reshape(2, n_ranges)
    if from_x:
        positions = device.workspace("min-max positions", n_ranges, np.int64)
        reduction.reduce(x, extremes[0], op.stat_axes, kind=MIN, index=positions)
        reduction.reduce(x, extremes[1], op.stat_axes, kind=MAX, index=positions)
    device.launch(range_update_kernel, n_ranges, _flat(qr_min), _flat(qr_max), extremes[0],
                  extremes[1], from_x, bool(op.ema), float(op.decay), float(op.eps))
    grid = _nudged_grid(op, inputs)
    device.launch(min_max_quantize_kernel, x.size, _flat(x), _index_map(op, "qindex"), grid,
                  _flat(outputs[0]))


@backward("MinMaxQuantize")
def min_max_quantize_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                              accum):
    x = _flat(inputs[0])
    grid = _nudged_grid(op, inputs)
    n_ranges = grid.shape[1]
    # qr_min / qr_max get gradients only when they are trained (no x statistics, no EMA)
    trained = not op.x_min_max and not op.ema
    dq = []
    for k in (1, 2):
        g = input_grads[k] if propagate_down[k] else None
        if g is not None and not accum[k]:
            device.fill(g, 0)
        dq.append(_flat(g) if g is not None and trained
                  else device.workspace("min-max unused d{}".format(k), n_ranges, x.dtype))
    dx = _flat(input_grads[0]) if propagate_down[0] else x   # x: a stand-in, not written
    device.launch(min_max_quantize_backward_kernel, x.size, x, _flat(output_grads[0]),
                  _index_map(op, "qindex"), grid, dx, dq[0], dq[1], bool(op.ste_fine_grained),
                  bool(propagate_down[0]), trained and bool(propagate_down[1] or propagate_down[2]),
                  bool(accum[0]))


# ---------------------------------------------------------------------------- QuantizeLinear
@device_function
def round_half_even(v):
    """np.rint: the nearest integer, ties to even (exact: v - floor(v) is exact in floating
    point); |v| >= 2^52 is an integer already."""
    if abs(v) >= 4503599627370496.0:
        return v
    r = math.floor(v)
    d = v - r
    if d > 0.5 or (d == 0.5 and r % 2 != 0):
        r += 1
    return r


@kernel
def quantize_linear_kernel(x, scale, zero_point, sindex, zindex, y, lo, hi, half_to_even):
    i = cuda.grid(1)
    if i < y.size:
        v = x[i] / scale[sindex[i]]
        z = zero_point[zindex[i]]
        if half_to_even:
            v = round_half_even(v)
            z = round_half_even(z)
        else:
            v = scalar_round_half_away(v)
            z = scalar_round_half_away(z)
        y[i] = saturate_quantized(v, z, lo, hi)


@kernel
def quantize_linear_backward_kernel(dy, scale, sindex, dx, accum):
    i = cuda.grid(1)
    if i < dx.size:
        g = dy[i] / scale[sindex[i]]
        store(dx, i, g, accum)


@forward("QuantizeLinear")
def quantize_linear_forward(op, inputs, outputs):
    x, scale, zero_point = inputs
    device.launch(quantize_linear_kernel, x.size, _flat(x), _flat(scale), _flat(zero_point),
                  _index_map(op, "sindex"), _index_map(op, "zindex"), _flat(outputs[0]),
                  float(op.range[0]), float(op.range[1]), op.round_mode == "HALF_TO_EVEN")


@backward("QuantizeLinear")
def quantize_linear_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                             accum):
    if propagate_down[0]:
        device.launch(quantize_linear_backward_kernel, input_grads[0].size,
                      _flat(output_grads[0]), _flat(inputs[1]), _index_map(op, "sindex"),
                      _flat(input_grads[0]), bool(accum[0]))


# ---------------------------------------------------------------------------- binary layers
@kernel
def binarize_kernel(w, wb, zero_to):
    i = cuda.grid(1)
    if i < wb.size:
        wb[i] = binary_value(w[i], zero_to)


@kernel
def mean_abs_kernel(w, alpha, per_column):
    """alpha[m] = mean |w| over column m of w (d, m) (``per_column``) or over row m of w (m, d)."""
    m = cuda.grid(1)
    if m < alpha.size:
        n = w.shape[0] if per_column else w.shape[1]
        acc = float64(0.0)
        for k in range(n):
            acc += abs(w[k, m] if per_column else w[m, k])
        alpha[m] = acc / max(n, 1)


@kernel
def scale_by_output_kernel(a, alpha, out, inner):
    """out[i] = a[i] alpha[o] for the output o = (i // inner) % alpha.size of element i."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] * alpha[(i // inner) % alpha.size]


def _weighted(op):
    return op.name.startswith("BinaryWeight")


def _binarized_inputs(op):
    return (2, 3) if _weighted(op) else (2,)


def _binarize(op, inputs, is_affine):
    """binary_weight = sign(weight) (and alpha = mean |weight| per output), in place."""
    w = inputs[1]
    device.launch(binarize_kernel, w.size, _flat(w), _flat(inputs[2]), float(op.quantize_zero_to))
    if _weighted(op):
        alpha = _flat(inputs[3])
        rows = w.size // alpha.size
        w2 = w.reshape(rows, alpha.size) if is_affine else w.reshape(alpha.size, rows)
        device.launch(mean_abs_kernel, alpha.size, w2, alpha, is_affine)


def _with_bias(op, first_two, per_input):
    """[first, second] plus the bias entry of ``per_input`` when the op has one."""
    b = op.bias_index
    return list(first_two) + ([per_input[b]] if b is not None else [])


@forward("BinaryConnectAffine", "BinaryWeightAffine", updates=_binarized_inputs)
def binary_affine_forward(op, inputs, outputs):
    _binarize(op, inputs, True)
    n, _, m = op.dims
    affine.affine_forward(op, [inputs[0], inputs[2]], outputs)
    y = outputs[0]
    if _weighted(op):
        device.launch(scale_by_output_kernel, y.size, _flat(y), _flat(inputs[3]), _flat(y), 1)
    if op.bias_index is not None:
        reduction.broadcast_into(inputs[op.bias_index], y.reshape(n, m), (0, 1), accum=True)


@backward("BinaryConnectAffine", "BinaryWeightAffine")
def binary_affine_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                           accum):
    """Affine's gradients with sign(W) for dx; dW goes to the float weight. BinaryWeight
    scales dy by alpha for dx only (nnabla)."""
    ins = _with_bias(op, (inputs[0], inputs[2]), inputs)
    grads = _with_bias(op, input_grads[:2], input_grads)
    pd = _with_bias(op, propagate_down[:2], propagate_down)
    acc = _with_bias(op, accum[:2], accum)
    dy = output_grads[0]
    if _weighted(op) and pd[0]:
        scaled = device.empty(dy.shape, dy.dtype)
        device.launch(scale_by_output_kernel, dy.size, _flat(dy), _flat(inputs[3]),
                      _flat(scaled), 1)
        affine.affine_backward(op, ins, outputs, [scaled], grads, [True] + [False] * (len(pd) - 1),
                               acc)
        device.release(scaled)
        pd[0] = False
    affine.affine_backward(op, ins, outputs, [dy], grads, pd, acc)


def _forward_filter(op, inputs):
    """sign(W), times alpha per output channel for BinaryWeightConvolution (a temporary)."""
    wb = inputs[2]
    if not _weighted(op):
        return wb
    filt = device.empty(wb.shape, wb.dtype)
    device.launch(scale_by_output_kernel, wb.size, _flat(wb), _flat(inputs[3]), _flat(filt),
                  wb.size // inputs[3].size)
    return filt


@forward("BinaryConnectConvolution", "BinaryWeightConvolution", updates=_binarized_inputs)
def binary_convolution_forward(op, inputs, outputs):
    _binarize(op, inputs, False)
    filt = _forward_filter(op, inputs)
    convolution.convolution_forward(op, _with_bias(op, (inputs[0], filt), inputs), outputs)
    if filt is not inputs[2]:
        device.release(filt)


@backward("BinaryConnectConvolution", "BinaryWeightConvolution")
def binary_convolution_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                accum):
    """The convolution's gradients with the forward filter for dx; dW to the float weight."""
    filt = _forward_filter(op, inputs) if propagate_down[0] else None   # read for dx only
    convolution.convolution_backward(
        op, _with_bias(op, (inputs[0], filt), inputs), outputs, output_grads,
        _with_bias(op, input_grads[:2], input_grads),
        _with_bias(op, propagate_down[:2], propagate_down), _with_bias(op, accum[:2], accum))
    if filt is not None and filt is not inputs[2]:
        device.release(filt)
