"""Reductions (with keep_dims), Max/Min with their flat indices, norms, cumulative sums and
products."""
import numpy as np

from ..dependencies import INT64
from .table import exports

REDUCE_OP = {"Sum": "ReduceSum", "Mean": "ReduceMean", "Prod": "ReduceProd",
             "Max": "ReduceMax", "Min": "ReduceMin"}


def _axes(n):
    return sorted(a % n.ndim for a in n.args["axes"])


def reduce_over(g, n, op_type, x):
    """``op_type`` over the node's axes, keeping them if keep_dims; no axes: x itself."""
    axes = _axes(n)
    if not axes:
        return g.op("Identity", [x])
    return g.reduce(op_type, x, axes, n.args["keep_dims"])


@exports("Sum", "Mean", "Prod")
def reduction(g, n):
    return reduce_over(g, n, REDUCE_OP[n.type], n.x)


@exports("Max", "Min")
def max_min(g, n):
    """The value and/or the index flat over the reduced axes: those axes are moved last and
    merged, then ONNX reduces and ArgMax/ArgMin that one axis (first index on ties)."""
    args = n.args
    if not (args["with_index"] or args["only_index"]):
        return reduce_over(g, n, REDUCE_OP[n.type], n.x)
    axes = _axes(n)
    kept = [a for a in range(n.ndim) if a not in axes]
    shape = n.in_shapes[0]
    merged = g.reshape(g.transpose(n.x, kept + axes), [shape[a] for a in kept] + [-1])
    out_shape = n.out_shapes[0]
    arg = "ArgMax" if n.type == "Max" else "ArgMin"
    index = g.reshape(g.op(arg, [merged], axis=len(kept), keepdims=0), out_shape)
    if args["only_index"]:
        return index
    value = g.reshape(g.reduce(REDUCE_OP[n.type], merged, [len(kept)], False), out_shape)
    return [value, index]


@exports("Norm")
def norm(g, n):
    p = float(n.args["p"])
    if p in (1.0, 2.0):
        return reduce_over(g, n, "ReduceL1" if p == 1.0 else "ReduceL2", n.x)
    powered = g.op("Pow", [g.op("Abs", [n.x]), g.scalar(p)])
    return g.op("Pow", [reduce_over(g, n, "ReduceSum", powered), g.scalar(1.0 / p)])


@exports("ReduceSum", "ReduceMean")
def reduce_all(g, n):
    return g.reduce(n.type, n.x, None, False)


@exports("CumSum")
def cumsum(g, n):
    axis = g.const(n.args["axis"] % n.ndim, INT64)
    return g.op("CumSum", [n.x, axis], exclusive=int(n.args["exclusive"]),
                reverse=int(n.args["reverse"]))


@exports("CumProd")
def cumprod(g, n):
    """ONNX has no cumulative product: the running products of the slices along the axis,
    concatenated (one Mul per element of the axis)."""
    axis = n.args["axis"] % n.ndim
    size = n.in_shapes[0][axis]
    parts = g.split(n.x, axis, [1] * size)
    if n.args["reverse"]:
        parts = parts[::-1]
    ones = list(n.in_shapes[0])
    ones[axis] = 1
    running = [g.const(np.ones(ones, np.float32))] if n.args["exclusive"] else []
    product = parts[0]
    running.append(product)
    for part in parts[1:]:
        product = g.op("Mul", [product, part])
        running.append(product)
    running = running[:size]
    if n.args["reverse"]:
        running = running[::-1]
    return g.op("Concat", running, axis=axis) if size > 1 else g.op("Identity", running)
