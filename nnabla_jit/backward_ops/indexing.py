"""Backward kernels and grad rules of the indexing ops.

The backward of a gather is a scatter-add of the gradient through the same start offsets and
the backward of a scatter is a gather, so the kernels are the forward ones (``copy_blocks``,
``add_blocks``) with source and destination swapped. The grad rules pair the ops the same way
(Gather <-> ScatterAdd, GatherNd <-> ScatterNd, BoolGather <-> BoolScatter), so ``nn.grad``
results are differentiable again.
"""
import numpy as np

from ..ops.registry import NoGradient, accumulate


def _ops():
    from ..ops import indexing
    return indexing


def _prod(shape):
    return int(np.prod(shape, dtype=np.int64))


def _rows(n, block):
    return np.arange(n, dtype=np.int64) * block


def _scatter_into(dx, dy, dx_starts, dy_starts, block, accum):
    """dx (+)= dy moved from ``dy_starts`` to ``dx_starts``; dx is zeroed first unless
    accumulating (destinations may repeat)."""
    if not accum:
        dx.fill(0)
    _ops().add_blocks(dy, dy_starts, dx, dx_starts, block)


# ------------------------------------------------------------------------------ kernels
def gather_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        _scatter_into(grad_inputs[0].reshape(-1), grad_outputs[0].reshape(-1),
                      op.src_starts(inputs[1]), op.dst_starts, op.dims[3], accum[0])


def gather_nd_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        _scatter_into(grad_inputs[0].reshape(-1), grad_outputs[0].reshape(-1),
                      op.src_starts(inputs[1]), op.dst_starts, op.block, accum[0])


def bool_gather_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        rows = _ops().nonzero_rows(inputs[1])
        _scatter_into(grad_inputs[0].reshape(-1), grad_outputs[0].reshape(-1), rows * op.block,
                      _rows(rows.size, op.block), op.block, accum[0])


def _gather_from(dx, dy, dy_starts, dx_starts, block, accum):
    """dx (+)= blocks of dy at ``dy_starts``, each destination written once."""
    if accum:
        _ops().add_blocks(dy, dy_starts, dx, dx_starts, block)
    else:
        _ops().copy_blocks.serial(dy, dy_starts, dx, dx_starts, block)


def scatter_nd_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """d data = the gradient at the scattered places (also for repeated indices, as nnabla)."""
    if propagate_down[0]:
        _gather_from(grad_inputs[0].reshape(-1), grad_outputs[0].reshape(-1),
                     op.dst_starts(inputs[1]), op.src_starts, op.block, accum[0])


def scatter_add_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    dy = grad_outputs[0]
    if propagate_down[0]:
        accumulate(grad_inputs[0], dy, accum[0])
    if propagate_down[2]:
        dx1 = grad_inputs[2].reshape(-1)
        if not accum[2]:
            dx1.fill(0)   # places of x1 outside the indices get nothing
        _ops().add_blocks(dy.reshape(-1), op.dst(inputs[1]), dx1, op.src, 1)


def bool_scatter_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    dy = grad_outputs[0].reshape(-1)
    rows = _ops().nonzero_rows(inputs[1])
    if propagate_down[0]:
        _gather_from(grad_inputs[0].reshape(-1), dy, rows * op.block, _rows(rows.size, op.block),
                     op.block, accum[0])
    if len(propagate_down) == 3 and propagate_down[2]:   # the kept values of ``output``
        g = dy.reshape(-1, op.block).copy()
        g[rows] = 0
        accumulate(grad_inputs[2], g.reshape(grad_inputs[2].shape), accum[2])


def sort_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if op.only_index:
        raise NoGradient("Sort: only_index=True outputs indices, which have no gradient")
    if propagate_down[0]:
        _ops().unsort_lines(grad_outputs[0].reshape(op.shape3), op.order(inputs[0]),
                            grad_inputs[0].reshape(op.shape3), accum[0])


def top_k_data_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[0]:
        return
    dx, dy = grad_inputs[0].reshape(-1), grad_outputs[0].reshape(-1)
    if not op.reduce:   # nnabla passes the whole gradient through when not reducing
        accumulate(dx, dy, accum[0])
        return
    positions = op.flat_positions(inputs[0])
    _scatter_into(dx, dy, positions, _rows(positions.size, 1), 1, accum[0])


def top_k_grad_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        dy = grad_outputs[0].reshape(-1)
        positions = op.flat_positions(dy)
        _scatter_into(grad_inputs[0].reshape(-1), dy, positions, positions, 1, accum[0])


# ------------------------------------------------------------------------------ grad rules
def _take_along_axis(g, index, axis):
    """g[..., index[p], ...] at every position p of index (same shape as g except on axis):
    a Gather over all leading dimensions once ``axis`` is moved last."""
    from .. import functions as F
    nd = len(g.shape)
    if axis != nd - 1:
        perm = [d for d in range(nd) if d != axis] + [axis]
        g, index = F.transpose(g, perm), F.transpose(index, perm)
    r = F.gather(g, index, axis=nd - 1, batch_dims=nd - 1)
    return F.transpose(r, list(np.argsort(perm))) if axis != nd - 1 else r


def gather_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0, batch_dims=0):
    """Scatter-add dy back: its index dimensions flattened to one, the indices broadcast to it."""
    from .. import functions as F
    dy, index = grad_inputs[0], inputs[1]
    xs, ishape = tuple(input_shapes[0]), tuple(input_shapes[1])
    axis %= len(xs)
    k = _prod(ishape[batch_dims:])
    flat = xs[:axis] + (k,) + xs[axis + 1:]
    aligned = ishape[:batch_dims] + (1,) * (axis - batch_dims) + (k,) + (1,) * (len(xs) - axis - 1)
    index = F.broadcast(F.reshape(index, aligned, inplace=False), flat)
    dx = F.scatter_add(F.constant(0.0, xs), index, F.reshape(dy, flat, inplace=False), axis=axis)
    return [dx, None]


def scatter_add_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=0):
    from .. import functions as F
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


def gather_nd_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    return [F.scatter_nd(grad_inputs[0], inputs[1], shape=tuple(input_shapes[0]), add=True), None]


def scatter_nd_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shape=None, add=False):
    from .. import functions as F
    return [F.gather_nd(grad_inputs[0], inputs[1])] + [None] * (len(inputs) - 1)


def bool_gather_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    return [F.bool_scatter(grad_inputs[0], inputs[1]), None]


def bool_scatter_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    dy, mask = grad_inputs[0], inputs[1]
    grads = [F.bool_gather(dy, mask), None]
    if len(inputs) == 3:   # ``output`` keeps its values where the mask is zero
        kept = F.equal_scalar(mask, 0.0)
        kept = F.reshape(kept, tuple(mask.shape) + (1,) * (len(dy.shape) - len(mask.shape)),
                         inplace=False)
        grads.append(dy * kept)
    return grads


def sort_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=-1, reverse=False,
              with_index=False, only_index=False):
    from .. import functions as F
    if only_index:
        raise NoGradient("Sort: only_index=True outputs indices, which have no gradient")
    order = F.sort(inputs[0], axis, reverse, only_index=True)
    return [F.scatter_add(F.constant(0.0, tuple(input_shapes[0])), order, grad_inputs[0], axis=axis)]


def top_k_data_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, k, abs=False,
                    reduce=True, base_axis=1, largest=True, with_index=False):
    from .. import functions as F
    dy = grad_inputs[0]
    if not reduce:
        return [dy]
    xs = tuple(input_shapes[0])
    base_axis %= len(xs)
    rows = (_prod(xs[:base_axis]), _prod(xs[base_axis:]))
    _, index = F.top_k_data(inputs[0], k, abs, True, base_axis, largest, with_index=True)
    dx = F.scatter_add(F.constant(0.0, rows), F.reshape(index, (rows[0], k), inplace=False),
                       F.reshape(dy, (rows[0], k), inplace=False), axis=1)
    return [F.reshape(dx, xs, inplace=False)]


def top_k_grad_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, k, abs=False,
                    base_axis=1):
    from .. import functions as F
    return [F.top_k_data(grad_inputs[0], k, abs=abs, reduce=False, base_axis=base_axis)]
