"""CUDA kernels of the array ops: Reshape, Transpose, Slice, Concatenate, Stack, Split,
Broadcast, BroadcastTo, Tile, Flip, Pad, Shift, Meshgrid (and Assign, Shape, OneHot).

The moves are one kernel, :func:`move_kernel`: for every position of a box ``shape``, an element is
read at ``src_base + sum(coord[ax] * src_strides[ax])`` and written (or added) at the same with
``dst_*``. Views (a transpose, a slice, a part of a concatenation or a stack) are strides and a
base offset; the per-axis index maps of the CPU's gathers (``ops/array.py``: Pad, Tile, Shift,
...) are tables read by the source coordinates (an entry < 0 reads ``fill``), uploaded once per
op. The adjoint of a view moves dy back through the same strides; the adjoint of a gather adds
dy into dx through the tables with atomic adds (several outputs may read one input), except
Broadcast's and Meshgrid's, which are the reduction kernel's sums. OneHot counts indices out
of range into host memory mapped into the device, and then raises the CPU's error.
"""
import math

import numpy as np

from ..ops.array import Broadcast, BroadcastTo
from ..ops.common import integer_indices
from . import device, reduction
from .device import contiguous_strides
from .registry import backward, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

WRITE, ADD = 0, 1


@kernel
def move_kernel(src, dst, shape, src_strides, src_base, dst_strides, dst_base, table,
                table_start, fill, n, mode):
    """dst[dst position] (=, +=) src[source position] over the box ``shape``
    (``n`` positions); an axis with table_start >= 0 maps its coordinate through the table on
    the source side, -1 there reading ``fill``."""
    i = cuda.grid(1)
    if i < n:
        src_off = src_base
        dst_off = dst_base
        valid = True
        rem = i
        for ax in range(len(shape) - 1, -1, -1):
            coord = rem % shape[ax]
            rem //= shape[ax]
            dst_off += coord * dst_strides[ax]
            if table_start[ax] >= 0:
                coord = table[table_start[ax] + coord]
                if coord < 0:
                    valid = False
            src_off += coord * src_strides[ax]
        v = src[src_off] if valid else fill
        if mode == WRITE:
            dst[dst_off] = v
        else:
            dst[dst_off] += v


@kernel
def scatter_kernel(dy, dx, shape, dx_strides, table, table_start, n):
    """The adjoint of a gather: dx[source position of i] += dy[i] (atomic)."""
    i = cuda.grid(1)
    if i < n:
        off = 0
        valid = True
        rem = i
        for ax in range(len(shape) - 1, -1, -1):
            coord = rem % shape[ax]
            rem //= shape[ax]
            if table_start[ax] >= 0:
                coord = table[table_start[ax] + coord]
                if coord < 0:
                    valid = False
            off += coord * dx_strides[ax]
        if valid:
            cuda.atomic.add(dx, off, dy[i])


def _no_table():
    return device.workspace("array no table", 1, np.int64)


def move(src, dst, shape, src_strides, dst_strides, src_base=0, dst_base=0, mode=WRITE,
         table=None, table_start=None, fill=0.0):
    """Run :func:`move_kernel` over the box ``shape`` between the flat device arrays."""
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    if n == 0:
        return
    if not shape:
        shape, src_strides, dst_strides = (1,), (0,), (0,)
    if table is None:
        table, table_start = _no_table(), (-1,) * len(shape)
    device.launch(move_kernel, n, device.flat(src), device.flat(dst), shape,
                  tuple(int(s) for s in src_strides), int(src_base),
                  tuple(int(s) for s in dst_strides), int(dst_base), table, table_start,
                  float(fill), n, mode)


def _put(src, dst, accum):
    """dst (+)= src, both contiguous of one size."""
    if accum:
        device.add_into(dst, src)
    else:
        device.copy(src, dst)


# ------------------------------------------------------------------------------ Reshape
@forward("Reshape")
def reshape_forward(op, inputs, outputs):
    device.copy(inputs[0], outputs[0])


@backward("Reshape")
def reshape_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        _put(output_grads[0], input_grads[0], accum[0])


# ------------------------------------------------------------------------------ Transpose
def _transpose_strides(op, in_shape):
    strides = contiguous_strides(in_shape)
    return tuple(strides[a] for a in op.axes)


@forward("Transpose")
def transpose_forward(op, inputs, outputs):
    x, y = inputs[0], outputs[0]
    move(x, y, y.shape, _transpose_strides(op, x.shape), contiguous_strides(y.shape))


@backward("Transpose")
def transpose_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dy, dx = output_grads[0], input_grads[0]
        move(dy, dx, dy.shape, contiguous_strides(dy.shape), _transpose_strides(op, dx.shape),
             mode=ADD if accum[0] else WRITE)


# ------------------------------------------------------------------------------ Slice
def _slice_view(op, in_shape):
    """(base, strides) of the sliced elements in the input."""
    strides = contiguous_strides(in_shape)
    base = sum(sl.start * st for sl, st in zip(op.slices, strides))
    return base, tuple(sl.step * st for sl, st in zip(op.slices, strides))


@forward("Slice")
def slice_forward(op, inputs, outputs):
    x, y = inputs[0], outputs[0]
    base, strides = _slice_view(op, x.shape)
    move(x, y, y.shape, strides, contiguous_strides(y.shape), src_base=base)


@backward("Slice")
def slice_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dy, dx = output_grads[0], input_grads[0]
        if not accum[0]:
            device.fill(dx, 0)
        base, strides = _slice_view(op, dx.shape)
        move(dy, dx, dy.shape, contiguous_strides(dy.shape), strides, dst_base=base, mode=ADD)


# ------------------------------------------------------------------ Concatenate, Stack, Split
def _parts(op, whole_shape, n_parts):
    """(base, strides) of each part inside the whole: a range of ``op.axis`` (Concatenate) or
    one index of it, the axis removed (Stack, Split)."""
    strides = contiguous_strides(whole_shape)
    if op.name == "Concatenate":
        return [(op.offsets[k] * strides[op.axis], strides) for k in range(n_parts)]
    rest = strides[:op.axis] + strides[op.axis + 1:]
    return [(k * strides[op.axis], rest) for k in range(n_parts)]


@forward("Concatenate", "Stack")
def join_forward(op, inputs, outputs):
    y = outputs[0]
    for x, (base, strides) in zip(inputs, _parts(op, y.shape, len(inputs))):
        move(x, y, x.shape, contiguous_strides(x.shape), strides, dst_base=base)


@backward("Concatenate", "Stack")
def join_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = output_grads[0]
    for k, (base, strides) in enumerate(_parts(op, dy.shape, len(input_grads))):
        if propagate_down[k]:
            dx = input_grads[k]
            move(dy, dx, dx.shape, strides, contiguous_strides(dx.shape), src_base=base,
                 mode=ADD if accum[k] else WRITE)


@forward("Split")
def split_forward(op, inputs, outputs):
    x = inputs[0]
    for y, (base, strides) in zip(outputs, _parts(op, x.shape, len(outputs))):
        move(x, y, y.shape, strides, contiguous_strides(y.shape), src_base=base)


@backward("Split")
def split_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dx = input_grads[0]
        for dy, (base, strides) in zip(output_grads, _parts(op, dx.shape, len(output_grads))):
            move(dy, dx, dy.shape, contiguous_strides(dy.shape), strides, dst_base=base,
                 mode=ADD if accum[0] else WRITE)


# ------------------------------------------------------------------------------ gathers
def _gather_shape(op, x_shape):
    """The shape the gather's index maps read (BroadcastTo's aligned one, Tile's padded)."""
    return tuple(getattr(op, "aligned", None) or getattr(op, "in_shape", None) or x_shape)


def _tables(op):
    """(device table, table_start) of the op's per-axis index maps, uploaded on first use."""
    key = tuple(None if ix is None else (len(ix), int(np.asarray(ix).sum())) for ix in op.indices)
    kept = getattr(op, "saved_device_tables", None)
    if kept is not None and kept[0] == key:
        return kept[1], kept[2]
    starts, parts, at = [], [], 0
    for ix in op.indices:
        if ix is None:
            starts.append(-1)
        else:
            starts.append(at)
            parts.append(np.asarray(ix, np.int64))
            at += len(ix)
    table = device.upload(np.concatenate(parts) if parts else np.zeros(1, np.int64))
    op.saved_device_tables = (key, table, tuple(starts))
    return table, tuple(starts)


def _is_broadcast(op):
    return isinstance(op, (Broadcast, BroadcastTo))


@forward("Broadcast", "BroadcastTo", "Tile", "Flip", "Pad", "Shift")
def gather_forward(op, inputs, outputs):
    x, y = inputs[op.gathered_input], outputs[0]
    table, starts = _tables(op)
    move(x, y, y.shape, contiguous_strides(_gather_shape(op, x.shape)),
         contiguous_strides(y.shape), table=table, table_start=starts, fill=op.fill)


@backward("Broadcast", "BroadcastTo", "Tile", "Flip", "Pad", "Shift")
def gather_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    k = op.gathered_input
    if not propagate_down[k]:
        return
    dy, dx = output_grads[0], input_grads[k]
    shape = _gather_shape(op, dx.shape)
    if _is_broadcast(op):   # a sum over the broadcast axes
        reduction.sum_to_shape(dy, device.reshaped(dx, shape), accum[k])
        return
    if not accum[k]:
        device.fill(dx, 0)
    table, starts = _tables(op)
    n = dy.size
    if n:
        device.launch(scatter_kernel, n, device.reshaped(dy, n), device.flat(dx),
                      tuple(int(s) for s in dy.shape) or (1,), contiguous_strides(shape) or (0,),
                      table, starts or (-1,), n)


# ------------------------------------------------------------------------------ Meshgrid
def _grid_strides(op, axis):
    """Strides reading a 1-D input over the grid: 1 along its axis, 0 along the others."""
    return tuple(1 if a == axis else 0 for a in range(len(op.grid_shape)))


@forward("Meshgrid")
def meshgrid_forward(op, inputs, outputs):
    for x, y, axis in zip(inputs, outputs, op.axes):
        move(x, y, op.grid_shape, _grid_strides(op, axis), contiguous_strides(op.grid_shape))


@backward("Meshgrid")
def meshgrid_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """Each input gets its output's gradient summed over the other axes of the grid."""
    for k, (dy, dx, axis) in enumerate(zip(output_grads, input_grads, op.axes)):
        if propagate_down[k]:
            others = tuple(a for a in range(len(op.grid_shape)) if a != axis)
            if others:
                reduction.reduce(dy, dx, others, accum=accum[k])
            else:
                _put(dy, dx, accum[k])


# ------------------------------------------------------------------------------ Assign, Shape
def _assigned(op):
    """Assign writes dst (input 0) in place."""
    return (0,)


@forward("Assign", updates=_assigned)
def assign_forward(op, inputs, outputs):
    dst, src = inputs
    device.copy(src, dst)
    device.copy(src, outputs[0])


@backward("Assign")
def assign_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """As in nnabla the gradient flows to dst (src gets none)."""
    if propagate_down[0]:
        _put(output_grads[0], input_grads[0], accum[0])


@forward("Shape")
def shape_forward(op, inputs, outputs):
    """The dimensions, known at set-up, uploaded once per op and type."""
    y = outputs[0]
    kept = getattr(op, "saved_device_dims", None)
    if kept is None or kept.dtype != y.dtype or kept.size != y.size:
        kept = op.saved_device_dims = device.upload(op.dims.astype(y.dtype))
    device.copy(kept, y)


@backward("Shape")
def shape_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """The shape does not depend on the values: a zero gradient."""
    if propagate_down[0] and not accum[0]:
        device.fill(input_grads[0], 0)


# ------------------------------------------------------------------------------ OneHot
@kernel
def one_hot_kernel(index, shape, strides, y, bad):
    """y[n, flat(index[n])] = 1 (y zeroed before); bad[0] counts rows with an index outside
    ``shape``."""
    n = cuda.grid(1)
    if n < index.shape[0]:
        flat = 0
        valid = True
        for k in range(index.shape[1]):
            v = index[n, k]
            if v > -1 and v < shape[k]:   # checked before the cast: NaN is invalid
                flat += int(v) * strides[k]
            else:
                valid = False
        if valid:
            y[n, flat] = 1.0
        else:
            cuda.atomic.add(bad, 0, 1)


@forward("OneHot")
def one_hot_forward(op, inputs, outputs):
    dims = len(op.shape)
    index = device.reshaped(inputs[0], inputs[0].size // dims, dims)
    y = device.reshaped(outputs[0], index.shape[0], outputs[0].size // max(index.shape[0], 1))
    device.fill(y, 0)
    bad = device.kept_counter(op, "bad indices")
    device.launch(one_hot_kernel, index.shape[0], index, tuple(int(s) for s in op.shape),
                  tuple(int(s) for s in op.strides), y, bad)
    if device.read_counter(bad):
        integer_indices(op, device.copy_down(index))   # a NaN or infinite index: the CPU's error
        op.fail("index out of range for shape {}", tuple(op.shape))
