"""Gathers, scatters, masks and top-k. nnabla's index tuples run along the first axis of
``indices`` (M, ...); ONNX's along the last, hence the transposes. Index inputs stored as
floats are cast to int64."""
import numpy as np

from ..builder import Unsupported
from ..dependencies import INT64
from .arithmetic import compare
from .table import exports


def _first_axis_last(g, indices, ndim):
    return g.transpose(g.as_int64(indices), list(range(1, ndim)) + [0])


def _nonzero_tuples(g, mask):
    """(count, mask.ndim) positions of the non-zeros of ``mask``."""
    return g.transpose(g.op("NonZero", [g.as_bool(mask)]), [1, 0])


def _zeros(g, shape):
    return g.const(np.zeros(shape, np.float32))


@exports("Gather")
def gather(g, n):
    if n.args["batch_dims"]:
        raise Unsupported("batch_dims > 0 has no ONNX Gather equivalent")
    return g.op("Gather", [n.x, g.as_int64(n.inputs[1])], axis=n.op.axis)


@exports("Embed")
def embed(g, n):
    return g.op("Gather", [n.inputs[1], g.as_int64(n.x)], axis=0)


@exports("GatherNd")
def gather_nd(g, n):
    return g.op("GatherND", [n.x, _first_axis_last(g, n.inputs[1], len(n.in_shapes[1]))])


@exports("ScatterNd")
def scatter_nd(g, n):
    """Into zeros of ``shape`` or into ``out``; ``add`` needs ScatterND's reduction (opset 16)."""
    base = n.input("out") or _zeros(g, n.out_shapes[0])
    index = _first_axis_last(g, n.input("indices"), len(n.shape("indices")))
    if not n.args["add"]:
        return g.op("ScatterND", [base, index, n.input("data")])
    if g.opset < 16:
        raise Unsupported("add=True needs ScatterND with reduction (opset 16 or later)")
    return g.op("ScatterND", [base, index, n.input("data")], reduction="add")


@exports("ScatterAdd")
def scatter_add(g, n):
    """x0 with x1 added at ``indices`` along ``axis``; the positions of x1 beyond the shape of
    ``indices`` take no part."""
    if g.opset < 16:
        raise Unsupported("ScatterElements with reduction='add' needs opset 16 or later")
    x0, indices, x1 = n.inputs
    index_shape, x1_shape = n.in_shapes[1], n.in_shapes[2]
    if tuple(index_shape) != tuple(x1_shape):
        axes = list(range(len(index_shape)))
        x1 = g.slice(x1, [0] * len(axes), list(index_shape), axes)
    return g.op("ScatterElements", [x0, g.as_int64(indices), x1], axis=n.op.axis, reduction="add")


@exports("BoolGather")
def bool_gather(g, n):
    return g.op("GatherND", [n.inputs[0], _nonzero_tuples(g, n.inputs[1])])


@exports("BoolScatter")
def bool_scatter(g, n):
    base = n.inputs[2] if len(n.inputs) > 2 else _zeros(g, n.out_shapes[0])
    return g.op("ScatterND", [base, _nonzero_tuples(g, n.inputs[1]), n.inputs[0]])


@exports("NonZero")
def nonzero(g, n):
    return g.op("NonZero", [g.as_bool(n.x)])


@exports("SearchSorted")
def search_sorted(g, n):
    """The insertion index is the number of sorted elements below the value (left) or not
    above it (right)."""
    sequence, values = n.inputs
    last = len(n.in_shapes[0]) - 1
    below = compare(g, "LessOrEqual" if n.args["right"] else "Less", g.unsqueeze(sequence, [last]),
                    g.unsqueeze(values, [last + 1]))
    return g.reduce("ReduceSum", g.as_float(below), [last + 1], False)


@exports("Unique")
def unique(g, n):
    """ONNX Unique gives all four outputs; the node keeps those its flags ask for."""
    args = n.args
    axis = None if args["flatten"] else n.op.axis
    y, first, inverse, counts = g.op("Unique", [n.x], n_outputs=4, elem=[None, INT64, INT64, INT64],
                                     sorted=int(args["sorted"]), axis=axis)
    flags = (args["with_index"], args["with_inverse"], args["with_counts"])
    return [y] + [out for out, on in zip([first, inverse, counts], flags) if on]


@exports("TopKData")
def top_k_data(g, n):
    """TopK over each sample (the dimensions from base_axis merged): the k values best first
    (and their positions), or, with reduce=False, those values in place and zeros elsewhere."""
    args = n.args
    rows = n.op.rows
    flat = g.reshape(n.x, list(rows))
    key = g.op("Abs", [flat]) if args["abs"] else flat
    _, index = g.topk(key, args["k"], 1, largest=bool(args["largest"]))
    values = g.gather_elements(flat, index, 1, tuple(rows), (rows[0], args["k"]))
    if not args["reduce"]:
        placed = g.op("ScatterElements", [_zeros(g, rows), index, values], axis=1)
        return g.reshape(placed, n.out_shapes[0])
    out = [g.reshape(values, n.out_shapes[0])]
    if args["with_index"]:
        out.append(g.reshape(index, n.out_shapes[1]))
    return out
