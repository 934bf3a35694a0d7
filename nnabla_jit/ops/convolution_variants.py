"""The convolutions that are not a plain im2col product: deformable convolution (bilinear
sampling at learned offsets, optionally masked), adaptive separable convolution (a per-pixel
vertical and horizontal kernel) and patch correlation (FlowNet's correlation layer), with their
backward kernels. They reuse the geometry and scratch buffers of ``convolution.py``.
"""
import math

import numpy as np
from numba import njit, prange

from .convolution import ConvGeometry, bias_grad, check_bias, init_for_bias
from .kernels import parallel_kernel
from .registry import Op, register


def _zeroed(array, accum):
    """``array`` ready to be added into: cleared unless the gradient accumulates."""
    if not accum:
        array.fill(0)
    return array


def deformable_convolution_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    names = op.input_names
    a = dict(zip(names, inputs))
    want = {n: (input_grads[i], accum[i]) for i, n in enumerate(names) if propagate_down[i]}
    geo, dy = op.geo, output_grads[0]
    geo.sample_with(a["offset"], a.get("mask"))
    if "weight" in want:
        geo.filter_grad(a["x"], dy, want["weight"][0], want["weight"][1], reuse_col=True)
    if "bias" in want:
        bias_grad(geo.map2(dy), *want["bias"], False)
    sampled = {n: _zeroed(*want[n]) for n in ("x", "offset", "mask") if n in want}
    if sampled:
        geo.sampling_grads(dy, a["weight"], a["x"], sampled.get("x"), sampled.get("offset"), sampled.get("mask"))


@parallel_kernel
def adaptive_separable_backward_kernel(x, kv, kh, dy, dx, dkv, dkh, want_x, want_kv, want_kh):
    """Add the gradients of AdaptiveSeparableConvolution into dx, dkv, dkh (those wanted)."""
    N, C, H, W = x.shape
    _, Kv, Ho, Wo = kv.shape
    Kh = kh.shape[1]
    for n in prange(N):
        for c in range(C):
            for h in range(Ho):
                for w in range(Wo):
                    g = dy[n, c, h, w]
                    for i in range(Kv):
                        for j in range(Kh):
                            v = x[n, c, h + i, w + j]
                            if want_x:
                                dx[n, c, h + i, w + j] += g * kv[n, i, h, w] * kh[n, j, h, w]
                            if want_kv:
                                dkv[n, i, h, w] += g * v * kh[n, j, h, w]
                            if want_kh:
                                dkh[n, j, h, w] += g * v * kv[n, i, h, w]


def adaptive_separable_convolution_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                            accum):
    x, kv, kh = inputs
    dummy = np.zeros((0, 0, 0, 0), x.dtype)
    grads = [_zeroed(input_grads[i], accum[i]) if propagate_down[i] else dummy for i in range(3)]
    adaptive_separable_backward_kernel.for_size(output_grads[0].size * kv.shape[1] * kh.shape[1])(
        x, kv, kh, output_grads[0], *grads, *propagate_down[:3])


@parallel_kernel
def patch_correlation_backward_kernel(x1, x2, dy, dx1, dx2, patch, shift, patch_step, shift_step, top, left,
                                      want1, want2):
    """Add the gradients of PatchCorrelation into dx1 and dx2 (those wanted)."""
    N, H, W, C = x1.shape
    _, Ho, Wo, Cy, Cx = dy.shape
    for n in prange(N):
        for ho in range(Ho):
            for wo in range(Wo):
                for iy in range(Cy):
                    dyy = iy * shift_step[0] - shift[0]
                    for ix in range(Cx):
                        dxx = ix * shift_step[1] - shift[1]
                        g = dy[n, ho, wo, iy, ix]
                        for kh in range(patch[0]):
                            h1 = ho * patch_step[0] + kh - top
                            h2 = h1 + dyy
                            if h1 < 0 or h1 >= H or h2 < 0 or h2 >= H:
                                continue
                            for kw in range(patch[1]):
                                w1 = wo * patch_step[1] + kw - left
                                w2 = w1 + dxx
                                if w1 < 0 or w1 >= W or w2 < 0 or w2 >= W:
                                    continue
                                for c in range(C):
                                    if want1:
                                        dx1[n, h1, w1, c] += g * x2[n, h2, w2, c]
                                    if want2:
                                        dx2[n, h2, w2, c] += g * x1[n, h1, w1, c]


def patch_correlation_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    x1, x2 = inputs
    dummy = np.zeros((0, 0, 0, 0), x1.dtype)
    grads = [_zeroed(input_grads[i], accum[i]) if propagate_down[i] else dummy for i in range(2)]
    patch_correlation_backward_kernel.for_size(output_grads[0].size * x1.shape[3])(
        x1, x2, output_grads[0], *grads, *op.args_a, op.padding[0], op.padding[2], *propagate_down[:2])


# ============================================================================== deformable
@njit(cache=True, inline="always")
def bilinear_corners(y, x, H, W):
    """Bilinear corners of (y, x): (y0, x0, ly, lx, inside); a point outside (-1, H) x (-1, W)
    reads as 0 (corners outside the image count as 0 too)."""
    if y <= -1.0 or y >= H or x <= -1.0 or x >= W:
        return 0, 0, 0.0, 0.0, False
    y0 = int(math.floor(y))   # math, not np.floor: also the CUDA kernels' device function
    x0 = int(math.floor(x))
    return y0, x0, y - y0, x - x0, True


@njit(cache=True, inline="always")
def corner_sums(img, base, H, W, y0, x0, ly, lx):
    """(v, dv/dy, dv/dx): the bilinear sample with top-left corner (y0, x0) and weights ly, lx of
    the plane at img[base + y * W + x], and its derivatives along y and x; corners outside the
    image read 0. The CUDA kernels compile its py_func."""
    v = 0.0
    vy = 0.0
    vx = 0.0
    for corner in range(4):
        cy, cx = y0 + corner // 2, x0 + corner % 2
        if cy < 0 or cy >= H or cx < 0 or cx >= W:
            continue
        wy = ly if corner // 2 else 1 - ly
        wx = lx if corner % 2 else 1 - lx
        val = img[base + cy * W + cx]
        v += wy * wx * val
        vy += (1.0 if corner // 2 else -1.0) * wx * val
        vx += wy * (1.0 if corner % 2 else -1.0) * val
    return v, vy, vx


@njit(cache=True, inline="always")
def corner_weight(corner, y0, x0, ly, lx, H, W):
    """(position in the plane, weight along y, weight along x) of corner 0..3 of the sample with
    top-left corner (y0, x0) and weights ly, lx; position -1 outside the image."""
    cy, cx = y0 + corner // 2, x0 + corner % 2
    wy = ly if corner // 2 else 1 - ly
    wx = lx if corner % 2 else 1 - lx
    if cy < 0 or cy >= H or cx < 0 or cx >= W:
        return -1, wy, wx
    return cy * W + cx, wy, wx


@njit(cache=True, inline="always")
def _bilinear(plane, H, W, y, x):
    """plane (a flattened H x W image) interpolated at (y, x)."""
    y0, x0, ly, lx, inside = bilinear_corners(y, x, H, W)
    v = 0.0
    if inside:
        if y0 >= 0 and x0 >= 0:
            v += (1 - ly) * (1 - lx) * plane[y0 * W + x0]
        if y0 >= 0 and x0 + 1 < W:
            v += (1 - ly) * lx * plane[y0 * W + x0 + 1]
        if y0 + 1 < H and x0 >= 0:
            v += ly * (1 - lx) * plane[(y0 + 1) * W + x0]
        if y0 + 1 < H and x0 + 1 < W:
            v += ly * lx * plane[(y0 + 1) * W + x0 + 1]
    return v


@parallel_kernel
def deformable_im2col(x, offset, mask, col, geom, dg, use_mask):
    """col[c * K + k, b * O + o] = x[b, c] sampled at tap k of map position o moved by its
    offset (times its mask). ``geom`` = (H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw); the
    offsets and masks of map position (oh, ow) sit at (oh * sh, ow * sw) of their H x W maps."""
    H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw = geom
    nb = x.shape[0]
    HW, K, O = H * W, KH * KW, OH * OW
    C = x.shape[1] // HW
    Cdg = C // dg
    for task in prange(C * K * nb):
        r = task // nb
        b = task - r * nb
        c, k = r // K, r % K
        g = c // Cdg
        plane = x[b, c * HW:(c + 1) * HW]
        oy = offset[b, (g * 2 * K + 2 * k) * HW:(g * 2 * K + 2 * k + 1) * HW]
        ox = offset[b, (g * 2 * K + 2 * k + 1) * HW:(g * 2 * K + 2 * k + 2) * HW]
        out = col[r, b * O:(b + 1) * O]
        for oh in range(OH):
            for ow in range(OW):
                pos = oh * sh * W + ow * sw
                v = _bilinear(plane, H, W, oh * sh - ph + (k // KW) * dh + oy[pos],
                              ow * sw - pw + (k % KW) * dw + ox[pos])
                if use_mask:
                    v *= mask[b, (g * K + k) * HW + pos]
                out[oh * OW + ow] = v


@parallel_kernel
def deformable_col2im(dcol, x, offset, mask, dx, doffset, dmask, geom, dg, use_mask, want_x, want_offset,
                      want_mask):
    """The gradients of deformable_im2col from the col gradient ``dcol``, added into dx (the
    bilinear weights), doffset (their derivatives) and dmask (the sampled values)."""
    H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw = geom
    nb = x.shape[0]
    HW, K, O = H * W, KH * KW, OH * OW
    C = x.shape[1] // HW
    Cdg = C // dg
    for task in prange(nb * dg):   # one task writes one sample's deformable group: no races
        b = task // dg
        g = task - b * dg
        for c in range(g * Cdg, (g + 1) * Cdg):
            plane = x[b, c * HW:(c + 1) * HW]
            for k in range(K):
                oyb = (g * 2 * K + 2 * k) * HW
                oxb = oyb + HW
                mb = (g * K + k) * HW
                grow = dcol[c * K + k, b * O:(b + 1) * O]
                for oh in range(OH):
                    for ow in range(OW):
                        pos = oh * sh * W + ow * sw
                        y = oh * sh - ph + (k // KW) * dh + offset[b, oyb + pos]
                        xx = ow * sw - pw + (k % KW) * dw + offset[b, oxb + pos]
                        y0, x0, ly, lx, inside = bilinear_corners(y, xx, H, W)
                        if not inside:
                            continue
                        m = mask[b, mb + pos] if use_mask else 1.0
                        gm = grow[oh * OW + ow] * m
                        v, vy, vx = corner_sums(plane, 0, H, W, y0, x0, ly, lx)
                        if want_x:
                            for corner in range(4):
                                at, wy, wx = corner_weight(corner, y0, x0, ly, lx, H, W)
                                if at >= 0:
                                    dx[b, c * HW + at] += gm * wy * wx
                        if want_offset:
                            doffset[b, oyb + pos] += gm * vy
                            doffset[b, oxb + pos] += gm * vx
                        if want_mask:
                            dmask[b, mb + pos] += grow[oh * OW + ow] * v


class DeformableGeometry(ConvGeometry):
    """A 2-d channel-first convolution whose col samples the image at offset positions."""

    TILED = False   # the tiled route makes im2col's col

    def __init__(self, op, x, w, offset, mask, pad, stride, dilation, group, deformable_group, base_axis):
        super().__init__(op, x, w, pad, stride, dilation, group, False, base_axis)
        # its col samples the image at the offsets: never the image itself
        self.col_is_image = self.pointwise = False
        if len(self.img_sp) != 2:
            op.fail("only 2-d inputs are supported, got input of shape {}", tuple(x))
        dg = deformable_group
        if dg < 1 or self.C % dg:
            op.fail("input channels {} must be divisible by deformable_group {}", self.C, dg)
        lead = tuple(x)[:len(x) - 3]
        for name, shape, per_tap in (("offset", offset, 2), ("mask", mask, 1)):
            want = lead + (per_tap * self.K * dg,) + self.img_sp
            if shape is not None and tuple(shape) != want:
                op.fail("{} of shape {} must have shape {} (input {}, weight {}, deformable_group {})", name,
                        tuple(shape), want, tuple(x), tuple(w), dg)
        for d in range(2):
            if (self.map_sp[d] - 1) * stride[d] >= self.img_sp[d]:
                op.fail("pad {} leaves output positions without an offset: the offsets of output position o "
                        "are read at o * stride {} of the input-sized offset map {}", tuple(pad), tuple(stride),
                        self.img_sp)
        self.dg = dg
        (H, W), (OH, OW), (KH, KW) = self.img_sp, self.map_sp, self.kernel
        self.geom = np.array([H, W, OH, OW, KH, KW, stride[0], stride[1], pad[0], pad[1], dilation[0], dilation[1]],
                             np.int64)
        self.sources = ()

    def sample_with(self, offset, mask):
        """Set the offsets (and masks) the next products use."""
        self.sources = (offset,) if mask is None else (offset, mask)
        self.offset = offset.reshape(self.B, -1)
        self.mask = mask.reshape(self.B, -1) if mask is not None else np.zeros((self.B, 0), offset.dtype)

    def _col_sources(self, img):
        return (img,) + self.sources

    def _fill_col(self, img2, b0, b1, col):
        deformable_im2col.for_size(col.size)(img2[b0:b1], self.offset[b0:b1], self.mask[b0:b1], col, self.geom,
                                             self.dg, len(self.sources) > 1)

    def sampling_grads(self, dy, w, x, dx=None, doffset=None, dmask=None):
        """Add into dx, doffset and dmask (each when given) their gradients from the map
        gradient dy: the bilinear sampling run backwards from the col gradient W^T dy."""
        x2 = self.img2(x)
        empty = np.zeros((self.B, 0), x2.dtype)
        dx2, doff2, dmask2 = [a.reshape(self.B, -1) if a is not None else empty for a in (dx, doffset, dmask)]
        for b0, b1, dcol in self.map_to_cols(dy, w):
            deformable_col2im.for_size(dcol.size)(
                dcol, x2[b0:b1], self.offset[b0:b1], self.mask[b0:b1], dx2[b0:b1], doff2[b0:b1], dmask2[b0:b1],
                self.geom, self.dg, len(self.sources) > 1, dx is not None, doffset is not None, dmask is not None)


def named_args(op, values):
    """Inputs (shapes or arrays) by name; absent optional inputs are None."""
    return {name: v for name, v in zip(op.input_names, values)}


@register
class DeformableConvolution(Op):
    """Convolution sampling the input at learned offsets (bilinear), optionally modulated by a
    mask (DCNv2). Offsets (N, 2 * K * deformable_group, H, W) hold (dy, dx) per tap."""

    def setup(self, *shapes):
        s = named_args(self, shapes)
        if self.channel_last:
            self.fail("channel_last=True is not supported (neither is it by nnabla on CPU)")
        self.geo = DeformableGeometry(self, s["x"], s["weight"], s["offset"], s.get("mask"), self.pad, self.stride,
                                      self.dilation, self.group, self.deformable_group, self.base_axis)
        check_bias(self, s.get("bias"), self.geo.M, s["weight"])
        return [self.geo.map_shape]

    def forward(self, inputs, outputs):
        a = named_args(self, inputs)
        self.geo.sample_with(a["offset"], a.get("mask"))
        bias = a.get("bias")
        self.geo.image_to_map(a["x"], a["weight"], outputs[0], bias, init_for_bias(bias))

    backward = deformable_convolution_backward

    def grad_depends_input_data(self, i, j):
        return "bias" not in (self.input_names[i], self.input_names[j])


# ============================================================================== adaptive separable
@njit(cache=True)
def separable_at(x, kv, kh, n, c, h, w):
    """sum_ij x[n, c, h + i, w + j] * kv[n, i, h, w] * kh[n, j, h, w]: one output element (also
    the CUDA kernel's device function)."""
    acc = 0.0
    for i in range(kv.shape[1]):
        row = 0.0
        for j in range(kh.shape[1]):
            row += x[n, c, h + i, w + j] * kh[n, j, h, w]
        acc += row * kv[n, i, h, w]
    return acc


@parallel_kernel
def adaptive_separable_kernel(x, kv, kh, y):
    """y[n, c, h, w] = separable_at(x, kv, kh, n, c, h, w)."""
    N, C = x.shape[:2]
    Ho, Wo = kv.shape[2:]
    for task in prange(N * C):
        n, c = task // C, task % C
        for h in range(Ho):
            for w in range(Wo):
                y[n, c, h, w] = separable_at(x, kv, kh, n, c, h, w)


@register
class AdaptiveSeparableConvolution(Op):
    """Per-pixel separable filters: a vertical (N, Kv, Ho, Wo) and a horizontal (N, Kh, Ho, Wo)
    kernel for every output pixel of x (N, C, H, W); Ho = H - Kv + 1, Wo = W - Kh + 1."""

    def setup(self, x, kv, kh):
        x, kv, kh = tuple(x), tuple(kv), tuple(kh)
        if len(x) != 4 or len(kv) != 4 or len(kh) != 4:
            self.fail("x {}, vertical_kernel {} and horizontal_kernel {} must be 4-d", x, kv, kh)
        out = (x[2] - kv[1] + 1, x[3] - kh[1] + 1)
        if min(out) < 1 or min(kv[1], kh[1]) < 1:
            self.fail("kernel sizes {} x {} do not fit input of shape {}", kv[1], kh[1], x)
        if kv != (x[0], kv[1]) + out or kh != (x[0], kh[1]) + out:
            self.fail("vertical_kernel {} and horizontal_kernel {} must be (N, K, {}, {}) for input {}", kv, kh,
                      out[0], out[1], x)
        return [x[:2] + out]

    def forward(self, inputs, outputs):
        adaptive_separable_kernel.for_size(outputs[0].size * inputs[1].shape[1] * inputs[2].shape[1])(
            *inputs, outputs[0])

    backward = adaptive_separable_convolution_backward

    def grad_depends_input_data(self, i, j):
        return i != j


# ============================================================================== patch correlation
@njit(cache=True)
def correlation_at(x1, x2, n, ho, wo, iy, ix, patch, shift, patch_step, shift_step, top, left):
    """The sum over the patch at (ho, wo) and the channels of x1 times x2 moved by shift
    (iy, ix); x1, x2 (N, H, W, C), zero outside: one output element (also the CUDA kernel's
    device function)."""
    H, W, C = x1.shape[1], x1.shape[2], x1.shape[3]
    dy = iy * shift_step[0] - shift[0]
    dx = ix * shift_step[1] - shift[1]
    acc = 0.0
    for kh in range(patch[0]):
        h1 = ho * patch_step[0] + kh - top
        h2 = h1 + dy
        if h1 < 0 or h1 >= H or h2 < 0 or h2 >= H:
            continue
        for kw in range(patch[1]):
            w1 = wo * patch_step[1] + kw - left
            w2 = w1 + dx
            if w1 < 0 or w1 >= W or w2 < 0 or w2 >= W:
                continue
            for c in range(C):
                acc += x1[n, h1, w1, c] * x2[n, h2, w2, c]
    return acc


@parallel_kernel
def patch_correlation_kernel(x1, x2, y, patch, shift, patch_step, shift_step, top, left):
    """y[n, ho, wo, iy, ix] = correlation_at(...)."""
    N = x1.shape[0]
    _, Ho, Wo, Cy, Cx = y.shape
    for task in prange(N * Ho):
        n, ho = task // Ho, task % Ho
        for wo in range(Wo):
            for iy in range(Cy):
                for ix in range(Cx):
                    y[n, ho, wo, iy, ix] = correlation_at(x1, x2, n, ho, wo, iy, ix, patch, shift,
                                                          patch_step, shift_step, top, left)


@register
class PatchCorrelation(Op):
    """FlowNet's correlation of NHWC x1 and x2: (N, Ho, Wo, Cy, Cx), Ho = (H + top + bottom -
    patch_h) // patch_step_h + 1, Cy = 2 * shift_h // shift_step_h + 1 (likewise W and x)."""

    def setup(self, x1, x2):
        x1, x2 = tuple(x1), tuple(x2)
        if len(x1) != 4 or x1 != x2:
            self.fail("x1 {} and x2 {} must be 4-d (N, H, W, C) and of equal shape", x1, x2)
        for name, n, low in (("patch", 2, 1), ("shift", 2, 0), ("patch_step", 2, 1), ("shift_step", 2, 1),
                             ("padding", 4, 0)):
            value = tuple(getattr(self, name))
            if len(value) != n or min(value) < low:
                self.fail("{} {} must have {} entries of at least {}", name, value, n, low)
        top, bottom, left, right = self.padding
        out = ((x1[1] + top + bottom - self.patch[0]) // self.patch_step[0] + 1,
               (x1[2] + left + right - self.patch[1]) // self.patch_step[1] + 1,
               2 * self.shift[0] // self.shift_step[0] + 1, 2 * self.shift[1] // self.shift_step[1] + 1)
        if min(out[:2]) < 1:
            self.fail("patch {} is larger than the padded input {} (padding {})", tuple(self.patch), x1,
                      tuple(self.padding))
        self.args_a = [np.array(getattr(self, n), np.int64) for n in ("patch", "shift", "patch_step", "shift_step")]
        return [(x1[0],) + out]

    def forward(self, inputs, outputs):
        patch_correlation_kernel.for_size(outputs[0].size * int(np.prod(self.patch)) * inputs[0].shape[3])(
            inputs[0], inputs[1], outputs[0], *self.args_a, self.padding[0], self.padding[2])

    backward = patch_correlation_backward

    def grad_depends_input_data(self, i, j):
        return i != j
