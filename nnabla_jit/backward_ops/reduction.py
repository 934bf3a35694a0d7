"""Backward kernels and grad rules of the reductions."""
import numpy as np
from numba import njit, prange

from ..ops.kernels import parallel_kernel


@parallel_kernel
def broadcast_back(dy, dx, scale, accum):
    """dx[a, b, c] (+)= scale * dy[a, c]: the gradient of a sum over b."""
    A, B, C = dx.shape
    for a in prange(A):
        for b in range(B):
            for c in range(C):
                g = scale * dy[a, c]
                if accum:
                    dx[a, b, c] += g
                else:
                    dx[a, b, c] = g


def _write(op, dx, g3, accum):
    """Store a gradient computed in the reduction's 3-d layout into dx."""
    g = op.layout.scatter_back(g3)
    if accum:
        dx += g
    else:
        dx[...] = g


def sum_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[0]:
        return
    lay = op.layout
    scale = 1.0 / max(lay.size_reduced, 1) if op.mean else 1.0
    dy = grad_outputs[0].reshape(lay.shape3[0], lay.shape3[2])
    dx = grad_inputs[0]
    kernel = broadcast_back.for_size(dx.size)
    if lay.perm is None:
        kernel(dy, dx.reshape(lay.shape3), scale, accum[0])
    else:
        g3 = np.empty(lay.shape3, dx.dtype)
        kernel(dy, g3, scale, False)
        _write(op, dx, g3, accum[0])


@njit(cache=True)
def arg_backward_kernel(dy, index, dx3, accum):
    """Route each dy[a, c] to the reduced position index[a, c] that won the max/min."""
    A, B, C = dx3.shape
    if not accum:
        dx3[:] = 0.0
    for a in range(A):
        for c in range(C):
            dx3[a, index[a, c], c] += dy[a, c]


def arg_reduction_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[0]:
        return
    if op.only_index:
        raise NotImplementedError("{}: only_index=True has no gradient".format(op.name))
    lay = op.layout
    index = getattr(op, "saved_index", None)
    if index is None:
        _, index = op._reduce(inputs[0])
    dy = grad_outputs[0].reshape(lay.shape3[0], lay.shape3[2])
    dx = grad_inputs[0]
    if lay.perm is None:
        arg_backward_kernel(dy, index, dx.reshape(lay.shape3), accum[0])
    else:
        g3 = np.zeros(lay.shape3, dx.dtype)
        arg_backward_kernel(dy, index, g3, True)
        _write(op, dx, g3, accum[0])


@njit(cache=True)
def prod_backward_kernel(x3, dy, g3):
    """g = dy * product of the other elements (exclusive prefix x suffix products: exact
    also where x has zeros)."""
    A, B, C = x3.shape
    for a in range(A):
        for c in range(C):
            left = 1.0
            for b in range(B):
                g3[a, b, c] = left
                left *= x3[a, b, c]
            right = 1.0
            for b in range(B - 1, -1, -1):
                g3[a, b, c] *= right * dy[a, c]
                right *= x3[a, b, c]


def prod_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[0]:
        return
    lay = op.layout
    x3 = lay.view(inputs[0])
    g3 = np.empty(lay.shape3, x3.dtype)
    prod_backward_kernel(x3, grad_outputs[0].reshape(lay.shape3[0], lay.shape3[2]), g3)
    _write(op, grad_inputs[0], g3, accum[0])


def norm_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[0]:
        return
    lay = op.layout
    x3 = lay.view(inputs[0])
    y = outputs[0].reshape(lay.shape3[0], 1, lay.shape3[2])
    dy = grad_outputs[0].reshape(lay.shape3[0], 1, lay.shape3[2])
    p = op.p
    with np.errstate(divide="ignore", invalid="ignore"):
        g3 = dy * np.sign(x3) * np.abs(x3) ** (p - 1) * np.where(y > 0, y, 1) ** (1 - p)
    _write(op, grad_inputs[0], g3.astype(x3.dtype), accum[0])


# ------------------------------------------------------------------------------- grad rules
def _expand(dy, input_shape, axes, keep_dims):
    """Broadcast a reduced gradient back to the input shape."""
    from .. import functions as F
    if not keep_dims:
        dy = F.reshape(dy, [1 if a in axes else s for a, s in enumerate(input_shape)], inplace=False)
    return F.broadcast(dy, input_shape)


def _axes_of(input_shape, axes):
    nd = len(input_shape)
    return sorted({a % nd for a in axes}) if axes is not None else list(range(nd))


def sum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None, keep_dims=False):
    axes = _axes_of(input_shapes[0], axes)
    return [_expand(grad_inputs[0], tuple(input_shapes[0]), axes, keep_dims)]


def mean_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None, keep_dims=False):
    axes = _axes_of(input_shapes[0], axes)
    n = int(np.prod([input_shapes[0][a] for a in axes]))
    return [_expand(grad_inputs[0], tuple(input_shapes[0]), axes, keep_dims) * (1.0 / max(n, 1))]


def reduce_sum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    return [F.broadcast(F.reshape(grad_inputs[0], [1] * len(input_shapes[0]), inplace=False),
                        tuple(input_shapes[0]))]


def reduce_mean_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    n = int(np.prod(input_shapes[0]))
    return [reduce_sum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes)[0] * (1.0 / n)]


def prod_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None, keep_dims=False):
    axes = _axes_of(input_shapes[0], axes)
    shape = tuple(input_shapes[0])
    x, y = inputs[0], outputs[0]
    return [_expand(grad_inputs[0] * y, shape, axes, keep_dims) / x]


def norm_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, p=2.0, axes=None, keep_dims=False):
    from .. import functions as F
    axes = _axes_of(input_shapes[0], axes)
    shape = tuple(input_shapes[0])
    x, y = inputs[0], outputs[0]
    scale = _expand(grad_inputs[0] * y ** (1 - p), shape, axes, keep_dims)
    # sign(x) |x|^(p-1) written as x |x|^(p-2): F.sign passes gradients straight through
    return [scale * x * F.abs(x) ** (p - 2)]


def arg_reduction_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axes=None,
                       keep_dims=False, with_index=False, only_index=False):
    """The max/min element gets dy: mask = (x == broadcast(y))."""
    from .. import functions as F
    if only_index:
        from ..ops.registry import NoGradient
        raise NoGradient("Max/Min with only_index=True has no gradient")
    axes = _axes_of(input_shapes[0], axes)
    shape = tuple(input_shapes[0])
    x, y = inputs[0], outputs[0]
    yb = _expand(y, shape, axes, keep_dims)
    mask = F.equal(x, yb)
    return [_expand(grad_inputs[0], shape, axes, keep_dims) * mask]
