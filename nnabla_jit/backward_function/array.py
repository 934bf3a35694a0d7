"""Grad rules of the array ops (``ops/array.py``): graphs of F ops, differentiable again.
"""
import numpy as np

from .. import functions as F
from ..ops.registry import grad_rule
from .adjoint import linear_adjoint
from .elementwise import reduce_to_shape


# ------------------------------------------------------------------------------- grad rules
@grad_rule('Reshape')
def reshape_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shape=None, inplace=True):
    return [F.reshape(grad_inputs[0], tuple(input_shapes[0]), inplace=False)]


def _sum_to(g, shape):
    return reduce_to_shape(g, tuple(shape))


@grad_rule('Broadcast')
def broadcast_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shape=None):
    return [_sum_to(grad_inputs[0], input_shapes[0])]


@grad_rule('BroadcastTo')
def broadcast_to_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=-1):
    xs, ys = tuple(input_shapes[0]), tuple(input_shapes[1])
    a = axis if axis >= 0 else len(xs) - len(ys)
    aligned = (1,) * a + ys + (1,) * (len(xs) - a - len(ys))
    return [None, F.reshape(_sum_to(grad_inputs[0], aligned), ys, inplace=False)]


@grad_rule('Tile')
def tile_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, reps=None):
    dy = grad_inputs[0]
    xs = tuple(input_shapes[0])
    nd = len(dy.shape)
    xs_full = (1,) * (nd - len(xs)) + xs
    split_shape, axes = [], []
    for k, (s, o) in enumerate(zip(xs_full, dy.shape)):
        split_shape += [o // s, s]
        axes.append(2 * k)
    g = F.sum(F.reshape(dy, split_shape, inplace=False), axis=axes)
    return [F.reshape(g, xs, inplace=False)]


@grad_rule('Flip')
def flip_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None):
    return [F.flip(grad_inputs[0], axes)]


@grad_rule('Pad')
def pad_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, pad_width=None,
             mode="constant", constant_value=0.0):
    # the constant is not part of the linear map
    return [linear_adjoint("Pad", dict(pad_width=tuple(pad_width), mode=mode, constant_value=0.0),
                           input_shapes[0], [grad_inputs[0]])]


@grad_rule('Transpose')
def transpose_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None):
    return [F.transpose(grad_inputs[0], tuple(np.argsort(axes)))]


@grad_rule('Slice')
def slice_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, start=None, stop=None, step=None):
    return [linear_adjoint("Slice", dict(start=tuple(start), stop=tuple(stop), step=tuple(step)),
                           input_shapes[0], [grad_inputs[0]])]


@grad_rule('Concatenate')
def concatenate_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    dy = grad_inputs[0]
    axis = axis % len(dy.shape)
    grads, off = [], 0
    for s in input_shapes:
        start = [0] * len(dy.shape)
        stop = list(dy.shape)
        start[axis], stop[axis] = off, off + s[axis]
        grads.append(F.slice(dy, start, stop, [1] * len(dy.shape)))
        off += s[axis]
    return grads


@grad_rule('Stack')
def stack_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0):
    dy = grad_inputs[0]
    return list(F.split(dy, axis=axis % len(dy.shape)))


@grad_rule('Split')
def split_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0):
    return [F.stack(*grad_inputs, axis=axis % len(input_shapes[0]))]


@grad_rule('EyeLike', 'Shape')
def no_input_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    """The output does not depend on the input values: no gradient (nn.grad gives zeros)."""
    return [None] * len(input_shapes)


@grad_rule('Shift')
def shift_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shifts=None,
               border_mode="nearest"):
    return [linear_adjoint("Shift", dict(shifts=tuple(shifts), border_mode=border_mode), input_shapes[0],
                           [grad_inputs[0]])]


@grad_rule('Meshgrid')
def meshgrid_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, ij_indexing=False):
    nd = len(input_shapes)
    axes = list(range(nd))
    if not ij_indexing and nd >= 2:
        axes[0], axes[1] = 1, 0
    return [F.sum(dy, axis=[d for d in range(nd) if d != a]) if nd > 1 else dy
            for dy, a in zip(grad_inputs, axes)]


@grad_rule('Assign')
def assign_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [grad_inputs[0], None]
