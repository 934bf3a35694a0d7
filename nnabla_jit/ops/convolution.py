"""Convolutions: Convolution, Deconvolution, DepthwiseConvolution, DepthwiseDeconvolution (their
DataGrad and FilterGrad transposes are ``ops/adjoint.py``'s), and the special ones built on them:
DeformableConvolution, FusedConvolution, AdaptiveSeparableConvolution, PatchCorrelation.

The first four are one computation seen from two sides. A convolution relates an *image*
(``(batch, C, *spatial)``, or ``(batch, *spatial, C)`` with ``channel_last``) to a *map*
(``(batch, M, *out_spatial)``) through a filter ``W`` of shape ``(M, C / group, *kernel)``
(``(M, *kernel, C / group)`` channel-last). Convolution goes image -> map, Deconvolution
map -> image with the same filter layout (its x is the map), and the filter gradient correlates
the two. The depthwise ops are the grouped ones with one group per channel.

:class:`ConvGeometry` does the work with im2col: the image of a batch chunk is unrolled into
``col`` of shape ``(C * K, chunk * O)`` (K kernel taps, O map positions per sample; rows in the
filter's column order, group by group), so that per group

    map rows (M/g, chunk*O) = W_g (M/g, C/g*K) @ col_g        (image -> map)
    col_g                   = W_g^T @ map rows                (map -> image, then col2im)
    dW_g                   += map rows @ col_g^T              (filter gradient)

are single BLAS GEMMs. With one group, in float32, they run in the orientations OpenBLAS does
fastest (see POSITION_MAJOR_DEPTH): the forward as ``rows^T = col^T W^T``, rows by position
(chunk*O, M) -- channel-last always (those rows are the map itself), channel-first for deep
cols --, the filter gradient of few output channels as ``dW^T = col rows^T``, and channel-last
the data and filter gradients read the map as its rows. The kernels handle any number of
spatial dimensions (a 1-d convolution is 1 x W): the last two are loops, the ones before them
are decoded once per plane.
DeformableConvolution is the same with a col that samples the image at offset positions.

A *pointwise* convolution (1 x ... x 1 filter, stride 1, no padding, one group: ResNet's
bottleneck layers) needs no col: a sample's image is its own col. Channel-first, each sample is
one GEMM straight between its image and its map; channel-last, the whole batch is one
``(batch * O, C)`` matrix and each product one GEMM, with no copies either way.
"""
import threading
import weakref

import numpy as np
from numba import prange, uint64

from .blas import gemm
from .common import normalize_axis
from .convolution_kernels import (INIT_ADD, INIT_BIAS, INIT_ZERO, col2im, im2col, map_to_rows,
                                  rows_to_map, tap_reads)
from .convolution_tiled import TiledRoute
from .kernels import parallel_kernel
from .registry import Op, register
from . import winograd


# ------------------------------------------------------------------ backward kernels
def init_for_accum(accum):
    """The write mode of a gradient: add into it (accum) or overwrite it."""
    return INIT_ADD if accum else INIT_ZERO


@parallel_kernel
def channel_sums(a2, out, accum, channel_last):
    """out[c] (+)= sum over samples and positions of channel c; a2 is (B, C * S) with element
    (c, s) at c * S + s, or at s * C + c channel-last."""
    B = a2.shape[0]
    C = out.shape[0]
    S = a2.shape[1] // C if C > 0 else 0
    cs, ss = (1, C) if channel_last else (S, 1)
    for c in prange(C):
        acc = 0.0
        for b in range(B):
            sample = a2[b]
            for s in range(S):
                acc += sample[uint64(c * cs + s * ss)]
        out[c] = out[c] + acc if accum else acc


def bias_grad(a2, db, accum, channel_last):
    channel_sums.for_size(a2.size)(a2, db, accum, channel_last)


def convolution_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """Convolution and DepthwiseConvolution: dx = conv^T(dy, W), dW = corr(x, dy), db = sum dy."""
    geo, dy = op.geo, output_grads[0]
    x, w = inputs[0], inputs[1]
    if propagate_down[0]:
        wino = getattr(op, "wino", None)
        if wino is not None and wino.takes(dy) and w.dtype == dy.dtype:
            wino.data_grad(dy, w, input_grads[0], init_for_accum(accum[0]))
        else:
            geo.map_to_image(dy, w, input_grads[0], init=init_for_accum(accum[0]))
    bias = len(inputs) > 2 and propagate_down[2]
    if propagate_down[1]:   # with the bias gradient from the same transposed dy
        geo.filter_grad(x, dy, input_grads[1], accum[1], reuse_col=True, out_b=input_grads[2] if bias else None,
                        b_accumulate=bias and accum[2])
    elif bias:
        bias_grad(geo.map2(dy), input_grads[2], accum[2], geo.channel_last)


def deconvolution_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """Deconvolution and DepthwiseDeconvolution: dx = conv(dy, W), dW = corr(dy, x)."""
    geo, dy = op.geo, output_grads[0]
    x, w = inputs[0], inputs[1]
    if propagate_down[0]:
        geo.image_to_map(dy, w, input_grads[0], init=init_for_accum(accum[0]))
    if propagate_down[1]:   # the col of dy is still in the buffer when dx was just computed
        geo.filter_grad(dy, x, input_grads[1], accum[1], reuse_col=propagate_down[0])
    if len(inputs) > 2 and propagate_down[2]:
        bias_grad(geo.img2(dy), input_grads[2], accum[2], geo.channel_last)


# ------------------------------------------------------------------------------ extras
# Upper bound on the elements of one im2col buffer; a batch is processed in chunks below it.
COL_ELEMENTS = 1 << 22
# A node keeps its own col (for its backward to reuse) only up to this size; bigger ones and
# all other work arrays come from one per-thread scratch pool, so that memory does not grow
# with the number of convolutions in a network.
KEPT_COL_ELEMENTS = 1 << 21
# A channel-first pointwise convolution of several samples runs one GEMM per sample once a sample
# has this many map positions; below it, one GEMM over the batch's col (its copies cost less
# than many small products).
POINTWISE_POSITIONS = 256
# The float32 GEMMs of one group run in the orientation OpenBLAS does fastest on a col
# (C * K, nb * O) (measured per product, one thread; benchmarks/README.md "Convolution GEMM
# orientation"; float64 keeps W col and rows col^T, see ConvGeometry._oriented). The
# forward's col^T W^T, position-major rows (nb * O, M), is 1.0-1.4x faster than W col: channel-
# last those rows are the map itself; channel-first rows_to_map transposes them, which pays from
# a col of this many rows (C * K) up. The filter gradient of up to POSITION_MAJOR_CHANNELS output
# channels computes dW^T = col rows^T and transposes it (1.05-1.35x; with more channels the
# products run alike and the transposition of the larger filter is a loss).
POSITION_MAJOR_DEPTH = 1024
POSITION_MAJOR_CHANNELS = 64
# im2col gathers through a table of tap reads (ConvGeometry.taps) on maps narrower than this:
# 1.2-2.1x faster than copying rows of 4-8 values (ResNet-18 stages 3-4, BN-CNN conv2, LeNet
# conv2), slower on rows of 16 and more (one thread, benchmarks/README.md).
NARROW_MAP = 16
_scratch = threading.local()


def scratch(name, size, dtype):
    """A flat work array of at least ``size`` elements, shared by every convolution of this
    thread (valid until the next call with the same name)."""
    pool = _scratch.__dict__.setdefault("pool", {})
    key = (name, np.dtype(dtype))
    buf = pool.get(key)
    if buf is None or buf.size < size:
        buf = pool[key] = np.empty(size, dtype)
    return buf


# ------------------------------------------------------------------------------ geometry
def split_layout(op, shape, base_axis, channel_last, what="input"):
    """(leading batch dims, channels, spatial dims) of an image or map shape."""
    shape = tuple(shape)
    if len(shape) < 2:
        op.fail("{} of shape {} needs a channel axis and at least one spatial axis", what, shape)
    base_axis = normalize_axis(op, base_axis, len(shape), "base_axis")
    spatial = shape[base_axis:-1] if channel_last else shape[base_axis + 1:]
    if not spatial:
        op.fail("{} of shape {} with base_axis {} has no spatial dimension", what, shape, base_axis)
    channels = shape[-1] if channel_last else shape[base_axis]
    return shape[:base_axis], channels, tuple(spatial)


def join_layout(lead, channels, spatial, channel_last):
    if channel_last:
        return tuple(lead) + tuple(spatial) + (channels,)
    return tuple(lead) + (channels,) + tuple(spatial)


def check_spatial_args(op, n_spatial, **args):
    """pad / stride / dilation / ... have one entry per spatial dimension and sane values."""
    for name, value in args.items():
        if len(value) != n_spatial:
            op.fail("{} {} must have {} entries, one per spatial dimension", name, tuple(value), n_spatial)
        low = 0 if name in ("pad", "output_padding") else 1
        if value and min(value) < low:
            op.fail("{} {} must be {}", name, tuple(value), "non-negative" if low == 0 else "positive")


def check_bias(op, b, channels, w):
    if b is not None and tuple(b) != (channels,):
        op.fail("bias of shape {} must have shape ({},) (weight shape {})", tuple(b), channels, tuple(w))


class ConvGeometry:
    """One convolution's shapes and the products of the module docstring.

    Built from the image shape and the filter shape (``(M, C / group, *kernel)``, or
    ``(M, *kernel, C / group)`` channel-last); the map shape follows. The instance belongs to
    one graph node; when the whole batch's col is small it keeps it, so that the col of a
    forward serves the filter gradient of the following backward. Float32 layers that
    ``TiledRoute.applies`` to take ``ops/convolution_tiled.py``'s products instead.
    """

    TILED = True   # a subclass whose col is not im2col's (deformable convolution) sets False

    def __init__(self, op, img_shape, w_shape, pad, stride, dilation, group, channel_last, base_axis):
        lead, C, img_sp = split_layout(op, img_shape, base_axis, channel_last)
        D = len(img_sp)
        check_spatial_args(op, D, pad=pad, stride=stride, dilation=dilation)
        if min(img_sp) < 1:
            op.fail("spatial dims {} of input shape {} must not be empty", img_sp, tuple(img_shape))
        w_shape = tuple(w_shape)
        if len(w_shape) != D + 2:
            op.fail("weight of shape {} must have {} dimensions for an input of shape {} ({} spatial)",
                    w_shape, D + 2, tuple(img_shape), D)
        kernel = w_shape[1:-1] if channel_last else w_shape[2:]
        if min(w_shape) < 1:
            op.fail("weight of shape {} has an empty dimension", w_shape)
        if group < 1 or C % group or w_shape[0] % group:
            op.fail("input channels {} and output channels {} (weight shape {}) must be divisible by "
                    "group {}", C, w_shape[0], w_shape, group)
        if (w_shape[-1] if channel_last else w_shape[1]) != C // group:
            op.fail("weight of shape {} does not fit input of shape {}: it needs {} input channels per "
                    "group (input channels {} / group {})", w_shape, tuple(img_shape), C // group, C, group)
        map_sp = []
        for d in range(D):
            reach = dilation[d] * (kernel[d] - 1) + 1
            if img_sp[d] + 2 * pad[d] < reach:
                op.fail("kernel {} (dilation {}) is larger than the padded input: spatial dimension {} of "
                        "input shape {} is {} + 2 * pad {}", tuple(kernel), tuple(dilation), d,
                        tuple(img_shape), img_sp[d], pad[d])
            map_sp.append((img_sp[d] + 2 * pad[d] - reach) // stride[d] + 1)
        self.img_sp, self.map_sp, self.kernel = tuple(img_sp), tuple(map_sp), tuple(kernel)
        self.stride, self.pad, self.dilation = (tuple(int(v) for v in a) for a in (stride, pad, dilation))
        self.C, self.M, self.group, self.channel_last = C, w_shape[0], group, channel_last
        self.B = int(np.prod(lead, dtype=np.int64))
        self.K = int(np.prod(kernel, dtype=np.int64))
        self.S = int(np.prod(img_sp, dtype=np.int64))
        self.O = int(np.prod(map_sp, dtype=np.int64))
        self.img_shape = tuple(img_shape)
        self.map_shape = join_layout(lead, self.M, map_sp, channel_last)
        # The kernels' view: at least two spatial dims (a 1-d convolution is 1 x W).
        fill = (1,) * max(0, 2 - D)
        taps = np.array(list(np.ndindex(*(fill + tuple(kernel)))), np.int64).reshape(self.K, -1)
        self.koff = taps * np.array(fill + tuple(dilation), np.int64) - np.array((0,) * len(fill) + tuple(pad),
                                                                                np.int64)
        self.img_sp_a = np.array(fill + tuple(img_sp), np.int64)
        self.map_sp_a = np.array(fill + tuple(map_sp), np.int64)
        self.stride_a = np.array(fill + tuple(stride), np.int64)
        self.chunk = max(1, min(self.B, COL_ELEMENTS // max(1, C * self.K * self.O)))
        self.keeps_col = self.chunk == self.B and self.B * C * self.K * self.O <= KEPT_COL_ELEMENTS
        # A 1 x ... x 1 filter of one group without stride or padding (dilation then moves
        # nothing): a sample's image is its own col (the rule; cuda_ops/convolution.py reads it
        # too), and the CPU takes the pointwise products when it also pays (see POINTWISE_POSITIONS).
        self.col_is_image = (self.K == 1 and group == 1 and not self.koff.any()
                             and max(self.stride) == 1)
        self.pointwise = self.col_is_image and (channel_last or self.B == 1
                                                or self.O >= POINTWISE_POSITIONS)
        self.taps = tap_reads(self) if map_sp[-1] < NARROW_MAP else np.zeros((0, 0), np.int32)
        self.kept_col = None
        self.col_of = None   # weak references to the arrays the whole-batch col in "col" came from
        # float32 products sample by sample where they beat the batch's BLAS GEMMs
        self.tiled = TiledRoute(self, scratch) if self.TILED and TiledRoute.applies(self) else None

    # --- views and buffers ---------------------------------------------------------------
    def img2(self, a):
        return a.reshape(self.B, self.C * self.S)

    def map2(self, a):
        return a.reshape(self.B, self.M * self.O)

    def _buffer(self, name, rows, nb, dtype):
        """A (rows, nb * O) C-contiguous work array (this node's own col, if it keeps one)."""
        size = rows * nb * self.O
        if name == "col" and self.keeps_col:
            if self.kept_col is None or self.kept_col.dtype != dtype:
                self.kept_col = np.empty(size, dtype)
            buf = self.kept_col
        else:
            # dcol (backward's col) is never live with a scratch col: one workspace for both
            buf = scratch("col" if name == "dcol" else name, size, dtype)
        return buf[:size].reshape(rows, nb * self.O)

    def _chunks(self):
        for b0 in range(0, self.B, self.chunk):
            yield b0, min(self.B, b0 + self.chunk)

    def _col(self, img, img2, b0, b1, reuse):
        """The col of image samples [b0, b1); not recomputed when ``reuse`` and already there."""
        col = self._buffer("col", self.C * self.K, b1 - b0, img2.dtype)
        sources = self._col_sources(img)
        if reuse and self.keeps_col and self.col_of is not None and all(
                r() is a for r, a in zip(self.col_of, sources)):
            return col
        self._fill_col(img2, b0, b1, col)
        self.col_of = [weakref.ref(a) for a in sources] if self.keeps_col else None
        return col

    def _col_sources(self, img):
        """The arrays a col is computed from (it is reused only while they are the same)."""
        return (img,)

    def _fill_col(self, img2, b0, b1, col):
        im2col.for_size(col.size)(img2[b0:b1], col, self.img_sp_a, self.map_sp_a, self.stride_a,
                                  self.koff, self.group, self.channel_last, self.taps)

    def _oriented(self, dtype):
        """Whether the products take POSITION_MAJOR_DEPTH's orientations: one group, float32 (in
        float64 OpenBLAS's dgemm ran col^T W^T 0.7-0.9x, dW^T 0.9-1.05x)."""
        return self.group == 1 and dtype == np.float32

    def _groups(self, w2, a, rows):
        """Per group: the filter rows, the col row block of ``a`` and the map row block."""
        G = self.group
        Mg, Cg = self.M // G, a.shape[0] // G
        return [(w2[g * Mg:(g + 1) * Mg], a[g * Cg:(g + 1) * Cg], rows[g * Mg:(g + 1) * Mg]) for g in range(G)]

    # --- the pointwise products (no col) -----------------------------------------------------
    def _pointwise_operands(self, img, mp):
        """The image and the map as GEMM operands: per sample (B, C, O) and (B, M, O), or the
        batch's (B * O, C) and (B * O, M) channel-last."""
        if self.channel_last:
            return img.reshape(self.B * self.O, self.C), mp.reshape(self.B * self.O, self.M)
        return img.reshape(self.B, self.C, self.O), mp.reshape(self.B, self.M, self.O)

    def _start(self, out, bias, init):
        """Put the bias in ``out`` (a pointwise operand) when the product is to add to it."""
        if init == INIT_BIAS:
            out[...] = bias if self.channel_last else bias.reshape(-1, 1)
        return init != INIT_ZERO

    def _pointwise_to_map(self, img, w2, out_map, bias, init):
        x, y = self._pointwise_operands(img, out_map)
        add = self._start(y, bias, init)
        if self.channel_last:
            gemm(x, w2, y, trans_b=True, accumulate=add)
            return
        for b in range(self.B):
            gemm(w2, x[b], y[b], accumulate=add)

    def _pointwise_to_image(self, mp, w2, out_img, bias, init):
        x, y = self._pointwise_operands(out_img, mp)
        add = self._start(x, bias, init)
        if self.channel_last:
            gemm(y, w2, x, accumulate=add)
            return
        for b in range(self.B):
            gemm(w2, y[b], x[b], trans_a=True, accumulate=add)

    def _pointwise_filter_grad(self, img, mp, dw2, accumulate):
        x, y = self._pointwise_operands(img, mp)
        if self.channel_last:
            gemm(y, x, dw2, trans_a=True, accumulate=accumulate)
            return
        for b in range(self.B):
            gemm(y[b], x[b], dw2, trans_b=True, accumulate=accumulate or b > 0)

    # --- the products ----------------------------------------------------------------------
    def _tiled_takes(self, *arrays):
        return self.tiled is not None and self.tiled.takes(*(a for a in arrays if a is not None))

    def forget_col(self):
        """Drop the forward's col (its image may change before the next backward)."""
        self.col_of = None
        if self.tiled is not None:
            self.tiled.forget()

    def image_to_map(self, img, w, out_map, bias=None, init=INIT_ZERO, reuse_col=False, relu=False):
        """out_map = conv(img, w) (+ bias), or += with INIT_ADD. Returns whether it also applied
        ``relu`` (the tiled route does, sample by sample; the caller otherwise)."""
        if self._tiled_takes(img, w, out_map, bias) and self.tiled.image_to_map(img, w, out_map, bias, init, relu):
            self.col_of = None
            return True
        if self.pointwise:
            return self._pointwise_to_map(img, w.reshape(self.M, -1), out_map, bias, init)
        img2, map2, w2 = self.img2(img), self.map2(out_map), w.reshape(self.M, -1)
        bias_a = bias if bias is not None else np.zeros(0, img2.dtype)
        oriented = self._oriented(img2.dtype)
        by_position = oriented and self.C * self.K >= POSITION_MAJOR_DEPTH
        for b0, b1 in self._chunks():
            col = self._col(img, img2, b0, b1, reuse_col)
            if oriented and self.channel_last:   # the map is the (nb * O, M) product itself
                rows = map2[b0:b1].reshape(-1, self.M)
                gemm(col, w2, rows, trans_a=True, trans_b=True, accumulate=self._start(rows, bias, init))
                continue
            rows = self._buffer("rows", self.M, b1 - b0, img2.dtype)
            if by_position:   # col^T W^T (see POSITION_MAJOR_DEPTH)
                rows = rows.reshape(-1, self.M)
                gemm(col, w2, rows, trans_a=True, trans_b=True)
            else:
                for wg, cg, rg in self._groups(w2, col, rows):
                    gemm(wg, cg, rg)
            rows_to_map.for_size(rows.size)(rows, map2[b0:b1], bias_a, init, self.channel_last, by_position)

    def map_to_cols(self, mp, w):
        """Per batch chunk: (b0, b1, dcol) with dcol = W^T @ map rows, the col of conv^T(mp, w)."""
        map2, w2 = self.map2(mp), w.reshape(self.M, -1)
        oriented = self._oriented(map2.dtype)
        for b0, b1 in self._chunks():
            dcol = self._buffer("dcol", self.C * self.K, b1 - b0, map2.dtype)
            if oriented and self.channel_last:   # the map is (nb * O, M) rows already
                gemm(w2, map2[b0:b1].reshape(-1, self.M), dcol, trans_a=True, trans_b=True)
                yield b0, b1, dcol
                continue
            rows = self._buffer("rows", self.M, b1 - b0, map2.dtype)
            map_to_rows.for_size(rows.size)(map2[b0:b1], rows, self.channel_last)
            for wg, cg, rg in self._groups(w2, dcol, rows):
                gemm(wg, rg, cg, trans_a=True)
            yield b0, b1, dcol

    def map_to_image(self, mp, w, out_img, bias=None, init=INIT_ZERO):
        """out_img = conv^T(mp, w) (+ bias), or += with INIT_ADD."""
        if self._tiled_takes(mp, w, out_img, bias) and self.tiled.map_to_image(mp, w, out_img, bias, init):
            return
        if self.pointwise:
            return self._pointwise_to_image(mp, w.reshape(self.M, -1), out_img, bias, init)
        img2 = self.img2(out_img)
        bias_a = bias if bias is not None else np.zeros(0, img2.dtype)
        for b0, b1, dcol in self.map_to_cols(mp, w):
            col2im.for_size(dcol.size)(dcol, img2[b0:b1], bias_a, init, self.img_sp_a, self.map_sp_a,
                                       self.stride_a, self.koff, self.group, self.channel_last)

    def filter_grad(self, img, mp, out_w, accumulate=False, reuse_col=False, out_b=None, b_accumulate=False):
        """out_w (+)= the correlation of img and mp: the filter gradient when mp is dL/dmap; and
        out_b (+)= the per-channel sums of mp (the bias gradient), when given."""
        img2, map2, dw2 = self.img2(img), self.map2(mp), out_w.reshape(self.M, -1)
        if self._tiled_takes(img, mp, out_w, out_b) and self.tiled.filter_grad(
                img, mp, out_w, accumulate, out_b, b_accumulate, reuse_col):
            return
        if self.pointwise and self.B > 0:
            self._pointwise_filter_grad(img, mp, dw2, accumulate)
            if out_b is not None:
                bias_grad(map2, out_b, b_accumulate, self.channel_last)
            return
        # one group, few output channels: dW^T = col @ rows^T, then transposed (POSITION_MAJOR_CHANNELS)
        oriented = self._oriented(map2.dtype)
        transposed = oriented and self.M <= POSITION_MAJOR_CHANNELS
        if transposed:
            dwt = scratch("dwt", dw2.size, dw2.dtype)[:dw2.size].reshape(dw2.shape[1], dw2.shape[0])
        for i, (b0, b1) in enumerate(self._chunks()):
            col = self._col(img, img2, b0, b1, reuse_col)
            if oriented and self.channel_last:   # the map is (nb * O, M) rows already
                rows = map2[b0:b1].reshape(-1, self.M)
                if transposed:
                    gemm(col, rows, dwt, accumulate=i > 0)
                else:
                    gemm(rows, col, dw2, trans_a=True, trans_b=True, accumulate=accumulate or i > 0)
                if out_b is not None:
                    gemm(rows, self._ones(rows.shape[0], rows.dtype), out_b.reshape(-1, 1), trans_a=True,
                         accumulate=b_accumulate or i > 0)
                continue
            rows = self._buffer("rows", self.M, b1 - b0, map2.dtype)
            map_to_rows.for_size(rows.size)(map2[b0:b1], rows, self.channel_last)
            if transposed:
                gemm(col, rows, dwt, trans_b=True, accumulate=i > 0)
            else:
                for dwg, cg, rg in self._groups(dw2, col, rows):
                    gemm(rg, cg, dwg, trans_b=True, accumulate=accumulate or i > 0)
            if out_b is not None:   # rows @ ones: BLAS sums the rows
                gemm(rows, self._ones(rows.shape[1], rows.dtype), out_b.reshape(-1, 1),
                     accumulate=b_accumulate or i > 0)
        if self.B == 0:
            for out, acc in ((out_w, accumulate), (out_b, b_accumulate)):
                if out is not None and not acc:
                    out.fill(0)
        elif transposed:
            if accumulate:
                dw2 += dwt.T
            else:
                dw2[...] = dwt.T

    def _ones(self, n, dtype):
        """An (n, 1) column of ones (shared, like the scratch arrays)."""
        pool = _scratch.__dict__.setdefault("ones", {})
        ones = pool.get(np.dtype(dtype))
        if ones is None or ones.size < n:
            ones = pool[np.dtype(dtype)] = np.ones(n, dtype)
        return ones[:n].reshape(n, 1)


# ------------------------------------------------------------------------------ ops
def init_for_bias(bias):
    return INIT_BIAS if bias is not None else INIT_ZERO


class WinogradRoute:
    """A Convolution's forward and data gradient through ops/winograd.py, for float32 and
    float64 (other dtypes take im2col). Its filter tiles are kept across calls while the
    filter's values stay the same."""

    def __init__(self, geo, pad):
        B, C, M = geo.B, geo.C, geo.M
        self.geo = geo
        self.forward_plan = winograd.WinogradPlan(C, M, geo.img_sp, geo.map_sp, pad, B, COL_ELEMENTS)
        self.grad_plan = winograd.WinogradPlan(M, C, geo.map_sp, geo.img_sp, tuple(2 - p for p in pad), B,
                                               COL_ELEMENTS)
        self.filter = winograd.FilterTiles(flip=False)
        self.flipped = winograd.FilterTiles(flip=True)

    @staticmethod
    def takes(a):
        return a.dtype == np.float32 or a.dtype == np.float64

    def forward(self, x, w, y, bias, init):
        geo = self.geo
        geo.forget_col()   # no col was made: the filter gradient must not reuse an old one
        bias_a = bias if bias is not None else np.zeros(0, x.dtype)
        self.forward_plan.run(geo.img2(x), self.filter.of(w), geo.map2(y), bias_a, init, scratch)

    def data_grad(self, dy, w, dx, init):
        geo = self.geo
        self.grad_plan.run(geo.map2(dy), self.flipped.of(w), geo.img2(dx), np.zeros(0, dy.dtype), init,
                           scratch)


def winograd_route(geo, pad, stride, dilation, group, channel_last):
    """The Winograd route of a convolution where it applies and wins (else None)."""
    mode = winograd.mode()
    if (mode != "0" and len(geo.kernel) == 2
            and winograd.applies(geo.kernel, stride, dilation, pad, group, channel_last)
            and (mode == "force" or winograd.wins(geo.C, geo.M, *geo.img_sp))):
        return WinogradRoute(geo, tuple(pad))
    return None


class _ImageToMap(Op):
    """Ops whose input is the image and output the map (Convolution, DepthwiseConvolution)."""

    wino = None

    def forward(self, inputs, outputs):
        self.forward_fused(inputs, outputs, None, False)

    def forward_fused(self, inputs, outputs, z, relu):
        """The forward, through a ReLU when ``relu`` (``z`` must be None): the epilogue the
        executor gives a convolution whose output only a ReLU reads (``fusion.py``), where
        ``relu_epilogue`` says it costs no pass of its own."""
        bias, y = inputs[2] if len(inputs) > 2 else None, outputs[0]
        if self.wino is not None and self.wino.takes(inputs[0]) and inputs[1].dtype == inputs[0].dtype:
            self.wino.forward(inputs[0], inputs[1], y, bias, init_for_bias(bias))
        elif self.geo.image_to_map(inputs[0], inputs[1], y, bias, init_for_bias(bias), relu=relu):
            return   # the tiled route applied it sample by sample
        if relu:
            np.maximum(y, 0, out=y)

    def relu_epilogue(self, dtype):
        """Whether the forward applies a following ReLU as it writes (the tiled route)."""
        return self.wino is None and self.geo.tiled is not None and dtype == np.float32

    def grad_depends_input_data(self, i, j):
        return (i == 0 and j == 1) or (i == 1 and j == 0)

    def forget_forward(self):
        self.geo.forget_col()   # the col its backward would reuse


@register
class Convolution(_ImageToMap):
    """y = x * W (+ b) over the spatial dims after the channel axis."""

    def setup(self, x, w, b=None):
        self.geo = ConvGeometry(self, x, w, self.pad, self.stride, self.dilation, self.group,
                                self.channel_last, self.base_axis)
        check_bias(self, b, self.geo.M, w)
        self.wino = winograd_route(self.geo, self.pad, self.stride, self.dilation, self.group,
                                   self.channel_last)
        return [self.geo.map_shape]

    backward = convolution_backward


@register
class DepthwiseConvolution(_ImageToMap):
    """Each input channel convolved with ``multiplier`` filters of its own: W (C * multiplier,
    *kernel); output channel c * multiplier + j comes from input channel c."""

    def setup(self, x, w, b=None):
        _, C, spatial = split_layout(self, x, self.base_axis, False)
        if self.multiplier < 1 or len(w) != len(spatial) + 1 or w[0] != C * self.multiplier:
            self.fail("weight of shape {} must be ({}, *kernel) with {} kernel dims for input of shape "
                      "{} and multiplier {}", tuple(w), C * self.multiplier, len(spatial), tuple(x),
                      self.multiplier)
        self.geo = ConvGeometry(self, x, (w[0], 1) + tuple(w[1:]), self.pad, self.stride, self.dilation,
                                C, False, self.base_axis)
        check_bias(self, b, self.geo.M, w)
        return [self.geo.map_shape]

    backward = convolution_backward


class _MapToImage(Op):
    """Ops whose input is the map and output the image (Deconvolution and its depthwise twin)."""

    def forward(self, inputs, outputs):
        bias = inputs[2] if len(inputs) > 2 else None
        self.geo.map_to_image(inputs[0], inputs[1], outputs[0], bias, init_for_bias(bias))

    def grad_depends_input_data(self, i, j):
        return (i == 0 and j == 1) or (i == 1 and j == 0)

    def _geometry(self, x, w_view, group, channel_last, output_padding):
        """The geometry whose map is x; the image (output) shape comes from the arguments."""
        lead, IC, spatial = split_layout(self, x, self.base_axis, channel_last)
        D = len(spatial)
        check_spatial_args(self, D, pad=self.pad, stride=self.stride, dilation=self.dilation,
                           output_padding=output_padding)
        if min(spatial) < 1:
            self.fail("spatial dims {} of input shape {} must not be empty", spatial, tuple(x))
        if len(w_view) != D + 2 or w_view[0] != IC:
            self.fail("weight of shape {} does not fit input of shape {}: it must have {} dimensions "
                      "and {} rows (the input channels)", tuple(w_view), tuple(x), D + 2, IC)
        if group < 1 or IC % group:
            self.fail("input channels {} must be divisible by group {}", IC, group)
        for d in range(D):
            if output_padding[d] >= self.stride[d]:
                self.fail("output_padding {} must be smaller than stride {}", tuple(output_padding),
                          tuple(self.stride))
        kernel = w_view[1:-1] if channel_last else w_view[2:]
        OC = (w_view[-1] if channel_last else w_view[1]) * group
        out_sp = tuple(self.stride[d] * (spatial[d] - 1) - 2 * self.pad[d] + self.dilation[d] * (kernel[d] - 1)
                       + 1 + output_padding[d] for d in range(D))
        if min(out_sp) < 1:
            self.fail("no output: input {} with kernel {}, pad {}, stride {}, dilation {} gives spatial "
                      "size {}", tuple(x), tuple(kernel), tuple(self.pad), tuple(self.stride),
                      tuple(self.dilation), out_sp)
        return ConvGeometry(self, join_layout(lead, OC, out_sp, channel_last), w_view, self.pad, self.stride,
                            self.dilation, group, channel_last, self.base_axis)


@register
class Deconvolution(_MapToImage):
    """The transpose of Convolution: W (C_in, C_out / group, *kernel)."""

    def setup(self, x, w, b=None):
        self.geo = self._geometry(x, tuple(w), self.group, self.channel_last, self.output_padding)
        check_bias(self, b, self.geo.C, w)
        return [self.geo.img_shape]

    backward = deconvolution_backward


@register
class DepthwiseDeconvolution(_MapToImage):
    """The transpose of DepthwiseConvolution: W (C, *kernel); output channel c sums the
    input channels c * divisor ... (c + 1) * divisor - 1."""

    def setup(self, x, w, b=None):
        _, C, spatial = split_layout(self, x, self.base_axis, False)
        if self.divisor < 1 or C % self.divisor:
            self.fail("input channels {} (input shape {}) must be divisible by divisor {}", C, tuple(x),
                      self.divisor)
        if len(w) != len(spatial) + 1 or w[0] != C:
            self.fail("weight of shape {} must be ({}, *kernel) with {} kernel dims for input of shape {}",
                      tuple(w), C, len(spatial), tuple(x))
        zeros = (0,) * len(spatial)
        self.geo = self._geometry(x, (C, 1) + tuple(w[1:]), C // self.divisor, False, zeros)
        check_bias(self, b, self.geo.C, w)
        return [self.geo.img_shape]

    backward = deconvolution_backward
