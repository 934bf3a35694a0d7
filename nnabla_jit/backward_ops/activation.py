"""Backward kernels and grad rules of the activations that are not elementwise table lines."""
import numpy as np
from numba import njit, prange

from ..ops.kernels import parallel_kernel


@parallel_kernel
def softmax_backward_kernel(y, dy, dx, log, accum):
    """Softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy). 3-d arrays."""
    outer, n, inner = y.shape
    for o in prange(outer):
        for i in range(inner):
            s = 0.0
            for k in range(n):
                s += dy[o, k, i] if log else dy[o, k, i] * y[o, k, i]
            for k in range(n):
                g = dy[o, k, i] - np.exp(y[o, k, i]) * s if log else y[o, k, i] * (dy[o, k, i] - s)
                if accum:
                    dx[o, k, i] += g
                else:
                    dx[o, k, i] = g


def softmax_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        s = op.shape3
        op.backward_kernel(outputs[0].reshape(s), grad_outputs[0].reshape(s),
                                grad_inputs[0].reshape(s), op.log, accum[0])


def softmax_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    from .. import functions as F
    dy, y = grad_inputs[0], outputs[0]
    return [y * (dy - F.sum(dy * y, axis=axis, keepdims=True))]


def log_softmax_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    from .. import functions as F
    dy, y = grad_inputs[0], outputs[0]
    return [dy - F.exp(y) * F.sum(dy, axis=axis, keepdims=True)]


@njit(cache=True)
def crelu_backward_kernel(x, dy, dx, alpha, elu, accum):
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(n):
            for i in range(inner):
                v = x[o, k, i]
                if v > 0:
                    g = dy[o, 0, k, i]
                elif elu:
                    g = dy[o, 0, k, i] * alpha * np.exp(v)
                else:
                    g = 0.0
                if -v > 0:
                    g -= dy[o, 1, k, i]
                elif elu:
                    g -= dy[o, 1, k, i] * alpha * np.exp(-v)
                if accum:
                    dx[o, k, i] += g
                else:
                    dx[o, k, i] = g


def concatenated_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """CReLU / CELU: the two halves of dy flow back through f(x) and f(-x)."""
    if propagate_down[0]:
        o, n, i = op.shape3
        crelu_backward_kernel(inputs[0].reshape(o, n, i), grad_outputs[0].reshape(o, 2, n, i),
                              grad_inputs[0].reshape(o, n, i), op.args.get("alpha", 0.0), op.elu,
                              accum[0])


def _halves(dy, axis):
    from .. import functions as F
    n = dy.shape[axis] // 2
    start = [0] * dy.ndim
    stop = list(dy.shape)
    stop[axis] = n
    first = F.slice(dy, start, stop)
    start[axis], stop[axis] = n, 2 * n
    return first, F.slice(dy, start, list(stop))


def crelu_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=1):
    from .. import functions as F
    x = inputs[0]
    d0, d1 = _halves(grad_inputs[0], axis % x.ndim)
    return [d0 * (x > 0) - d1 * (x < 0)]


def celu_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, alpha=1.0, axis=1):
    from .. import functions as F
    x = inputs[0]
    d0, d1 = _halves(grad_inputs[0], axis % x.ndim)
    pos, neg = x > 0, x < 0
    return [d0 * (pos + (1 - pos) * alpha * F.exp(x)) - d1 * (neg + (1 - neg) * alpha * F.exp(-x))]


@njit(cache=True)
def prelu_backward_kernel(x, w, dy, dx, dw, want_dx, want_dw, accum_dx, accum_dw):
    outer, n, inner = x.shape
    if want_dw and not accum_dw:
        dw[:] = 0.0
    for o in range(outer):
        for k in range(n):
            wk = k if w.size > 1 else 0
            for i in range(inner):
                v = x[o, k, i]
                g = dy[o, k, i]
                if want_dx:
                    gx = g if v > 0 else w[wk] * g
                    if accum_dx:
                        dx[o, k, i] += gx
                    else:
                        dx[o, k, i] = gx
                if want_dw and v <= 0:
                    dw[wk] += g * v


def prelu_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    s = op.shape3
    x, w = inputs[0].reshape(s), inputs[1].reshape(-1)
    dx = grad_inputs[0].reshape(s) if propagate_down[0] else x
    dw = grad_inputs[1].reshape(-1) if propagate_down[1] else w
    prelu_backward_kernel(x, w, grad_outputs[0].reshape(s), dx, dw,
                          propagate_down[0], propagate_down[1], accum[0], accum[1])


def prelu_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1):
    from .. import functions as F
    dy, x, w = grad_inputs[0], inputs[0], inputs[1]
    base_axis %= x.ndim
    pos = x > 0
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
