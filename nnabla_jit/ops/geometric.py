"""Geometric layers (spatial transformers): AffineGrid, WarpByGrid and WarpByFlow.

Warping is done in two steps that both backward passes reuse:

1. :func:`grid_coordinates` maps each grid entry to a pixel coordinate per spatial axis
   (unnormalising [-1, 1] by ``align_corners``, then the padding mode: clamp for 'repeat',
   mirror for 'reflect') and records the slope d(coordinate)/d(grid) (0 where clamped,
   +-scale where mirrored);
2. :func:`warp_kernel` samples the input at those coordinates (bilinear / trilinear over
   2^nd corners, or the nearest pixel); corners outside the input read 0 ('zero' padding).

Spatial axes are handled generically: coordinates come in (x, y[, z]) order, i.e. the last
spatial axis first, and the input is seen as (batch, channel, pixels).
"""
import math

import numpy as np
from numba import njit, prange

from .blas import gemm
from .kernels import parallel_kernel
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
def affine_grid_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dtheta = input_grads[0]
    base = op.base_for(dtheta.dtype)
    dgrid = output_grads[0].reshape(dtheta.shape[0], base.shape[0], dtheta.shape[1])
    for b in range(dtheta.shape[0]):   # dtheta[b] = dgrid[b]^T base
        gemm(dgrid[b], base, dtheta[b], trans_a=True, accumulate=accum[0])


def warp_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    want_dx, want_dgrid = propagate_down[0], propagate_down[1]
    coords, slope = op.coordinates(inputs)
    dy = op.to_channels_first(output_grads[0], op.y_view)
    x = op.to_channels_first(inputs[0], op.x_view) if want_dgrid else dy
    direct = want_dx and not op.channel_last
    if direct:
        dx = input_grads[0].reshape(op.x_view)
        if not accum[0]:
            dx.fill(0)
    else:
        dx = np.zeros(op.x_view if want_dx else (1, 1, 1), dy.dtype)
    dcoords = np.empty_like(coords)
    op.warp_backward(x, coords, op.sizes, op.strides, op.nearest, dy, dx, dcoords, want_dx,
                     want_dgrid)
    if want_dx and not direct:
        op.from_channels_first(dx, input_grads[0], op.spatial, accum[0])
    if want_dgrid:
        op.store_grid_gradient(dcoords * slope, input_grads[1], accum[1])


def warp_coordinates_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                              accum):
    if propagate_down[0]:
        g = output_grads[0] * outputs[1]
        if accum[0]:
            input_grads[0] += g
        else:
            input_grads[0][...] = g


def grid_corners_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dx = input_grads[0]
        if not accum[0]:
            dx.fill(0)
        dc = output_grads[0]
        scatter_corners.for_size(dc.size)(dc, inputs[1], op.sizes, op.strides, op.nearest, dx)


ZERO, REPEAT, REFLECT = 0, 1, 2
PADDING = {"zero": ZERO, "repeat": REPEAT, "reflect": REFLECT}


# ------------------------------------------------------------------ AffineGrid
def target_grid(size, align_corners):
    """(prod(size), nd + 1): the normalised target coordinates (x, y[, z], 1) of every pixel."""
    def axis(n):
        if align_corners:
            return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(n)
        return (2 * np.arange(n) + 1) / n - 1
    mesh = np.meshgrid(*[axis(n) for n in size], indexing="ij")
    coords = [m.reshape(-1) for m in reversed(mesh)]   # x (last axis) first
    return np.stack(coords + [np.ones(int(np.prod(size)))], axis=1)


@register
class AffineGrid(Op):
    """grid[b, pixel] = theta[b] @ (x, y[, z], 1) over the normalised target grid."""

    def setup(self, theta):
        size = tuple(self.size)
        nd = len(size)
        if nd not in (2, 3):
            self.fail("size {} must be (H, W) or (D, H, W)", size)
        if len(theta) != 3 or tuple(theta[1:]) != (nd, nd + 1):
            self.fail("theta of shape {} must be (B, {}, {}) for a {}-d grid of size {}", theta,
                      nd, nd + 1, nd, size)
        self.base = target_grid(size, self.align_corners)
        self._typed = {}
        return [(theta[0],) + size + (nd,)]

    def base_for(self, dtype):
        if dtype not in self._typed:
            self._typed[dtype] = np.ascontiguousarray(self.base, dtype)
        return self._typed[dtype]

    def forward(self, inputs, outputs):
        theta = inputs[0]
        base = self.base_for(theta.dtype)
        grid = outputs[0].reshape(theta.shape[0], base.shape[0], theta.shape[1])
        for b in range(theta.shape[0]):
            gemm(base, theta[b], grid[b], trans_b=True)

    backward = affine_grid_backward

    def grad_depends_input_data(self, i, j):
        return False


# ------------------------------------------------------------------ warping
@njit(cache=True, inline="always")
def grid_coordinate(g, n, pixel_units, align_corners, padding):
    """(the pixel coordinate of grid value g along an axis of n pixels, its derivative with
    respect to g). Shared with the CUDA kernels (``cuda_ops/geometric.py``): a leaf."""
    if pixel_units:
        u, s = g, 1.0
    elif align_corners:
        u, s = (g + 1.0) * (n - 1) / 2.0, (n - 1) / 2.0
    else:
        u, s = ((g + 1.0) * n - 1.0) / 2.0, n / 2.0
    if padding == REFLECT:
        lo, hi = (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)
        span = hi - lo
        if span <= 0:
            u, s = 0.0, 0.0
        else:
            c = u - lo
            if c < 0:
                c, s = -c, -s
            k = math.floor(c / span)
            r = c - k * span
            if k % 2 == 0:
                u = lo + r
            else:
                u, s = hi - r, -s
    if padding != ZERO:
        if u < 0:
            u, s = 0.0, 0.0
        elif u > n - 1:
            u, s = n - 1.0, 0.0
    return u, s


@parallel_kernel
def grid_coordinates(grid, sizes, pixel_units, align_corners, padding, coords, slope):
    """coords[b, o, d] = the pixel coordinate of grid[b, o, d] along spatial axis d (sizes in
    x, y, z order); slope = its derivative with respect to the grid value."""
    for b in prange(grid.shape[0]):
        for o in range(grid.shape[1]):
            for d in range(grid.shape[2]):
                u, s = grid_coordinate(grid[b, o, d], sizes[d], pixel_units, align_corners,
                                       padding)
                coords[b, o, d] = u
                slope[b, o, d] = s


@njit(cache=True, inline="always")
def corner(coords, sizes, strides, b, o, k, nd, nearest):
    """(flat pixel index or -1 if outside, weight) of corner k of sample (b, o)."""
    w = 1.0
    flat = 0
    inside = True
    for d in range(nd):
        u = coords[b, o, d]
        if nearest:
            i = int(math.floor(u + 0.5))   # numba-cuda's floor keeps the float type
        else:
            i0 = int(math.floor(u))
            f = u - i0
            bit = (k >> d) & 1
            i = i0 + bit
            w *= f if bit else 1.0 - f
        if i < 0 or i >= sizes[d]:
            inside = False
        flat += i * strides[d]
    return (flat if inside else -1), w


@njit(cache=True, inline="always")
def corner_weight_derivative(coords, b, o, k, d, nd):
    """d(weight of corner k of sample (b, o))/d(coordinate d): the other factors times +-1."""
    dw = 1.0
    for e in range(nd):
        u = coords[b, o, e]
        f = u - math.floor(u)
        bit = (k >> e) & 1
        if e == d:
            dw *= 1.0 if bit else -1.0
        else:
            dw *= f if bit else 1.0 - f
    return dw


@parallel_kernel
def warp_kernel(x, coords, sizes, strides, nearest, y):
    """y[b, c, o] = sum over corners of weight * x[b, c, corner] (x: (B, C, pixels))."""
    nd = coords.shape[2]
    corners = 1 if nearest else 1 << nd
    for b in prange(y.shape[0]):
        for o in range(y.shape[2]):
            for c in range(y.shape[1]):
                y[b, c, o] = 0.0
            for k in range(corners):
                flat, w = corner(coords, sizes, strides, b, o, k, nd, nearest)
                if flat >= 0 and w != 0.0:
                    for c in range(y.shape[1]):
                        y[b, c, o] += w * x[b, c, flat]


@parallel_kernel
def warp_backward_kernel(x, coords, sizes, strides, nearest, dy, dx, dcoords, want_dx, want_dc):
    """dx[b, c, corner] += weight * dy (dx accumulates); dcoords[b, o, d] = sum over corners
    and channels of d(weight)/d(coordinate d) * x * dy (0 for nearest)."""
    nd = coords.shape[2]
    corners = 1 if nearest else 1 << nd
    for b in prange(dy.shape[0]):
        for o in range(dy.shape[2]):
            if want_dc:
                for d in range(nd):
                    dcoords[b, o, d] = 0.0
            for k in range(corners):
                flat, w = corner(coords, sizes, strides, b, o, k, nd, nearest)
                if flat < 0:
                    continue
                if want_dx:
                    for c in range(dy.shape[1]):
                        dx[b, c, flat] += w * dy[b, c, o]
                if want_dc and not nearest:
                    xdy = 0.0
                    for c in range(dy.shape[1]):
                        xdy += x[b, c, flat] * dy[b, c, o]
                    for d in range(nd):
                        dcoords[b, o, d] += corner_weight_derivative(coords, b, o, k, d,
                                                                     nd) * xdy


class _Warp(Op):
    """Shared by WarpByGrid and WarpByFlow: subclasses set the layout in setup and provide
    ``coordinates(inputs)`` -> (coords, slope) of shape (B, O, nd)."""

    def warp_layout(self, batch, channels, spatial, out_spatial):
        self.spatial = tuple(spatial)
        self.sizes = np.array(spatial[::-1], np.int64)            # x, y, z order
        self.strides = np.array([int(np.prod(spatial[len(spatial) - d:], dtype=np.int64))
                                 for d in range(len(spatial))], np.int64)
        self.x_view = (batch, channels, int(np.prod(spatial, dtype=np.int64)))
        self.y_view = (batch, channels, int(np.prod(out_spatial, dtype=np.int64)))
        self.nearest = getattr(self, "mode", "linear") == "nearest"
        work = self.y_view[0] * self.y_view[1] * self.y_view[2] * (1 << len(spatial))
        self.warp = warp_kernel.for_size(work)
        self.warp_backward = warp_backward_kernel.for_size(work)
        self.transform = grid_coordinates.for_size(self.y_view[0] * self.y_view[2])

    def transformed(self, grid, pixel_units, align_corners, padding):
        coords = np.empty_like(grid)
        slope = np.empty_like(grid)
        self.transform(grid, self.sizes, pixel_units, align_corners, padding, coords, slope)
        return coords, slope

    channel_last = False

    def to_channels_first(self, a, view):
        """(B, C, pixels) view of a data-shaped array (a transposed copy if channel_last)."""
        if self.channel_last:
            a = np.ascontiguousarray(np.moveaxis(a, -1, 1))
        return a.reshape(view)

    def from_channels_first(self, a, out, spatial, accum=False):
        """out (+)= a (B, C, pixels) in out's layout."""
        a = a.reshape(a.shape[:2] + tuple(spatial))
        if self.channel_last:
            a = np.moveaxis(a, 1, -1)
        if accum:
            out += a
        else:
            out[...] = a

    def forward(self, inputs, outputs):
        coords, _ = self.coordinates(inputs)
        x = self.to_channels_first(inputs[0], self.x_view)
        y = np.empty(self.y_view, x.dtype) if self.channel_last else outputs[0].reshape(self.y_view)
        self.warp(x, coords, self.sizes, self.strides, self.nearest, y)
        if self.channel_last:
            self.from_channels_first(y, outputs[0], self.out_spatial)

    backward = warp_backward

    def grad_depends_input_data(self, i, j):
        return j == 1 or i == 1   # dx reads the grid; dgrid reads x and the grid


@register
class WarpByGrid(_Warp):
    """Sample x at the normalised grid coordinates (bilinear / trilinear or nearest)."""

    def setup(self, x, grid):
        nd = grid[-1] if grid else 0
        if nd not in (2, 3) or len(grid) != nd + 2:
            self.fail("grid of shape {} must be (B, H, W, 2) or (B, D, H, W, 3)", grid)
        if len(x) != nd + 2 or x[0] != grid[0]:
            self.fail("x of shape {} must be a batch of {} {}-d inputs matching grid {}", x,
                      grid[0], nd, grid)
        out_spatial = tuple(grid[1:-1])
        if self.channel_last:
            batch, spatial, channels = x[0], x[1:-1], x[-1]
            out = (batch,) + out_spatial + (channels,)
        else:
            batch, channels, spatial = x[0], x[1], x[2:]
            out = (batch, channels) + out_spatial
        self.padding = PADDING[self.padding_mode]
        self.out_spatial = out_spatial
        self.warp_layout(batch, channels, spatial, out_spatial)
        return [out]

    def coordinates(self, inputs):
        grid = inputs[1]
        return self.transformed(grid.reshape(grid.shape[0], -1, grid.shape[-1]), False,
                                self.align_corners, self.padding)


    def store_grid_gradient(self, g, dgrid, accum):
        """dgrid (+)= g, the gradient of the (B, O, nd) coordinates."""
        if accum:
            dgrid += g.reshape(dgrid.shape)
        else:
            dgrid[...] = g.reshape(dgrid.shape)


@register
class WarpByFlow(_Warp):
    """output[n, c, y, x] = data[n, c] sampled bilinearly at (y + flow[n, 1], x + flow[n, 0]),
    coordinates clamped to the image."""

    def setup(self, data, flow):
        if len(data) != 4 or len(flow) != 4 or flow[1] != 2 or data[0] != flow[0] \
                or tuple(data[2:]) != tuple(flow[2:]):
            self.fail("data {} must be (N, C, H, W) and flow {} must be (N, 2, H, W)", data, flow)
        H, W = data[2], data[3]
        yy, xx = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
        self.pixels = np.stack([xx.reshape(-1), yy.reshape(-1)], axis=1).astype(np.float64)
        self.out_spatial = (H, W)
        self.warp_layout(data[0], data[1], (H, W), (H, W))
        return [tuple(data)]

    def coordinates(self, inputs):
        flow = inputs[1]
        n = flow.shape[0]
        grid = flow.reshape(n, 2, -1).transpose(0, 2, 1) + self.pixels.astype(flow.dtype)
        return self.transformed(np.ascontiguousarray(grid), True, True, REPEAT)


    def store_grid_gradient(self, g, dflow, accum):
        g = g.transpose(0, 2, 1).reshape(dflow.shape)
        if accum:
            dflow += g
        else:
            dflow[...] = g


# ------------------------------------------------------------------ internal ops of the grad rules
# WarpByGrid / WarpByFlow differentiate as  y = sum_k w_k(frac) * corner_k,  frac = coords - base:
# WarpCoordinates gives the coordinates (differentiable through its slope), GridCorners the
# corner values (linear in x) and the integer base, and F arithmetic the weights, so every
# derivative of any order follows from these three ops and F.
@parallel_kernel
def gather_corners(x, coords, sizes, strides, nearest, corners, base):
    """corners[b, c, o, k] = x[b, c, corner k of sample (b, o)] (0 outside); base = floor."""
    nd = coords.shape[2]
    for b in prange(corners.shape[0]):
        for o in range(corners.shape[2]):
            for d in range(nd):
                base[b, o, d] = math.floor(coords[b, o, d])
            for k in range(corners.shape[3]):
                flat, _ = corner(coords, sizes, strides, b, o, k, nd, nearest)
                for c in range(corners.shape[1]):
                    corners[b, c, o, k] = x[b, c, flat] if flat >= 0 else 0.0


@parallel_kernel
def scatter_corners(dcorners, coords, sizes, strides, nearest, dx):
    """dx[b, c, corner k of (b, o)] += dcorners[b, c, o, k] (dx accumulates)."""
    nd = coords.shape[2]
    for b in prange(dcorners.shape[0]):
        for o in range(dcorners.shape[2]):
            for k in range(dcorners.shape[3]):
                flat, _ = corner(coords, sizes, strides, b, o, k, nd, nearest)
                if flat >= 0:
                    for c in range(dcorners.shape[1]):
                        dx[b, c, flat] += dcorners[b, c, o, k]


class _GridOp(Op):
    """Internal ops on (B, C, pixels) images of ``spatial`` size and (B, O, nd) coordinates."""

    def __init__(self, input_names=(), spatial=(), nearest=False, **args):
        super().__init__(input_names, spatial=tuple(spatial), nearest=bool(nearest), **args)
        self.sizes = np.array(self.spatial[::-1], np.int64)
        self.strides = np.array([int(np.prod(self.spatial[len(self.spatial) - d:], dtype=np.int64))
                                 for d in range(len(self.spatial))], np.int64)
        self.corners = 1 if self.nearest else 1 << len(self.spatial)

    def grad_depends_input_data(self, i, j):
        return j == 1


@register(name="WarpCoordinates")
class WarpCoordinates(_GridOp):
    """Internal: pixel coordinates (and their slope) of (B, O, nd) grid values."""

    def __init__(self, input_names=(), spatial=(), pixel_units=False, align_corners=False,
                 padding=ZERO):
        super().__init__(input_names, spatial, False, pixel_units=bool(pixel_units),
                         align_corners=bool(align_corners), padding=int(padding))

    def setup(self, grid):
        # built only by the warps' grad rules, on a (B, O, nd) reshape of a grid WarpByGrid or
        # WarpByFlow already checked: a reshape to a fixed shape fails first on any other shape
        assert len(grid) == 3 and grid[2] == len(self.spatial), (grid, self.spatial)
        return [tuple(grid), tuple(grid)]

    def forward(self, inputs, outputs):
        grid_coordinates.for_size(inputs[0].shape[0] * inputs[0].shape[1])(
            inputs[0], self.sizes, self.pixel_units, self.align_corners, self.padding, *outputs)

    backward = warp_coordinates_backward

    def grad_depends_input_data(self, i, j):
        return False

    def grad_depends_output_data(self, i, o):
        return o == 1


@register(name="GridCorners")
class GridCorners(_GridOp):
    """Internal: the corner values (B, C, O, corners) of x (B, C, pixels) at coordinates
    (B, O, nd), and the floor of the coordinates (no gradient)."""
    no_grad_inputs = (1,)

    def setup(self, x, coords):
        # built only by the warps' grad rules (and its own, through LinearAdjoint), on fixed-shape
        # reshapes of inputs the warp checked: another shape fails in the reshape first
        assert len(x) == 3 and x[2] == int(np.prod(self.spatial)) and len(coords) == 3 \
            and coords[0] == x[0], (x, coords, self.spatial)
        return [(x[0], x[1], coords[1], self.corners), tuple(coords)]

    def forward(self, inputs, outputs):
        gather_corners.for_size(outputs[0].size)(inputs[0], inputs[1], self.sizes, self.strides,
                                                 self.nearest, *outputs)

    backward = grid_corners_backward
