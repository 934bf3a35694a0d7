"""Convolution sample by sample with register tiles (``ops/tiles.py``), for the float32 layers
where OpenBLAS's GEMMs run far below the machine's peak.

The im2col route (``ops/convolution.py``) unrolls a whole batch into one col and hands it to
BLAS, which packs that col again before multiplying: for a layer of 16-128 output channels the
col is written, read, packed and read again, and the packing costs as much as the arithmetic.
Here each sample's col -- a few hundred KB at most (``SAMPLE_COL_ELEMENTS``) -- is made in a
per-thread buffer that stays in cache, and the product runs on it in place:

    map_b (M, O)   = W (M, R) @ col_b (R, O)          forward, straight into the map
    dcol_b (R, O)  = W^T (R, M) @ dy_b (M, O)         data gradient, added into the sample's image
    dW^T (R, M)   += col_b (R, O) @ dy_b^T (O, M)     filter gradient, a partial sum per part

(R = C * K rows: channels times kernel taps; O map positions.) A *part* is a run of samples one
thread takes; the filter gradient sums the parts' partial products at the end. When the
batch's cols are small enough (``KEPT_COL_ELEMENTS``) the forward writes them into a buffer
kept for the filter gradient; without them the filter
gradient takes the im2col route (it would make the cols again, and a kernel with an im2col of
its own costs a fresh machine another second of compiling).

Taken by one-group, channel-first convolutions (any padding, stride, dilation, spatial dims)
whose sample col and filter fit ``SAMPLE_COL_ELEMENTS`` and ``FILTER_ELEMENTS``, in float32, on
CPUs with AVX-512 (``tiles.FAST``); ``NNABLA_JIT_TILED_CONV=0`` turns it off.
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


def _store(out, total, accumulate):
    if accumulate:
        out += total
    else:
        out[...] = total


def enabled():
    return tiles.FAST and os.environ.get("NNABLA_JIT_TILED_CONV", "1") != "0"


class TiledRoute:
    """A ConvGeometry's products by ``tiled_*`` (float32 calls; the geometry keeps the rest)."""

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
        self.keeps = geo.B * self.R * geo.O <= KEPT_COL_ELEMENTS
        self.kept = None      # (B, R * O): the last forward's cols, when it keeps them
        self.kept_of = None   # a weak reference to the image they came from

    @staticmethod
    def applies(geo):
        return (enabled() and geo.group == 1 and not geo.channel_last and not geo.col_is_image
                and geo.B > 0 and geo.C * geo.K * geo.O <= SAMPLE_COL_ELEMENTS
                and geo.M * geo.C * geo.K <= FILTER_ELEMENTS)

    @staticmethod
    def takes(*arrays):
        return all(a.dtype == np.float32 for a in arrays)

    def _variant(self, kernel):
        """The variant for this layer's work and how many parts (one per thread) it takes."""
        work = self.geo.B * self.R * self.geo.O
        variant = kernel.for_size(work)
        parts = min(self.geo.B, numba.get_num_threads()) if variant is kernel.parallel else 1
        return variant, parts

    def _work(self, name, rows, dtype):
        size = rows * self.R * self.geo.O
        return self.scratch(name, size, dtype)[:size].reshape(rows, self.R * self.geo.O)

    def image_to_map(self, img, w, out_map, bias, init, relu=False):
        geo = self.geo
        kernel, parts = self._variant(tiled_image_to_map)
        if self.keeps:
            if self.kept is None:
                self.kept = np.empty((geo.B, self.R * geo.O), np.float32)
            cols, self.kept_of = self.kept, weakref.ref(img)
        else:
            cols, self.kept_of = self._work("col", parts, np.float32), None
        bias_a = bias if bias is not None else np.zeros(0, np.float32)
        kernel(geo.img2(img), w.reshape(geo.M, self.R), geo.map2(out_map), bias_a, init, relu, cols, self.keeps, parts,
               self.forward_taps, self.plane, self.koff)

    def map_to_image(self, mp, w, out_img, bias, init):
        geo = self.geo
        kernel, parts = self._variant(tiled_map_to_image)
        bias_a = bias if bias is not None else np.zeros(0, np.float32)
        kernel(geo.map2(mp), w.reshape(geo.M, self.R), geo.img2(out_img), bias_a, init,
               self._work("col", parts, np.float32), self.taps)

    def has_cols(self, img, reuse_col):
        """Whether the filter gradient can read the forward's cols (of this very image)."""
        return reuse_col and self.kept_of is not None and self.kept_of() is img

    def filter_grad(self, mp, out_w, accumulate, out_b, b_accumulate):
        """out_w (+)= the filter gradient from the kept cols (``has_cols``), and out_b (+)= the
        bias gradient (the channel sums of ``mp``) when given."""
        geo = self.geo
        kernel, parts = self._variant(tiled_filter_grad)
        partial = self.scratch("dwt", parts * self.R * geo.M, np.float32)[:parts * self.R * geo.M]
        partial = partial.reshape(parts, self.R, geo.M)
        rows_t = self.scratch("rows", parts * geo.O * geo.M, np.float32)[:parts * geo.O * geo.M]
        sums = self.scratch("channel_sums", parts * geo.M, np.float64)[:parts * geo.M].reshape(parts, geo.M)
        kernel(geo.map2(mp), self.kept, partial, rows_t.reshape(parts, geo.O * geo.M), sums, out_b is not None)
        _store(out_w.reshape(geo.M, self.R), partial.sum(axis=0).T, accumulate)
        if out_b is not None:
            _store(out_b, sums.sum(axis=0), b_accumulate)

    def forget(self):
        self.kept_of = None
