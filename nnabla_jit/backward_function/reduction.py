"""Grad rules of the reduction ops (``ops/reduction.py``): graphs of F ops, differentiable again.
"""
import numpy as np

from .. import functions as F
from ..ops.reduction import axes_of
from ..ops.registry import NoGradient, grad_rule


# ------------------------------------------------------------------------------- grad rules
def _expand(dy, input_shape, axes, keep_dims):
    """Broadcast a reduced gradient back to the input shape."""
    if not keep_dims:
        dy = F.reshape(dy, [1 if a in axes else s for a, s in enumerate(input_shape)], inplace=False)
    return F.broadcast(dy, input_shape)


@grad_rule('Sum')
def sum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None, keep_dims=False):
    axes = axes_of(input_shapes[0], axes)
    return [_expand(grad_inputs[0], tuple(input_shapes[0]), axes, keep_dims)]


@grad_rule('Mean')
def mean_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None, keep_dims=False):
    axes = axes_of(input_shapes[0], axes)
    n = int(np.prod([input_shapes[0][a] for a in axes]))
    return [_expand(grad_inputs[0], tuple(input_shapes[0]), axes, keep_dims) * (1.0 / max(n, 1))]


@grad_rule('ReduceSum')
def reduce_sum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [F.broadcast(F.reshape(grad_inputs[0], [1] * len(input_shapes[0]), inplace=False),
                        tuple(input_shapes[0]))]


@grad_rule('ReduceMean')
def reduce_mean_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    n = int(np.prod(input_shapes[0]))
    return [reduce_sum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes)[0] * (1.0 / n)]


@grad_rule('Prod')
def prod_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None, keep_dims=False):
    axes = axes_of(input_shapes[0], axes)
    shape = tuple(input_shapes[0])
    x, y = inputs[0], outputs[0]
    return [_expand(grad_inputs[0] * y, shape, axes, keep_dims) / x]


@grad_rule('Norm')
def norm_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, p=2.0, axes=None, keep_dims=False):
    axes = axes_of(input_shapes[0], axes)
    shape = tuple(input_shapes[0])
    x, y = inputs[0], outputs[0]
    scale = _expand(grad_inputs[0] * y ** (1 - p), shape, axes, keep_dims)
    # sign(x) |x|^(p-1) written as x |x|^(p-2): F.sign passes gradients straight through
    return [scale * x * F.abs(x) ** (p - 2)]


@grad_rule('Max', 'Min')
def arg_reduction_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None,
                       keep_dims=False, with_index=False, only_index=False):
    """The max/min element gets dy: mask = (x == broadcast(y))."""
    if only_index:
        raise NoGradient("Max/Min with only_index=True has no gradient")
    axes = axes_of(input_shapes[0], axes)
    shape = tuple(input_shapes[0])
    x, y = inputs[0], outputs[0]
    yb = _expand(y, shape, axes, keep_dims)
    mask = F.equal(x, yb)
    return [_expand(grad_inputs[0], shape, axes, keep_dims) * mask]
