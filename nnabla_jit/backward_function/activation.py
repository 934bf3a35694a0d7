"""Grad rules of the activation ops (``ops/activation.py``): graphs of F ops, differentiable again.
"""
from .. import functions as F
from ..ops.registry import grad_rule


@grad_rule('Softmax')
def softmax_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    dy, y = grad_inputs[0], outputs[0]
    return [y * (dy - F.sum(dy * y, axis=axis, keepdims=True))]


@grad_rule('LogSoftmax')
def log_softmax_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    dy, y = grad_inputs[0], outputs[0]
    return [dy - F.exp(y) * F.sum(dy, axis=axis, keepdims=True)]


def _halves(dy, axis):
    n = dy.shape[axis] // 2
    start = [0] * dy.ndim
    stop = list(dy.shape)
    stop[axis] = n
    first = F.slice(dy, start, stop)
    start[axis], stop[axis] = n, 2 * n
    return first, F.slice(dy, start, list(stop))


@grad_rule('CReLU')
def crelu_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=1):
    x = inputs[0]
    d0, d1 = _halves(grad_inputs[0], axis % x.ndim)
    return [d0 * (x > 0) - d1 * (x <= 0)]   # x = 0: -d1, as nnabla


@grad_rule('CELU')
def celu_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, alpha=1.0, axis=1):
    x = inputs[0]
    d0, d1 = _halves(grad_inputs[0], axis % x.ndim)
    pos, neg = x > 0, x < 0
    return [d0 * (pos + (1 - pos) * alpha * F.exp(x)) - d1 * (neg + (1 - neg) * alpha * F.exp(-x))]


@grad_rule('PReLU')
def prelu_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1):
    dy, x, w = grad_inputs[0], inputs[0], inputs[1]
    base_axis %= x.ndim
    pos = x >= 0   # x = 0 takes dy, as nnabla's backward (its slope term is 0 there)
    if w.size == 1:
        wb = F.broadcast(F.reshape(w, (1,) * x.ndim), x.shape)
        dw = F.reshape(F.sum(dy * x * (1 - pos)), w.shape)
    else:
        shape = [1] * x.ndim
        shape[base_axis] = w.size
        wb = F.broadcast(F.reshape(w, shape), x.shape)
        axes = [a for a in range(x.ndim) if a != base_axis]
        dw = F.reshape(F.sum(dy * x * (1 - pos), axis=axes), w.shape)
    return [dy * (pos + (1 - pos) * wb), dw]
