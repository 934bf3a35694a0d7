"""Neural network activation functions.

The elementwise ones are table lines (see ``elementwise.py``); Softmax, LogSoftmax, CReLU, CELU
and PReLU work along an axis or with a weight and have their own kernels.
"""
import numpy as np
from numba import njit, prange

from ..backward_ops import activation as bw
from .elementwise import elementwise
from .kernels import parallel_kernel
from .registry import Op, register

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


def normalize_axis(op, axis, ndim, arg="axis"):
    """Map a negative axis to its positive index; reject one outside [-ndim, ndim)."""
    if not -ndim <= axis < ndim:
        op.fail("{} {} is out of range for an input of {} dimensions", arg, axis, ndim)
    return axis % ndim


def outer_axis_inner(shape, axis):
    """(outer, size, inner): the input seen as a 3-d array around ``axis``."""
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, shape[axis], inner


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
        self.backward_kernel = bw.softmax_backward_kernel.for_size(size)
        return [x]

    def forward(self, inputs, outputs):
        self.forward_kernel(inputs[0].reshape(self.shape3), outputs[0].reshape(self.shape3), self.log)

    backward = bw.softmax_backward

    def grad_depends_input_data(self, i, j):
        return False

    def grad_depends_output_data(self, i, o):
        return True


@register
class Softmax(_AxisSoftmax):
    grad = bw.softmax_grad


@register
class LogSoftmax(_AxisSoftmax):
    log = True
    grad = bw.log_softmax_grad


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

    backward = bw.concatenated_backward


@register
class CReLU(_Concatenated):
    grad = bw.crelu_grad


@register
class CELU(_Concatenated):
    elu = True
    grad = bw.celu_grad


@njit(cache=True)
def crelu_kernel(x, y, alpha, elu):
    """y[:, 0] = f(x), y[:, 1] = f(-x) with f = relu or elu(alpha)."""
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(n):
            for i in range(inner):
                for half in range(2):
                    v = x[o, k, i] if half == 0 else -x[o, k, i]
                    if v > 0:
                        y[o, half, k, i] = v
                    elif elu:
                        y[o, half, k, i] = alpha * (np.exp(v) - 1.0)
                    else:
                        y[o, half, k, i] = 0.0


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

    backward = bw.prelu_backward
    grad = bw.prelu_grad


@njit(cache=True)
def prelu_kernel(x, w, y):
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(n):
            slope = w[k if w.size > 1 else 0]
            for i in range(inner):
                v = x[o, k, i]
                y[o, k, i] = v if v > 0 else slope * v
