"""Backward kernels and grad rules of array manipulation (adjoints of the data movement)."""
import numpy as np


def _ops():
    from ..ops import array
    return array


def _store(dst, g, accum):
    _ops().copy_view(g, dst, accum)


def gather_op_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """Adjoint of a per-axis gather: scatter-add dy back through each gathered axis."""
    if not propagate_down[0]:
        return
    dx = grad_inputs[0]
    in_shape = getattr(op, "aligned", None) or getattr(op, "in_shape", None) or dx.shape
    g = _ops().scatter_axes(grad_outputs[0], op.indices, in_shape)
    _store(dx, g.reshape(dx.shape), accum[0])


def reshape_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        _store(grad_inputs[0].reshape(-1), grad_outputs[0].reshape(-1), accum[0])


def transpose_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        _store(grad_inputs[0], grad_outputs[0].transpose(np.argsort(op.axes)), accum[0])


def slice_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        dx = grad_inputs[0]
        if not accum[0]:
            dx.fill(0)
        _store(dx[op.slices], grad_outputs[0], True)


def concatenate_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    for k, dx in enumerate(grad_inputs):
        if propagate_down[k]:
            _store(dx, op.part(grad_outputs[0], k), accum[k])


def stack_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    dy = np.moveaxis(grad_outputs[0], op.axis, 0)
    for k, dx in enumerate(grad_inputs):
        if propagate_down[k]:
            _store(dx, dy[k, ...], accum[k])


def split_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        dx = np.moveaxis(grad_inputs[0], op.axis, 0)
        for k, dy in enumerate(grad_outputs):
            _store(dx[k, ...], dy, accum[0])


# ------------------------------------------------------------------------------- grad rules
def reshape_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shape=None, inplace=True):
    from .. import functions as F
    return [F.reshape(grad_inputs[0], tuple(input_shapes[0]), inplace=False)]


def _sum_to(g, shape):
    from ..ops.elementwise import reduce_to_shape
    return reduce_to_shape(g, tuple(shape))


def broadcast_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shape=None):
    return [_sum_to(grad_inputs[0], input_shapes[0])]


def broadcast_to_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=-1):
    from .. import functions as F
    xs, ys = tuple(input_shapes[0]), tuple(input_shapes[1])
    a = axis if axis >= 0 else len(ys) - len(xs)
    aligned = (1,) * a + xs + (1,) * (len(ys) - a - len(xs))
    return [F.reshape(_sum_to(grad_inputs[0], aligned), xs, inplace=False), None]


def tile_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, reps=None):
    from .. import functions as F
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


def flip_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None):
    from .. import functions as F
    return [F.flip(grad_inputs[0], axes)]


def pad_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, pad_width=None,
             mode="constant", constant_value=0.0):
    return [_internal("PadAdjoint", grad_inputs[0], in_shape=tuple(input_shapes[0]),
                      pad_width=tuple(pad_width), mode=mode, constant_value=0.0)]


def _internal(name, x, **args):
    """Build a node of an internal (non-nnabla) op such as PadAdjoint."""
    from ..function import build
    from ..ops.registry import REGISTRY
    return build(REGISTRY[name](input_names=("x",), **args), [x])


def pad_adjoint_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        g = _ops().gather_axes(grad_outputs[0], op.pad.indices, 0.0)
        _store(grad_inputs[0], g, accum[0])


def pad_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, in_shape=None,
                     pad_width=None, mode="constant", constant_value=0.0):
    from .. import functions as F
    return [F.pad(grad_inputs[0], pad_width, mode, 0.0)]


def slice_adjoint_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        _store(grad_inputs[0], grad_outputs[0][op.slice.slices], accum[0])


def slice_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, in_shape=None,
                       start=None, stop=None, step=None):
    from .. import functions as F
    return [F.slice(grad_inputs[0], start, stop, step)]


def transpose_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None):
    from .. import functions as F
    return [F.transpose(grad_inputs[0], tuple(np.argsort(axes)))]


def slice_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, start=None, stop=None, step=None):
    return [_internal("SliceAdjoint", grad_inputs[0], in_shape=tuple(input_shapes[0]),
                      start=tuple(start), stop=tuple(stop), step=tuple(step))]


def concatenate_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    from .. import functions as F
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


def stack_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0):
    from .. import functions as F
    dy = grad_inputs[0]
    return list(F.split(dy, axis=axis % len(dy.shape)))


def split_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0):
    from .. import functions as F
    return [F.stack(*grad_inputs, axis=axis % len(input_shapes[0]))]


# ------------------------------------------------------------------------------- Shift, Meshgrid,
# Shape, Assign (appended with the indexing/linalg family)
def zero_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """For outputs that do not depend on the input values (Shape, EyeLike): a zero gradient."""
    for dx, pd, acc in zip(grad_inputs, propagate_down, accum):
        if pd and not acc:
            dx.fill(0)


def no_input_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    """The output does not depend on the input values: no gradient (nn.grad gives zeros)."""
    return [None] * len(input_shapes)


def shift_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shifts=None,
               border_mode="nearest"):
    return [_internal("ShiftAdjoint", grad_inputs[0], shifts=tuple(shifts), border_mode=border_mode)]


def shift_adjoint_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        _store(grad_inputs[0], _ops().gather_axes(grad_outputs[0], op.shift.indices, 0.0), accum[0])


def shift_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shifts=None,
                       border_mode="nearest"):
    from .. import functions as F
    return [F.shift(grad_inputs[0], shifts, border_mode)]


def meshgrid_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """Each input gets its output's gradient summed over the other axes of the grid."""
    for i, (dx, axis) in enumerate(zip(grad_inputs, op.axes)):
        if propagate_down[i]:
            shape = op.grid_shape
            dy3 = grad_outputs[i].reshape(int(np.prod(shape[:axis])), shape[axis],
                                          int(np.prod(shape[axis + 1:])))
            _ops().sum_outer_inner(dy3, dx, accum[i])


def meshgrid_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, ij_indexing=False):
    from .. import functions as F
    nd = len(input_shapes)
    axes = list(range(nd))
    if not ij_indexing and nd >= 2:
        axes[0], axes[1] = 1, 0
    return [F.sum(dy, axis=[d for d in range(nd) if d != a]) if nd > 1 else dy
            for dy, a in zip(grad_inputs, axes)]


def assign_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """As in nnabla the gradient flows to ``dst`` (src gets none)."""
    if propagate_down[0]:
        _store(grad_inputs[0], grad_outputs[0], accum[0])


def assign_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [grad_inputs[0], None]
