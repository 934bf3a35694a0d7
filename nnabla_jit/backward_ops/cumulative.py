"""Backward kernels and grad rules of CumSum and CumProd."""
import numpy as np
from numba import prange

from ..ops.kernels import parallel_kernel


def cumsum_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """The adjoint of a cumulative sum is the cumulative sum in the other direction."""
    if propagate_down[0]:
        op.kernel(grad_outputs[0].reshape(op.shape3), grad_inputs[0].reshape(op.shape3), False,
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


def cumprod_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        s = op.shape3
        cumprod_backward_kernel.for_size(s[0] * s[1] * s[2])(
            inputs[0].reshape(s), grad_outputs[0].reshape(s), grad_inputs[0].reshape(s),
            op.exclusive, op.reverse, accum[0])


def cumsum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0, exclusive=False,
                reverse=False):
    from .. import functions as F
    return [F.cumsum(grad_inputs[0], axis, exclusive, not reverse)]


def cumprod_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0,
                 exclusive=False, reverse=False):
    """dx_j = sum_i dy_i * prod_{k in y_i, k != j} x_k, built without division (exact with
    zeros): z[..., j, k] = x_k with z[..., j, j] = 1, then C = cumprod(z) along k gives
    C[..., j, i] = prod_{k <= i (< i if exclusive), k != j} x_k, masked to the outputs i that
    include x_j. This takes n x n per line (n = the axis length), the price of staying a
    graph of F ops that can be differentiated again."""
    from .. import functions as F
    from ..variable import Variable
    dy, x = grad_inputs[0], inputs[0]
    nd = len(input_shapes[0])
    axis %= nd
    n = input_shapes[0][axis]
    perm = [d for d in range(nd) if d != axis] + [axis]

    def to_lines(v):   # the axis last, in accumulation order
        v = F.transpose(v, perm) if axis != nd - 1 else v
        return F.flip(v, [nd - 1]) if reverse else v

    xt, dyt = to_lines(x), to_lines(dy)
    lead = tuple(xt.shape[:-1])
    eye = np.eye(n)

    def constant(a):
        return Variable.from_numpy_array(a, need_grad=False)

    z = F.reshape(xt, lead + (1, n), inplace=False) * constant(1 - eye) + constant(eye)
    c = F.cumprod(z, axis=nd, exclusive=exclusive)
    includes = constant(np.triu(np.ones((n, n)), 1 if exclusive else 0))   # [j, i]: y_i has x_j
    g = F.sum(c * includes * F.reshape(dyt, lead + (1, n), inplace=False), axis=nd)
    if reverse:
        g = F.flip(g, [nd - 1])
    return [F.transpose(g, list(np.argsort(perm))) if axis != nd - 1 else g]
