"""Grad rules of the quantization ops (``ops/quantization.py``): graphs of F ops, differentiable again.

The grad rules rebuild nnabla's straight-through estimators from F ops: the pass-through masks
are comparisons, which have no gradient, so differentiating a rule again treats them as the
constants they are almost everywhere.
"""
import numpy as np

from .. import functions as F
from ..ops.quantization import affine_dims, fixed_point_pass_range, pow2_pass_range
from ..ops.registry import grad_rule
from .adjoint import bilinear_adjoint
from .elementwise import reduce_to_shape


def _ste_grad(dy, x, pass_range):
    """dy inside [lo, hi] (everywhere when pass_range is None)."""
    if pass_range is None:
        return dy
    lo, hi = pass_range
    return dy * F.greater_equal_scalar(x, lo) * F.less_equal_scalar(x, hi)


@grad_rule('FixedPointQuantize')
def fixed_point_quantize_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [_ste_grad(grad_inputs[0], inputs[0], fixed_point_pass_range(**args))]


@grad_rule('Pow2Quantize')
def pow2_quantize_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [_ste_grad(grad_inputs[0], inputs[0], pow2_pass_range(**args))]


@grad_rule('Prune')
def prune_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, rate=0.9):
    return [grad_inputs[0]]


@grad_rule('MinMaxQuantize')
def min_max_quantize_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, decay=0.999,
                          x_min_max=False, ema=False, ste_fine_grained=True, eps=0.01):
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


@grad_rule('QuantizeLinear')
def quantize_linear_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                         round_mode="HALF_AWAY_FROM_ZERO", narrow_range=False, dtype=1):
    return [grad_inputs[0] / inputs[1], None, None]


def _affine_dx(dy, w_for_dx, x_shape, w_shape, base_axis):
    """F-built dx = dy W^T of y = x W (+ b), W being ``w_for_dx``."""
    xs, ws, (n, d, m) = affine_dims(x_shape, w_shape, base_axis)
    dx = F.batch_matmul(F.reshape(dy, (n, m), inplace=False),
                        F.reshape(w_for_dx, (d, m), inplace=False), False, True)
    return F.reshape(dx, xs, inplace=False)


def _affine_dw_db(dy, x, x_shape, w_shape, base_axis):
    """F-built dW = x^T dy and db = sum(dy) of y = x W + b."""
    xs, ws, (n, d, m) = affine_dims(x_shape, w_shape, base_axis)
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


@grad_rule('BinaryConnectAffine')
def binary_connect_affine_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                               base_axis=1, quantize_zero_to=1.0):
    return _affine_rule(grad_inputs[0], inputs[0], inputs[2], input_shapes, 3, base_axis)


@grad_rule('BinaryWeightAffine')
def binary_weight_affine_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                              base_axis=1, quantize_zero_to=1.0):
    # alpha = mean |W| is rebuilt from W (the alpha input is just the buffer forward fills), so
    # differentiating the rule again sees how dx depends on W through it.
    ws = tuple(input_shapes[1])
    d, m = ws[0], int(np.prod(ws[1:]))
    alpha = F.reshape(F.mean(F.abs(F.reshape(inputs[1], (d, m), inplace=False)), axis=0), ws[1:],
                      inplace=False)
    return _affine_rule(grad_inputs[0], inputs[0], inputs[2], input_shapes, 4, base_axis,
                        dx_scale=alpha)


@grad_rule('INQAffine')
def inq_affine_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                    num_bits=4, inq_iterations=(), selection_algorithm="largest_abs", seed=-1):
    return _affine_rule(grad_inputs[0], inputs[0], inputs[1], input_shapes, 3, base_axis)


def _convolution_rule(dy, x, w_for_dx, input_shapes, output_shapes, n_before_bias, base_axis,
                      pad, stride, dilation, group):
    """[dx, dW, None, ..., db] of a convolution whose optional bias follows ``n_before_bias``
    inputs, dx taken through the filter ``w_for_dx``."""
    xs, ys, ws = tuple(input_shapes[0]), tuple(output_shapes[0]), tuple(input_shapes[1])
    base_axis %= len(xs)
    args = dict(base_axis=base_axis, pad=pad, stride=stride, dilation=dilation, group=group,
                channel_last=False)
    dx = bilinear_adjoint("ConvolutionDataGrad", args, xs, dy, w_for_dx)
    dw = bilinear_adjoint("ConvolutionFilterGrad", args, ws, dy, x)
    grads = [dx, dw] + [None] * (n_before_bias - 2)
    if len(input_shapes) > n_before_bias:
        grads.append(F.sum(dy, axis=[a for a in range(len(ys)) if a != base_axis]))
    return grads


@grad_rule('BinaryConnectConvolution')
def binary_connect_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                                    base_axis=1, pad=None, stride=None, dilation=None, group=1,
                                    quantize_zero_to=1.0):
    return _convolution_rule(grad_inputs[0], inputs[0], inputs[2], input_shapes, output_shapes, 3,
                             base_axis, pad, stride, dilation, group)


@grad_rule('BinaryWeightConvolution')
def binary_weight_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                                   base_axis=1, pad=None, stride=None, dilation=None, group=1,
                                   quantize_zero_to=1.0):
    ws = tuple(input_shapes[1])
    alpha = F.reshape(F.mean(F.abs(inputs[1]), axis=tuple(range(1, len(ws))), keepdims=True),
                      (ws[0],) + (1,) * (len(ws) - 1), inplace=False)   # mean |W|, as above
    return _convolution_rule(grad_inputs[0], inputs[0], inputs[2] * alpha, input_shapes,
                             output_shapes, 4, base_axis, pad, stride, dilation, group)


@grad_rule('INQConvolution')
def inq_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                         pad=None, stride=None, dilation=None, group=1, num_bits=4,
                         inq_iterations=(), selection_algorithm="largest_abs", seed=-1):
    return _convolution_rule(grad_inputs[0], inputs[0], inputs[1], input_shapes, output_shapes, 3,
                             base_axis, pad, stride, dilation, group)
