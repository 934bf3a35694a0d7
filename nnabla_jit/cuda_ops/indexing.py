"""CUDA kernels of the gathers and scatters through index arrays: Gather, GatherNd, ScatterNd,
ScatterAdd, and Embed (a gather of weight rows; its CPU kernel is in ``ops/affine.py``).

As on the CPU (``ops/indexing.py``), every one moves contiguous blocks of ``block`` elements,
and one kernel, :func:`block_move_kernel`, moves them all, forward and backward: the block row
of output row r is

    row(r) = (b pre + p) n + flat(indices[:, b k + j]),   r = (b, p, j) over (batches, pre, k),

``flat`` being the C-order position of an index tuple of M values within the M indexed axes
(``index_shape``). Gather is M = 1 with its batch and pre axes; GatherNd (and ScatterNd's
destinations) is one batch, pre = 1, k = rows; Embed is Gather along axis 0. Gathers read
through ``row`` (the scatter-add of their backward adds into it atomically: indices may
repeat), scatters write through it.

Index values are read on the device (floats truncate toward zero, as on the CPU). One out of
range is skipped and counted in host memory mapped into the device; a non-zero count copies the
indices down once and the CPU's own check raises its error.

ScatterNd without ``add`` and with repeated indices keeps one of the repeated writes, not
necessarily the last one as the CPU does (the threads of one launch run in no order).
"""
import numpy as np

from . import device
from .registry import backward, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

GATHER, GATHER_ADD, SCATTER, SCATTER_ADD = 0, 1, 2, 3


@kernel
def block_move_kernel(src, dst, indices, index_shape, wrap, pre, k, n, block, n_rows, mode,
                      bad):
    """Over the n_rows x block elements (r, e): with GATHER(_ADD) dst[r, e] (+)= src[row(r), e],
    with SCATTER(_ADD) dst[row(r), e] (=, atomic +=) src[r, e]; ``indices`` is (M, columns)
    flat. Index values outside their axis (after one wrap of negatives with ``wrap``) skip the
    element and count in bad[0]."""
    i = cuda.grid(1)
    if i < n_rows * block:
        r = i // block
        e = i - r * block
        b = r // (pre * k)
        p = (r // k) % pre
        column = b * k + r % k
        columns = indices.size // len(index_shape)
        flat = 0
        valid = True
        for d in range(len(index_shape)):
            size = index_shape[d]
            v = int(indices[d * columns + column])
            if wrap and v < 0:
                v += size
            if v < 0 or v >= size:
                valid = False
            flat = flat * size + v
        if not valid:
            if e == 0:
                cuda.atomic.add(bad, 0, 1)
            return
        far = ((b * pre + p) * n + flat) * block + e
        if mode == GATHER:
            dst[i] = src[far]
        elif mode == GATHER_ADD:
            dst[i] += src[far]
        elif mode == SCATTER:
            dst[far] = src[i]
        else:
            cuda.atomic.add(dst, far, src[i])


@kernel
def scatter_add_kernel(x1, indices, src, dst_base, axis_size, axis_stride, y, to_x1, bad):
    """ScatterAdd over the positions q of ``indices``: y[dst(q)] += x1[src[q]] (atomic), or,
    with ``to_x1``, x1[src[q]] += y[dst(q)] (the gradient of x1: each src once), where
    dst(q) = dst_base[q] + indices[q] axis_stride."""
    q = cuda.grid(1)
    if q < src.size:
        v = int(indices[q])
        if v < 0 or v >= axis_size:
            cuda.atomic.add(bad, 0, 1)
            return
        d = dst_base[q] + v * axis_stride
        if to_x1:
            x1[src[q]] += y[d]
        else:
            cuda.atomic.add(y, d, x1[src[q]])


def _flat(a):
    return a.reshape(a.size)


def _checked(op, index, launch_kernel, host_check):
    """Run ``launch_kernel(bad)`` with a mapped counter of out-of-range indices; when any is,
    ``host_check(indices on the host)`` raises the CPU's error."""
    bad = getattr(op, "saved_bad_indices", None)
    if bad is None:
        bad = op.saved_bad_indices = device.host_counter()
    bad[0] = 0
    launch_kernel(bad)
    if device.read_counter(bad):
        host_check(device.copy_down(index))
        op.fail("index out of range")   # host_check found what the device did


def _geometry(op, x_shape):
    """(index_shape, wrap, pre, k, n, block, rows) of the op's block rows (see the module
    docstring), for the array the indices address (shaped ``x_shape``)."""
    if op.name == "Gather":
        nb, pre, n, block, k = op.dims
        return (n,), False, pre, k, n, block, nb * pre * k
    if op.name == "Embed":
        n = x_shape[0]
        block = int(np.prod(x_shape[1:], dtype=np.int64))
        return (n,), False, 1, op.rows, n, block, op.rows
    rows = op.rows   # GatherNd, ScatterNd
    return (tuple(op.index_shape), True, 1, rows, int(np.prod(op.index_shape, dtype=np.int64)),
            op.block, rows)


def _move(op, src, dst, index, far_shape, mode, host_check):
    shape, wrap, pre, k, n, block, rows = _geometry(op, far_shape)
    if rows * block == 0:
        return
    _checked(op, index, lambda bad: device.launch(
        block_move_kernel, rows * block, _flat(src), _flat(dst), _flat(index), shape or (1,),
        wrap, pre, k, n, block, rows, mode, bad), host_check)


def _rows(op, index):
    """Set on first use: the number of block rows (index tuples) of GatherNd / ScatterNd / Embed."""
    op.rows = index.size // max(len(getattr(op, "index_shape", (1,))), 1)


def _host_check(op):
    """The CPU's index check of the op (raises its error)."""
    if op.name in ("Gather", "GatherNd"):
        return op.src_starts
    if op.name == "ScatterNd":
        return op.dst_starts
    return lambda index: op.fail("index out of range [0, {}): min {} max {}", op.rows_of_w,
                                 index.min(), index.max())


# ------------------------------------------------------------------------------ gathers
@forward("Gather", "GatherNd", "Embed")
def gather_forward(op, inputs, outputs):
    x, index = (inputs[1], inputs[0]) if op.name == "Embed" else (inputs[0], inputs[1])
    _rows(op, index)
    op.rows_of_w = x.shape[0] if x.ndim else 0
    _move(op, x, outputs[0], index, x.shape, GATHER, _host_check(op))


@backward("Gather", "GatherNd", "Embed")
def gather_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    k, j = (1, 0) if op.name == "Embed" else (0, 1)   # (data, indices)
    if not propagate_down[k]:
        return
    dx = input_grads[k]
    if not accum[k]:
        device.fill(dx, 0)
    _move(op, output_grads[0], dx, inputs[j], dx.shape, SCATTER_ADD, _host_check(op))


# ------------------------------------------------------------------------------ scatters
def _scatter_nd_out(op):
    """ScatterNd's ``out`` input, which its forward updates in place (when given)."""
    return (2,) if len(op.input_names) == 3 else ()


@forward("ScatterNd", updates=_scatter_nd_out)
def scatter_nd_forward(op, inputs, outputs):
    data, index, y = inputs[0], inputs[1], outputs[0]
    _rows(op, index)
    if len(inputs) == 3:
        device.copy(inputs[2], y)
    else:
        device.fill(y, 0)
    _move(op, data, y, index, y.shape, SCATTER_ADD if op.add else SCATTER, _host_check(op))
    if len(inputs) == 3:
        device.copy(y, inputs[2])


@backward("ScatterNd")
def scatter_nd_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """d data (+)= the gradient at the scattered places (also for repeated indices)."""
    if propagate_down[0]:
        dy = output_grads[0]
        _move(op, dy, input_grads[0], inputs[1], dy.shape, GATHER_ADD if accum[0] else GATHER,
              _host_check(op))


def _scatter_add_tables(op):
    """ScatterAdd's set-up tables (source positions in x1, destination bases in x0) on the
    device, uploaded once."""
    tables = getattr(op, "saved_device_tables", None)
    if tables is None:
        tables = op.saved_device_tables = (device.upload(op.src), device.upload(op.dst_base))
    return tables


def _scatter_add(op, x1, index, y, to_x1):
    src, dst_base = _scatter_add_tables(op)
    _checked(op, index, lambda bad: device.launch(
        scatter_add_kernel, src.size, _flat(x1), _flat(index), src, dst_base, op.axis_size,
        op.axis_stride, _flat(y), to_x1, bad), op.dst)


@forward("ScatterAdd")
def scatter_add_forward(op, inputs, outputs):
    x0, index, x1 = inputs
    device.copy(x0, outputs[0])
    _scatter_add(op, x1, index, outputs[0], False)


@backward("ScatterAdd")
def scatter_add_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = output_grads[0]
    if propagate_down[0]:
        if accum[0]:
            device.add_into(input_grads[0], dy)
        else:
            device.copy(dy, input_grads[0])
    if propagate_down[2]:
        dx1 = input_grads[2]
        if not accum[2]:
            device.fill(dx1, 0)   # places of x1 outside the indices get nothing
        _scatter_add(op, dx1, inputs[1], dy, True)
