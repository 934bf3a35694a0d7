"""Neural network activation functions.

The elementwise ones are table lines (see ``elementwise.py``); Softmax, LogSoftmax, CReLU, CELU
and PReLU work along an axis or with a weight and have their own kernels.
"""
import math

import numpy as np
from numba import njit, prange

from .common import normalize_axis, outer_axis_inner, store
from .elementwise import elementwise
from .kernels import parallel_kernel
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
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
                store(dx, (o, k, i), g, accum)


def softmax_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        s = op.shape3
        op.backward_kernel(outputs[0].reshape(s), output_grads[0].reshape(s),
                                input_grads[0].reshape(s), op.log, accum[0])


@njit(inline="always")
def concatenated_value(v, alpha, elu):
    """f(v) of CReLU (relu) and CELU (elu with ``alpha``), shared with the CUDA kernels."""
    if v > 0:
        return v
    if elu:
        return alpha * (math.exp(v) - 1.0)
    return 0.0


@njit(inline="always")
def concatenated_slope(v, alpha, elu):
    """f'(v) of :func:`concatenated_value`."""
    if v > 0:
        return 1.0
    if elu:
        return alpha * math.exp(v)
    return 0.0


@njit(cache=True)
def crelu_backward_kernel(x, dy, dx, alpha, elu, accum):
    """dx = dy[:, 0] f'(x) - dy[:, 1] f'(-x)."""
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(n):
            for i in range(inner):
                v = x[o, k, i]
                g = (dy[o, 0, k, i] * concatenated_slope(v, alpha, elu)
                     - dy[o, 1, k, i] * concatenated_slope(-v, alpha, elu))
                store(dx, (o, k, i), g, accum)


def concatenated_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """CReLU / CELU: the two halves of dy flow back through f(x) and f(-x)."""
    if propagate_down[0]:
        o, n, i = op.shape3
        crelu_backward_kernel(inputs[0].reshape(o, n, i), output_grads[0].reshape(o, 2, n, i),
                              input_grads[0].reshape(o, n, i), op.args.get("alpha", 0.0), op.elu,
                              accum[0])


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
                    store(dx, (o, k, i), gx, accum_dx)
                if want_dw and v <= 0:
                    dw[wk] += g * v


def prelu_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    s = op.shape3
    x, w = inputs[0].reshape(s), inputs[1].reshape(-1)
    dx = input_grads[0].reshape(s) if propagate_down[0] else x
    dw = input_grads[1].reshape(-1) if propagate_down[1] else w
    prelu_backward_kernel(x, w, output_grads[0].reshape(s), dx, dw,
                          propagate_down[0], propagate_down[1], accum[0], accum[1])


elementwise("Sigmoid", "sigmoid(x)", dx="dy * y * (1 - y)")
elementwise("Swish", "x * sigmoid(x)", dx="dy * (y + sigmoid(x) * (1 - y))")
elementwise("Tanh", "tanh(x)", dx="dy * (1 - y * y)")
elementwise("ReLU", "where(x > 0, x, 0.0)", dx="where(y > 0, dy, 0.0)")
elementwise("LeakyReLU", "where(x > 0, x, alpha * x)", dx="where(x > 0, dy, alpha * dy)")
elementwise("ELU", "where(x >= 0, x, alpha * (exp(x) - 1))", dx="where(x >= 0, dy, dy * alpha * exp(x))")
elementwise("SELU", "where(x > 0, scale * x, scale * alpha * (exp(x) - 1))",
            dx="where(x > 0, dy * scale, dy * scale * alpha * exp(x))")
elementwise("GELU", "x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))",
            dx="dy * (0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))"
               " + 0.5 * x * (1 - tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)) ** 2)"
               " * sqrt(2 / pi) * (1 + 0.134145 * x * x))")
elementwise("Mish", "x * tanh(softplus(x))",
            dx="dy * (tanh(softplus(x)) + x * (1 - tanh(softplus(x)) ** 2) * sigmoid(x))")
elementwise("ReLU6", "minimum(maximum(x, 0.0), 6.0)", dx="where((x > 0) * (x < 6), dy, 0.0)")
elementwise("HardSigmoid", "maximum(0.0, minimum(1.0, 0.2 * x + 0.5))",
            dx="where((x >= -2.5) * (x <= 2.5), 0.2 * dy, 0.0)")
elementwise("HardTanh", "maximum(-1.0, minimum(1.0, x))", dx="where((x >= -1) * (x <= 1), dy, 0.0)")
elementwise("LogSigmoid", "-softplus(-x)", dx="dy * sigmoid(-x)")
elementwise("SoftPlus", "softplus(beta * x) / beta", dx="dy * sigmoid(beta * x)")
elementwise("SoftSign", "x / (1 + abs(x))", dx="dy / (1 + abs(x)) ** 2")
elementwise("TanhShrink", "x - tanh(x)", dx="dy * tanh(x) ** 2")
elementwise("Sinc", "where(x == 0, 1.0, sin(x) / x)",
            dx="where(eq(x, 0), 0.0, dy * (cos(x) / x - sin(x) / (x * x)))")


@parallel_kernel
def softmax_kernel(x, y, log):
    """Softmax (or log-softmax) over axis 1 of 3-d (outer, n, inner) arrays."""
    outer, n, inner = x.shape
    for o in prange(outer):
        for i in range(inner):
            m = x[o, 0, i]
            for k in range(1, n):
                if x[o, k, i] > m:
                    m = x[o, k, i]
            s = 0.0
            for k in range(n):
                s += np.exp(x[o, k, i] - m)
            if log:
                ls = np.log(s)
                for k in range(n):
                    y[o, k, i] = x[o, k, i] - m - ls
            else:
                for k in range(n):
                    y[o, k, i] = np.exp(x[o, k, i] - m) / s


class _AxisSoftmax(Op):
    log = False

    def setup(self, x):
        self.axis = normalize_axis(self, self.axis, len(x))
        self.shape3 = outer_axis_inner(x, self.axis)
        size = int(np.prod(x, dtype=np.int64))
        self.forward_kernel = softmax_kernel.for_size(size)
        self.backward_kernel = softmax_backward_kernel.for_size(size)
        return [x]

    def forward(self, inputs, outputs):
        self.forward_kernel(inputs[0].reshape(self.shape3), outputs[0].reshape(self.shape3), self.log)

    backward = softmax_backward

    def grad_depends_input_data(self, i, j):
        return False

    def grad_depends_output_data(self, i, o):
        return True


@register
class Softmax(_AxisSoftmax):
    pass


@register
class LogSoftmax(_AxisSoftmax):
    log = True


class _Concatenated(Op):
    """f(x) and f(-x) concatenated along ``axis``: CReLU (f = relu) and CELU (f = elu)."""
    elu = False

    def setup(self, x):
        self.axis = normalize_axis(self, self.axis, len(x))
        self.shape3 = outer_axis_inner(x, self.axis)
        out = list(x)
        out[self.axis] *= 2
        return [tuple(out)]

    def forward(self, inputs, outputs):
        o, n, i = self.shape3
        crelu_kernel(inputs[0].reshape(o, n, i), outputs[0].reshape(o, 2, n, i),
                     self.args.get("alpha", 0.0), self.elu)

    backward = concatenated_backward


@register
class CReLU(_Concatenated):
    pass


@register
class CELU(_Concatenated):
    elu = True


@njit(cache=True)
def crelu_kernel(x, y, alpha, elu):
    """y[:, 0] = f(x), y[:, 1] = f(-x) with f = relu or elu(alpha)."""
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(n):
            for i in range(inner):
                for half in range(2):
                    v = x[o, k, i] if half == 0 else -x[o, k, i]
                    y[o, half, k, i] = concatenated_value(v, alpha, elu)


@register
class PReLU(Op):
    """y = x if x > 0 else w * x, with a single slope or one per channel (axis base_axis)."""

    def setup(self, x, w):
        self.base_axis = normalize_axis(self, self.base_axis, len(x), "base_axis")
        size = int(np.prod(w, dtype=np.int64))
        if size == 1:
            self.shape3 = (int(np.prod(x, dtype=np.int64)), 1, 1)
        elif size == x[self.base_axis]:
            self.shape3 = outer_axis_inner(x, self.base_axis)
        else:
            self.fail("slope of shape {} must have 1 or {} elements (input shape {}, base_axis {})",
                      w, x[self.base_axis], x, self.base_axis)
        return [x]

    def forward(self, inputs, outputs):
        prelu_kernel(inputs[0].reshape(self.shape3), inputs[1].reshape(-1), outputs[0].reshape(self.shape3))

    backward = prelu_backward


@njit(cache=True)
def prelu_kernel(x, w, y):
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(n):
            slope = w[k if w.size > 1 else 0]
            for i in range(inner):
                v = x[o, k, i]
                y[o, k, i] = v if v > 0 else slope * v
