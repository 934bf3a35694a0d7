"""The col rules and copy kernels of convolutions: im2col and its adjoint col2im, and the
transpositions between a map and its GEMM rows (``ops/convolution.py`` describes the products
they serve). The layout and col rules are ``@njit(inline="always")`` helpers that the CUDA
kernels (``cuda_ops/convolution.py``) compile from their ``py_func``.

Arrays reach the kernels flattened per sample: an image is (nb, C * S) with element (c, s) at
c * S + s, or s * C + c channel-last; a map likewise. Inner loops index with uint64: numba
skips its negative-index wraparound for unsigned ints, which lets LLVM vectorize the copies.
"""
import numpy as np
from numba import njit, prange, uint64

from .kernels import parallel_kernel

# How a kernel starts the array it writes: add into it, from zero, or from the bias.
INIT_ADD, INIT_ZERO, INIT_BIAS = 0, 1, 2


@njit(cache=True, inline="always")
def sample_strides(channels, size, channel_last):
    """(channel stride, position stride) of a flattened sample."""
    if channel_last:
        return 1, channels
    return size, 1


@njit(cache=True, inline="always")
def col_row(c, k, K, Cg, channel_last):
    """The col row of image channel ``c`` and kernel tap ``k`` (the filter's column order: c * K
    + k, or group by group tap-major channel-last); ``Cg`` channels per group."""
    if channel_last:
        g = c // Cg
        return g * K * Cg + k * Cg + (c - g * Cg)
    return c * K + k


@njit(cache=True, inline="always")
def col_entry(row, K, Cg, channel_last):
    """(c, k): the image channel and kernel tap of col row ``row`` (``col_row`` inverted)."""
    if channel_last:
        g = row // (K * Cg)
        rest = row - g * K * Cg
        k = rest // Cg
        return g * Cg + rest - k * Cg, k
    c = row // K
    return c, row - c * K


@njit(cache=True, inline="always")
def col_layout(img, col, img_sp, map_sp, stride, koff, group, channel_last):
    """What im2col and col2im read off their arguments: (nb, K, D, H, W, OH, OW, sh, sw, O, S, C,
    cs, ss, Cg, step) -- samples, taps, spatial dims, the last two dims of the image and the map
    and their strides, map positions and image positions per sample, channels, the sample
    strides, channels per group, and the image step between neighbouring map columns."""
    nb = img.shape[0]
    K, D = koff.shape
    O = col.shape[1] // nb if nb > 0 else 0
    S = 1
    for d in range(D):
        S *= img_sp[d]
    C = img.shape[1] // S
    cs, ss = sample_strides(C, S, channel_last)
    return (nb, K, D, img_sp[D - 2], img_sp[D - 1], map_sp[D - 2], map_sp[D - 1], stride[D - 2],
            stride[D - 1], O, S, C, cs, ss, C // group, stride[D - 1] * ss)


@njit(cache=True, inline="always")
def plane_digit(p, d, sp):
    """(p's coordinate along spatial dim d, what is left of p for the dims before d): how
    ``image_plane`` and the CUDA ``map_plane`` read a plane position (a flat position over the
    spatial dims before the last two), from its last dim. Dim 0 takes what is left whole: no
    division (int64 division is emulated on a GPU)."""
    if d == 0:
        return p, p
    rest = p // sp[d]
    return p - rest * sp[d], rest


@njit(cache=True, inline="always")
def image_plane(p, k, map_sp, img_sp, stride, koff):
    """Image position (flat, in H x W planes) of map plane ``p`` -- a position over the spatial
    dims before the last two -- at tap ``k``, and whether it lies in the image. The CUDA
    im2col compiles this rule too: the first dim takes no division (p is below its size there;
    int64 division is emulated on a GPU), none at all up to 3 spatial dims."""
    flat = 0
    mult = 1
    valid = True
    for d in range(len(map_sp) - 3, -1, -1):
        o_d, p = plane_digit(p, d, map_sp)
        i_d = o_d * stride[d] + koff[k, d]
        if i_d < 0 or i_d >= img_sp[d]:
            valid = False
        flat += i_d * mult
        mult *= img_sp[d]
    return flat, valid


@njit(cache=True, inline="always")
def valid_range(W, OW, sw, off):
    """The map positions ow in [lo, hi) whose image position ow * sw + off lies in [0, W)."""
    lo = 0 if off >= 0 else (-off + sw - 1) // sw
    hi = 0 if W - 1 - off < 0 else (W - 1 - off) // sw + 1
    hi = min(hi, OW)
    return min(lo, hi), hi


@parallel_kernel
def im2col(img, col, img_sp, map_sp, stride, koff, group, channel_last, taps):
    """col[row(c, k), b * O + o] = the image value under tap k of map position o (0 in the
    padding). Spatial dims are (..., H, W), at least two; ``koff[k, d]`` = tap offset - pad.
    ``taps`` (K, O), when not empty, holds the image position each tap reads at each map
    position (-1 in the padding): one gather per entry instead of row copies (NARROW_MAP)."""
    nb, K, D, H, W, OH, OW, sh, sw, O, S, C, cs, ss, Cg, step = col_layout(
        img, col, img_sp, map_sp, stride, koff, group, channel_last)
    for task in prange(C * K * nb):
        ck = task // nb
        b = task - ck * nb
        c = ck // K
        k = ck - c * K
        sample, out = img[b], col[col_row(c, k, K, Cg, channel_last)]
        if taps.shape[0] > 0:
            reads = taps[k]
            for o in range(O):
                at = reads[o]
                v = sample[uint64(c * cs + max(at, 0) * ss)]
                out[uint64(b * O + o)] = v if at >= 0 else 0.0
            continue
        offh, offw = koff[k, D - 2], koff[k, D - 1]
        hlo, hhi = valid_range(H, OH, sh, offh)
        wlo, whi = valid_range(W, OW, sw, offw)
        for p in range(O // (OH * OW)):
            plane, valid = image_plane(p, k, map_sp, img_sp, stride, koff)
            base = b * O + p * OH * OW
            for oh in range(OH):
                dst = base + oh * OW
                if not valid or oh < hlo or oh >= hhi:
                    for ow in range(OW):
                        out[uint64(dst + ow)] = 0.0
                    continue
                for ow in range(wlo):
                    out[uint64(dst + ow)] = 0.0
                src = c * cs + ((plane * H + oh * sh + offh) * W + wlo * sw + offw) * ss
                d0 = dst + wlo
                if step == 1:
                    for i in range(whi - wlo):
                        out[uint64(d0 + i)] = sample[uint64(src + i)]
                else:
                    for i in range(whi - wlo):
                        out[uint64(d0 + i)] = sample[uint64(src + i * step)]
                for ow in range(whi, OW):
                    out[uint64(dst + ow)] = 0.0


@parallel_kernel
def col2im(col, img, bias, init, img_sp, map_sp, stride, koff, group, channel_last):
    """The adjoint of im2col: every image position gets the sum of its col entries, added to
    its contents (INIT_ADD), to zero or to bias[c]."""
    nb, K, D, H, W, OH, OW, sh, sw, O, S, C, cs, ss, Cg, step = col_layout(
        img, col, img_sp, map_sp, stride, koff, group, channel_last)
    for task in prange(nb * C):
        b = task // C
        c = task - b * C
        sample = img[b]
        if init != INIT_ADD:
            v0 = bias[c] if init == INIT_BIAS else 0.0
            for s in range(S):
                sample[uint64(c * cs + s * ss)] = v0
        for k in range(K):
            row = col[col_row(c, k, K, Cg, channel_last)]
            offh, offw = koff[k, D - 2], koff[k, D - 1]
            hlo, hhi = valid_range(H, OH, sh, offh)
            wlo, whi = valid_range(W, OW, sw, offw)
            for p in range(O // (OH * OW)):
                plane, valid = image_plane(p, k, map_sp, img_sp, stride, koff)
                if not valid:
                    continue
                for oh in range(hlo, hhi):
                    src = b * O + (p * OH + oh) * OW + wlo
                    dst = c * cs + ((plane * H + oh * sh + offh) * W + wlo * sw + offw) * ss
                    if step == 1:
                        for i in range(whi - wlo):
                            sample[uint64(dst + i)] += row[uint64(src + i)]
                    else:
                        for i in range(whi - wlo):
                            sample[uint64(dst + i * step)] += row[uint64(src + i)]


@njit(cache=True, inline="always")
def rows_layout(mp, rows, channel_last, by_position):
    """(nb, M, O, ms, os, rs, ps): what rows_to_map and map_to_rows read off a map (nb, M * O)
    and its GEMM rows (M, nb * O), or (nb * O, M) ``by_position`` -- samples, channels,
    positions, the map's sample strides and the rows' (channel, position) strides."""
    nb = mp.shape[0]
    M = rows.shape[1] if by_position else rows.shape[0]
    O = rows.size // M // nb if nb > 0 and M > 0 else 0
    ms, os_ = sample_strides(M, O, channel_last)
    rs, ps = (1, M) if by_position else (nb * O, 1)
    return nb, M, O, ms, os_, rs, ps


@parallel_kernel
def rows_to_map(rows, mp, bias, init, channel_last, by_position):
    """mp (+)= rows (M, nb * O), or (nb * O, M) ``by_position``, laid out as a map (nb, M * O),
    or (nb, O * M) channel-last. Position-major rows are read in blocks of 16 positions (all
    channels of a block stay in L1: a transposition 2-3x faster than one position at a time)."""
    nb, M, O, ms, os_, rs, ps = rows_layout(mp, rows, channel_last, by_position)
    flat = rows.reshape(rows.size)
    block = 16 if by_position else max(O, 1)
    n_blocks = (O + block - 1) // block
    for task in prange(nb * n_blocks):
        b = task // n_blocks
        o0 = (task - b * n_blocks) * block
        o1 = min(O, o0 + block)
        dst = mp[b]
        for m in range(M):
            v0 = bias[m] if init == INIT_BIAS else 0.0
            for o in range(o0, o1):
                i = uint64(m * ms + o * os_)
                v = flat[uint64(m * rs + (b * O + o) * ps)] + v0
                dst[i] = dst[i] + v if init == INIT_ADD else v


@parallel_kernel
def map_to_rows(mp, rows, channel_last):
    """rows[m, b * O + o] = the map's element (m, o) of sample b."""
    nb, M, O, ms, os_, rs, ps = rows_layout(mp, rows, channel_last, False)
    for task in prange(nb * M):
        b = task // M
        m = task - b * M
        src, dst = mp[b], rows[m]
        for o in range(O):
            dst[uint64(b * O + o)] = src[uint64(m * ms + o * os_)]


def tap_reads(geo):
    """(K, O) int32: the flat image position tap k reads at map position o, -1 in the padding
    (im2col's ``taps``)."""
    at = np.array(list(np.ndindex(*geo.map_sp_a)), np.int64).reshape(-1, len(geo.map_sp_a))
    at = at[None] * geo.stride_a + geo.koff[:, None]   # (K, O, dims)
    inside = np.all((at >= 0) & (at < geo.img_sp_a), axis=2)
    flat = np.ravel_multi_index(tuple(np.moveaxis(np.clip(at, 0, geo.img_sp_a - 1), 2, 0)), tuple(geo.img_sp_a))
    return np.where(inside, flat, -1).astype(np.int32)
