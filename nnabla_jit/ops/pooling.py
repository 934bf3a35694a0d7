"""Pooling: MaxPooling, AveragePooling, SumPooling, GlobalAveragePooling, Unpooling,
MaxPoolingBackward, RoiAlign, and the internal ops their grad rules use.

The window poolings' layout and window rules are ``pooling_geometry.py``'s, shared with the CUDA
kernels: ``setup`` computes the node's ``PoolGeometry`` (``op.geo``); the kernels here read its
window tables (its rule tabulated) and call its window loops, and a CUDA thread applies the
same rule and loops to its own window.
"""
import math
import weakref

import numpy as np
from numba import njit, prange, uint64

from .common import integer_indices
from .kernels import parallel_kernel
from .max_pool_kernels import max_pool_planes
from .pooling_geometry import AVERAGE, EXTENT, HI, LO, MAX, NEAR, SUM, PoolGeometry, window_max, window_sum
from .registry import Op, register

__all__ = ["MAX", "AVERAGE", "SUM", "PoolGeometry", "roi_grid", "roi_sample", "bilinear_at"]


# ------------------------------------------------------------------ backward kernels
# Samples arrive flattened, (N, D * H * W * C) (see pooling_geometry.py). Inner loops index with
# uint64: numba skips its negative-index wraparound for unsigned ints, which keeps them tight.
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
def spread_kernel(dy, dx, wd, wh, ww, H, W, C, mode, accum):
    """The transpose of average / sum pooling: every element of window o gets dy[o] (divided
    by the window size of AveragePooling). wd, wh, ww: the geometry's window tables."""
    N = dx.shape[0]
    OD, OH, OW = wd.shape[1], wh.shape[1], ww.shape[1]
    for n in prange(N):
        g, out = dy[n], dx[n]
        if not accum:
            out[:] = 0.0
        for c in range(C):
            o = c
            for od in range(OD):
                d_lo, d_hi, d_extent = wd[LO, od], wd[HI, od], wd[EXTENT, od]
                for oh in range(OH):
                    h_lo, h_hi, h_extent = wh[LO, oh], wh[HI, oh], wh[EXTENT, oh]
                    for ow in range(OW):
                        w_lo, w_hi = ww[LO, ow], ww[HI, ow]
                        scale = 1.0
                        if mode == AVERAGE:
                            count = d_extent * h_extent * ww[EXTENT, ow]
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
    spread_kernel.for_size(dx.size)(dy.reshape(geo.y2), dx.reshape(geo.x2), *geo.window_tables(including_pad),
                                    geo.sizes[1], geo.sizes[2], geo.C, mode, accum)


# ------------------------------------------------------------------------------ backward
def window_pooling_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """AveragePooling and SumPooling."""
    if propagate_down[0]:
        spread_over_windows(op.geo, output_grads[0], input_grads[0], op.mode, op.including_pad, accum[0])


def max_pooling_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        x = inputs[0]
        scatter_to_max(op.geo, output_grads[0], op.winners(x), input_grads[0], accum[0])


def max_pooling_backward_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """MaxPoolingBackward(dy, x): d dy = the incoming gradient at the max positions of x."""
    if propagate_down[0]:
        op.gather(output_grads[0], op.winners(inputs[1]), input_grads[0], accum[0])


def max_pooling_gather_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """MaxPoolingGather(g, x): d g = the incoming gradient scattered to the max positions."""
    if propagate_down[0]:
        scatter_to_max(op.geo, output_grads[0], op.winners(inputs[1]), input_grads[0], accum[0])


def global_average_pooling_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        spread_rows.for_size(input_grads[0].size)(output_grads[0].reshape(op.rows),
                                                  input_grads[0].reshape(op.rows, op.size), 1.0 / op.size, accum[0])


def unpooling_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        scatter_to_source.for_size(input_grads[0].size)(output_grads[0].reshape(op.y2), op.source,
                                                        input_grads[0].reshape(op.x2), op.C, accum[0])


# The sampling of RoiAlign, shared with its kernels below and with the CUDA kernels
# (cuda_ops/pooling.py compiles their py_func as device functions: leaves, math only).
@njit(cache=True, inline="always")
def roi_grid(box, OH, OW, scale_y, scale_x, sampling_ratio):
    """(y1, x1, bin_h, bin_w, grid_h, grid_w) of a (b, x1, y1, x2, y2) box: pixel centres at
    +0.5 (Mask R-CNN's aligned boxes); an adaptive grid takes ceil(bin size) samples."""
    y1, x1 = box[2] * scale_y - 0.5, box[1] * scale_x - 0.5
    bin_h = (box[4] * scale_y - 0.5 - y1) / OH
    bin_w = (box[3] * scale_x - 0.5 - x1) / OW
    gh = sampling_ratio if sampling_ratio > 0 else int(math.ceil(bin_h))
    gw = sampling_ratio if sampling_ratio > 0 else int(math.ceil(bin_w))
    return y1, x1, bin_h, bin_w, gh, gw


@njit(cache=True, inline="always")
def roi_sample(grid, oh, ow, iy, ix, H, W):
    """(y0, x0, y1, x1, ly, lx, inside): the corners and weights of sample (iy, ix) of bin (oh, ow)
    of a box's ``roi_grid``, clamped at the border as Mask R-CNN's RoiAlign does; a sample beyond
    one pixel outside reads 0."""
    top, left, bin_h, bin_w, gh, gw = grid
    y = top + oh * bin_h + (iy + 0.5) * bin_h / gh
    x = left + ow * bin_w + (ix + 0.5) * bin_w / gw
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


@njit(cache=True, inline="always")
def bilinear_at(img, base, ss, W, ya, xa, yb, xb, ly, lx):
    """The bilinear sample of a plane of ``img`` (element (y, x) at base + (y * W + x) * ss) with
    corners (ya, xa), (yb, xb) and weights ly, lx."""
    return ((1 - ly) * (1 - lx) * img[base + (ya * W + xa) * ss]
            + (1 - ly) * lx * img[base + (ya * W + xb) * ss]
            + ly * (1 - lx) * img[base + (yb * W + xa) * ss]
            + ly * lx * img[base + (yb * W + xb) * ss])


@parallel_kernel
def roi_align_backward_kernel(dy, boxes, dx, H, W, C, OH, OW, scale_y, scale_x, sampling_ratio, channel_last):
    """Spread each bin's gradient over its bilinear samples (one task per channel: no races)."""
    R = boxes.shape[0]
    cs, ss = (1, C) if channel_last else (H * W, 1)
    ocs, oss = (1, C) if channel_last else (OH * OW, 1)
    for c in prange(C):
        for r in range(R):
            img, g = dx[int(boxes[r, 0])], dy[r]
            grid = roi_grid(boxes[r], OH, OW, scale_y, scale_x, sampling_ratio)
            gh, gw = grid[4], grid[5]
            count = gh * gw
            if count == 0:
                continue
            for oh in range(OH):
                for ow in range(OW):
                    v = g[c * ocs + (oh * OW + ow) * oss] / count
                    for iy in range(gh):
                        for ix in range(gw):
                            ya, xa, yb, xb, ly, lx, inside = roi_sample(grid, oh, ow, iy, ix, H, W)
                            if inside:
                                img[c * cs + (ya * W + xa) * ss] += v * (1 - ly) * (1 - lx)
                                img[c * cs + (ya * W + xb) * ss] += v * (1 - ly) * lx
                                img[c * cs + (yb * W + xa) * ss] += v * ly * (1 - lx)
                                img[c * cs + (yb * W + xb) * ss] += v * ly * lx


def roi_align_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        x, boxes = inputs
        op.check_boxes(boxes)
        dx = input_grads[0]
        if not accum[0]:
            dx.fill(0)
        dy = output_grads[0]
        roi_align_backward_kernel.for_size(dy.size * 4)(dy.reshape(dy.shape[0], -1), boxes, dx.reshape(op.N, -1),
                                                       *op.kernel_args())


# ------------------------------------------------------------------------------ kernels
@parallel_kernel
def pool_forward(x, y, index, wd, wh, ww, H, W, C, mode, accum):
    """y[n, o, c] (+)= max / mean / sum of x over window o; for MAX, ``index`` gets the flat
    (d, h, w) position of the winner (ties: the first). wd, wh, ww: the geometry's window
    tables."""
    N = x.shape[0]
    OD, OH, OW = wd.shape[1], wh.shape[1], ww.shape[1]
    for n in prange(N):
        xs, ys, ix = x[n], y[n], index[n]
        for c in range(C):
            out = c
            for od in range(OD):   # the table entries read into locals where they vary (it matters)
                d_lo, d_hi, d_extent, d_near = wd[LO, od], wd[HI, od], wd[EXTENT, od], wd[NEAR, od]
                for oh in range(OH):
                    h_lo, h_hi, h_extent, h_near = wh[LO, oh], wh[HI, oh], wh[EXTENT, oh], wh[NEAR, oh]
                    for ow in range(OW):
                        w_lo, w_hi = ww[LO, ow], ww[HI, ow]
                        if mode == MAX:
                            start = (d_near * H + h_near) * W + ww[NEAR, ow]
                            best, best_pos = window_max(xs, c, C, H, W, d_lo, d_hi, h_lo, h_hi, w_lo, w_hi, start)
                            ys[uint64(out)] = best
                            ix[uint64(out)] = best_pos
                        else:
                            acc = window_sum(xs, c, C, H, W, d_lo, d_hi, h_lo, h_hi, w_lo, w_hi)
                            if mode == AVERAGE:
                                count = d_extent * h_extent * ww[EXTENT, ow]
                                acc = acc / count if count > 0 else np.nan
                            ys[uint64(out)] = ys[uint64(out)] + acc if accum else acc
                        out += C


@parallel_kernel
def gather_at(src, index, out, C, accum):
    """out[n, o, c] (+)= src[n, index[n, o, c], c]: values at the max positions."""
    N, L = out.shape
    for n in prange(N):
        s, ix, dst = src[n], index[n], out[n]
        for o in range(L // C):
            for c in range(C):
                i = uint64(o * C + c)
                v = s[uint64(ix[i] * C + c)]
                dst[i] = dst[i] + v if accum else v


@parallel_kernel
def copy_from_source(x, source, y, C):
    """y[n, o, c] = x[n, source[o], c] (Unpooling's repeat, as an index map)."""
    N = y.shape[0]
    O = source.shape[0]
    for n in prange(N):
        xs, ys = x[n], y[n]
        for o in range(O):
            for c in range(C):
                ys[uint64(o * C + c)] = xs[uint64(source[o] * C + c)]


@parallel_kernel
def row_means(x, y):
    """y[r] = mean of x[r, :]."""
    R, S = x.shape
    for r in prange(R):
        row = x[r]
        acc = 0.0
        for s in range(S):
            acc += row[uint64(s)]
        y[r] = acc / S


# ------------------------------------------------------------------------------ runs
def pool(geo, x, y, index, mode, including_pad=True, accum=False):
    """y (+)= the pooling of x over the windows of ``geo`` (index: the max positions, for MAX;
    an (N, 0) array otherwise)."""
    if mode == MAX and geo.C == 1:   # the winners of channel-first samples: max_pool_kernels.py
        max_pool_planes.for_size(x.size)(x.reshape(geo.x2), y.reshape(geo.y2), index, *geo.window_tables(True),
                                         geo.sizes[1], geo.sizes[2], geo.kernel, geo.stride[2], geo.pad[2],
                                         *geo.full_windows())
        return
    pool_forward.for_size(x.size)(x.reshape(geo.x2), y.reshape(geo.y2), index, *geo.window_tables(including_pad),
                                  geo.sizes[1], geo.sizes[2], geo.C, mode, accum)


# ------------------------------------------------------------------------------ ops
class KeepsWinners:
    """Ops that find the max positions in forward and keep them for their backward: on the
    host here, and on the device in ``device_winners``, which the CUDA launchers keep."""
    device_winners = None

    def scratch(self, dtype):
        """An output-shaped work array (for maxima nobody reads)."""
        buf = getattr(self, "_scratch", None)
        if buf is None or buf.dtype != dtype or buf.shape != self.geo.y2:
            buf = self._scratch = np.empty(self.geo.y2, dtype)
        return buf

    def find_winners(self, x, y):
        """Pool x into y (a scratch array when None), keeping the max positions."""
        index = getattr(self, "index", None)
        if index is None or index.shape != self.geo.y2:
            index = self.index = np.empty(self.geo.y2, np.int64)
        pool(self.geo, x, self.scratch(x.dtype) if y is None else y, index, MAX)
        self.index_of = weakref.ref(x)
        return index

    def winners(self, x):
        """The forward's max positions when they were found in this x, else recomputed."""
        kept = getattr(self, "index_of", None)
        if kept is not None and kept() is x:
            return self.index
        index = np.empty(self.geo.y2, np.int64)
        pool(self.geo, x, self.scratch(x.dtype), index, MAX)
        return index

    def gather(self, g, index, out, accum):
        """out (+)= g (shaped like x) read at the max positions ``index``."""
        geo = self.geo
        gather_at.for_size(out.size)(g.reshape(geo.x2), index, out.reshape(geo.y2), geo.C, accum)


class _Pooling(Op):
    mode = SUM
    including_pad = True

    def setup(self, x):
        if not 2 <= len(self.kernel) <= 3:   # nnabla's pooling is 2-d or 3-d only
            self.fail("kernel {} must have 2 or 3 dimensions (2-d and 3-d pooling)", tuple(self.kernel))
        self.geo = PoolGeometry(self, x, self.kernel, self.stride, self.pad, self.ignore_border,
                                self.channel_last)
        return [self.geo.out_shape]

    def forward(self, inputs, outputs):
        pool(self.geo, inputs[0], outputs[0], np.empty((self.geo.N, 0), np.int64), self.mode, self.including_pad)

    backward = window_pooling_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class MaxPooling(KeepsWinners, _Pooling):
    """Max over each window. The forward keeps the winners' positions (on this node's op) for
    the backward, which scatters dy there."""
    mode = MAX

    def forward(self, inputs, outputs):
        self.find_winners(inputs[0], outputs[0])

    backward = max_pooling_backward

    def grad_depends_input_data(self, i, j):
        return True


@register
class AveragePooling(_Pooling):
    mode = AVERAGE


@register
class SumPooling(_Pooling):
    mode = SUM


@register
class MaxPoolingBackward(KeepsWinners, Op):
    """dx of MaxPooling from (dy, x): dy scattered to the max positions of x's windows."""
    no_grad_inputs = (1,)

    def setup(self, dy, x):
        self.geo = PoolGeometry(self, x, self.kernel, self.stride, self.pad, self.ignore_border,
                                self.channel_last)
        if tuple(dy) != self.geo.out_shape:
            self.fail("dy of shape {} must have the pooled shape {} of x {}", tuple(dy), self.geo.out_shape,
                      tuple(x))
        return [tuple(x)]

    def forward(self, inputs, outputs):
        dy, x = inputs
        scatter_to_max(self.geo, dy, self.find_winners(x, None), outputs[0], False)

    backward = max_pooling_backward_backward

    def grad_depends_input_data(self, i, j):
        return j == 1


@register(name="MaxPoolingGather")
class MaxPoolingGather(KeepsWinners, Op):
    """Internal: g (shaped like x) read at the max positions of x's windows; the gradient of
    MaxPoolingBackward with respect to dy (and its own gradient is MaxPoolingBackward)."""
    no_grad_inputs = (1,)

    def __init__(self, input_names=(), kernel=(), stride=(), ignore_border=True, pad=(), channel_last=False):
        super().__init__(input_names, kernel=tuple(kernel), stride=tuple(stride), ignore_border=ignore_border,
                         pad=tuple(pad), channel_last=channel_last)

    def setup(self, g, x):
        if tuple(g) != tuple(x):
            self.fail("g of shape {} must have the shape of x {}", tuple(g), tuple(x))
        self.geo = PoolGeometry(self, x, self.kernel, self.stride, self.pad, self.ignore_border,
                                self.channel_last)
        return [self.geo.out_shape]

    def forward(self, inputs, outputs):
        g, x = inputs
        self.gather(g, self.find_winners(x, None), outputs[0], False)

    backward = max_pooling_gather_backward

    def grad_depends_input_data(self, i, j):
        return j == 1


@register
class GlobalAveragePooling(Op):
    """(N, C, *spatial) -> (N, C, 1, 1): the mean over everything after the channel axis."""

    def setup(self, x):
        if len(x) < 2:
            self.fail("input of shape {} needs at least 2 dimensions (batch, channel)", tuple(x))
        self.rows = int(x[0] * x[1])
        self.size = int(np.prod(x[2:], dtype=np.int64))
        if self.size == 0:
            self.fail("input of shape {} has no spatial elements to average", tuple(x))
        return [(x[0], x[1], 1, 1)]

    def forward(self, inputs, outputs):
        row_means.for_size(inputs[0].size)(inputs[0].reshape(self.rows, self.size), outputs[0].reshape(self.rows))

    backward = global_average_pooling_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Unpooling(Op):
    """Each element repeated ``kernel`` times along the last len(kernel) axes (the ones before
    the last with channel_last)."""

    def setup(self, x):
        x, kernel = tuple(x), tuple(self.kernel)
        nk = len(kernel)
        end = len(x) - 1 if self.channel_last else len(x)
        if nk < 1 or end - nk < 0:
            self.fail("kernel {} must have between 1 and {} dimensions for input of shape {}", kernel, end, x)
        if min(kernel) < 1:
            self.fail("kernel {} must be positive", kernel)
        pooled = x[end - nk:end]
        out = tuple(n * k for n, k in zip(pooled, kernel))
        # For every output position (flat over the repeated axes), the input position it copies.
        grids = np.meshgrid(*[np.arange(o) // k for o, k in zip(out, kernel)], indexing="ij")
        self.source = np.ravel_multi_index(grids, pooled).reshape(-1).astype(np.int64)
        self.C = x[-1] if self.channel_last else 1
        N = int(np.prod(x[:end - nk], dtype=np.int64))
        self.x2 = (N, int(np.prod(pooled, dtype=np.int64)) * self.C)
        self.y2 = (N, int(np.prod(out, dtype=np.int64)) * self.C)
        return [x[:end - nk] + out + x[end:]]

    def forward(self, inputs, outputs):
        copy_from_source.for_size(outputs[0].size)(inputs[0].reshape(self.x2), self.source,
                                                   outputs[0].reshape(self.y2), self.C)

    backward = unpooling_backward

    def grad_depends_input_data(self, i, j):
        return False


# ============================================================================== RoiAlign
@parallel_kernel
def roi_align_kernel(x, boxes, y, H, W, C, OH, OW, scale_y, scale_x, sampling_ratio, channel_last):
    """y[r, c, oh, ow] = mean of the bilinear samples of bin (oh, ow) of box r (flattened
    (N, C*H*W) input and (R, C*OH*OW) output, channel-last when asked)."""
    R = boxes.shape[0]
    cs, ss = (1, C) if channel_last else (H * W, 1)
    ocs, oss = (1, C) if channel_last else (OH * OW, 1)
    for task in prange(R * C):
        r, c = task // C, task % C
        img, out = x[int(boxes[r, 0])], y[r]
        grid = roi_grid(boxes[r], OH, OW, scale_y, scale_x, sampling_ratio)
        gh, gw = grid[4], grid[5]
        count = gh * gw
        for oh in range(OH):
            for ow in range(OW):
                acc = 0.0
                for iy in range(gh):
                    for ix in range(gw):
                        ya, xa, yb, xb, ly, lx, inside = roi_sample(grid, oh, ow, iy, ix, H, W)
                        if inside:
                            acc += bilinear_at(img, c * cs, ss, W, ya, xa, yb, xb, ly, lx)
                out[c * ocs + (oh * OW + ow) * oss] = acc / count if count != 0 else np.nan


@register
class RoiAlign(Op):
    """Mask R-CNN's RoiAlign: (K, 5) boxes (batch index, x1, y1, x2, y2) of a 4-d input, each
    averaged into output_size bins of bilinear samples; spatial_scale scales (y, x)."""
    no_grad_inputs = (1,)

    def setup(self, x, boxes):
        x, boxes = tuple(x), tuple(boxes)
        if len(x) != 4 or min(x[1:]) < 1:
            self.fail("input of shape {} must be 4-d with non-empty channel and spatial dims", x)
        if len(boxes) != 2 or boxes[1] != 5:
            self.fail("boxes of shape {} must be (K, 5)", boxes)
        if len(self.output_size) != 2 or min(self.output_size) < 1:
            self.fail("output_size {} must be a positive (height, width)", tuple(self.output_size))
        if len(self.spatial_scale) != 2:
            self.fail("spatial_scale {} must have 2 entries", tuple(self.spatial_scale))
        self.N = x[0]
        self.C, self.H, self.W = (x[3], x[1], x[2]) if self.channel_last else x[1:]
        OH, OW = self.output_size
        return [(boxes[0], OH, OW, self.C) if self.channel_last else (boxes[0], self.C, OH, OW)]

    def check_boxes(self, boxes):
        index = integer_indices(self, boxes[:, 0], "box batch index")
        if index.size and (index.min() < 0 or index.max() >= self.N):
            self.fail("box batch indices {} must lie in [0, {})", index, self.N)

    def kernel_args(self):
        return (self.H, self.W, self.C, self.output_size[0], self.output_size[1], self.spatial_scale[0],
                self.spatial_scale[1], self.sampling_ratio, self.channel_last)

    def forward(self, inputs, outputs):
        x, boxes = inputs
        self.check_boxes(boxes)
        y = outputs[0]
        roi_align_kernel.for_size(y.size * 4)(x.reshape(self.N, -1), boxes, y.reshape(y.shape[0], -1),
                                             *self.kernel_args())

    backward = roi_align_backward

    def grad_depends_input_data(self, i, j):
        return j == 1
