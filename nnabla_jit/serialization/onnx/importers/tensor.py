"""ONNX shape, layout and indexing ops. Shapes are static, so the shape-valued inputs (Reshape's
shape, Slice's starts, Pad's pads ...) must be constants; ONNX's index tuples run along the last
axis of ``indices``, nnabla's along the first."""
import numpy as np

from .... import functions as F
from ..builder import Unsupported
from .elementwise import broadcast_to_shape
from .table import imports


def _prod(shape):
    return int(np.prod(shape, dtype=np.int64))


def const_ints(c, name, what):
    return [int(v) for v in c.const(name, what).reshape(-1)]


def _axes_of(c, node, position, ndim, attr="axes"):
    """Axes from an attribute (older opsets) or from input ``position``; None when absent."""
    name = node.input(position)
    axes = const_ints(c, name, "axes") if name else node.attr(attr)
    return None if axes is None else [int(a) % ndim for a in axes]


@imports("Reshape")
def reshape(c, node):
    x = c.var(node.inputs[0])
    shape = const_ints(c, node.inputs[1], "shape")
    if not node.attr("allowzero", 0):
        shape = [x.shape[k] if d == 0 else d for k, d in enumerate(shape)]
    if -1 in shape:
        known = _prod([d for d in shape if d != -1])
        shape[shape.index(-1)] = x.size // known if known else 0
    return F.reshape(x, tuple(shape))


@imports("Flatten")
def flatten(c, node):
    x = c.var(node.inputs[0])
    axis = node.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return F.reshape(x, (_prod(x.shape[:axis]), _prod(x.shape[axis:])))


@imports("Squeeze")
def squeeze(c, node):
    x = c.var(node.inputs[0])
    axes = _axes_of(c, node, 1, x.ndim)
    if axes is None:
        axes = [a for a, s in enumerate(x.shape) if s == 1]
    return F.reshape(x, tuple(s for a, s in enumerate(x.shape) if a not in axes))


@imports("Unsqueeze")
def unsqueeze(c, node):
    x = c.var(node.inputs[0])
    n = x.ndim + len(node.attr("axes") or c.const(node.inputs[1], "axes").reshape(-1))
    axes = sorted(_axes_of(c, node, 1, n))
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return F.reshape(x, tuple(shape))


@imports("Transpose")
def transpose(c, node):
    x = c.var(node.inputs[0])
    perm = node.attr("perm") or list(range(x.ndim))[::-1]
    return F.transpose(x, tuple(int(p) for p in perm))


@imports("Expand")
def expand(c, node):
    x = c.var(node.inputs[0])
    shape = tuple(np.broadcast_shapes(x.shape, tuple(const_ints(c, node.inputs[1], "shape"))))
    return broadcast_to_shape(x, shape)


@imports("Tile")
def tile(c, node):
    return F.tile(c.var(node.inputs[0]), tuple(const_ints(c, node.inputs[1], "repeats")))


@imports("Concat")
def concat(c, node):
    xs = [c.var(i) for i in node.inputs if i]
    return F.concatenate(*xs, axis=node.attr("axis") % xs[0].ndim)


def _slice_axis(x, axis, start, stop):
    starts, stops = [0] * x.ndim, list(x.shape)
    starts[axis], stops[axis] = start, stop
    return F.slice(x, tuple(starts), tuple(stops), (1,) * x.ndim)


@imports("Split")
def split(c, node):
    x = c.var(node.inputs[0])
    axis = node.attr("axis", 0) % x.ndim
    size = x.shape[axis]
    if node.input(1):
        sizes = const_ints(c, node.input(1), "split")
    elif node.attr("split"):
        sizes = list(node.attr("split"))
    else:
        parts = node.attr("num_outputs", len(node.outputs))
        step = -(-size // parts)
        sizes = [min(step, size - k * step) for k in range(parts)]
    bounds = np.cumsum([0] + sizes)
    return [_slice_axis(x, axis, int(b), int(e)) for b, e in zip(bounds[:-1], bounds[1:])]


@imports("Slice")
def slice_(c, node):
    """ONNX's clamped starts/ends as Python slices; a stop before index 0 (negative steps)
    is written as -size-1, which nnabla reads the same way."""
    x = c.var(node.inputs[0])
    if c.opset < 10:     # Slice-1: starts, ends and axes are attributes
        starts, ends = list(node.attr("starts")), list(node.attr("ends"))
    else:
        starts = const_ints(c, node.inputs[1], "starts")
        ends = const_ints(c, node.inputs[2], "ends")
    axes = _axes_of(c, node, 3, x.ndim) or list(range(len(starts)))
    steps = const_ints(c, node.input(4), "steps") if node.input(4) else [1] * len(starts)
    start, stop, step = [0] * x.ndim, list(x.shape), [1] * x.ndim
    for a, b, e, s in zip(axes, starts, ends, steps):
        b, e, s = slice(b, e, s).indices(x.shape[a])
        start[a], stop[a], step[a] = b, e if e >= 0 else -x.shape[a] - 1, s
    return F.slice(x, tuple(start), tuple(stop), tuple(step))


@imports("Pad")
def pad(c, node):
    x = c.var(node.inputs[0])
    pads = node.attr("pads") if c.opset < 11 else const_ints(c, node.inputs[1], "pads")
    axes = _axes_of(c, node, 3, x.ndim) or list(range(x.ndim))
    if min(pads) < 0:
        raise Unsupported("negative pads (cropping) are not supported")
    mode = {"constant": "constant", "reflect": "reflect", "edge": "repeat"}.get(node.attr("mode", "constant"))
    if mode is None:
        raise Unsupported("mode '{}' is not supported".format(node.attr("mode")))
    value = c.const(node.input(2), "constant_value").reshape(-1)[0] if node.input(2) else node.attr("value", 0.0)
    width = [0] * (2 * x.ndim)
    for k, a in enumerate(axes):
        width[2 * a], width[2 * a + 1] = pads[k], pads[k + len(axes)]
    return F.pad(x, tuple(width), mode, float(value or 0.0))


@imports("Gather")
def gather(c, node):
    data, indices = node.inputs[:2]
    axis = node.attr("axis", 0) % len(c.shape(data))
    if c.is_const(data) and not c.is_const(indices) and axis == 0 and len(c.shape(data)) >= 2:
        return F.embed(c.var(indices), c.var(data))    # a lookup table: nnabla's Embed
    return F.gather(c.var(data), wrapped_indices(c, indices, c.shape(data)[axis]), axis=axis)


def wrapped_indices(c, name, size):
    """Indices ``name`` with ONNX's negative ones (counted from the end) made positive."""
    if c.is_const(name):
        array = np.asarray(c.consts[name])
        if not np.any(array < 0):
            return c.var(name)
        return c.parameter(name + "_wrapped", np.where(array < 0, array + size, array), need_grad=False)
    index = c.var(name)
    return F.add2(index, F.mul_scalar(F.less_scalar(index, 0.0), float(size)))


def _index_grid(shape, axis, indices):
    """The (ndim, *shape) index tuples of GatherElements: positions, with ``indices`` along
    ``axis``."""
    grids = []
    for a in range(len(shape)):
        if a == axis:
            grids.append(indices)
        else:
            aligned = [1] * len(shape)
            aligned[a] = shape[a]
            grids.append(F.constant(0.0, shape) if shape[a] == 1 else
                         F.broadcast(F.reshape(F.arange(0, shape[a]), aligned), shape))
    return F.stack(*grids, axis=0)


@imports("GatherElements")
def gather_elements(c, node):
    data, indices = c.var(node.inputs[0]), c.var(node.inputs[1])
    axis = node.attr("axis", 0) % data.ndim
    return F.gather_nd(data, _index_grid(indices.shape, axis, indices))


def _tuples_first(x):
    return F.transpose(x, (x.ndim - 1,) + tuple(range(x.ndim - 1)))


@imports("GatherND")
def gather_nd(c, node):
    if node.attr("batch_dims", 0):
        raise Unsupported("batch_dims > 0 is not supported")
    return F.gather_nd(c.var(node.inputs[0]), _tuples_first(c.var(node.inputs[1])))


def _is_zeros(c, name):
    return c.is_const(name) and not np.any(c.consts[name])


@imports("ScatterND")
def scatter_nd(c, node):
    data, indices, updates = node.inputs
    shape = c.shape(data)
    index = _tuples_first(c.var(indices))
    add = node.attr("reduction", "none") == "add"
    if node.attr("reduction", "none") not in ("none", "add"):
        raise Unsupported("reduction '{}' is not supported".format(node.attr("reduction")))
    scattered = F.scatter_nd(c.var(updates), index, shape=shape, add=add)
    if _is_zeros(c, data):
        return scattered
    if add:
        return F.add2(c.var(data), scattered)
    written = F.scatter_nd(F.constant(1.0, c.shape(updates)), index, shape=shape)
    return F.where(written, scattered, c.var(data))


@imports("ScatterElements", "Scatter")
def scatter_elements(c, node):
    data, indices, updates = node.inputs
    axis = node.attr("axis", 0) % len(c.shape(data))
    reduction = node.attr("reduction", "none")
    if reduction == "add":
        return F.scatter_add(c.var(data), wrapped_indices(c, indices, c.shape(data)[axis]), c.var(updates),
                             axis=axis)
    if reduction != "none":
        raise Unsupported("reduction '{}' is not supported".format(reduction))
    zeros = F.constant(0.0, c.shape(data))
    index = wrapped_indices(c, indices, c.shape(data)[axis])
    scattered = F.scatter_add(zeros, index, c.var(updates), axis=axis)
    if _is_zeros(c, data):
        return scattered
    written = F.scatter_add(zeros, index, F.constant(1.0, c.shape(updates)), axis=axis)
    return F.where(written, scattered, c.var(data))


@imports("OneHot")
def one_hot(c, node):
    depth = int(c.const(node.inputs[1], "depth").reshape(-1)[0])
    indices = wrapped_indices(c, node.inputs[0], depth)
    off, on = (float(v) for v in c.const(node.inputs[2], "values").reshape(-1))
    y = F.one_hot(F.reshape(indices, tuple(indices.shape) + (1,)), (depth,))
    if (off, on) != (0.0, 1.0):
        y = F.add_scalar(F.mul_scalar(y, on - off), off)
    axis = node.attr("axis", -1) % (indices.ndim + 1)
    if axis != indices.ndim:
        perm = list(range(indices.ndim))
        perm.insert(axis, indices.ndim)
        y = F.transpose(y, tuple(perm))
    return y


@imports("TopK")
def top_k(c, node):
    """A stable sort along the axis, cut to k."""
    x = c.var(node.inputs[0])
    k = node.attr("k") if c.opset < 10 else int(c.const(node.inputs[1], "K").reshape(-1)[0])
    axis = node.attr("axis", -1) % x.ndim
    values, index = F.sort(x, axis, reverse=bool(node.attr("largest", 1)), with_index=True)
    return [_slice_axis(values, axis, 0, k), _slice_axis(index, axis, 0, k)]


@imports("NonZero")
def nonzero(c, node):
    return F.nonzero(c.var(node.inputs[0]))


@imports("Unique")
def unique(c, node):
    axis = node.attr("axis")
    wanted = [bool(name) for name in (node.outputs + [""] * 4)[1:4]]
    x = c.var(node.inputs[0])
    outs = F.unique(x, axis is None, None if axis is None else axis % x.ndim, bool(node.attr("sorted", 1)),
                    *wanted, n_outputs=1 + sum(wanted))
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    it = iter(outs[1:])
    return [outs[0]] + [next(it) if on else None for on in wanted]


@imports("EyeLike")
def eye_like(c, node):
    return F.eye_like(c.var(node.inputs[0]), node.attr("k", 0))


@imports("Trilu")
def trilu(c, node):
    k = int(c.const(node.input(1), "k").reshape(-1)[0]) if node.input(1) else 0
    return F.trilu(c.var(node.inputs[0]), k, bool(node.attr("upper", 1)))


@imports("Einsum")
def einsum(c, node):
    return F.einsum(*[c.var(i) for i in node.inputs if i], equation=node.attr("equation"))


@imports("Det")
def det(c, node):
    x = c.var(node.inputs[0])
    batch = tuple(x.shape[:-2])
    y = F.batch_det(F.reshape(x, (_prod(batch),) + tuple(x.shape[-2:])))
    return F.reshape(y, batch)


@imports("Shape")
def shape(c, node):
    dims = c.shape(node.inputs[0])
    start, end = node.attr("start", 0), node.attr("end")
    return np.asarray(dims[start:end], np.int64)


@imports("Size")
def size(c, node):
    return np.asarray(_prod(c.shape(node.inputs[0])), np.int64)
