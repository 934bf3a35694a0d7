"""CUDA kernels of the convolutions that are not a plain im2col product (``ops/
convolution_variants.py``): AdaptiveSeparableConvolution, PatchCorrelation and
DeformableConvolution.

AdaptiveSeparableConvolution and PatchCorrelation give every output element a thread running
the CPU's per-element function (``separable_at``, ``correlation_at``, compiled as device
functions). Their backwards gather: one thread per element of a gradient sums the terms that
reach it (no atomics), and adds it to the gradient when accumulating.

DeformableConvolution is the convolution's im2col + GEMM (``convolution.py``'s launcher) with
a col that samples the image bilinearly at the offset positions (times the mask). Its data,
offset and mask gradients come from the col gradient W^T rows(dy), one thread per col element
adding into the corners it read and the offset and mask it used (atomically: several col
elements share them).
"""
from ..ops.convolution import init_for_bias
from ..ops.convolution_variants import (bilinear_corners as cpu_corners, corner_sums as cpu_corner_sums,
                                        corner_weight as cpu_corner_weight, correlation_at as cpu_correlation_at,
                                        separable_at as cpu_separable_at)
from . import blas, device, reduction
from .convolution import ConvLaunch, zero_unless_accum
from .device import store, unravel3
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

separable_at = device_function(cpu_separable_at.py_func)
correlation_at = device_function(cpu_correlation_at.py_func)
corners = device_function(cpu_corners.py_func)
corner_sums = device_function(cpu_corner_sums.py_func)
corner_weight = device_function(cpu_corner_weight.py_func)


# ============================================================================== adaptive separable
@kernel
def separable_kernel(x, kv, kh, y):
    i = cuda.grid(1)
    if i < y.size:
        C, Ho, Wo = y.shape[1], y.shape[2], y.shape[3]
        n, c, hw = unravel3(i, C, Ho * Wo)
        _, h, w = unravel3(hw, Ho, Wo)
        y[n, c, h, w] = separable_at(x, kv, kh, n, c, h, w)


@kernel
def separable_input_grad_kernel(kv, kh, dy, dx, accum):
    """dx[n, c, p, q] (+)= sum over the taps (i, j) of the outputs (p - i, q - j) reading it of
    dy kv kh there."""
    i = cuda.grid(1)
    if i < dx.size:
        C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
        Ho, Wo = dy.shape[2], dy.shape[3]
        n, c, pq = unravel3(i, C, H * W)
        _, p, q = unravel3(pq, H, W)
        acc = 0.0
        for a in range(kv.shape[1]):
            h = p - a
            if h < 0 or h >= Ho:
                continue
            for b in range(kh.shape[1]):
                w = q - b
                if 0 <= w < Wo:
                    acc += dy[n, c, h, w] * kv[n, a, h, w] * kh[n, b, h, w]
        store(dx, (n, c, p, q), acc, accum)


@kernel
def separable_kernel_grad_kernel(x, other, dy, dk, vertical, accum):
    """The gradient of one of the two per-pixel kernels (the vertical one with ``vertical``):
    dk[n, t, h, w] (+)= sum over the channels and the other kernel's taps u of dy x (at tap
    (t, u), or (u, t)) times the other kernel at u."""
    i = cuda.grid(1)
    if i < dk.size:
        T, Ho, Wo = dk.shape[1], dk.shape[2], dk.shape[3]
        n, t, hw = unravel3(i, T, Ho * Wo)
        _, h, w = unravel3(hw, Ho, Wo)
        acc = 0.0
        for c in range(x.shape[1]):
            g = dy[n, c, h, w]
            for u in range(other.shape[1]):
                v = x[n, c, h + t, w + u] if vertical else x[n, c, h + u, w + t]
                acc += g * v * other[n, u, h, w]
        store(dk, (n, t, h, w), acc, accum)


@forward("AdaptiveSeparableConvolution")
def adaptive_separable_forward(op, inputs, outputs):
    device.launch(separable_kernel, outputs[0].size, *inputs, outputs[0])


@backward("AdaptiveSeparableConvolution")
def adaptive_separable_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                accum):
    x, kv, kh = inputs
    dy, (dx, dkv, dkh) = output_grads[0], input_grads
    if propagate_down[0]:
        device.launch(separable_input_grad_kernel, dx.size, kv, kh, dy, dx, accum[0])
    if propagate_down[1]:
        device.launch(separable_kernel_grad_kernel, dkv.size, x, kh, dy, dkv, True, accum[1])
    if propagate_down[2]:
        device.launch(separable_kernel_grad_kernel, dkh.size, x, kv, dy, dkh, False, accum[2])


# ============================================================================== patch correlation
@kernel
def correlation_kernel(x1, x2, y, patch, shift, patch_step, shift_step, top, left):
    i = cuda.grid(1)
    if i < y.size:
        Ho, Wo, Cy, Cx = y.shape[1], y.shape[2], y.shape[3], y.shape[4]
        n, ho, rest = unravel3(i, Ho, Wo * Cy * Cx)
        wo, iy, ix = unravel3(rest, Cy, Cx)
        y[n, ho, wo, iy, ix] = correlation_at(x1, x2, n, ho, wo, iy, ix, patch, shift,
                                              patch_step, shift_step, top, left)


@kernel
def correlation_grad_kernel(partner, dy, dx, patch, shift, patch_step, shift_step, top, left,
                            first, accum):
    """The gradient of x1 (``first``, ``partner`` = x2) or of x2 (``partner`` = x1) at each of
    its elements: the sum over the shifts and the outputs whose patch holds it of dy times
    the partner's element it was multiplied with."""
    i = cuda.grid(1)
    if i < dx.size:
        H, W, C = dx.shape[1], dx.shape[2], dx.shape[3]
        Ho, Wo, Cy, Cx = dy.shape[1], dy.shape[2], dy.shape[3], dy.shape[4]
        n, q, pc = unravel3(i, H, W * C)
        _, p, c = unravel3(pc, W, C)
        acc = 0.0
        for iy in range(Cy):
            sy = iy * shift_step[0] - shift[0]
            h1 = q if first else q - sy   # this element's row in x1, and its partner's
            h2 = h1 + sy
            if h1 < 0 or h1 >= H or h2 < 0 or h2 >= H:
                continue
            for ix in range(Cx):
                sx = ix * shift_step[1] - shift[1]
                w1 = p if first else p - sx
                w2 = w1 + sx
                if w1 < 0 or w1 >= W or w2 < 0 or w2 >= W:
                    continue
                v = partner[n, h2, w2, c] if first else partner[n, h1, w1, c]
                for kh in range(patch[0]):
                    t = h1 + top - kh   # ho * patch_step
                    if t < 0 or t % patch_step[0] != 0 or t // patch_step[0] >= Ho:
                        continue
                    for kw in range(patch[1]):
                        s = w1 + left - kw
                        if s < 0 or s % patch_step[1] != 0 or s // patch_step[1] >= Wo:
                            continue
                        acc += dy[n, t // patch_step[0], s // patch_step[1], iy, ix] * v
        store(dx, (n, q, p, c), acc, accum)


def _correlation_args(op):
    return tuple(tuple(int(v) for v in a) for a in op.args_a) + (int(op.padding[0]),
                                                                  int(op.padding[2]))


@forward("PatchCorrelation")
def patch_correlation_forward(op, inputs, outputs):
    device.launch(correlation_kernel, outputs[0].size, inputs[0], inputs[1], outputs[0],
                  *_correlation_args(op))


@backward("PatchCorrelation")
def patch_correlation_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                               accum):
    for k in range(2):
        if propagate_down[k]:
            device.launch(correlation_grad_kernel, input_grads[k].size, inputs[1 - k],
                          output_grads[0], input_grads[k], *_correlation_args(op), k == 0,
                          accum[k])


# ============================================================================== deformable
@device_function
def deformable_tap(i, geom, n_batch, channels, dg):
    """Col element i = (c K + k, b O + o): (b, c, k, the flat offset of o's (dy, dx) and mask,
    its sampling point y, x)."""
    H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw = geom
    K, O = KH * KW, OH * OW
    HW = H * W
    r, b, o = unravel3(i, n_batch, O)
    c = r // K
    k = r - c * K
    g = c // (channels // dg)
    oh = o // OW
    ow = o - oh * OW
    pos = oh * sh * W + ow * sw
    at_y = b * (dg * 2 * K * HW) + (g * 2 * K + 2 * k) * HW + pos
    at_mask = b * (dg * K * HW) + (g * K + k) * HW + pos
    return b, c, at_y, at_mask, oh * sh - ph + (k // KW) * dh, ow * sw - pw + (k % KW) * dw


@device_function
def deformable_sample(i, offset, geom, n_batch, channels, dg):
    """Col element i's sample: (b, c, the flat positions of its (dy, dx) offset and of its mask,
    the flat start of its image plane, its bilinear corner, weights, and whether it reads the
    image at all)."""
    H, W = geom[0], geom[1]
    b, c, at_y, at_mask, y0, x0 = deformable_tap(i, geom, n_batch, channels, dg)
    yi, xi, ly, lx, inside = corners(y0 + offset[at_y], x0 + offset[at_y + H * W], H, W)
    return b, c, at_y, at_mask, (b * channels + c) * H * W, yi, xi, ly, lx, inside


@kernel
def deformable_im2col_kernel(x, offset, mask, col, geom, n_batch, channels, dg, use_mask):
    """col[c K + k, b O + o] = x[b, c] sampled bilinearly at tap k of o moved by its offset
    (times its mask); the CPU's deformable_im2col, one thread per col element."""
    i = cuda.grid(1)
    if i < col.size:
        H, W = geom[0], geom[1]
        b, c, at_y, at_mask, base, yi, xi, ly, lx, inside = deformable_sample(
            i, offset, geom, n_batch, channels, dg)
        v = 0.0
        if inside:
            v = corner_sums(x, base, H, W, yi, xi, ly, lx)[0]
        if use_mask:
            v *= mask[at_mask]
        col[i] = v


@kernel
def deformable_col2im_kernel(dcol, x, offset, mask, dx, doffset, dmask, geom, n_batch, channels,
                             dg, use_mask, want_x, want_offset, want_mask):
    """The gradients of deformable_im2col from the col gradient: each col element adds into
    the corners it read (dx), its offset (the bilinear weights' derivatives times the corner
    values) and its mask (the sampled value)."""
    i = cuda.grid(1)
    if i < dcol.size:
        H, W = geom[0], geom[1]
        b, c, at_y, at_mask, base, yi, xi, ly, lx, inside = deformable_sample(
            i, offset, geom, n_batch, channels, dg)
        if not inside:
            return
        m = mask[at_mask] if use_mask else 1.0
        gm = dcol[i] * m
        v, vy, vx = corner_sums(x, base, H, W, yi, xi, ly, lx)
        if want_x:
            for corner in range(4):
                at, wy, wx = corner_weight(corner, yi, xi, ly, lx, H, W)
                if at >= 0:
                    cuda.atomic.add(dx, base + at, gm * wy * wx)
        if want_offset:
            cuda.atomic.add(doffset, at_y, gm * vy)
            cuda.atomic.add(doffset, at_y + H * W, gm * vx)
        if want_mask:
            cuda.atomic.add(dmask, at_mask, dcol[i] * v)


def _flat(a):
    return a.reshape(a.size)


class _DeformableLaunch(ConvLaunch):
    """The convolution's products with the deformable col of the given offsets (and mask)."""

    direct_col = False   # the col samples the image at the offsets: the rows layout only

    def __init__(self, op, offset, mask):
        super().__init__(op)
        geo = self.geo
        self.sampling = (tuple(int(v) for v in geo.geom), geo.B, geo.C, int(geo.dg))
        self.offset = _flat(offset)
        self.mask = self.offset if mask is None else _flat(mask)   # offset: a stand-in, not read
        self.use_mask = mask is not None

    def col(self, img):
        geo = self.geo
        col = device.workspace("conv col", geo.C * geo.K * geo.B * geo.O, img.dtype)
        device.launch(deformable_im2col_kernel, col.size, _flat(img), self.offset, self.mask,
                      col, *self.sampling, self.use_mask)
        return col.reshape(geo.group, geo.C // geo.group * geo.K, geo.B * geo.O)

    def sampling_grads(self, rows, w, x, dx, doffset, dmask):
        """dx, doffset, dmask (those not None) += their gradients through the col gradient
        W^T rows(dy)."""
        geo = self.geo
        dcol = device.workspace("conv dcol", geo.C * geo.K * geo.B * geo.O, rows.dtype)
        blas.matmul(self.filters(w), self.grouped(rows),
                    dcol.reshape(geo.group, geo.C // geo.group * geo.K, geo.B * geo.O),
                    trans_a=True, a_batch=self.same, b_batch=self.same)
        wanted = [a is not None for a in (dx, doffset, dmask)]
        dx, doffset, dmask = (_flat(a) if a is not None else dcol for a in (dx, doffset, dmask))
        device.launch(deformable_col2im_kernel, dcol.size, dcol, _flat(x), self.offset, self.mask,
                      dx, doffset, dmask, *self.sampling, self.use_mask, *wanted)


def _deformable_inputs(op, values):
    named = dict(zip(op.input_names, values))
    return named, _DeformableLaunch(op, named["offset"], named.get("mask"))


@forward("DeformableConvolution")
def deformable_convolution_forward(op, inputs, outputs):
    if outputs[0].size:
        a, launch = _deformable_inputs(op, inputs)
        bias = a.get("bias")
        launch.image_to_map(a["x"], a["weight"], outputs[0], bias, init_for_bias(bias))


@backward("DeformableConvolution")
def deformable_convolution_backward(op, inputs, outputs, output_grads, input_grads,
                                    propagate_down, accum):
    a, launch = _deformable_inputs(op, inputs)
    want = {n: (input_grads[i], accum[i]) for i, n in enumerate(op.input_names)
            if propagate_down[i]}
    dy = output_grads[0]
    if dy.size == 0:
        zero_unless_accum(input_grads, propagate_down, accum)
        return
    rows = launch.rows(dy)
    if "weight" in want:
        launch.filter_grad(a["x"], dy, want["weight"][0], want["weight"][1], rows=rows)
    if "bias" in want:
        reduction.reduce(rows, want["bias"][0].reshape(rows.shape[0]), (1,), accum=want["bias"][1])
    sampled = {}
    for name in ("x", "offset", "mask"):
        if name in want:
            grad, acc = want[name]
            if not acc:
                device.fill(grad, 0)
            sampled[name] = grad
    if sampled:
        launch.sampling_grads(rows, a["weight"], a["x"], sampled.get("x"), sampled.get("offset"),
                              sampled.get("mask"))
