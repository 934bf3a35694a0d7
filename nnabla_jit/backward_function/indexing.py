"""Grad rules of the indexing ops (``ops/indexing.py``): graphs of F ops, differentiable again.

The backward of a gather is a scatter-add of the gradient through the same start offsets and
the backward of a scatter is a gather, so the kernels are the forward ones (``copy_blocks``,
``add_blocks``) with source and destination swapped. The grad rules pair the ops the same way
(Gather <-> ScatterAdd, GatherNd <-> ScatterNd, BoolGather <-> BoolScatter), so ``nn.grad``
results are differentiable again.
"""
import numpy as np

from .. import functions as F
from ..ops.common import shape_size
from ..ops.registry import NoGradient, grad_rule


# ------------------------------------------------------------------------------ grad rules
def _take_along_axis(g, index, axis):
    """g[..., index[p], ...] at every position p of index (same shape as g except on axis):
    a Gather over all leading dimensions once ``axis`` is moved last."""
    nd = len(g.shape)
    if axis != nd - 1:
        perm = [d for d in range(nd) if d != axis] + [axis]
        g, index = F.transpose(g, perm), F.transpose(index, perm)
    r = F.gather(g, index, axis=nd - 1, batch_dims=nd - 1)
    return F.transpose(r, list(np.argsort(perm))) if axis != nd - 1 else r


@grad_rule('Gather')
def gather_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0, batch_dims=0):
    """Scatter-add dy back: its index dimensions flattened to one, the indices broadcast to it."""
    dy, index = grad_inputs[0], inputs[1]
    xs, ishape = tuple(input_shapes[0]), tuple(input_shapes[1])
    axis %= len(xs)
    k = shape_size(ishape[batch_dims:])
    flat = xs[:axis] + (k,) + xs[axis + 1:]
    aligned = ishape[:batch_dims] + (1,) * (axis - batch_dims) + (k,) + (1,) * (len(xs) - axis - 1)
    index = F.broadcast(F.reshape(index, aligned, inplace=False), flat)
    dx = F.scatter_add(F.constant(0.0, xs), index, F.reshape(dy, flat, inplace=False), axis=axis)
    return [dx, None]


@grad_rule('ScatterAdd')
def scatter_add_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0):
    dy, index = grad_inputs[0], inputs[1]
    ishape, x1s = tuple(input_shapes[1]), tuple(input_shapes[2])
    nd = len(ishape)
    axis %= nd
    stop = [s if d == axis else i for d, (i, s) in enumerate(zip(ishape, dy.shape))]
    g = dy if tuple(stop) == tuple(dy.shape) else F.slice(dy, [0] * nd, stop, [1] * nd)
    dx1 = _take_along_axis(g, index, axis)
    if ishape != x1s:
        dx1 = F.pad(dx1, [p for i, s in zip(ishape, x1s) for p in (0, s - i)], "constant", 0.0)
    return [dy, None, dx1]


@grad_rule('GatherNd')
def gather_nd_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [F.scatter_nd(grad_inputs[0], inputs[1], shape=tuple(input_shapes[0]), add=True), None]


@grad_rule('ScatterNd')
def scatter_nd_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shape=None, add=False):
    return [F.gather_nd(grad_inputs[0], inputs[1])] + [None] * (len(inputs) - 1)


@grad_rule('BoolGather')
def bool_gather_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [F.bool_scatter(grad_inputs[0], inputs[1]), None]


@grad_rule('BoolScatter')
def bool_scatter_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    dy, mask = grad_inputs[0], inputs[1]
    grads = [F.bool_gather(dy, mask), None]
    if len(inputs) == 3:   # ``output`` keeps its values where the mask is zero
        kept = F.equal_scalar(mask, 0.0)
        kept = F.reshape(kept, tuple(mask.shape) + (1,) * (len(dy.shape) - len(mask.shape)),
                         inplace=False)
        grads.append(dy * kept)
    return grads


@grad_rule('Sort')
def sort_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=-1, reverse=False,
              with_index=False, only_index=False):
    if only_index:
        raise NoGradient("Sort: only_index=True outputs indices, which have no gradient")
    order = F.sort(inputs[0], axis, reverse, only_index=True)
    return [F.scatter_add(F.constant(0.0, tuple(input_shapes[0])), order, grad_inputs[0], axis=axis)]


@grad_rule('TopKData')
def top_k_data_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, k, abs=False,
                    reduce=True, base_axis=1, largest=True, with_index=False):
    dy = grad_inputs[0]
    if not reduce:
        return [dy]
    xs = tuple(input_shapes[0])
    base_axis %= len(xs)
    rows = (shape_size(xs[:base_axis]), shape_size(xs[base_axis:]))
    _, index = F.top_k_data(inputs[0], k, abs, True, base_axis, largest, with_index=True)
    dx = F.scatter_add(F.constant(0.0, rows), F.reshape(index, (rows[0], k), inplace=False),
                       F.reshape(dy, (rows[0], k), inplace=False), axis=1)
    return [F.reshape(dx, xs, inplace=False)]


@grad_rule('TopKGrad')
def top_k_grad_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, k, abs=False,
                    base_axis=1):
    return [F.top_k_data(grad_inputs[0], k, abs=abs, reduce=False, base_axis=base_axis)]
