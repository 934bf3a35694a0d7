"""Cumulative sums and products along an axis (inclusive or exclusive, forward or reversed).

The input is seen as (outer, n, inner) around the axis and each of the outer x inner lines is
accumulated by one parametrised kernel; CumSum's backward is the same kernel run the other
way, CumProd's is a zero-safe recurrence (``cumprod_backward_kernel``).
"""
import numpy as np
from numba import njit, prange

from .common import normalize_axis, outer_axis_inner
from .kernels import parallel_kernel
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
def cumsum_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """The adjoint of a cumulative sum is the cumulative sum in the other direction."""
    if propagate_down[0]:
        op.kernel(output_grads[0].reshape(op.shape3), input_grads[0].reshape(op.shape3), False,
                  op.exclusive, not op.reverse, accum[0])


@parallel_kernel
def cumprod_backward_kernel(x3, dy3, dx3, exclusive, reverse, accum):
    """dx_j = sum over outputs i that include x_j of dy_i * (product of the other factors of
    y_i), as prefix_j * R_j with R from a reverse recurrence: no division, exact with zeros.

    In accumulation order t (positions k_t): prefix_t = prod_{s<t} x_{k_s};
    inclusive: R_t = dy_t + x_{t+1} R_{t+1}; exclusive: R_t = dy_{t+1} + x_{t+1} R_{t+1}.
    """
    outer, n, inner = x3.shape
    for line in prange(outer * inner):
        a = line // inner
        c = line % inner
        prefix = np.empty(n, np.float64)
        p = 1.0
        for t in range(n):
            prefix[t] = p
            p *= x3[a, n - 1 - t if reverse else t, c]
        r = 0.0
        x_next = 0.0
        for t in range(n - 1, -1, -1):
            k = n - 1 - t if reverse else t
            if exclusive:
                g = prefix[t] * r
                r = dy3[a, k, c] + x3[a, k, c] * r
            else:
                r = dy3[a, k, c] + x_next * r
                g = prefix[t] * r
                x_next = x3[a, k, c]
            if accum:
                dx3[a, k, c] += g
            else:
                dx3[a, k, c] = g


def cumprod_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        s = op.shape3
        cumprod_backward_kernel.for_size(s[0] * s[1] * s[2])(
            inputs[0].reshape(s), output_grads[0].reshape(s), input_grads[0].reshape(s),
            op.exclusive, op.reverse, accum[0])


@njit(inline="always")
def cumulate_line(x3, y3, a, c, multiply, exclusive, reverse, accum):
    """One line of :func:`cumulate` (also the CUDA kernel's, ``cuda_ops/cumulative.py``)."""
    n = x3.shape[1]
    acc = 1.0 if multiply else 0.0
    for t in range(n):
        k = n - 1 - t if reverse else t
        previous = acc
        acc = acc * x3[a, k, c] if multiply else acc + x3[a, k, c]
        value = previous if exclusive else acc
        if accum:
            y3[a, k, c] += value
        else:
            y3[a, k, c] = value


@parallel_kernel
def cumulate(x3, y3, multiply, exclusive, reverse, accum):
    """y3[a, k, c] (+)= sum (or product) of x3[a, k', c] for k' up to k (before k if
    exclusive; from the end if reverse), line by line."""
    outer, n, inner = x3.shape
    for line in prange(outer * inner):
        cumulate_line(x3, y3, line // inner, line % inner, multiply, exclusive, reverse, accum)


class _Cumulative(Op):
    multiply = False

    def setup(self, x):
        if not x:
            self.fail("input must have at least one dimension, got shape {}", x)
        self.axis = normalize_axis(self, self.axis, len(x))
        self.shape3 = outer_axis_inner(x, self.axis)
        self.kernel = cumulate.for_size(self.shape3[0] * self.shape3[1] * self.shape3[2])
        return [tuple(x)]

    def forward(self, inputs, outputs):
        self.kernel(inputs[0].reshape(self.shape3), outputs[0].reshape(self.shape3), self.multiply,
                    self.exclusive, self.reverse, False)


@register
class CumSum(_Cumulative):
    backward = cumsum_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class CumProd(_Cumulative):
    multiply = True
    backward = cumprod_backward
