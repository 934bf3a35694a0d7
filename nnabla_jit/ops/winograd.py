"""Winograd F(2x2, 3x3): 3x3 stride-1 convolutions with 16 multiplies per 2x2 output tile
instead of 36 (Lavin & Gray, 2015).

The image is cut into overlapping 4x4 tiles (stride 2); each tile ``d`` becomes ``B^T d B``, each
3x3 filter ``g`` becomes ``G g G^T``, and a 2x2 output tile is ``A^T [(G g G^T) * (B^T d B)] A``
summed over input channels. The sum over channels of the element-wise products is, for each of
the 16 tile positions, one matrix product

    Mt[xi] (M, tiles) = U[xi] (M, C) @ V[xi] (C, tiles)

which goes through BLAS like im2col's. The transforms are short loops over tiles.

The data gradient of a 3x3 stride-1 convolution with padding p is the same convolution of dy
with the filter flipped in space and transposed (M <-> C) and padding 2 - p, so it runs through
the same plan. Filter transforms are kept with a copy of the filter they came from and redone
only when the filter's values changed (once per step in training, once in inference).

Used by Convolution (ops/convolution.py) where :func:`wins` says it beats im2col + GEMM.
"""
import os

import numpy as np
from numba import njit, prange, uint64

from .blas import gemm
from .kernels import parallel_kernel

POSITIONS = 16   # of a 4x4 input tile, each one GEMM
INIT_ADD, INIT_ZERO, INIT_BIAS = 0, 1, 2   # as ops/convolution.py's (which imports this module)


def mode():
    """NNABLA_JIT_WINOGRAD (read at each op's setup): "1" takes the Winograd route where
    :func:`wins`, "force" for every convolution it applies to (to measure and test it), anything
    else (the default, "0") keeps im2col. Off by default: its measured gain on ResNet-18 training
    (about 8%, within the noise of the sitting) does not pay for the filter transforms it keeps
    (about 70 MB over ResNet-18's stages 1-3), while the peak-memory target is not met."""
    return os.environ.get("NNABLA_JIT_WINOGRAD", "0")


def applies(kernel, stride, dilation, pad, group, channel_last):
    """Whether the convolution is one this module computes: 2-d, 3x3, stride 1, dilation 1,
    one group, channel-first, padding at most 2 (the data gradient's padding is 2 - pad)."""
    return (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and group == 1 and not channel_last and all(0 <= p <= 2 for p in pad))


def wins(in_channels, out_channels, height, width):
    """The shape rule: where the Winograd route measured faster than im2col + GEMM in training
    (forward + backward) as well as in inference (benchmarks/README.md, "Winograd F(2x2,3x3)"):
    ResNet-18's 3x3 layers on 32x32 to 8x8 maps. With few channels or small maps the 16 GEMMs
    are too thin and the transforms dominate (an RGB input layer ran 3-7x slower), and the
    filter gradient, which stays on im2col, can no longer reuse the forward's col."""
    return (in_channels >= 64 and out_channels >= 64 and width >= 8
            and in_channels * height * width >= 16384)


# ------------------------------------------------------------------------------ kernels
@njit(cache=True)
def same_values(a, b):
    """Whether flat arrays a and b hold the same values (NaN differs from everything)."""
    for i in range(a.size):
        if a[uint64(i)] != b[uint64(i)]:
            return False
    return True


@parallel_kernel
def filter_tiles(w, U, flip):
    """U[xi, m, c] = (G g G^T)[xi] for the 3x3 filter g = w[m, c] (w is (M, C, 3, 3)); with
    ``flip``, U[xi, c, m] from g = w[m, c] turned by 180 degrees (the data gradient's filter)."""
    M, C = w.shape[0], w.shape[1]
    for task in prange(M * C):
        m = task // C
        c = task - m * C
        g = w[m, c]
        t = np.empty((4, 3), w.dtype)   # G g
        for j in range(3):
            jj = 2 - j if flip else j
            g0 = g[2, jj] if flip else g[0, jj]
            g1 = g[1, jj]
            g2 = g[0, jj] if flip else g[2, jj]
            t[0, j] = g0
            t[1, j] = 0.5 * (g0 + g1 + g2)
            t[2, j] = 0.5 * (g0 - g1 + g2)
            t[3, j] = g2
        for i in range(4):
            u0, u1, u2 = t[i, 0], t[i, 1], t[i, 2]
            r, s = (c, m) if flip else (m, c)
            U[i * 4 + 0, r, s] = u0
            U[i * 4 + 1, r, s] = 0.5 * (u0 + u1 + u2)
            U[i * 4 + 2, r, s] = 0.5 * (u0 - u1 + u2)
            U[i * 4 + 3, r, s] = u2


@parallel_kernel
def image_tiles(img, V, H, W, pad_h, pad_w, tiles_h, tiles_w):
    """V[xi, c, b * T + t] = (B^T d B)[xi] for the 4x4 image tile d of tile t (T = tiles_h *
    tiles_w, tile (ty, tx) starting at image row 2 ty - pad_h, column 2 tx - pad_w; 0 outside).
    img is (nb, C * H * W). A tile row's four image rows are first copied into a zero-padded
    buffer, so that the loop over the tiles has no bounds tests and vectorizes."""
    nb = img.shape[0]
    C = V.shape[1]
    T = tiles_h * tiles_w
    width = 2 * tiles_w + 2
    for task in prange(C * nb):
        c = task // nb
        b = task - c * nb
        sample = img[b]
        base = c * H * W
        rows = np.zeros((4, width), img.dtype)
        comb = np.empty((4, width), img.dtype)
        xlo = max(0, pad_w)
        xhi = min(width, W + pad_w)
        for ty in range(tiles_h):
            for i in range(4):
                y = 2 * ty - pad_h + i
                r = rows[i]
                if y < 0 or y >= H:
                    r[:] = 0.0
                    continue
                src = base + y * W - pad_w
                for x in range(xhi, width):
                    r[uint64(x)] = 0.0
                for x in range(xlo, xhi):
                    r[uint64(x)] = sample[uint64(src + x)]
            # B^T d: the tile rows combined (whole buffer rows at once), then (B^T d) B: the
            # columns of each tile combined. (Indexing V directly: views of V made per tile
            # row, and one loop per V row, were 14x slower.)
            r0, r1, r2, r3 = rows[0], rows[1], rows[2], rows[3]
            for x in range(width):
                k = uint64(x)
                u0, u1, u2, u3 = r0[k], r1[k], r2[k], r3[k]
                comb[0, k] = u0 - u2
                comb[1, k] = u1 + u2
                comb[2, k] = u2 - u1
                comb[3, k] = u1 - u3
            col0 = b * T + ty * tiles_w
            for i in range(4):
                e = comb[i]
                for tx in range(tiles_w):
                    x = 2 * tx
                    e0, e1, e2, e3 = e[uint64(x)], e[uint64(x + 1)], e[uint64(x + 2)], e[uint64(x + 3)]
                    k = uint64(col0 + tx)
                    V[4 * i, c, k] = e0 - e2
                    V[4 * i + 1, c, k] = e1 + e2
                    V[4 * i + 2, c, k] = e2 - e1
                    V[4 * i + 3, c, k] = e1 - e3


@parallel_kernel
def map_tiles(Mt, out, bias, init, OH, OW, tiles_h, tiles_w):
    """out[b, m, 2 ty + i, 2 tx + j] (+)= (A^T Mt[:, m, b * T + t] A)[i, j] (+ bias[m]) for the
    positions inside the map; out is (nb, M * OH * OW). The tiles of a sample are made in one
    loop (it vectorizes; a loop per tile row was slow on small maps), then written in place.
    Tasks go channel by channel so that neighbouring tasks read neighbouring Mt columns."""
    nb = out.shape[0]
    M = Mt.shape[1]
    T = tiles_h * tiles_w
    for task in prange(nb * M):
        m = task // nb
        b = task - m * nb
        dst = out[b]
        base = m * OH * OW
        v0 = bias[m] if init == INIT_BIAS else 0.0
        q = np.empty((4, T), Mt.dtype)   # output (i, j) of each tile in row 2 i + j
        col0 = b * T
        for t in range(T):
            k = uint64(col0 + t)
            # A^T Mt: rows 0 + 1 + 2 and 1 - 2 - 3 of the tile; then the same on columns
            s0 = Mt[0, m, k] + Mt[4, m, k] + Mt[8, m, k]
            s1 = Mt[1, m, k] + Mt[5, m, k] + Mt[9, m, k]
            s2 = Mt[2, m, k] + Mt[6, m, k] + Mt[10, m, k]
            s3 = Mt[3, m, k] + Mt[7, m, k] + Mt[11, m, k]
            t0 = Mt[4, m, k] - Mt[8, m, k] - Mt[12, m, k]
            t1 = Mt[5, m, k] - Mt[9, m, k] - Mt[13, m, k]
            t2 = Mt[6, m, k] - Mt[10, m, k] - Mt[14, m, k]
            t3 = Mt[7, m, k] - Mt[11, m, k] - Mt[15, m, k]
            u = uint64(t)
            q[0, u] = s0 + s1 + s2 + v0
            q[1, u] = s1 - s2 - s3 + v0
            q[2, u] = t0 + t1 + t2 + v0
            q[3, u] = t1 - t2 - t3 + v0
        for y in range(OH):
            ty = y // 2
            i = y - 2 * ty
            even, odd = q[2 * i], q[2 * i + 1]
            at = base + y * OW
            for x in range(OW):
                tx = x // 2
                v = odd[uint64(ty * tiles_w + tx)] if x - 2 * tx else even[uint64(ty * tiles_w + tx)]
                if init == INIT_ADD:
                    dst[uint64(at + x)] += v
                else:
                    dst[uint64(at + x)] = v


# ------------------------------------------------------------------------------ plans
class FilterTiles:
    """U of one filter, redone only when the filter's values change (a copy tells)."""

    def __init__(self, flip):
        self.flip = flip
        self.seen = None
        self.U = None

    def of(self, w):
        M, C = w.shape[0], w.shape[1]
        flat = w.reshape(-1)
        if (self.seen is None or self.seen.dtype != w.dtype
                or not same_values(flat, self.seen)):
            rows, cols = (C, M) if self.flip else (M, C)
            if self.U is None or self.U.dtype != w.dtype:
                self.U = np.empty((POSITIONS, rows, cols), w.dtype)
            filter_tiles.for_size(w.size * 8)(w.reshape(M, C, 3, 3), self.U, self.flip)
            self.seen = flat.copy()
        return self.U


class WinogradPlan:
    """A 3x3 stride-1 convolution from an image (nb, C, H, W) to a map (nb, M, OH, OW) with
    padding ``pad``, in batch chunks whose work arrays stay under ``max_elements``."""

    def __init__(self, C, M, in_sp, out_sp, pad, batch, max_elements):
        self.C, self.M = C, M
        self.H, self.W = in_sp
        self.OH, self.OW = out_sp
        self.pad_h, self.pad_w = pad
        self.tiles_h, self.tiles_w = (self.OH + 1) // 2, (self.OW + 1) // 2
        self.T = self.tiles_h * self.tiles_w
        self.batch = batch
        self.chunk = max(1, min(batch, max_elements // max(1, POSITIONS * max(C, M) * self.T)))

    def run(self, img2, U, out2, bias, init, buffer):
        """out2 = conv(img2) with filter tiles U (16, M, C); ``buffer(name, size, dtype)`` gives
        flat work arrays."""
        dtype = img2.dtype
        for b0 in range(0, self.batch, self.chunk):
            b1 = min(self.batch, b0 + self.chunk)
            cols = (b1 - b0) * self.T
            V = buffer("winograd_v", POSITIONS * self.C * cols, dtype)[:POSITIONS * self.C * cols]
            V = V.reshape(POSITIONS, self.C, cols)
            Mt = buffer("winograd_m", POSITIONS * self.M * cols, dtype)[:POSITIONS * self.M * cols]
            Mt = Mt.reshape(POSITIONS, self.M, cols)
            image_tiles.for_size(V.size)(img2[b0:b1], V, self.H, self.W, self.pad_h, self.pad_w,
                                         self.tiles_h, self.tiles_w)
            for xi in range(POSITIONS):
                gemm(U[xi], V[xi], Mt[xi])
            map_tiles.for_size(Mt.size)(Mt, out2[b0:b1], bias, init, self.OH, self.OW,
                                        self.tiles_h, self.tiles_w)
