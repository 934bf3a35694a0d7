"""CUDA kernels of MaxPooling, AveragePooling, SumPooling, GlobalAveragePooling, pooling's
double backward (MaxPoolingBackward, MaxPoolingGather), Unpooling and RoiAlign.

Samples are seen as the CPU's ``PoolGeometry`` sees them: (N, D * H * W * C) with the pooled
dims padded to three in front and C = 1 unless channel-last, so one kernel serves every layout.
The windows are computed in the kernels from (size, kernel, stride, pad) as ``ops/pooling.py``'s
``_windows`` tabulates them: window o covers [o * s - p, min(o * s - p + k, n + p)), clipped to
the input for its elements, and a max window wholly in the padding takes the element nearest
its start.

Forward is one thread per output element (MaxPooling keeps the winners' positions on the op,
``saved_device_index``). The average / sum backward is a gather, one thread per input element
summing the windows that cover it (no atomics); the max backward scatters dy to the winners
with atomic adds, since overlapping windows may share one. The double backward ops reuse the
winners, that scatter and its gather; Unpooling and RoiAlign are described where they are.
"""
import numpy as np

from ..ops.pooling import AVERAGE, MAX
from ..ops.pooling import roi_corners as cpu_roi_corners, roi_grid as cpu_roi_grid
from . import array, device, reduction
from .device import contiguous_strides
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

roi_grid = device_function(cpu_roi_grid.py_func)         # RoiAlign's sampling, as the CPU's
roi_corners = device_function(cpu_roi_corners.py_func)


@device_function
def window_bounds(o, n, k, s, p):
    """(lo, hi, size, near) of window o along a dim of n elements: the clipped range, its size
    within the padded input, and the element nearest its start."""
    start = o * s - p
    end = min(start + k, n + p)
    near = min(max(start, 0), n - 1)
    return max(start, 0), min(end, n), end - start, near


@kernel
def pool_kernel(x, y, index, sizes, out_sizes, kernel_shape, stride, pad, C, mode,
                including_pad):
    """y[n, o, c] = max / mean / sum of x over window o (index: the max's flat position)."""
    i = cuda.grid(1)
    if i < y.size:
        D, H, W = sizes
        OD, OH, OW = out_sizes
        per_sample = OD * OH * OW * C
        n = i // per_sample
        r = i - n * per_sample
        c = r % C
        r //= C
        ow = r % OW
        r //= OW
        oh = r % OH
        od = r // OH
        d_lo, d_hi, d_size, d_near = window_bounds(od, D, kernel_shape[0], stride[0], pad[0])
        h_lo, h_hi, h_size, h_near = window_bounds(oh, H, kernel_shape[1], stride[1], pad[1])
        w_lo, w_hi, w_size, w_near = window_bounds(ow, W, kernel_shape[2], stride[2], pad[2])
        base = n * D * H * W * C
        if mode == MAX:
            best_pos = (d_near * H + h_near) * W + w_near
            best = x[base + best_pos * C + c]
            for d in range(d_lo, d_hi):
                for h in range(h_lo, h_hi):
                    row = (d * H + h) * W
                    for w in range(w_lo, w_hi):
                        v = x[base + (row + w) * C + c]
                        if v > best:
                            best = v
                            best_pos = row + w
            y[i] = best
            index[i] = best_pos
        else:
            acc = 0.0
            for d in range(d_lo, d_hi):
                for h in range(h_lo, h_hi):
                    row = (d * H + h) * W
                    for w in range(w_lo, w_hi):
                        acc += x[base + (row + w) * C + c]
            if mode == AVERAGE:
                if including_pad:
                    count = d_size * h_size * w_size
                else:
                    count = (d_hi - d_lo) * (h_hi - h_lo) * (w_hi - w_lo)
                acc = acc / count if count > 0 else np.nan
            y[i] = acc


@device_function
def covering_windows(pos, n_out, k, s, p):
    """The range [first, last] of windows along a dim whose span covers position ``pos``."""
    first = max((pos + p - k + s) // s, 0)   # ceil((pos + p - k + 1) / s), pos + p - k + 1 >= 1 - k
    last = min((pos + p) // s, n_out - 1)
    return first, last


@kernel
def spread_kernel(dy, dx, sizes, out_sizes, kernel_shape, stride, pad, C, mode, including_pad,
                  accum):
    """dx[n, p, c] (+)= sum over the windows o covering p of dy[n, o, c] (divided by the window
    size for AveragePooling)."""
    i = cuda.grid(1)
    if i < dx.size:
        D, H, W = sizes
        OD, OH, OW = out_sizes
        per_sample = D * H * W * C
        n = i // per_sample
        r = i - n * per_sample
        c = r % C
        r //= C
        w = r % W
        r //= W
        h = r % H
        d = r // H
        d0, d1 = covering_windows(d, OD, kernel_shape[0], stride[0], pad[0])
        h0, h1 = covering_windows(h, OH, kernel_shape[1], stride[1], pad[1])
        w0, w1 = covering_windows(w, OW, kernel_shape[2], stride[2], pad[2])
        base = n * OD * OH * OW * C
        acc = 0.0
        for od in range(d0, d1 + 1):
            d_lo, d_hi, d_size, d_near = window_bounds(od, D, kernel_shape[0], stride[0], pad[0])
            for oh in range(h0, h1 + 1):
                h_lo, h_hi, h_size, h_near = window_bounds(oh, H, kernel_shape[1], stride[1],
                                                           pad[1])
                for ow in range(w0, w1 + 1):
                    scale = 1.0
                    if mode == AVERAGE:
                        w_lo, w_hi, w_size, w_near = window_bounds(ow, W, kernel_shape[2],
                                                                   stride[2], pad[2])
                        if including_pad:
                            count = d_size * h_size * w_size
                        else:
                            count = (d_hi - d_lo) * (h_hi - h_lo) * (w_hi - w_lo)
                        scale = 1.0 / count if count > 0 else 0.0
                    acc += dy[base + ((od * OH + oh) * OW + ow) * C + c] * scale
        if accum:
            dx[i] += acc
        else:
            dx[i] = acc


@kernel
def scatter_to_max_kernel(dy, index, dx, out_per_sample, in_per_sample, C):
    """dx[n, index[n, o, c], c] += dy[n, o, c] (atomic: windows may share a winner)."""
    i = cuda.grid(1)
    if i < dy.size:
        n = i // out_per_sample
        c = (i - n * out_per_sample) % C
        cuda.atomic.add(dx, n * in_per_sample + index[i] * C + c, dy[i])


@kernel
def gather_at_max_kernel(g, index, out, out_per_sample, in_per_sample, C, accum):
    """out[n, o, c] (+)= g[n, index[n, o, c], c]: g read at the winners."""
    i = cuda.grid(1)
    if i < out.size:
        n = i // out_per_sample
        c = (i - n * out_per_sample) % C
        v = g[n * in_per_sample + index[i] * C + c]
        if accum:
            out[i] += v
        else:
            out[i] = v


def _dims(op):
    """(sizes, out_sizes, kernel, stride, pad, C) of the pooled dims, padded to three in front
    as the CPU geometry pads them."""
    geo = op.geo
    fill = 3 - len(op.kernel)
    sizes = (geo.x2[1] // (geo.C * geo.H * geo.W), int(geo.H), int(geo.W))
    out_sizes = tuple(int(w.shape[1]) for w in geo.windows)
    as3 = (lambda v, pad_value: (pad_value,) * fill + tuple(int(e) for e in v))
    return (sizes, out_sizes, as3(op.kernel, 1), as3(op.stride, 1), as3(op.pad, 0), int(geo.C))


def _mode(op):
    return MAX if op.name == "MaxPooling" else op.mode


def _flat(a):
    return device.flat(a)


def _winners(op, x, y=None):
    """Pool ``x`` by max into ``y`` (a workspace when None), keeping the winners' positions on
    the op (``saved_device_index``), which the backward of MaxPooling and the double backward
    ops read."""
    n_out = op.geo.y2[0] * op.geo.y2[1]
    index = getattr(op, "saved_device_index", None)
    if index is None or index.size != n_out:
        index = op.saved_device_index = device.empty((n_out,), np.int64)
    if y is None:
        y = device.workspace("pool max", n_out, x.dtype)
    device.launch(pool_kernel, n_out, _flat(x), _flat(y), index, *_dims(op), MAX, True)
    return index


def _kept_winners(op, x):
    """The winners a device forward kept, or found again in ``x``."""
    index = getattr(op, "saved_device_index", None)
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
    if _mode(op) == MAX:
        _winners(op, x, y)
        return
    device.launch(pool_kernel, y.size, _flat(x), _flat(y),
                  device.workspace("pool no index", 1, np.int64), *_dims(op), _mode(op),
                  op.including_pad)


@backward("MaxPooling", "AveragePooling", "SumPooling")
def pooling_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dy, dx = output_grads[0], input_grads[0]
    if _mode(op) == MAX:
        _scatter_to_winners(op, dy, _kept_winners(op, inputs[0]), dx, accum[0])
        return
    device.launch(spread_kernel, dx.size, _flat(dy), _flat(dx), *_dims(op), op.mode,
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


# RoiAlign: one thread per output bin, averaging its bilinear samples (the CPU's roi_grid and
# roi_corners); the backward spreads each bin's gradient over the same samples with atomic
# adds (bins of overlapping boxes share pixels). A box whose batch index is out of range is
# counted into host memory mapped into the device, and the CPU's check then reports it.
@device_function
def roi_bin(i, C, OH, OW, channel_last):
    """(box, channel, bin row, bin column) of element i of RoiAlign's output."""
    per_box = C * OH * OW
    r = i // per_box
    rest = i - r * per_box
    if channel_last:
        c = rest % C
        pos = rest // C
    else:
        c = rest // (OH * OW)
        pos = rest - c * OH * OW
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
        y1, x1, bin_h, bin_w, gh, gw = roi_grid(boxes[r], OH, OW, scale_y, scale_x,
                                                sampling_ratio)
        acc = 0.0
        for iy in range(gh):
            sy = y1 + oh * bin_h + (iy + 0.5) * bin_h / gh
            for ix in range(gw):
                sx = x1 + ow * bin_w + (ix + 0.5) * bin_w / gw
                ya, xa, yb, xb, ly, lx, inside = roi_corners(sy, sx, H, W)
                if inside:
                    acc += ((1 - ly) * (1 - lx) * x[base + (ya * W + xa) * ss]
                            + (1 - ly) * lx * x[base + (ya * W + xb) * ss]
                            + ly * (1 - lx) * x[base + (yb * W + xa) * ss]
                            + ly * lx * x[base + (yb * W + xb) * ss])
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
        y1, x1, bin_h, bin_w, gh, gw = roi_grid(boxes[r], OH, OW, scale_y, scale_x,
                                                sampling_ratio)
        count = gh * gw
        if count == 0:
            return
        v = dy[i] / count
        for iy in range(gh):
            sy = y1 + oh * bin_h + (iy + 0.5) * bin_h / gh
            for ix in range(gw):
                sx = x1 + ow * bin_w + (ix + 0.5) * bin_w / gw
                ya, xa, yb, xb, ly, lx, inside = roi_corners(sy, sx, H, W)
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
