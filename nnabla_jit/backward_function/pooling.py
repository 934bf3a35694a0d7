"""Grad rules of the pooling ops (``ops/pooling.py``): graphs of F ops, differentiable again.

MaxPooling's gradient is a scatter of dy to the max positions; the grad rule builds it as
MaxPoolingBackward(dy, x), whose gradient with respect to dy reads the incoming gradient at the
same positions (the internal MaxPoolingGather), whose gradient is MaxPoolingBackward again.
Average and sum pooling are linear: their gradients spread dy over the windows (a
LinearAdjoint of the pooling), and the adjoint's gradient is the pooling itself. RoiAlign has a backward
kernel but, as in nnabla, no grad rule.
"""
import numpy as np

from .. import functions as F
from ..function import build
from ..ops.registry import REGISTRY, grad_rule
from .adjoint import linear_adjoint


# ------------------------------------------------------------------------------ grad rules
def _internal(name, inputs, **args):
    return build(REGISTRY[name](input_names=tuple("x{}".format(i) for i in range(len(inputs))), **args), inputs)


@grad_rule('MaxPooling')
def max_pooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None, stride=None,
                     ignore_border=True, pad=None, channel_last=False):
    return [F.max_pooling_backward(grad_inputs[0], inputs[0], kernel, stride, ignore_border, pad, channel_last)]


@grad_rule('MaxPoolingBackward')
def max_pooling_backward_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None,
                              stride=None, ignore_border=True, pad=None, channel_last=False):
    return [_internal("MaxPoolingGather", [grad_inputs[0], inputs[1]], kernel=kernel, stride=stride,
                      ignore_border=ignore_border, pad=pad, channel_last=channel_last), None]


@grad_rule('MaxPoolingGather')
def max_pooling_gather_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None,
                            stride=None, ignore_border=True, pad=None, channel_last=False):
    return [F.max_pooling_backward(grad_inputs[0], inputs[1], kernel, stride, ignore_border, pad, channel_last),
            None]


@grad_rule('AveragePooling')
def average_pooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [linear_adjoint("AveragePooling", args, input_shapes[0], [grad_inputs[0]])]


@grad_rule('SumPooling')
def sum_pooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [linear_adjoint("SumPooling", args, input_shapes[0], [grad_inputs[0]])]


@grad_rule('GlobalAveragePooling')
def global_average_pooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    x_shape = tuple(input_shapes[0])
    size = int(np.prod(x_shape[2:], dtype=np.int64))
    dy = F.reshape(grad_inputs[0], x_shape[:2] + (1,) * (len(x_shape) - 2), inplace=False)
    return [F.broadcast(dy, x_shape) * (1.0 / size)]


@grad_rule('Unpooling')
def unpooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None, channel_last=False):
    """Sum dy over each kernel block: reshape every repeated axis n * k into (n, k), sum the k's."""
    x_shape, nk = tuple(input_shapes[0]), len(kernel)
    end = len(x_shape) - 1 if channel_last else len(x_shape)
    split = list(x_shape[:end - nk])
    axes = []
    for n, k in zip(x_shape[end - nk:end], kernel):
        split += [n, k]
        axes.append(len(split) - 1)
    split += list(x_shape[end:])
    g = F.sum(F.reshape(grad_inputs[0], split, inplace=False), axis=axes)
    return [F.reshape(g, x_shape, inplace=False)]
