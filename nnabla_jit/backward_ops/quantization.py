"""Backward kernels and grad rules of the quantization layers (see ``ops/quantization.py``).

The grad rules rebuild nnabla's straight-through estimators from F ops: the pass-through masks
are comparisons, which have no gradient, so differentiating a rule again treats them as the
constants they are almost everywhere.
"""
import numpy as np
from numba import njit

from ..ops.blas import gemm, sum_rows
from ..ops.registry import accumulate


# ------------------------------------------------------------------ straight-through estimators
def range_ste_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[0]:
        return
    dx, dy = grad_inputs[0].reshape(-1), grad_outputs[0].reshape(-1)
    if op.range is None:
        accumulate(dx, dy, accum[0])
    else:
        op.bw_kernel(inputs[0].reshape(-1), dy, dx, op.range[0], op.range[1], accum[0])


def identity_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        accumulate(grad_inputs[0], grad_outputs[0], accum[0])


def _ste_grad(dy, x, pass_range):
    """dy inside [lo, hi] (everywhere when pass_range is None)."""
    from .. import functions as F
    if pass_range is None:
        return dy
    lo, hi = pass_range
    return dy * F.greater_equal_scalar(x, lo) * F.less_equal_scalar(x, hi)


def fixed_point_quantize_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    from ..ops.quantization import fixed_point_pass_range
    return [_ste_grad(grad_inputs[0], inputs[0], fixed_point_pass_range(**args))]


def pow2_quantize_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    from ..ops.quantization import pow2_pass_range
    return [_ste_grad(grad_inputs[0], inputs[0], pow2_pass_range(**args))]


def prune_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, rate=0.9):
    return [grad_inputs[0]]


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


def min_max_quantize_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    from ..ops.quantization import nudged_range
    x, qr_min, qr_max, ql_min, ql_max = inputs
    scale, lo, hi = nudged_range(qr_min, qr_max, ql_min, ql_max)
    # qr_min / qr_max get gradients only when they are trained (no x statistics, no EMA).
    trained = not op.x_min_max and not op.ema
    dq = []
    for k in (1, 2):
        g = grad_inputs[k] if propagate_down[k] else None
        if g is not None and not accum[k]:
            g.fill(0)
        dq.append(g.reshape(-1) if g is not None and trained else np.zeros(lo.size, lo.dtype))
    dx = grad_inputs[0].reshape(-1) if propagate_down[0] else x.reshape(-1)
    min_max_quantize_backward_kernel(
        x.reshape(-1), grad_outputs[0].reshape(-1), op.qindex, lo.reshape(-1), hi.reshape(-1),
        dx, dq[0], dq[1], op.ste_fine_grained, propagate_down[0],
        trained and (propagate_down[1] or propagate_down[2]), accum[0])


def min_max_quantize_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, decay=0.999,
                          x_min_max=False, ema=False, ste_fine_grained=True, eps=0.01):
    from .. import functions as F
    from ..ops.elementwise import reduce_to_shape
    dy = grad_inputs[0]
    x, qr_min, qr_max, ql_min, ql_max = inputs
    qr_max = F.where(F.less_scalar(qr_max - qr_min, eps), qr_min + eps, qr_max)
    scale = (qr_max - qr_min) / (ql_max - ql_min)
    zero_point = F.minimum2(F.maximum2(F.round(ql_min - qr_min / scale), ql_min), ql_max)
    lo, hi = (ql_min - zero_point) * scale, (ql_max - zero_point) * scale
    dx = dy * F.greater_equal(x, lo) * F.less_equal(x, hi) if ste_fine_grained else dy
    if x_min_max or ema:
        return [dx, None, None, None, None]
    q_shape = tuple(input_shapes[1])
    return [dx, reduce_to_shape(dy * F.less(x, lo), q_shape),
            reduce_to_shape(dy * F.greater(x, hi), q_shape), None, None]


# ------------------------------------------------------------------ linear quantization
@njit(cache=True)
def quantize_linear_backward_kernel(dy, scale, sindex, dx, accum):
    for i in range(dy.size):
        g = dy[i] / scale[sindex[i]]
        if accum:
            dx[i] += g
        else:
            dx[i] = g


def quantize_linear_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        quantize_linear_backward_kernel(grad_outputs[0].reshape(-1), inputs[1].reshape(-1),
                                        op.sindex, grad_inputs[0].reshape(-1), accum[0])


def quantize_linear_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                         round_mode="HALF_AWAY_FROM_ZERO", narrow_range=False, dtype=1):
    return [grad_inputs[0] / inputs[1], None, None]


# ------------------------------------------------------------------ quantized affine layers
def _affine_backward(op, x, dy, w_for_dx, grad_inputs, propagate_down, accum):
    """dx = dy w_for_dx^T, dW = x^T dy (the float weight, input 1), db = sum(dy)."""
    n, d, m = op.dims
    dy2 = dy.reshape(n, m)
    if propagate_down[0]:
        gemm(dy2, w_for_dx.reshape(d, m), grad_inputs[0].reshape(n, d), trans_b=True,
             accumulate=accum[0])
    if propagate_down[1]:
        gemm(x.reshape(n, d), dy2, grad_inputs[1].reshape(d, m), trans_a=True, accumulate=accum[1])
    b = op.bias_index
    if b is not None and propagate_down[b]:
        sum_rows(dy2, grad_inputs[b].reshape(m), accum[b])


def binary_connect_affine_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down,
                                   accum):
    _affine_backward(op, inputs[0], grad_outputs[0], inputs[2], grad_inputs, propagate_down, accum)


def binary_weight_affine_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down,
                                  accum):
    n, d, m = op.dims
    dy = grad_outputs[0].reshape(n, m)
    if propagate_down[0]:   # the output scale alpha applies to dx only; dW ignores it (nnabla)
        gemm(dy * inputs[3].reshape(1, m), inputs[2].reshape(d, m), grad_inputs[0].reshape(n, d),
             trans_b=True, accumulate=accum[0])
    pd = list(propagate_down)
    pd[0] = False
    _affine_backward(op, inputs[0], dy, inputs[2], grad_inputs, pd, accum)


def inq_affine_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    _affine_backward(op, inputs[0], grad_outputs[0], inputs[1], grad_inputs, propagate_down, accum)


def _affine_dims(x_shape, w_shape, base_axis):
    xs, ws = tuple(x_shape), tuple(w_shape)
    base_axis %= len(xs)
    return xs, ws, (int(np.prod(xs[:base_axis])), ws[0], int(np.prod(ws[1:])))


def _affine_dx(dy, w_for_dx, x_shape, w_shape, base_axis):
    """F-built dx = dy W^T of y = x W (+ b), W being ``w_for_dx``."""
    from .. import functions as F
    xs, ws, (n, d, m) = _affine_dims(x_shape, w_shape, base_axis)
    dx = F.batch_matmul(F.reshape(dy, (n, m), inplace=False),
                        F.reshape(w_for_dx, (d, m), inplace=False), False, True)
    return F.reshape(dx, xs, inplace=False)


def _affine_dw_db(dy, x, x_shape, w_shape, base_axis):
    """F-built dW = x^T dy and db = sum(dy) of y = x W + b."""
    from .. import functions as F
    xs, ws, (n, d, m) = _affine_dims(x_shape, w_shape, base_axis)
    dy2 = F.reshape(dy, (n, m), inplace=False)
    dw = F.batch_matmul(F.reshape(x, (n, d), inplace=False), dy2, True, False)
    return F.reshape(dw, ws, inplace=False), F.reshape(F.sum(dy2, axis=0), ws[1:], inplace=False)


def _affine_rule(dy, x, w_for_dx, input_shapes, n_before_bias, base_axis, dx_scale=None):
    """[dx, dW, None, ..., db] of an affine layer whose optional bias follows
    ``n_before_bias`` inputs (x, the weight and its quantized companions)."""
    dx = _affine_dx(dy if dx_scale is None else dy * dx_scale, w_for_dx, input_shapes[0],
                    input_shapes[1], base_axis)
    dw, db = _affine_dw_db(dy, x, input_shapes[0], input_shapes[1], base_axis)
    grads = [dx, dw] + [None] * (n_before_bias - 2)
    return grads + [db] if len(input_shapes) > n_before_bias else grads


def binary_connect_affine_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                               base_axis=1, quantize_zero_to=1.0):
    return _affine_rule(grad_inputs[0], inputs[0], inputs[2], input_shapes, 3, base_axis)


def binary_weight_affine_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                              base_axis=1, quantize_zero_to=1.0):
    # alpha = mean |W| is rebuilt from W (the alpha input is just the buffer forward fills), so
    # differentiating the rule again sees how dx depends on W through it.
    from .. import functions as F
    ws = tuple(input_shapes[1])
    d, m = ws[0], int(np.prod(ws[1:]))
    alpha = F.reshape(F.mean(F.abs(F.reshape(inputs[1], (d, m), inplace=False)), axis=0), ws[1:],
                      inplace=False)
    return _affine_rule(grad_inputs[0], inputs[0], inputs[2], input_shapes, 4, base_axis,
                        dx_scale=alpha)


def inq_affine_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                    num_bits=4, inq_iterations=(), selection_algorithm="largest_abs", seed=-1):
    return _affine_rule(grad_inputs[0], inputs[0], inputs[1], input_shapes, 3, base_axis)


# ------------------------------------------------------------------ quantized convolutions
def quantized_convolution_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down,
                                   accum):
    from ..ops.convolution import INIT_ADD, INIT_ZERO
    geo, dy = op.geo, grad_outputs[0]
    if propagate_down[0]:
        geo.map_to_image(dy, op.forward_filter(inputs), grad_inputs[0],
                         init=INIT_ADD if accum[0] else INIT_ZERO)
    if propagate_down[1]:
        geo.filter_grad(inputs[0], dy, grad_inputs[1], accum[1], reuse_col=True)
    b = op.bias_index
    if b is not None and propagate_down[b]:
        axes = tuple(a for a in range(dy.ndim) if a != op.channel_axis)
        accumulate(grad_inputs[b], dy.sum(axis=axes), accum[b])


def _convolution_rule(dy, x, w_for_dx, input_shapes, output_shapes, n_before_bias, base_axis,
                      pad, stride, dilation, group):
    """[dx, dW, None, ..., db] of a convolution whose optional bias follows ``n_before_bias``
    inputs, dx taken through the filter ``w_for_dx``."""
    from .. import functions as F
    from ..function import build
    from ..ops.registry import REGISTRY
    xs, ys, ws = tuple(input_shapes[0]), tuple(output_shapes[0]), tuple(input_shapes[1])
    base_axis %= len(xs)
    img_sp, map_sp, kernel = xs[base_axis + 1:], ys[base_axis + 1:], ws[2:]
    output_padding = tuple(i - ((o - 1) * s - 2 * p + d * (k - 1) + 1) for i, o, k, p, s, d in
                           zip(img_sp, map_sp, kernel, pad, stride, dilation))
    dx = F.deconvolution(dy, w_for_dx, None, base_axis, pad, stride, dilation, group, False,
                         output_padding)
    filter_grad = REGISTRY["ConvolutionFilterGrad"](
        input_names=("img", "mp"), w_shape=ws, base_axis=base_axis, pad=pad, stride=stride,
        dilation=dilation, group=group, channel_last=False)
    dw = build(filter_grad, [x, dy])
    grads = [dx, dw] + [None] * (n_before_bias - 2)
    if len(input_shapes) > n_before_bias:
        grads.append(F.sum(dy, axis=[a for a in range(len(ys)) if a != base_axis]))
    return grads


def binary_connect_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                                    base_axis=1, pad=None, stride=None, dilation=None, group=1,
                                    quantize_zero_to=1.0):
    return _convolution_rule(grad_inputs[0], inputs[0], inputs[2], input_shapes, output_shapes, 3,
                             base_axis, pad, stride, dilation, group)


def binary_weight_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                                   base_axis=1, pad=None, stride=None, dilation=None, group=1,
                                   quantize_zero_to=1.0):
    from .. import functions as F
    ws = tuple(input_shapes[1])
    alpha = F.reshape(F.mean(F.abs(inputs[1]), axis=tuple(range(1, len(ws))), keepdims=True),
                      (ws[0],) + (1,) * (len(ws) - 1), inplace=False)   # mean |W|, as above
    return _convolution_rule(grad_inputs[0], inputs[0], inputs[2] * alpha, input_shapes,
                             output_shapes, 4, base_axis, pad, stride, dilation, group)


def inq_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                         pad=None, stride=None, dilation=None, group=1, num_bits=4,
                         inq_iterations=(), selection_algorithm="largest_abs", seed=-1):
    return _convolution_rule(grad_inputs[0], inputs[0], inputs[1], input_shapes, output_shapes, 3,
                             base_axis, pad, stride, dilation, group)
