"""Grad rules of the cumulative ops (``ops/cumulative.py``): graphs of F ops, differentiable again.
"""
import numpy as np

from .. import functions as F
from ..ops.registry import grad_rule
from ..variable import Variable


@grad_rule('CumSum')
def cumsum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0, exclusive=False,
                reverse=False):
    return [F.cumsum(grad_inputs[0], axis, exclusive, not reverse)]


@grad_rule('CumProd')
def cumprod_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0,
                 exclusive=False, reverse=False):
    """dx_j = sum_i dy_i * prod_{k in y_i, k != j} x_k, built without division (exact with
    zeros): z[..., j, k] = x_k with z[..., j, j] = 1, then C = cumprod(z) along k gives
    C[..., j, i] = prod_{k <= i (< i if exclusive), k != j} x_k, masked to the outputs i that
    include x_j. This takes n x n per line (n = the axis length), the price of staying a
    graph of F ops that can be differentiated again."""
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
