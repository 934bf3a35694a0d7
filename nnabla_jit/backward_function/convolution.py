"""Grad rules of the convolution ops (``ops/convolution.py``): graphs of F ops, differentiable again.

As in nnabla, a convolution's input and filter gradients are the nodes ConvolutionDataGrad(dy, w)
and ConvolutionFilterGrad(dy, x) (a deconvolution's likewise), the transposes of the bilinear op
(``ops/adjoint.py``) whose own rules are again the op and its other transpose -- so any order
works. The depthwise ops are the grouped ones with one group per channel.
FusedConvolution's rule differentiates the graph of the ops it fuses. DeformableConvolution,
AdaptiveSeparableConvolution and PatchCorrelation have backward kernels but, as in nnabla, no
grad rule.
"""
from .. import functions as F
from ..composite_functions import _fused_input_names, fused_convolution_graph
from ..grad import grad
from ..ops.registry import grad_rule
from .adjoint import bilinear_adjoint


def _sum_but(dy, shape, axis):
    return F.sum(dy, axis=[a for a in range(len(shape)) if a != axis])


def _channel_axis(shape, base_axis, channel_last):
    return len(shape) - 1 if channel_last else base_axis % len(shape)


def _wanted(inputs, i):
    return len(inputs) > i and inputs[i].need_grad


def _transposes(source, args, dy, x, w, x_shape, w_shape, inputs):
    """[dx, dw] of the bilinear op ``source`` (None where no gradient is wanted)."""
    return [bilinear_adjoint(source + "DataGrad", args, x_shape, dy, w) if _wanted(inputs, 0) else None,
            bilinear_adjoint(source + "FilterGrad", args, w_shape, dy, x) if _wanted(inputs, 1) else None]


@grad_rule('Convolution')
def convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1, pad=None,
                     stride=None, dilation=None, group=1, channel_last=False):
    args = dict(base_axis=base_axis, pad=pad, stride=stride, dilation=dilation, group=group,
                channel_last=channel_last)
    dy = grad_inputs[0]
    grads = _transposes("Convolution", args, dy, inputs[0], inputs[1], input_shapes[0], input_shapes[1],
                        inputs)
    if len(inputs) > 2:
        grads.append(_sum_but(dy, output_shapes[0], _channel_axis(output_shapes[0], base_axis, channel_last))
                     if _wanted(inputs, 2) else None)
    return grads


@grad_rule('Deconvolution')
def deconvolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1, pad=None,
                       stride=None, dilation=None, group=1, channel_last=False, output_padding=None):
    args = dict(base_axis=base_axis, pad=pad, stride=stride, dilation=dilation, group=group,
                channel_last=channel_last, output_padding=output_padding)
    dy = grad_inputs[0]
    grads = _transposes("Deconvolution", args, dy, inputs[0], inputs[1], input_shapes[0], input_shapes[1],
                        inputs)
    if len(inputs) > 2:
        grads.append(_sum_but(dy, output_shapes[0], _channel_axis(output_shapes[0], base_axis, channel_last))
                     if _wanted(inputs, 2) else None)
    return grads


def _depthwise_grads(source, args, grad_inputs, inputs, input_shapes, output_shapes, base_axis):
    """A depthwise op's grads through its grouped twin ``source``, W (C', *k) seen as (C', 1, *k)."""
    dy, (x, w) = grad_inputs[0], inputs[:2]
    w_shape = tuple(input_shapes[1])
    w_view = (w_shape[0], 1) + w_shape[1:]
    dx, dw = _transposes(source, args, dy, x, F.reshape(w, w_view, inplace=False), input_shapes[0], w_view,
                         inputs)
    grads = [dx, None if dw is None else F.reshape(dw, w_shape, inplace=False)]
    if len(inputs) > 2:
        grads.append(_sum_but(dy, output_shapes[0], base_axis % len(output_shapes[0]))
                     if _wanted(inputs, 2) else None)
    return grads


@grad_rule('DepthwiseConvolution')
def depthwise_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                               pad=None, stride=None, dilation=None, multiplier=1):
    """DepthwiseConvolution is Convolution with group = C and W viewed as (C * m, 1, *k)."""
    C = input_shapes[0][base_axis % len(input_shapes[0])]
    args = dict(base_axis=base_axis, pad=pad, stride=stride, dilation=dilation, group=C, channel_last=False)
    return _depthwise_grads("Convolution", args, grad_inputs, inputs, input_shapes, output_shapes, base_axis)


@grad_rule('DepthwiseDeconvolution')
def depthwise_deconvolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                                 pad=None, stride=None, dilation=None, divisor=1):
    """DepthwiseDeconvolution is Deconvolution with group = C / divisor and W (C, 1, *k)."""
    C = input_shapes[0][base_axis % len(input_shapes[0])]
    args = dict(base_axis=base_axis, pad=pad, stride=stride, dilation=dilation, group=C // divisor,
                channel_last=False, output_padding=(0,) * len(pad))
    return _depthwise_grads("Deconvolution", args, grad_inputs, inputs, input_shapes, output_shapes, base_axis)


@grad_rule('FusedConvolution')
def fused_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    """The gradient of the graph FusedConvolution stands for (running statistics get none)."""
    names = _fused_input_names(input_shapes)
    y = fused_convolution_graph(dict(zip(names, inputs)), keep_running_stats=True, **args)
    wanted = [i for i, (n, v) in enumerate(zip(names, inputs)) if v.need_grad and n not in ("mean", "variance")]
    grads = [None] * len(inputs)
    if wanted:
        for i, g in zip(wanted, grad([y], [inputs[i] for i in wanted], grad_outputs=[grad_inputs[0]])):
            grads[i] = g
    return grads
