"""Convolution with register tiles (``ops/tiles.py``), for the float32 layers where OpenBLAS's
GEMMs run far below the machine's peak.

The im2col route (``ops/convolution.py``) unrolls a whole batch into one col and hands it to
BLAS, which packs that col again before multiplying: for a layer of 16-128 output channels the
col is written, read, packed and read again, and the packing costs as much as the arithmetic.
Here the products run sample by sample on the tiles (R = C * K col rows: channels times
kernel taps; O map positions; a *part* is a run of samples one thread takes, or of output
channels when there are fewer samples than threads):

    map_b (M, O)   = W (M, R) @ col_b (R, O)          forward
    dx_b           = W^T (R, M) @ dy_b (M, O)         data gradient (through the col's adjoint)
    dW^T (R, M)   += col_b (R, O) @ dy_b^T (O, M)     filter gradient, a partial sum per part

*Implicit* (stride 1, ``implicit_plans``): the col is never written. Each sample is copied into
a padded image (C, Hp, Wp); row r = (c, kh, kw) of its col is then the padded image read from
``c * Hp * Wp + kh * dh * Wp + kw * dw`` on, if the map is computed over the *wide* positions
``oh * Wp + ow`` (the Wp - OW columns past each map row are computed and dropped). The tiles
find those rows through a table of offsets (``tiles.table_product``). The data gradient is the
same convolution of dy, padded by (kernel - 1) * dilation - pad, with the filter turned by 180
degrees and transposed; the filter gradient reads the col's rows as A's through the table and
dy^T, written at the wide positions with zeros between the rows, as B. Taken where at most
``IMPLICIT_WASTE`` wide positions are computed per map position.

*Sampled* (other layers small enough, ``_sampled``): each sample's col -- a few hundred KB at
most (``SAMPLE_COL_ELEMENTS``) -- is made in a per-thread buffer that stays in cache and
multiplied there; the data gradient adds the sample's dcol into its image. When the batch's
cols are small enough (``KEPT_COL_ELEMENTS``) the forward writes them into a buffer kept for the
filter gradient; without them the filter gradient takes the im2col route (it would make the
cols again, and a kernel with an im2col of its own costs a fresh machine another second of
compiling).

Taken by one-group, channel-first convolutions, in float32, on CPUs with AVX-512
(``tiles.FAST``); ``NNABLA_JIT_TILED_CONV=0`` turns both routes off.
"""
import os
import weakref

import numba
import numpy as np
from numba import njit, prange, uint64

from . import tiles
from .convolution_kernels import INIT_ADD, INIT_BIAS, INIT_ZERO, tap_reads, valid_range
from .kernels import parallel_kernel

# A sample's col up to this many elements (1 MB of float32: half of a core's L2 here) and a
# filter up to this many: above them the per-sample products lose to one batched BLAS GEMM
# (ResNet-18's stages 1, 3 and 4 measured 1.1-3x slower, benchmarks/README.md).
SAMPLE_COL_ELEMENTS = 1 << 18
FILTER_ELEMENTS = 1 << 18
# The forward keeps the batch's cols for the filter gradient up to this many elements (16 MB,
# twice the im2col route's bound: the BN CNN's 32 -> 64 layer keeps its 9.4 MB, 4-5% a step).
KEPT_COL_ELEMENTS = 1 << 22
# Implicit convolution (stride 1): where it computes at most this many wide positions per map
# position, or in any layer of at most SMALL_LAYER multiply-adds a call (well under a millisecond
# either way: there sharing the implicit kernels spares a first run compiling the sampled ones,
# the digits example's 4 x 4 layer), and its per-thread padded image and wide map hold at most
# IMPLICIT_ELEMENTS. (The data gradient of LeNet's conv2, waste 1.33, runs 0.83x the sampled
# route's; it stays implicit all the same: a first run then compiles neither the sampled kernels
# nor block_product.)
IMPLICIT_WASTE = 1.5
SMALL_LAYER = 1 << 24
IMPLICIT_ELEMENTS = 1 << 19
IMPLICIT_FILTER_ELEMENTS = 1 << 20


@njit(cache=True, inline="always")
def sample_col(sample, col, taps, K, S, plane, koff):
    """col (R, O) = the col of one sample (channel-first, one group): row c * K + k reads
    sample[c * S + taps[k, o]] (0 where -1) through im2col's table of tap reads, or, when
    ``taps`` is empty (maps 16 wide and more: copies beat a gather), copies rows of a 2-d
    sample; ``plane`` = (H, W, OH, OW, sh, sw), ``koff`` im2col's tap offsets (K, 2). im2col's
    own N-d body (planes, channel-last strides) would do the same and cost each kernel holding
    it another 0.6 s of compiling on a fresh machine (benchmarks/README.md)."""
    R, O = col.shape
    H, W, OH, OW, sh, sw = plane
    for r in range(R):
        c = r // K
        k = r - c * K
        row = col[r]
        if taps.shape[0] > 0:
            reads = taps[k]
            for o in range(O):
                i = reads[o]
                v = sample[uint64(c * S + max(i, 0))]
                row[o] = v if i >= 0 else 0.0
            continue
        offh, offw = koff[k, 0], koff[k, 1]
        hlo, hhi = valid_range(H, OH, sh, offh)
        wlo, whi = valid_range(W, OW, sw, offw)
        for oh in range(OH):
            dst = oh * OW
            if oh < hlo or oh >= hhi:
                for ow in range(OW):
                    row[dst + ow] = 0.0
                continue
            for ow in range(wlo):
                row[dst + ow] = 0.0
            src = c * S + (oh * sh + offh) * W + wlo * sw + offw
            for i in range(whi - wlo):
                row[uint64(dst + wlo + i)] = sample[uint64(src + i * sw)]
            for ow in range(whi, OW):
                row[dst + ow] = 0.0


@njit(cache=True, inline="always")
def add_sample_col(dcol, sample, taps, K, S):
    """sample[c * S + taps[k, o]] += dcol[c * K + k, o]: ``sample_col``'s adjoint (skipping -1)."""
    R, O = dcol.shape
    for r in range(R):
        c = r // K
        reads = taps[r - c * K]
        row = dcol[r]
        for o in range(O):
            i = reads[o]
            if i >= 0:
                sample[uint64(c * S + i)] += row[o]


@parallel_kernel
def tiled_image_to_map(img, w, mp, bias, init, relu, cols, keep, parts, taps, plane, koff):
    """mp (+)= conv(img, w) per sample, ``parts`` runs of samples: a sample's col into cols[b]
    (``keep``) or its part's cols[p], then W @ col by register tiles into the sample's map (the
    bias put there first with INIT_BIAS), through a ReLU when ``relu`` while it is in cache."""
    nb = img.shape[0]
    M, R = w.shape
    K = koff.shape[0]
    O = mp.shape[1] // M
    S = img.shape[1] // (R // K)
    w_flat = w.reshape(M * R)
    for p in prange(parts):
        for b in range(p * nb // parts, (p + 1) * nb // parts):
            col = cols[b] if keep else cols[p]
            sample_col(img[b], col.reshape(R, O), taps, K, S, plane, koff)
            y = mp[b]
            if init == INIT_BIAS:
                for m in range(M):
                    for o in range(O):
                        y[m * O + o] = bias[m]
            tiles.block_product(w_flat, 0, R, 1, col, 0, O, y, 0, O, M, O, R, init != INIT_ZERO)
            if relu:
                for i in range(M * O):
                    if y[i] < 0:
                        y[i] = 0.0


@parallel_kernel
def tiled_map_to_image(mp, w, img, bias, init, dcols, taps):
    """img (+)= conv^T(mp, w) per sample: W^T @ the sample's map rows by register tiles into
    the part's dcols[p], then added into the sample's image (zeroed or set to the bias first,
    except with INIT_ADD)."""
    nb = mp.shape[0]
    M, R = w.shape
    K, O = taps.shape
    C = R // K
    S = img.shape[1] // C
    parts = dcols.shape[0]
    w_flat = w.reshape(M * R)
    for p in prange(parts):
        dcol = dcols[p]
        for b in range(p * nb // parts, (p + 1) * nb // parts):
            tiles.block_product(w_flat, 0, 1, R, mp[b], 0, O, dcol, 0, O, R, O, M, False)
            x = img[b]
            if init != INIT_ADD:
                for c in range(C):
                    v0 = bias[c] if init == INIT_BIAS else 0.0
                    for s in range(S):
                        x[c * S + s] = v0
            add_sample_col(dcol.reshape(R, O), x, taps, K, S)


@parallel_kernel
def tiled_filter_grad(mp, cols, partial, rows_t, partial_b, want_b):
    """partial[p] (R, M) = the sum over part p's samples of col_b (R, O) @ dy_b^T, from the cols
    the forward kept; rows_t[p] holds the sample's dy_b^T (O, M). With ``want_b`` also
    partial_b[p] (M,) = the part's sums of dy per channel (the bias gradient), read off dy_b^T."""
    nb = mp.shape[0]
    parts, R, M = partial.shape
    O = mp.shape[1] // M
    for p in prange(parts):
        t = rows_t[p]
        out = partial[p].reshape(R * M)
        sums = partial_b[p]
        sums[:] = 0.0
        b0 = p * nb // parts
        for b in range(b0, (p + 1) * nb // parts):
            y = mp[b]
            for o0 in range(0, O, 16):   # in blocks of positions, so that the rows written stay in L1
                for m in range(M):
                    for o in range(o0, min(O, o0 + 16)):
                        t[o * M + m] = y[m * O + o]
            if want_b:
                for o in range(O):
                    for m in range(M):
                        sums[m] += t[o * M + m]
            tiles.block_product(cols[b], 0, O, 1, t, 0, M, out, 0, M, R, M, O, b > b0)


@njit(cache=True, inline="always")
def pad_sample(x, xp, plane):
    """The inside of the padded image xp (C, Hp, Wp) = the sample x (C, H, W); the border is
    left as it is (zeroed once by the caller: every sample writes the same positions)."""
    C, H, W, Hp, Wp, OH, OW, ph, pw, N = plane
    for c in range(C):
        for h in range(H):
            at = (c * Hp + h + ph) * Wp + pw
            for i in range(W):
                xp[at + i] = x[(c * H + h) * W + i]


@parallel_kernel
def implicit_convolution(src, w, out, bias, init, relu, rows, pads, wides, plane, by_channels):
    """out (+)= the stride-1 convolution of src (B, C * H * W) with w (M, R), sample by sample:
    the sample padded into its part's pads[p], W @ its implicit col (row r: the padded image
    from ``rows[r]`` on) by register tiles into the part's wides[p] (M, N) over the wide
    positions oh * Wp + ow, then the map's positions copied out (the bias added with
    INIT_BIAS, onto ``out`` with INIT_ADD, through a ReLU when ``relu``). A part is a run of
    samples, or with ``by_channels`` (fewer samples than threads) a run of output channels
    of every sample."""
    nb = src.shape[0]
    M, R = w.shape
    C, H, W, Hp, Wp, OH, OW, ph, pw, N = plane
    parts = pads.shape[0]
    w_flat = w.reshape(M * R)
    no_rows = np.zeros(0, np.int64)
    for p in prange(parts):
        xp = pads[p]
        wide = wides[p]
        xp[:] = 0.0
        b0, b1, m0, m1 = p * nb // parts, (p + 1) * nb // parts, 0, M
        if by_channels:
            b0, b1, m0, m1 = 0, nb, p * M // parts, (p + 1) * M // parts
        for b in range(b0, b1):
            pad_sample(src[b], xp, plane)
            tiles.table_product(w_flat[m0 * R:], no_rows, R, xp, rows, 0, wide, N, m1 - m0, N, R, False)
            y = out[b]
            for m in range(m0, m1):
                v0 = bias[m] if init == INIT_BIAS else np.float32(0.0)
                for oh in range(OH):
                    for ow in range(OW):
                        at = (m * OH + oh) * OW + ow
                        v = wide[(m - m0) * N + oh * Wp + ow] + v0
                        if init == INIT_ADD:
                            v += y[at]
                        if relu and v < 0:
                            v = np.float32(0.0)
                        y[at] = v


@parallel_kernel
def implicit_filter_grad(src, mp, partial, partial_b, want_b, rows, pads, wides, plane):
    """partial[p] (R, M) = the sum over part p's samples of the sample's implicit col (R, N)
    @ dy_b^T (N, M) over the wide positions: the sample padded into pads[p] as the forward
    does, dy_b^T written into wides[p] with zero rows at the wide positions past a map row
    (so they add nothing). With ``want_b`` also partial_b[p] (M,) = the part's sums of dy
    per channel (the bias gradient)."""
    nb = src.shape[0]
    parts, R, M = partial.shape
    C, H, W, Hp, Wp, OH, OW, ph, pw, N = plane
    no_rows = np.zeros(0, np.int64)
    for p in prange(parts):
        xp = pads[p]
        t = wides[p]
        out = partial[p].reshape(R * M)
        sums = partial_b[p]
        sums[:] = 0.0
        xp[:] = 0.0
        t[:] = 0.0
        b0 = p * nb // parts
        for b in range(b0, (p + 1) * nb // parts):
            pad_sample(src[b], xp, plane)
            y = mp[b]
            for oh in range(OH):   # a map row at a time, so that the rows written stay in L1
                for m in range(M):
                    for ow in range(OW):
                        t[(oh * Wp + ow) * M + m] = y[(m * OH + oh) * OW + ow]
            if want_b:
                for m in range(M):
                    for o in range(OH * OW):
                        sums[m] += y[m * OH * OW + o]
            tiles.table_product(xp, rows, 1, t, no_rows, M, out, M, R, M, N, b > b0)


def _store(out, total, accumulate):
    if accumulate:
        out += total
    else:
        out[...] = total


def enabled():
    return tiles.FAST and os.environ.get("NNABLA_JIT_TILED_CONV", "1") != "0"


class ImplicitPlan:
    """How ``implicit_convolution`` runs a stride-1 convolution of (C, H, W) images into
    (M, OH, OW) maps: the padded image (Hp, Wp), the wide positions N (oh * Wp + ow up to the
    last map position, rounded up to whole vectors: the columns past OW in each row are
    computed and dropped) and the col's row table (row c * K + k starts at the padded image's
    c * Hp * Wp + kh * dh * Wp + kw * dw)."""

    def __init__(self, C, M, img_hw, map_hw, kernel, dilation, pad):
        (H, W), (OH, OW), (KH, KW), (dh, dw), (ph, pw) = img_hw, map_hw, kernel, dilation, pad
        Hp, Wp = H + 2 * ph, W + 2 * pw
        N = -(-((OH - 1) * Wp + OW) // tiles.WIDTH) * tiles.WIDTH
        taps = np.array([kh * dh * Wp + kw * dw for kh in range(KH) for kw in range(KW)], np.int64)
        self.rows = (np.arange(C, dtype=np.int64)[:, None] * (Hp * Wp) + taps).ravel()
        self.pad_size = max(C * Hp * Wp, int(self.rows[-1]) + N)
        self.wide_size = M * N
        self.plane = tuple(int(v) for v in (C, H, W, Hp, Wp, OH, OW, ph, pw, N))
        self.waste = N / (OH * OW)   # products computed per map position

    def fits(self, filter_elements, macs):
        return ((self.waste <= IMPLICIT_WASTE or macs <= SMALL_LAYER)
                and self.pad_size + self.wide_size <= IMPLICIT_ELEMENTS
                and filter_elements <= IMPLICIT_FILTER_ELEMENTS)


def implicit_plans(geo):
    """(forward plan, data-gradient plan) of a stride-1, 1-d or 2-d geometry: each None where
    it does not apply or wins (``ImplicitPlan.fits``). The data gradient is the convolution of
    dy padded by (kernel - 1) * dilation - pad with the filter turned by 180 degrees and
    transposed, which needs that padding to be at least 0."""
    if len(geo.img_sp) > 2 or max(geo.stride) != 1:
        return None, None
    fill = (1,) * (2 - len(geo.img_sp))
    kernel, dilation = fill + geo.kernel, fill + geo.dilation
    pad = (0,) * len(fill) + geo.pad
    img_hw, map_hw = tuple(geo.img_sp_a[-2:]), tuple(geo.map_sp_a[-2:])
    filter_elements = geo.M * geo.C * geo.K
    macs = geo.B * filter_elements * geo.O
    forward = ImplicitPlan(geo.C, geo.M, img_hw, map_hw, kernel, dilation, pad)
    grad_pad = tuple((k - 1) * d - p for k, d, p in zip(kernel, dilation, pad))
    grad = None
    if min(grad_pad) >= 0:
        grad = ImplicitPlan(geo.M, geo.C, map_hw, img_hw, kernel, dilation, grad_pad)
    return (forward if forward.fits(filter_elements, macs) else None,
            grad if grad is not None and grad.fits(filter_elements, macs) else None)


def _sampled(geo):
    """Whether the products sample by sample over a col made in cache apply (``tiled_*``)."""
    return geo.C * geo.K * geo.O <= SAMPLE_COL_ELEMENTS and geo.M * geo.C * geo.K <= FILTER_ELEMENTS


class TiledRoute:
    """A ConvGeometry's products by register tiles (float32 calls; the geometry keeps the rest):
    the forward and the data gradient of stride-1 layers by ``implicit_convolution``, others by
    ``tiled_image_to_map`` / ``tiled_map_to_image`` where ``_sampled``; the filter gradient by
    ``tiled_filter_grad`` where the filter fits (FILTER_ELEMENTS). Each method returns None
    where it does not apply (the geometry's im2col route then runs)."""

    def __init__(self, geo, scratch):
        self.geo = geo
        self.scratch = scratch   # the geometry's per-thread work arrays
        self.R = geo.C * geo.K
        self.taps = geo.taps if geo.taps.size else tap_reads(geo)   # (K, O) image positions, -1 padding
        # the forward copies rows of 2-d samples on wide maps (im2col's NARROW_MAP rule)
        flat = len(geo.img_sp_a) == 2
        self.forward_taps = geo.taps if flat else self.taps
        self.plane = tuple(int(v) for v in (*geo.img_sp_a[-2:], *geo.map_sp_a[-2:], *geo.stride_a[-2:]))
        self.koff = np.ascontiguousarray(geo.koff[:, -2:])
        self.forward_plan, self.grad_plan = implicit_plans(geo)
        self.sampled = _sampled(geo)
        self.keeps = self.forward_plan is None and geo.B * self.R * geo.O <= KEPT_COL_ELEMENTS
        self.kept = None      # (B, R * O): the last forward's cols, when it keeps them
        self.kept_of = None   # a weak reference to the image they came from

    @staticmethod
    def applies(geo):
        return (enabled() and geo.group == 1 and not geo.channel_last and not geo.col_is_image
                and geo.B > 0 and (_sampled(geo) or implicit_plans(geo)[0] is not None))

    @staticmethod
    def takes(*arrays):
        return all(a.dtype == np.float32 for a in arrays)

    def _variant(self, kernel):
        """The variant for this layer's work and how many parts (one per thread) it takes."""
        work = self.geo.B * self.R * self.geo.O
        variant = kernel.for_size(work)
        parts = min(self.geo.B, numba.get_num_threads()) if variant is kernel.parallel else 1
        return variant, parts

    def _work(self, name, rows, size, dtype):
        return self.scratch(name, rows * size, dtype)[:rows * size].reshape(rows, size)

    def _implicit(self, plan, src, w2, out, bias, init, relu):
        kernel, parts = self._variant(implicit_convolution)
        by_channels = kernel is implicit_convolution.parallel and parts < numba.get_num_threads()
        if by_channels:   # fewer samples than threads: each thread takes some output channels
            parts = min(numba.get_num_threads(), w2.shape[0])
        bias_a = bias if bias is not None else np.zeros(0, np.float32)
        kernel(src, w2, out, bias_a, init, relu, plan.rows, self._work("col", parts, plan.pad_size, np.float32),
               self._work("rows", parts, plan.wide_size, np.float32), plan.plane, by_channels)
        return True

    def image_to_map(self, img, w, out_map, bias, init, relu=False):
        geo = self.geo
        self.kept_of = None
        if self.forward_plan is not None:
            return self._implicit(self.forward_plan, geo.img2(img), w.reshape(geo.M, self.R), geo.map2(out_map),
                                  bias, init, relu)
        if not self.sampled:
            return None
        kernel, parts = self._variant(tiled_image_to_map)
        if self.keeps:
            if self.kept is None:
                self.kept = np.empty((geo.B, self.R * geo.O), np.float32)
            cols, self.kept_of = self.kept, weakref.ref(img)
        else:
            cols = self._work("col", parts, self.R * geo.O, np.float32)
        bias_a = bias if bias is not None else np.zeros(0, np.float32)
        kernel(geo.img2(img), w.reshape(geo.M, self.R), geo.map2(out_map), bias_a, init, relu, cols, self.keeps, parts,
               self.forward_taps, self.plane, self.koff)
        return True

    def map_to_image(self, mp, w, out_img, bias, init):
        geo = self.geo
        if self.grad_plan is not None:   # the filter turned by 180 degrees, as (C, M * K)
            flipped = w.reshape(geo.M, geo.C, -1)[:, :, ::-1].transpose(1, 0, 2)
            w2 = np.ascontiguousarray(flipped).reshape(geo.C, geo.M * geo.K)
            return self._implicit(self.grad_plan, geo.map2(mp), w2, geo.img2(out_img), bias, init, False)
        if not self.sampled:
            return None
        kernel, parts = self._variant(tiled_map_to_image)
        bias_a = bias if bias is not None else np.zeros(0, np.float32)
        kernel(geo.map2(mp), w.reshape(geo.M, self.R), geo.img2(out_img), bias_a, init,
               self._work("col", parts, self.R * geo.O, np.float32), self.taps)
        return True

    def filter_grad(self, img, mp, out_w, accumulate, out_b, b_accumulate, reuse_col):
        """out_w (+)= the filter gradient, and out_b (+)= the bias gradient (the channel sums of
        ``mp``) when given: from the forward's kept cols where it kept those of this very
        image, else implicitly where the forward is implicit and the filter fits."""
        geo = self.geo
        if reuse_col and self.kept_of is not None and self.kept_of() is img:
            kernel, parts = self._variant(tiled_filter_grad)
            partial = self._work("dwt", parts, self.R * geo.M, np.float32).reshape(parts, self.R, geo.M)
            rows_t = self._work("rows", parts, geo.O * geo.M, np.float32)
            sums = self._work("channel_sums", parts, geo.M, np.float64)
            kernel(geo.map2(mp), self.kept, partial, rows_t, sums, out_b is not None)
        elif self.forward_plan is not None and geo.M * self.R <= FILTER_ELEMENTS:
            plan = self.forward_plan
            kernel, parts = self._variant(implicit_filter_grad)
            partial = self._work("dwt", parts, self.R * geo.M, np.float32).reshape(parts, self.R, geo.M)
            sums = self._work("channel_sums", parts, geo.M, np.float64)
            kernel(geo.img2(img), geo.map2(mp), partial, sums, out_b is not None, plan.rows,
                   self._work("col", parts, plan.pad_size, np.float32),
                   self._work("rows", parts, plan.wide_size, np.float32), plan.plane)
        else:
            return None
        self._store_grads(partial, sums, out_w, accumulate, out_b, b_accumulate)
        return True

    def _store_grads(self, partial, sums, out_w, accumulate, out_b, b_accumulate):
        """The parts' partial products and channel sums summed into the gradients."""
        _store(out_w.reshape(self.geo.M, self.R), partial.sum(axis=0).T, accumulate)
        if out_b is not None:
            _store(out_b, sums.sum(axis=0), b_accumulate)

    def forget(self):
        self.kept_of = None
