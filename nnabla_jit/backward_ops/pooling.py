"""Backward kernels and grad rules of the pooling ops (see ``ops/pooling.py``).

MaxPooling's gradient is a scatter of dy to the max positions; the grad rule builds it as
MaxPoolingBackward(dy, x), whose gradient with respect to dy reads the incoming gradient at the
same positions (the internal MaxPoolingGather), whose gradient is MaxPoolingBackward again.
Average and sum pooling are linear: their gradients spread dy over the windows (the internal
PoolingAdjoint), and the adjoint's gradient is the pooling itself. RoiAlign has a backward
kernel but, as in nnabla, no grad rule.
"""
import numpy as np
from numba import njit, prange, uint64

from ..ops.kernels import parallel_kernel

_AVERAGE = 1   # ops/pooling.py's mode for AveragePooling


# ------------------------------------------------------------------------------ kernels
# The layouts of ops/pooling.py: samples flattened to (N, D * H * W * C), window-bound arrays
# with rows LO, HI, SIZE; uint64 indices in the inner loops.
_LO, _HI, _SIZE = 0, 1, 2


@parallel_kernel
def scatter_kernel(dy, index, dx, C, accum):
    """dx[n, index[n, o, c], c] += dy[n, o, c] (dx zeroed first unless ``accum``)."""
    N, L = dy.shape
    for n in prange(N):
        g, ix, out = dy[n], index[n], dx[n]
        if not accum:
            out[:] = 0.0
        for o in range(L // C):
            for c in range(C):
                i = uint64(o * C + c)
                out[uint64(ix[i] * C + c)] += g[i]


@parallel_kernel
def spread_kernel(dy, dx, wd, wh, ww, H, W, C, mode, including_pad, accum):
    """The transpose of average / sum pooling: every element of window o gets dy[o] (divided
    by the window size of AveragePooling)."""
    N = dx.shape[0]
    OD, OH, OW = wd.shape[1], wh.shape[1], ww.shape[1]
    for n in prange(N):
        g, out = dy[n], dx[n]
        if not accum:
            out[:] = 0.0
        for c in range(C):
            o = c
            for od in range(OD):
                d_lo, d_hi, d_size = wd[_LO, od], wd[_HI, od], wd[_SIZE, od]
                for oh in range(OH):
                    h_lo, h_hi, h_size = wh[_LO, oh], wh[_HI, oh], wh[_SIZE, oh]
                    for ow in range(OW):
                        w_lo, w_hi = ww[_LO, ow], ww[_HI, ow]
                        scale = 1.0
                        if mode == _AVERAGE:
                            if including_pad:
                                count = d_size * h_size * ww[_SIZE, ow]
                            else:
                                count = (d_hi - d_lo) * (h_hi - h_lo) * (w_hi - w_lo)
                            scale = 1.0 / count if count > 0 else 0.0
                        v = g[uint64(o)] * scale
                        for d in range(d_lo, d_hi):
                            for h in range(h_lo, h_hi):
                                row = (d * H + h) * W
                                for w in range(w_lo, w_hi):
                                    out[uint64((row + w) * C + c)] += v
                        o += C


@parallel_kernel
def spread_rows(dy, dx, scale, accum):
    """dx[r, s] (+)= scale * dy[r]."""
    R, S = dx.shape
    for r in prange(R):
        g = dy[r] * scale
        row = dx[r]
        for s in range(S):
            row[uint64(s)] = row[uint64(s)] + g if accum else g


@parallel_kernel
def scatter_to_source(dy, source, dx, C, accum):
    """dx[n, source[o], c] += dy[n, o, c]: the transpose of Unpooling's repeat."""
    N = dy.shape[0]
    O = source.shape[0]
    for n in prange(N):
        g, out = dy[n], dx[n]
        if not accum:
            out[:] = 0.0
        for o in range(O):
            for c in range(C):
                out[uint64(source[o] * C + c)] += g[uint64(o * C + c)]


def scatter_to_max(geo, dy, index, dx, accum):
    scatter_kernel.for_size(dx.size)(dy.reshape(geo.y2), index, dx.reshape(geo.x2), geo.C, accum)


def spread_over_windows(geo, dy, dx, mode, including_pad, accum):
    wd, wh, ww = geo.windows
    spread_kernel.for_size(dx.size)(dy.reshape(geo.y2), dx.reshape(geo.x2), wd, wh, ww, geo.H, geo.W, geo.C,
                                    mode, including_pad, accum)


# ------------------------------------------------------------------------------ backward
def window_pooling_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """AveragePooling and SumPooling."""
    if propagate_down[0]:
        spread_over_windows(op.geo, grad_outputs[0], grad_inputs[0], op.mode, op.including_pad, accum[0])


def max_pooling_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        x = inputs[0]
        scatter_to_max(op.geo, grad_outputs[0], op.winners(x), grad_inputs[0], accum[0])


def max_pooling_backward_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """MaxPoolingBackward(dy, x): d dy = the incoming gradient at the max positions of x."""
    if propagate_down[0]:
        op.gather(grad_outputs[0], op.winners(inputs[1]), grad_inputs[0], accum[0])


def max_pooling_gather_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """MaxPoolingGather(g, x): d g = the incoming gradient scattered to the max positions."""
    if propagate_down[0]:
        scatter_to_max(op.geo, grad_outputs[0], op.winners(inputs[1]), grad_inputs[0], accum[0])


def pooling_adjoint_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """PoolingAdjoint's gradient is the pooling of the incoming gradient."""
    if propagate_down[0]:
        op.geo.run(grad_outputs[0], grad_inputs[0], op.geo.no_index(), op.kind, op.including_pad, accum[0])


def global_average_pooling_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        spread_rows.for_size(grad_inputs[0].size)(grad_outputs[0].reshape(op.rows),
                                                  grad_inputs[0].reshape(op.rows, op.size), 1.0 / op.size, accum[0])


def unpooling_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        scatter_to_source.for_size(grad_inputs[0].size)(grad_outputs[0].reshape(op.y2), op.source,
                                                        grad_inputs[0].reshape(op.x2), op.C, accum[0])


# ------------------------------------------------------------------------------ grad rules
def _internal(name, inputs, **args):
    from ..function import build
    from ..ops.registry import REGISTRY
    return build(REGISTRY[name](input_names=tuple("x{}".format(i) for i in range(len(inputs))), **args), inputs)


def max_pooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None, stride=None,
                     ignore_border=True, pad=None, channel_last=False):
    from .. import functions as F
    return [F.max_pooling_backward(grad_inputs[0], inputs[0], kernel, stride, ignore_border, pad, channel_last)]


def max_pooling_backward_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None,
                              stride=None, ignore_border=True, pad=None, channel_last=False):
    return [_internal("MaxPoolingGather", [grad_inputs[0], inputs[1]], kernel=kernel, stride=stride,
                      ignore_border=ignore_border, pad=pad, channel_last=channel_last), None]


def max_pooling_gather_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None,
                            stride=None, ignore_border=True, pad=None, channel_last=False):
    from .. import functions as F
    return [F.max_pooling_backward(grad_inputs[0], inputs[1], kernel, stride, ignore_border, pad, channel_last),
            None]


def _adjoint(dy, x_shape, mode, kernel, stride, ignore_border, pad, channel_last, including_pad):
    return _internal("PoolingAdjoint", [dy], x_shape=x_shape, mode=mode, kernel=kernel, stride=stride,
                     ignore_border=ignore_border, pad=pad, channel_last=channel_last, including_pad=including_pad)


def average_pooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None, stride=None,
                         ignore_border=True, pad=None, channel_last=False, including_pad=True):
    return [_adjoint(grad_inputs[0], tuple(input_shapes[0]), "average", kernel, stride, ignore_border, pad,
                     channel_last, including_pad)]


def sum_pooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None, stride=None,
                     ignore_border=True, pad=None, channel_last=False):
    return [_adjoint(grad_inputs[0], tuple(input_shapes[0]), "sum", kernel, stride, ignore_border, pad,
                     channel_last, True)]


def pooling_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, x_shape=None, mode="sum",
                         kernel=None, stride=None, ignore_border=True, pad=None, channel_last=False,
                         including_pad=True):
    from .. import functions as F
    g = grad_inputs[0]
    if mode == "average":
        return [F.average_pooling(g, kernel, stride, ignore_border, pad, channel_last, including_pad)]
    return [F.sum_pooling(g, kernel, stride, ignore_border, pad, channel_last)]


def global_average_pooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    x_shape = tuple(input_shapes[0])
    size = int(np.prod(x_shape[2:], dtype=np.int64))
    dy = F.reshape(grad_inputs[0], x_shape[:2] + (1,) * (len(x_shape) - 2), inplace=False)
    return [F.broadcast(dy, x_shape) * (1.0 / size)]


def unpooling_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, kernel=None, channel_last=False):
    """Sum dy over each kernel block: reshape every repeated axis n * k into (n, k), sum the k's."""
    from .. import functions as F
    x_shape, nk = tuple(input_shapes[0]), len(kernel)
    end = len(x_shape) - 1 if channel_last else len(x_shape)
    split = list(x_shape[:end - nk])
    axes = []
    for n, k in zip(x_shape[end - nk:end], kernel):
        split += [n, k]
        axes.append(len(split) - 1)
    split += list(x_shape[end:])
    g = F.sum(F.reshape(grad_inputs[0], split, inplace=False), axis=axes)
    return [F.reshape(g, x_shape, inplace=False)]


# The sampling of RoiAlign, shared with its forward kernel in ops/pooling.py.
@njit(cache=True, inline="always")
def roi_grid(box, OH, OW, scale_y, scale_x, sampling_ratio):
    """(y1, x1, bin_h, bin_w, grid_h, grid_w) of a (b, x1, y1, x2, y2) box: pixel centres at
    +0.5 (Mask R-CNN's aligned boxes); an adaptive grid takes ceil(bin size) samples."""
    y1, x1 = box[2] * scale_y - 0.5, box[1] * scale_x - 0.5
    bin_h = (box[4] * scale_y - 0.5 - y1) / OH
    bin_w = (box[3] * scale_x - 0.5 - x1) / OW
    gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(bin_h))
    gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(bin_w))
    return y1, x1, bin_h, bin_w, gh, gw


@njit(cache=True, inline="always")
def roi_corners(y, x, H, W):
    """(y0, x0, y1, x1, ly, lx, inside) of a bilinear sample, clamped at the border as Mask
    R-CNN's RoiAlign does; a sample beyond one pixel outside reads 0."""
    if y < -1.0 or y > H or x < -1.0 or x > W:
        return 0, 0, 0, 0, 0.0, 0.0, False
    y, x = max(y, 0.0), max(x, 0.0)
    ya, xa = int(y), int(x)
    if ya >= H - 1:
        ya = yb = H - 1
        y = float(ya)
    else:
        yb = ya + 1
    if xa >= W - 1:
        xa = xb = W - 1
        x = float(xa)
    else:
        xb = xa + 1
    return ya, xa, yb, xb, y - ya, x - xa, True


@parallel_kernel
def roi_align_backward_kernel(dy, boxes, dx, H, W, C, OH, OW, scale_y, scale_x, sampling_ratio, channel_last):
    """Spread each bin's gradient over its bilinear samples (one task per channel: no races)."""
    R = boxes.shape[0]
    cs, ss = (1, C) if channel_last else (H * W, 1)
    ocs, oss = (1, C) if channel_last else (OH * OW, 1)
    for c in prange(C):
        for r in range(R):
            img, g = dx[int(boxes[r, 0])], dy[r]
            y1, x1, bin_h, bin_w, gh, gw = roi_grid(boxes[r], OH, OW, scale_y, scale_x, sampling_ratio)
            count = gh * gw
            if count == 0:
                continue
            for oh in range(OH):
                for ow in range(OW):
                    v = g[c * ocs + (oh * OW + ow) * oss] / count
                    for iy in range(gh):
                        sy = y1 + oh * bin_h + (iy + 0.5) * bin_h / gh
                        for ix in range(gw):
                            sx = x1 + ow * bin_w + (ix + 0.5) * bin_w / gw
                            ya, xa, yb, xb, ly, lx, inside = roi_corners(sy, sx, H, W)
                            if inside:
                                img[c * cs + (ya * W + xa) * ss] += v * (1 - ly) * (1 - lx)
                                img[c * cs + (ya * W + xb) * ss] += v * (1 - ly) * lx
                                img[c * cs + (yb * W + xa) * ss] += v * ly * (1 - lx)
                                img[c * cs + (yb * W + xb) * ss] += v * ly * lx


def roi_align_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        x, boxes = inputs
        op.check_boxes(boxes)
        dx = grad_inputs[0]
        if not accum[0]:
            dx.fill(0)
        dy = grad_outputs[0]
        roi_align_backward_kernel.for_size(dy.size * 4)(dy.reshape(dy.shape[0], -1), boxes, dx.reshape(op.N, -1),
                                                       *op.kernel_args())
