"""CUDA kernels of MaxPooling, AveragePooling, SumPooling and GlobalAveragePooling.

Samples are seen as the CPU's ``PoolGeometry`` sees them: (N, D * H * W * C) with the pooled
dims padded to three in front and C = 1 unless channel-last, so one kernel serves every layout.
The windows are computed in the kernels from (size, kernel, stride, pad) as ``ops/pooling.py``'s
``_windows`` tabulates them: window o covers [o * s - p, min(o * s - p + k, n + p)), clipped to
the input for its elements, and a max window wholly in the padding takes the element nearest
its start.

Forward is one thread per output element (MaxPooling keeps the winners' positions on the op,
``saved_device_index``). The average / sum backward is a gather, one thread per input element
summing the windows that cover it (no atomics); the max backward scatters dy to the winners
with atomic adds, since overlapping windows may share one.
"""
import numpy as np

from ..ops.pooling import AVERAGE, MAX
from . import device, reduction
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()


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
    return a.reshape(a.size)


@forward("MaxPooling", "AveragePooling", "SumPooling")
def pooling_forward(op, inputs, outputs):
    x, y = inputs[0], outputs[0]
    if y.size == 0:
        return
    if _mode(op) == MAX:
        index = getattr(op, "saved_device_index", None)
        if index is None or index.size != y.size:
            index = op.saved_device_index = device.empty((y.size,), np.int64)
    else:
        index = device.workspace("pool no index", 1, np.int64)
    device.launch(pool_kernel, y.size, _flat(x), _flat(y), index, *_dims(op), _mode(op),
                  op.including_pad)


@backward("MaxPooling", "AveragePooling", "SumPooling")
def pooling_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dy, dx = output_grads[0], input_grads[0]
    sizes, out_sizes, kernel_shape, stride, pad, C = _dims(op)
    if _mode(op) != MAX:
        device.launch(spread_kernel, dx.size, _flat(dy), _flat(dx), sizes, out_sizes,
                      kernel_shape, stride, pad, C, op.mode, op.including_pad, accum[0])
        return
    if not accum[0]:
        device.fill(dx, 0)
    index = getattr(op, "saved_device_index", None)
    if index is None or index.size != dy.size:   # no device forward kept them: find them again
        pooling_forward(op, inputs, [device.workspace("pool max", dy.size, dy.dtype)])
        index = op.saved_device_index
    geo = op.geo
    device.launch(scatter_to_max_kernel, dy.size, _flat(dy), index, _flat(dx), geo.y2[1],
                  geo.x2[1], C)


@forward("GlobalAveragePooling")
def global_average_pooling_forward(op, inputs, outputs):
    reduction.reduce(inputs[0].reshape(op.rows, op.size), outputs[0].reshape(op.rows), (1,),
                     scale=1.0 / op.size)


@backward("GlobalAveragePooling")
def global_average_pooling_backward(op, inputs, outputs, output_grads, input_grads,
                                    propagate_down, accum):
    if propagate_down[0]:
        reduction.broadcast_into(output_grads[0], input_grads[0].reshape(op.rows, op.size),
                                 (1, 0), 1.0 / op.size, accum[0])
