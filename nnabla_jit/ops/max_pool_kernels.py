"""The CPU kernel that finds MaxPooling's winners (the max of each window and its position) in
channel-first samples (C == 1 in ``pooling_geometry.py``'s (D, H, W, C) view).

A window wholly inside the input -- every window of an unpadded pooling but the partial ones at
the end -- has the kernel's full extent, so its loops need no table, and for 2x2 and 3x3 kernels
they are written out with constant sizes (``_full_windows``): LLVM then vectorizes the loop over
a row of outputs (a 2x2 pooling of x[32, 32, 32, 32] took 2.0 ms of one core through the tables'
loops, 0.53 ms here; a copy of its 4 MB takes 0.30 ms). The clipped windows at the borders take
the geometry's ``window_max``. Ties go to the first element in (d, h, w) order, as in
``window_max``: each step keeps the earlier element unless the later one is larger. Channel-last
samples (C > 1) keep ``pooling.py``'s ``pool_forward``.
"""
from numba import njit, prange, uint64

from .kernels import parallel_kernel
from .pooling_geometry import HI, LO, NEAR, window_max


@njit(cache=True, inline="always")
def _keep_larger(xs, p, best, pos):
    """(best, pos) after looking at element p."""
    v = xs[uint64(p)]
    if v > best:
        return v, p
    return best, pos


@njit(cache=True, inline="always")
def _plane_max(xs, start, W, KH, KW, best, pos):
    """(best, pos) after the KH x KW window of one plane whose first element is ``start``."""
    for kh in range(KH):
        for kw in range(KW):
            best, pos = _keep_larger(xs, start + kh * W + kw, best, pos)
    return best, pos


@njit(cache=True, inline="always")
def _window_2x2(xs, start, W):
    """(max, position) of the 2 x 2 window of one plane whose first element is ``start``."""
    best, pos = _keep_larger(xs, start + 1, xs[uint64(start)], start)
    best, pos = _keep_larger(xs, start + W, best, pos)
    return _keep_larger(xs, start + W + 1, best, pos)


@njit(cache=True, inline="always")
def _window_3x3(xs, start, W):
    """(max, position) of the 3 x 3 window of one plane whose first element is ``start``."""
    best, pos = _keep_larger(xs, start + 1, xs[uint64(start)], start)
    best, pos = _keep_larger(xs, start + 2, best, pos)
    best, pos = _keep_larger(xs, start + W, best, pos)
    best, pos = _keep_larger(xs, start + W + 1, best, pos)
    best, pos = _keep_larger(xs, start + W + 2, best, pos)
    best, pos = _keep_larger(xs, start + 2 * W, best, pos)
    best, pos = _keep_larger(xs, start + 2 * W + 1, best, pos)
    return _keep_larger(xs, start + 2 * W + 2, best, pos)


@njit(cache=True, inline="always")
def _clipped_window(xs, ys, ix, out, H, W, d_lo, d_hi, h_lo, h_hi, ww, ow, near):
    """y and index of output ``out``, window ``ow`` of its row, through the window tables."""
    best, pos = window_max(xs, 0, 1, H, W, d_lo, d_hi, h_lo, h_hi, ww[LO, ow], ww[HI, ow], near + ww[NEAR, ow])
    ys[uint64(out)] = best
    ix[uint64(out)] = pos


@njit(cache=True, inline="always")
def _full_windows(xs, ys, ix, out, corner, first, end, SW, W, KH, KW):
    """Outputs [first, end) of a row whose windows are unclipped, the first plane of the window
    of ow starting at corner + ow * SW. One loop per common kernel shape, written out with
    constant offsets: LLVM vectorizes those (it does not unswitch the shape tests out of a loop
    nest this size). The written-out windows are helpers of their own, not branches of one
    shared helper: nested inlined branches made numba compile this kernel for 24 s."""
    if KH == 2 and KW == 2:
        for ow in range(first, end):
            o = uint64(out + ow)
            ys[o], ix[o] = _window_2x2(xs, corner + ow * SW, W)
    elif KH == 3 and KW == 3:
        for ow in range(first, end):
            o = uint64(out + ow)
            ys[o], ix[o] = _window_3x3(xs, corner + ow * SW, W)
    else:
        for ow in range(first, end):
            o = uint64(out + ow)
            start = corner + ow * SW
            ys[o], ix[o] = _plane_max(xs, start, W, KH, KW, xs[uint64(start)], start)


@njit(cache=True, inline="always")
def _further_plane(xs, ys, ix, out, corner, first, end, SW, W, KH, KW):
    """The same outputs continued over a further plane of 3-d windows (``corner`` in it)."""
    for ow in range(first, end):
        o = uint64(out + ow)
        ys[o], ix[o] = _plane_max(xs, corner + ow * SW, W, KH, KW, ys[o], ix[o])


@parallel_kernel
def max_pool_planes(x, y, index, wd, wh, ww, H, W, kernel, SW, PW, w_first, w_end):
    """y[n, o] = the max of x[n] over window o, index[n, o] its flat (d, h, w) position, for
    samples (N, D * H * W). In a row of outputs (n, od, oh) whose d and h extents are full,
    the windows of [w_first, w_end) are wholly inside the input (``PoolGeometry.full_windows``)
    and are taken plane by plane (``_full_windows``); the others through the window tables."""
    N = x.shape[0]
    OD, OH, OW = wd.shape[1], wh.shape[1], ww.shape[1]
    KD, KH, KW = kernel
    for n in prange(N):   # samples, not rows: a flat loop over rows ran 30% slower
        xs, ys, ix = x[n], y[n], index[n]
        for od in range(OD):
            d_lo, d_hi = wd[LO, od], wd[HI, od]
            for oh in range(OH):
                h_lo, h_hi = wh[LO, oh], wh[HI, oh]
                near = (wd[NEAR, od] * H + wh[NEAR, oh]) * W
                full = d_hi - d_lo == KD and h_hi - h_lo == KH
                first, end = (w_first, w_end) if full else (OW, OW)
                out = (od * OH + oh) * OW
                for ow in range(first):
                    _clipped_window(xs, ys, ix, out + ow, H, W, d_lo, d_hi, h_lo, h_hi, ww, ow, near)
                corner = (d_lo * H + h_lo) * W - PW
                _full_windows(xs, ys, ix, out, corner, first, end, SW, W, KH, KW)
                for kd in range(1, KD):   # the further planes of 3-d windows, in order
                    _further_plane(xs, ys, ix, out, corner + kd * H * W, first, end, SW, W, KH, KW)
                for ow in range(end, OW):
                    _clipped_window(xs, ys, ix, out + ow, H, W, d_lo, d_hi, h_lo, h_hi, ww, ow, near)
