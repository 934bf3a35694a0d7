"""Grad rules of the convolution ops (``ops/convolution.py``): graphs of F ops, differentiable again.

Backward passes run the geometry's products in the other direction: a convolution's input
gradient is the transposed product of dy, its filter gradient the correlation of x and dy, and
a deconvolution the other way round. The grad rules build the same as graph nodes: a
Deconvolution (or Convolution) for the data and the internal ConvolutionFilterGrad for the
filter, whose own rule is again a Deconvolution and a Convolution -- so any order works.
FusedConvolution's rule differentiates the graph of the ops it fuses. DeformableConvolution,
AdaptiveSeparableConvolution and PatchCorrelation have backward kernels but, as in nnabla, no
grad rule.
"""
from .. import functions as F
from ..composite_functions import _fused_input_names, fused_convolution_graph
from ..function import build
from ..grad import grad
from ..ops.registry import REGISTRY, grad_rule


def _sum_but(dy, shape, axis):
    return F.sum(dy, axis=[a for a in range(len(shape)) if a != axis])


def _filter_grad_node(img, mp, w_shape, base_axis, pad, stride, dilation, group, channel_last):
    op = REGISTRY["ConvolutionFilterGrad"](
        input_names=("img", "mp"), w_shape=w_shape, base_axis=base_axis, pad=pad, stride=stride,
        dilation=dilation, group=group, channel_last=channel_last)
    return build(op, [img, mp])


def _layout(shape, base_axis, channel_last):
    """(channel axis, spatial dims) of a validated image or map shape."""
    n = len(shape)
    base_axis %= n
    if channel_last:
        return n - 1, tuple(shape[base_axis:-1])
    return base_axis, tuple(shape[base_axis + 1:])


def _output_padding(img_sp, map_sp, kernel, pad, stride, dilation):
    """The Deconvolution output_padding that gives back the image size from the map size."""
    return tuple(i - ((o - 1) * s - 2 * p + d * (k - 1) + 1)
                 for i, o, k, p, s, d in zip(img_sp, map_sp, kernel, pad, stride, dilation))


def _kernel(w_shape, channel_last):
    return tuple(w_shape[1:-1] if channel_last else w_shape[2:])


def _wanted(inputs, i):
    return len(inputs) > i and inputs[i].need_grad


@grad_rule('Convolution')
def convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1, pad=None,
                     stride=None, dilation=None, group=1, channel_last=False):
    dy, (x, w) = grad_inputs[0], inputs[:2]
    axis, img_sp = _layout(input_shapes[0], base_axis, channel_last)
    _, map_sp = _layout(output_shapes[0], base_axis, channel_last)
    w_shape = tuple(input_shapes[1])
    grads = [None] * len(inputs)
    if _wanted(inputs, 0):
        op = _output_padding(img_sp, map_sp, _kernel(w_shape, channel_last), pad, stride, dilation)
        grads[0] = F.deconvolution(dy, w, None, base_axis, pad, stride, dilation, group, channel_last, op)
    if _wanted(inputs, 1):
        grads[1] = _filter_grad_node(x, dy, w_shape, base_axis, pad, stride, dilation, group, channel_last)
    if _wanted(inputs, 2):
        grads[2] = _sum_but(dy, output_shapes[0], axis)
    return grads


@grad_rule('Deconvolution')
def deconvolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1, pad=None,
                       stride=None, dilation=None, group=1, channel_last=False, output_padding=None):
    dy, (x, w) = grad_inputs[0], inputs[:2]
    axis, _ = _layout(output_shapes[0], base_axis, channel_last)
    grads = [None] * len(inputs)
    if _wanted(inputs, 0):
        grads[0] = F.convolution(dy, w, None, base_axis, pad, stride, dilation, group, channel_last)
    if _wanted(inputs, 1):
        grads[1] = _filter_grad_node(dy, x, tuple(input_shapes[1]), base_axis, pad, stride, dilation, group,
                                     channel_last)
    if _wanted(inputs, 2):
        grads[2] = _sum_but(dy, output_shapes[0], axis)
    return grads


@grad_rule('DepthwiseConvolution')
def depthwise_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                               pad=None, stride=None, dilation=None, multiplier=1):
    """DepthwiseConvolution is Convolution with group = C and W viewed as (C * m, 1, *k)."""
    dy, (x, w) = grad_inputs[0], inputs[:2]
    axis, img_sp = _layout(input_shapes[0], base_axis, False)
    _, map_sp = _layout(output_shapes[0], base_axis, False)
    w_shape = tuple(input_shapes[1])
    w_view = (w_shape[0], 1) + w_shape[1:]
    C = input_shapes[0][axis]
    grads = [None] * len(inputs)
    if _wanted(inputs, 0):
        op = _output_padding(img_sp, map_sp, w_shape[1:], pad, stride, dilation)
        grads[0] = F.deconvolution(dy, F.reshape(w, w_view, inplace=False), None, base_axis, pad, stride,
                                   dilation, C, False, op)
    if _wanted(inputs, 1):
        grads[1] = F.reshape(_filter_grad_node(x, dy, w_view, base_axis, pad, stride, dilation, C, False),
                             w_shape, inplace=False)
    if _wanted(inputs, 2):
        grads[2] = _sum_but(dy, output_shapes[0], axis)
    return grads


@grad_rule('DepthwiseDeconvolution')
def depthwise_deconvolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                                 pad=None, stride=None, dilation=None, divisor=1):
    """DepthwiseDeconvolution is Deconvolution with group = C / divisor and W (C, 1, *k)."""
    dy, (x, w) = grad_inputs[0], inputs[:2]
    axis, _ = _layout(input_shapes[0], base_axis, False)
    w_shape = tuple(input_shapes[1])
    w_view = (w_shape[0], 1) + w_shape[1:]
    group = input_shapes[0][axis] // divisor
    grads = [None] * len(inputs)
    if _wanted(inputs, 0):
        grads[0] = F.convolution(dy, F.reshape(w, w_view, inplace=False), None, base_axis, pad, stride,
                                 dilation, group, False)
    if _wanted(inputs, 1):
        grads[1] = F.reshape(_filter_grad_node(dy, x, w_view, base_axis, pad, stride, dilation, group, False),
                             w_shape, inplace=False)
    if _wanted(inputs, 2):
        grads[2] = _sum_but(dy, output_shapes[0], axis)
    return grads


@grad_rule('ConvolutionFilterGrad')
def filter_grad_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, w_shape=None, base_axis=1,
                     pad=None, stride=None, dilation=None, group=1, channel_last=False):
    g, (img, mp) = grad_inputs[0], inputs
    _, img_sp = _layout(input_shapes[0], base_axis, channel_last)
    _, map_sp = _layout(input_shapes[1], base_axis, channel_last)
    grads = [None, None]
    if img.need_grad:
        op = _output_padding(img_sp, map_sp, _kernel(w_shape, channel_last), pad, stride, dilation)
        grads[0] = F.deconvolution(mp, g, None, base_axis, pad, stride, dilation, group, channel_last, op)
    if mp.need_grad:
        grads[1] = F.convolution(img, g, None, base_axis, pad, stride, dilation, group, channel_last)
    return grads


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
