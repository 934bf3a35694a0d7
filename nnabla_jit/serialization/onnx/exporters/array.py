"""Shape and layout functions: reshape, transpose, broadcast, tile, pad, slice, flip, shift,
concatenate / split / stack, one-hot, sort, shape, meshgrid and the matrix-diagonal family."""
import numpy as np

from ..builder import INT64_MIN
from ..dependencies import INT64
from .table import exports


def _prod(shape):
    return int(np.prod(shape, dtype=np.int64))


@exports("Reshape")
def reshape(g, n):
    return g.reshape(n.x, n.out_shapes[0])


@exports("Transpose")
def transpose(g, n):
    return g.op("Transpose", [n.x], perm=[int(a) for a in n.op.axes])


@exports("Broadcast")
def broadcast(g, n):
    return g.op("Expand", [n.x, g.ints(n.out_shapes[0])])


@exports("BroadcastTo")
def broadcast_to(g, n):
    return g.op("Expand", [g.reshape(n.inputs[1], n.op.aligned), g.ints(n.out_shapes[0])])


@exports("Tile")
def tile(g, n):
    in_shape = n.op.in_shape
    reps = [o // i if i else 1 for o, i in zip(n.out_shapes[0], in_shape)]
    return g.op("Tile", [g.reshape(n.x, in_shape), g.ints(reps)])


@exports("Flip")
def flip(g, n):
    axes = sorted({a % n.ndim for a in n.args["axes"]})
    k = len(axes)
    if g.opset >= 10:
        return g.slice(n.x, [-1] * k, [INT64_MIN] * k, axes, [-1] * k)
    y = n.x   # Slice-1 has no steps: gather the reversed positions
    for axis in axes:
        size = n.in_shapes[0][axis]
        y = g.op("Gather", [y, g.const(np.arange(size - 1, -1, -1, dtype=np.int64), INT64)], axis=axis)
    return y


@exports("Shift")
def shift(g, n):
    """A gather along each shifted axis, at the source positions nnabla_jit computes."""
    y = n.x
    for axis, index in enumerate(n.op.indices):
        if index is not None:
            y = g.op("Gather", [y, g.const(np.asarray(index, np.int64), INT64)], axis=axis)
    return y


@exports("Pad")
def pad(g, n):
    width = list(n.args["pad_width"])
    before = [0] * (n.ndim - len(width) // 2) + width[0::2]
    after = [0] * (n.ndim - len(width) // 2) + width[1::2]
    mode = {"constant": "constant", "reflect": "reflect", "repeat": "edge"}[n.args["mode"]]
    return g.pad(n.x, before + after, mode, float(n.args["constant_value"]))


@exports("Slice")
def slice_(g, n):
    """The node's normalized Python slices; a stop of None (before index 0, negative steps)
    becomes the most negative end."""
    starts, ends, axes, steps = [], [], [], []
    for axis, (sl, size) in enumerate(zip(n.op.slices, n.in_shapes[0])):
        if sl.indices(size) == slice(None).indices(size):
            continue
        starts.append(sl.start)
        ends.append(INT64_MIN if sl.stop is None else sl.stop)
        axes.append(axis)
        steps.append(sl.step)
    if not axes:
        return g.op("Identity", [n.x])
    return g.slice(n.x, starts, ends, axes, steps)


@exports("Concatenate")
def concatenate(g, n):
    return g.op("Concat", n.inputs, axis=n.op.axis)


@exports("Split")
def split(g, n):
    axis = n.op.axis
    parts = g.split(n.x, axis, [1] * n.in_shapes[0][axis])
    return [g.squeeze(p, [axis]) for p in parts]


@exports("Stack")
def stack(g, n):
    axis = n.op.axis
    return g.op("Concat", [g.unsqueeze(x, [axis]) for x in n.inputs], axis=axis)


@exports("OneHot")
def one_hot(g, n):
    """Index rows (..., k) to flat positions in ``shape``, then ONNX OneHot over their product."""
    shape = list(n.args["shape"])
    strides = [_prod(shape[k + 1:]) for k in range(len(shape))]
    index = g.as_int64(n.x)
    flat = g.reduce("ReduceSum", g.op("Mul", [index, g.ints(strides)]), [n.ndim - 1], False)
    hot = g.op("OneHot", [flat, g.ints([_prod(shape)]), g.const(np.array([0.0, 1.0], np.float32))],
               axis=-1)
    return g.reshape(hot, n.out_shapes[0])


@exports("Sort")
def sort(g, n):
    """TopK over the whole axis: the sorted values and their indices."""
    axis = n.op.axis
    size = n.in_shapes[0][axis]
    values, index = g.topk(n.x, size, axis, largest=bool(n.args["reverse"]))
    if n.args["only_index"]:
        return index
    return [values, index] if n.args["with_index"] else values


@exports("Shape")
def shape(g, n):
    """Static shapes: the dimensions are known when exporting."""
    return g.const(np.asarray(n.op.dims, np.float32))


def _eye(n):
    return np.eye(n, dtype=np.float32)


@exports("MatrixDiag")
def matrix_diag(g, n):
    size = n.in_shapes[0][-1]
    return g.op("Mul", [g.unsqueeze(n.x, [n.ndim]), g.const(_eye(size))])


@exports("MatrixDiagPart")
def matrix_diag_part(g, n):
    size = n.in_shapes[0][-1]
    return g.reduce("ReduceSum", g.op("Mul", [n.x, g.const(_eye(size))]), [n.ndim - 1], False)


@exports("Trilu")
def trilu(g, n):
    k, upper = int(n.args["k"]), bool(n.args["upper"])
    if g.opset >= 14:
        return g.op("Trilu", [n.x, g.const(np.asarray(k, np.int64), INT64)], upper=int(upper))
    rows, cols = n.in_shapes[0][-2:]
    ones = np.ones((rows, cols), np.float32)
    mask = np.triu(ones, k) if upper else np.tril(ones, k)
    return g.op("Mul", [n.x, g.const(mask)])


@exports("EyeLike")
def eye_like(g, n):
    return g.op("EyeLike", [n.x], k=int(n.args["k"]))


@exports("Meshgrid")
def meshgrid(g, n):
    grid = n.op.grid_shape
    outs = []
    for x, axis in zip(n.inputs, n.op.axes):
        aligned = [1] * len(grid)
        aligned[axis] = grid[axis]
        outs.append(g.op("Expand", [g.reshape(x, aligned), g.ints(grid)]))
    return outs
