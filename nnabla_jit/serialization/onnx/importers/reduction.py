"""ONNX reductions, ArgMax / ArgMin and CumSum."""
from .... import functions as F
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
    "ReduceLogSumExp": lambda x, axes, keep: _log_sum_exp(x, axes, keep),
    "ReduceLogSum": lambda x, axes, keep: F.log(F.sum(x, axes, keep)),
}


def _log_sum_exp(x, axes, keep):
    """log(sum(exp(x - max))) + max, which does not overflow."""
    top = F.max(x, axes, True)
    y = F.add2(F.log(F.sum(F.exp(F.sub2(x, top)), axes, True)), top)
    return y if keep else F.reshape(y, tuple(s for a, s in enumerate(x.shape) if a not in axes))


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
    x = c.var(node.inputs[0])
    fn = F.max if node.op_type == "ArgMax" else F.min
    axis, keep = node.attr("axis", 0) % x.ndim, bool(node.attr("keepdims", 1))
    if not node.attr("select_last_index", 0):
        return fn(x, axis, keep, only_index=True)
    # nnabla takes the first extreme: the last one is the first of the flipped axis.
    index = fn(F.flip(x, (axis,)), axis, keep, only_index=True)
    return F.r_sub_scalar(index, float(x.shape[axis] - 1))


@imports("CumSum")
def cumsum(c, node):
    x = c.var(node.inputs[0])
    axis = int(c.const(node.inputs[1], "axis").reshape(-1)[0]) % x.ndim
    return F.cumsum(x, axis, exclusive=bool(node.attr("exclusive", 0)),
                    reverse=bool(node.attr("reverse", 0)))
