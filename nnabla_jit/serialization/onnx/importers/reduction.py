"""ONNX reductions, ArgMax / ArgMin and CumSum."""
from .... import functions as F
from ..builder import Unsupported
from .table import imports

# Opset from which a reduction takes its axes as an input (ReduceSum 13, the others 18).
AXES_INPUT_SINCE = {"ReduceSum": 13}

REDUCE = {
    "ReduceSum": lambda x, axes, keep: F.sum(x, axes, keep),
    "ReduceMean": lambda x, axes, keep: F.mean(x, axes, keep),
    "ReduceMax": lambda x, axes, keep: F.max(x, axes, keep),
    "ReduceMin": lambda x, axes, keep: F.min(x, axes, keep),
    "ReduceProd": lambda x, axes, keep: F.prod(x, axes, keep),
    "ReduceL1": lambda x, axes, keep: F.norm(x, 1, axes, keep),
    "ReduceL2": lambda x, axes, keep: F.norm(x, 2, axes, keep),
    "ReduceSumSquare": lambda x, axes, keep: F.sum(F.mul2(x, x), axes, keep),
    "ReduceLogSumExp": lambda x, axes, keep: F.log(F.sum(F.exp(x), axes, keep)),
}


def reduction_axes(c, node, ndim):
    """The axes of a reduction node (None: all), from its attribute or its input."""
    if c.opset >= AXES_INPUT_SINCE.get(node.op_type, 18):
        name = node.input(1)
        axes = None if name is None else [int(a) for a in c.const(name, "axes").reshape(-1)]
    else:
        axes = node.attr("axes")
    if not axes:
        return None if not node.attr("noop_with_empty_axes", 0) else []
    return tuple(sorted(int(a) % ndim for a in axes))


@imports(*REDUCE)
def reduce(c, node):
    x = c.var(node.inputs[0])
    axes = reduction_axes(c, node, x.ndim)
    if axes == []:
        return F.identity(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    return REDUCE[node.op_type](x, axes, bool(node.attr("keepdims", 1)))


@imports("ArgMax", "ArgMin")
def arg_max_min(c, node):
    if node.attr("select_last_index", 0):
        raise Unsupported("select_last_index=1 is not supported (nnabla takes the first index)")
    x = c.var(node.inputs[0])
    fn = F.max if node.op_type == "ArgMax" else F.min
    return fn(x, node.attr("axis", 0) % x.ndim, bool(node.attr("keepdims", 1)), only_index=True)


@imports("CumSum")
def cumsum(c, node):
    x = c.var(node.inputs[0])
    axis = int(c.const(node.inputs[1], "axis").reshape(-1)[0]) % x.ndim
    return F.cumsum(x, axis, exclusive=bool(node.attr("exclusive", 0)),
                    reverse=bool(node.attr("reverse", 0)))
