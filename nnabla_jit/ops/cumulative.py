"""Cumulative sums and products along an axis (inclusive or exclusive, forward or reversed).

The input is seen as (outer, n, inner) around the axis and each of the outer x inner lines is
accumulated by one parametrised kernel; CumSum's backward is the same kernel run the other
way, CumProd's is a zero-safe recurrence (``backward_ops/cumulative.py``).
"""
from numba import prange

from ..backward_ops import cumulative as bw
from .activation import normalize_axis, outer_axis_inner
from .kernels import parallel_kernel
from .registry import Op, register


@parallel_kernel
def cumulate(x3, y3, multiply, exclusive, reverse, accum):
    """y3[a, k, c] (+)= sum (or product) of x3[a, k', c] for k' up to k (before k if
    exclusive; from the end if reverse), line by line."""
    outer, n, inner = x3.shape
    for line in prange(outer * inner):
        a = line // inner
        c = line % inner
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
    backward = bw.cumsum_backward
    grad = bw.cumsum_grad

    def grad_depends_input_data(self, i, j):
        return False


@register
class CumProd(_Cumulative):
    multiply = True
    backward = bw.cumprod_backward
    grad = bw.cumprod_grad
