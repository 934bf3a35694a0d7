"""CUDA kernels of MaxPooling, AveragePooling, SumPooling, GlobalAveragePooling, pooling's
double backward (MaxPoolingBackward, MaxPoolingGather), Unpooling and RoiAlign.

The window poolings read the node's ``PoolGeometry`` (``op.geo``, ``ops/pooling_geometry.py``)
and nothing else of the op: samples are (N, D * H * W * C) as on the CPU, and the windows come
from the geometry's rules (``window_bounds``, ``covering_windows``), compiled from the CPU's
helpers, so one kernel serves every layout and both backends draw the same windows.

Forward is one thread per output element (MaxPooling keeps the winners' positions on the op,
``device_winners``). The average / sum backward is a gather, one thread per input element
summing the windows that cover it (no atomics); the max backward scatters dy to the winners
with atomic adds, since overlapping windows may share one. The double backward ops reuse the
winners, that scatter and its gather; Unpooling and RoiAlign are described where they are.
"""
import numpy as np

from ..ops import pooling_geometry
from ..ops.pooling import bilinear_at as cpu_bilinear_at, roi_grid as cpu_roi_grid, roi_sample as cpu_roi_sample
from ..ops.pooling_geometry import AVERAGE, MAX
from . import array, device, reduction
from .device import contiguous_strides, store, unravel3
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

roi_grid = device_function(cpu_roi_grid.py_func)         # RoiAlign's sampling, as the CPU's
roi_sample = device_function(cpu_roi_sample.py_func)
bilinear_at = device_function(cpu_bilinear_at.py_func)
window_bounds = device_function(pooling_geometry.window_bounds.py_func)   # the windows, as the CPU's
covering_windows = device_function(pooling_geometry.covering_windows.py_func)
sample_element = device_function(pooling_geometry.sample_element.py_func)
window_max = device_function(pooling_geometry.window_max.py_func)
window_sum = device_function(pooling_geometry.window_sum.py_func)


@kernel
def pool_kernel(x, y, index, sizes, out_sizes, kernel_shape, stride, pad, C, mode,
                including_pad):
    """y[n, o, c] = max / mean / sum of x over window o (index: the max's flat position)."""
    i = cuda.grid(1)
    if i < y.size:
        D, H, W = sizes
        n, od, oh, ow, c = sample_element(i, out_sizes, C)
        d_lo, d_hi, d_extent, d_near = window_bounds(od, D, kernel_shape[0], stride[0], pad[0],
                                                     including_pad)
        h_lo, h_hi, h_extent, h_near = window_bounds(oh, H, kernel_shape[1], stride[1], pad[1],
                                                     including_pad)
        w_lo, w_hi, w_extent, w_near = window_bounds(ow, W, kernel_shape[2], stride[2], pad[2],
                                                     including_pad)
        base = n * D * H * W * C + c
        if mode == MAX:
            best, best_pos = window_max(x, base, C, H, W, d_lo, d_hi, h_lo, h_hi, w_lo, w_hi,
                                        (d_near * H + h_near) * W + w_near)
            y[i] = best
            index[i] = best_pos
        else:
            acc = window_sum(x, base, C, H, W, d_lo, d_hi, h_lo, h_hi, w_lo, w_hi)
            if mode == AVERAGE:
                count = d_extent * h_extent * w_extent
                acc = acc / count if count > 0 else np.nan
            y[i] = acc


@kernel
def spread_kernel(dy, dx, sizes, out_sizes, kernel_shape, stride, pad, C, mode, including_pad,
                  accum):
    """dx[n, p, c] (+)= sum over the windows o covering p of dy[n, o, c] (divided by the window
    size for AveragePooling)."""
    i = cuda.grid(1)
    if i < dx.size:
        D, H, W = sizes
        OD, OH, OW = out_sizes
        n, d, h, w, c = sample_element(i, sizes, C)
        d0, d1 = covering_windows(d, OD, kernel_shape[0], stride[0], pad[0])
        h0, h1 = covering_windows(h, OH, kernel_shape[1], stride[1], pad[1])
        w0, w1 = covering_windows(w, OW, kernel_shape[2], stride[2], pad[2])
        base = n * OD * OH * OW * C
        acc = 0.0
        for od in range(d0, d1 + 1):
            d_extent = window_bounds(od, D, kernel_shape[0], stride[0], pad[0], including_pad)[2]
            for oh in range(h0, h1 + 1):
                h_extent = window_bounds(oh, H, kernel_shape[1], stride[1], pad[1],
                                         including_pad)[2]
                for ow in range(w0, w1 + 1):
                    scale = 1.0
                    if mode == AVERAGE:
                        count = d_extent * h_extent * window_bounds(
                            ow, W, kernel_shape[2], stride[2], pad[2], including_pad)[2]
                        scale = 1.0 / count if count > 0 else 0.0
                    acc += dy[base + ((od * OH + oh) * OW + ow) * C + c] * scale
        store(dx, i, acc, accum)


@kernel
def scatter_to_max_kernel(dy, index, dx, out_per_sample, in_per_sample, C):
    """dx[n, index[n, o, c], c] += dy[n, o, c] (atomic: windows may share a winner)."""
    i = cuda.grid(1)
    if i < dy.size:
        n, _, c = unravel3(i, out_per_sample // C, C)
        cuda.atomic.add(dx, n * in_per_sample + index[i] * C + c, dy[i])


@kernel
def gather_at_max_kernel(g, index, out, out_per_sample, in_per_sample, C, accum):
    """out[n, o, c] (+)= g[n, index[n, o, c], c]: g read at the winners."""
    i = cuda.grid(1)
    if i < out.size:
        n, _, c = unravel3(i, out_per_sample // C, C)
        v = g[n * in_per_sample + index[i] * C + c]
        store(out, i, v, accum)


def _flat(a):
    return device.flat(a)


def _winners(op, x, y=None):
    """Pool ``x`` by max into ``y`` (a workspace when None), keeping the winners' positions on
    the op (``device_winners``), which the backward of MaxPooling and the double backward ops
    read."""
    geo = op.geo
    n_out = geo.y2[0] * geo.y2[1]
    index = op.device_winners
    if index is None or index.size != n_out:
        index = op.device_winners = device.empty((n_out,), np.int64)
    if y is None:
        y = device.workspace("pool max", n_out, x.dtype)
    device.launch(pool_kernel, n_out, _flat(x), _flat(y), index, *geo.window_args(), MAX, True)
    return index


def _kept_winners(op, x):
    """The winners a device forward kept, or found again in ``x``."""
    index = op.device_winners
    if index is None or index.size != op.geo.y2[0] * op.geo.y2[1]:
        index = _winners(op, x)
    return index


def _scatter_to_winners(op, dy, index, dx, accum):
    """dx (+)= dy scattered to the winners ``index`` (dx shaped like the pooled input)."""
    if not accum:
        device.fill(dx, 0)
    geo = op.geo
    device.launch(scatter_to_max_kernel, dy.size, _flat(dy), index, _flat(dx), geo.y2[1],
                  geo.x2[1], geo.C)


def _gather_at_winners(op, g, index, out, accum):
    """out (+)= g (shaped like the pooled input) read at the winners ``index``."""
    geo = op.geo
    device.launch(gather_at_max_kernel, out.size, _flat(g), index, _flat(out), geo.y2[1],
                  geo.x2[1], geo.C, accum)


@forward("MaxPooling", "AveragePooling", "SumPooling")
def pooling_forward(op, inputs, outputs):
    x, y = inputs[0], outputs[0]
    if y.size == 0:
        return
    if op.mode == MAX:
        _winners(op, x, y)
        return
    device.launch(pool_kernel, y.size, _flat(x), _flat(y),
                  device.workspace("pool no index", 1, np.int64), *op.geo.window_args(), op.mode,
                  op.including_pad)


@backward("MaxPooling", "AveragePooling", "SumPooling")
def pooling_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dy, dx = output_grads[0], input_grads[0]
    if op.mode == MAX:
        _scatter_to_winners(op, dy, _kept_winners(op, inputs[0]), dx, accum[0])
        return
    device.launch(spread_kernel, dx.size, _flat(dy), _flat(dx), *op.geo.window_args(), op.mode,
                  op.including_pad, accum[0])


# MaxPoolingBackward(dy, x) scatters dy to the winners of x's windows, MaxPoolingGather(g, x)
# reads g at them: each is the other's gradient with respect to its first input (the second,
# x, gets none), so the two share the winners and the scatter / gather pair of MaxPooling.
@forward("MaxPoolingBackward")
def max_pooling_backward_forward(op, inputs, outputs):
    dy, x = inputs
    _scatter_to_winners(op, dy, _winners(op, x), outputs[0], False)


@backward("MaxPoolingBackward")
def max_pooling_backward_backward(op, inputs, outputs, output_grads, input_grads,
                                  propagate_down, accum):
    if propagate_down[0]:
        _gather_at_winners(op, output_grads[0], _kept_winners(op, inputs[1]), input_grads[0],
                           accum[0])


@forward("MaxPoolingGather")
def max_pooling_gather_forward(op, inputs, outputs):
    g, x = inputs
    _gather_at_winners(op, g, _winners(op, x), outputs[0], False)


@backward("MaxPoolingGather")
def max_pooling_gather_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                accum):
    if propagate_down[0]:
        _scatter_to_winners(op, output_grads[0], _kept_winners(op, inputs[1]), input_grads[0],
                            accum[0])


@forward("GlobalAveragePooling")
def global_average_pooling_forward(op, inputs, outputs):
    reduction.reduce(device.reshaped(inputs[0], op.rows, op.size),
                     device.reshaped(outputs[0], op.rows), (1,), scale=1.0 / op.size)


@backward("GlobalAveragePooling")
def global_average_pooling_backward(op, inputs, outputs, output_grads, input_grads,
                                    propagate_down, accum):
    if propagate_down[0]:
        reduction.broadcast_into(output_grads[0], device.reshaped(input_grads[0], op.rows, op.size),
                                 (1, 0), 1.0 / op.size, accum[0])


# Unpooling repeats every element ``kernel`` times along the pooled axes: a gather through
# per-axis index maps (output coordinate -> coordinate // k), which is the array family's move
# kernel, and its adjoint the array family's atomic scatter.
def _unpooling_tables(op, y_shape):
    """(device table, table_start) of the index maps of Unpooling's output axes, uploaded
    once per op."""
    kept = getattr(op, "saved_device_tables", None)
    if kept is not None and kept[0] == y_shape:
        return kept[1], kept[2]
    end = len(y_shape) - 1 if op.channel_last else len(y_shape)
    first = end - len(op.kernel)
    starts, parts, at = [-1] * len(y_shape), [], 0
    for ax, k in zip(range(first, end), op.kernel):
        starts[ax] = at
        parts.append(np.arange(y_shape[ax], dtype=np.int64) // k)
        at += y_shape[ax]
    table = device.upload(np.concatenate(parts))
    op.saved_device_tables = (y_shape, table, tuple(starts))
    return table, tuple(starts)


@forward("Unpooling")
def unpooling_forward(op, inputs, outputs):
    x, y = inputs[0], outputs[0]
    table, starts = _unpooling_tables(op, tuple(y.shape))
    array.move(x, y, y.shape, contiguous_strides(x.shape), contiguous_strides(y.shape),
               table=table, table_start=starts)


@backward("Unpooling")
def unpooling_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dy, dx = output_grads[0], input_grads[0]
    if not accum[0]:
        device.fill(dx, 0)
    table, starts = _unpooling_tables(op, tuple(dy.shape))
    device.launch(array.scatter_kernel, dy.size, _flat(dy), _flat(dx), tuple(dy.shape),
                  contiguous_strides(dx.shape), table, starts, dy.size)


# RoiAlign: one thread per output bin, averaging its bilinear samples (the CPU's roi_grid,
# roi_sample and bilinear_at); the backward spreads each bin's gradient over the same samples
# with atomic adds (bins of overlapping boxes share pixels). A box whose batch index is out of
# range is counted into host memory mapped into the device, and the CPU's check then reports it.
@device_function
def roi_bin(i, C, OH, OW, channel_last):
    """(box, channel, bin row, bin column) of element i of RoiAlign's output."""
    if channel_last:
        r, pos, c = unravel3(i, OH * OW, C)
    else:
        r, c, pos = unravel3(i, C, OH * OW)
    return r, c, pos // OW, pos % OW


@device_function
def roi_image(boxes, r, n_images, bad, i, per_box):
    """The batch index of box r, or -1 (counted once per box into ``bad``) out of range."""
    b = boxes[r, 0]
    if b < 0 or b >= n_images:
        if i % per_box == 0:
            cuda.atomic.add(bad, 0, 1)
        return -1
    return int(b)


@kernel
def roi_align_kernel(x, boxes, y, n_images, H, W, C, OH, OW, scale_y, scale_x, sampling_ratio,
                     channel_last, bad):
    """y[r, c, oh, ow] = the mean of the bilinear samples of bin (oh, ow) of box r."""
    i = cuda.grid(1)
    if i < y.size:
        r, c, oh, ow = roi_bin(i, C, OH, OW, channel_last)
        n = roi_image(boxes, r, n_images, bad, i, C * OH * OW)
        if n < 0:
            y[i] = np.nan
            return
        cs, ss = (1, C) if channel_last else (H * W, 1)
        base = n * C * H * W + c * cs
        grid = roi_grid(boxes[r], OH, OW, scale_y, scale_x, sampling_ratio)
        gh, gw = grid[4], grid[5]
        acc = 0.0
        for iy in range(gh):
            for ix in range(gw):
                ya, xa, yb, xb, ly, lx, inside = roi_sample(grid, oh, ow, iy, ix, H, W)
                if inside:
                    acc += bilinear_at(x, base, ss, W, ya, xa, yb, xb, ly, lx)
        count = gh * gw
        y[i] = acc / count if count != 0 else np.nan


@kernel
def roi_align_backward_kernel(dy, boxes, dx, n_images, H, W, C, OH, OW, scale_y, scale_x,
                              sampling_ratio, channel_last, bad):
    """dx += dy[r, c, oh, ow] / count at each bilinear sample of the bin, by its weights."""
    i = cuda.grid(1)
    if i < dy.size:
        r, c, oh, ow = roi_bin(i, C, OH, OW, channel_last)
        n = roi_image(boxes, r, n_images, bad, i, C * OH * OW)
        if n < 0:
            return
        cs, ss = (1, C) if channel_last else (H * W, 1)
        base = n * C * H * W + c * cs
        grid = roi_grid(boxes[r], OH, OW, scale_y, scale_x, sampling_ratio)
        gh, gw = grid[4], grid[5]
        count = gh * gw
        if count == 0:
            return
        v = dy[i] / count
        for iy in range(gh):
            for ix in range(gw):
                ya, xa, yb, xb, ly, lx, inside = roi_sample(grid, oh, ow, iy, ix, H, W)
                if inside:
                    cuda.atomic.add(dx, base + (ya * W + xa) * ss, v * (1 - ly) * (1 - lx))
                    cuda.atomic.add(dx, base + (ya * W + xb) * ss, v * (1 - ly) * lx)
                    cuda.atomic.add(dx, base + (yb * W + xa) * ss, v * ly * (1 - lx))
                    cuda.atomic.add(dx, base + (yb * W + xb) * ss, v * ly * lx)


def _roi_align_checked(op, boxes, roi_kernel, n, a, b):
    """Launch ``roi_kernel`` over n bins from a into b, then report out-of-range boxes as the
    CPU does (copying the boxes down only then)."""
    bad = device.kept_counter(op, "bad boxes")
    device.launch(roi_kernel, n, _flat(a), boxes, _flat(b), op.N, *op.kernel_args(), bad)
    if device.read_counter(bad):
        op.check_boxes(device.copy_down(boxes))


@forward("RoiAlign")
def roi_align_forward(op, inputs, outputs):
    x, boxes = inputs
    _roi_align_checked(op, boxes, roi_align_kernel, outputs[0].size, x, outputs[0])


@backward("RoiAlign")
def roi_align_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dy, dx = output_grads[0], input_grads[0]
        if not accum[0]:
            device.fill(dx, 0)
        _roi_align_checked(op, inputs[1], roi_align_backward_kernel, dy.size, dy, dx)
