"""CUDA kernels of AffineGrid and, in the channel-first layout, of WarpByGrid / WarpByFlow
(channel-last warps run their CPU kernels).

AffineGrid is one batched ``blas.matmul`` with the op's normalised target grid (copied up once
per op). Warping follows the CPU's two steps (``ops/geometric.py``) with its per-element
functions compiled as device functions: ``grid_coordinate`` (unnormalisation and padding, one
thread per coordinate), then ``corner`` (the 2^nd bilinear / trilinear corners or the nearest
pixel, one thread per output element). Backward is one thread per sample: dx is scattered
with atomic adds (samples share corners), and the grid's gradient is the CPU's
``corner_weight_derivative`` sum times the coordinate's slope, written in the grid's (or the
flow's) layout. The grad rules' internal ops run here too: WarpCoordinates (the coordinates
kernel) and GridCorners (the corner values gathered, scattered back by atomic adds).
"""
import math

from numba import float64

from ..ops import geometric as cpu_geometric
from . import blas, device
from .device import store, unravel3
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

grid_coordinate = device_function(cpu_geometric.grid_coordinate.py_func)
corner = device_function(cpu_geometric.corner.py_func)
corner_weight_derivative = device_function(cpu_geometric.corner_weight_derivative.py_func)

MAX_ND = 3   # spatial axes a warp has at most (2 or 3)


# ---------------------------------------------------------------------------- kernels
@kernel
def coordinates_kernel(grid, from_flow, width, sizes, pixel_units, align_corners, padding,
                       coords, slope):
    """coords[b, o, d], slope[b, o, d] of grid (B, O, nd), or, ``from_flow``, of flow
    (B, nd, O) plus the pixel's own (x, y) (image width ``width``)."""
    i = cuda.grid(1)
    if i < coords.size:
        n_out, nd = coords.shape[1], coords.shape[2]
        b, o, d = unravel3(i, n_out, nd)
        if from_flow:
            g = grid[b, d, o] + (o % width if d == 0 else o // width)
        else:
            g = grid[b, o, d]
        u, s = grid_coordinate(g, sizes[d], pixel_units, align_corners, padding)
        coords[b, o, d] = u
        slope[b, o, d] = s


@kernel
def warp_kernel(x, coords, sizes, strides, nearest, y):
    """y[b, c, o] = sum over corners of weight * x[b, c, corner] (x: (B, C, pixels))."""
    i = cuda.grid(1)
    if i < y.size:
        channels, n_out = y.shape[1], y.shape[2]
        b, c, o = unravel3(i, channels, n_out)
        nd = coords.shape[2]
        acc = float64(0.0)
        for k in range(1 if nearest else 1 << nd):
            flat, w = corner(coords, sizes, strides, b, o, k, nd, nearest)
            if flat >= 0 and w != 0.0:
                acc += w * x[b, c, flat]
        y[b, c, o] = acc


@kernel
def warp_backward_kernel(x, coords, slope, sizes, strides, nearest, dy, dx, dgrid, want_dx,
                         want_dgrid, to_flow, accum_grid):
    """Per sample (b, o): dx[b, :, corner] += weight dy[b, :, o] (atomic), and dgrid (+)=
    slope * sum over corners of d(weight)/d(coordinate) x dy (0 for nearest); dgrid is
    (B, O, nd), or (B, nd, O) with ``to_flow``."""
    i = cuda.grid(1)
    channels, n_out = dy.shape[1], dy.shape[2]
    if i < dy.shape[0] * n_out:
        b = i // n_out
        o = i % n_out
        nd = coords.shape[2]
        dcoords = cuda.local.array(MAX_ND, float64)
        for d in range(nd):
            dcoords[d] = 0.0
        for k in range(1 if nearest else 1 << nd):
            flat, w = corner(coords, sizes, strides, b, o, k, nd, nearest)
            if flat < 0:
                continue
            if want_dx:
                for c in range(channels):
                    cuda.atomic.add(dx, (b, c, flat), w * dy[b, c, o])
            if want_dgrid and not nearest:
                xdy = float64(0.0)
                for c in range(channels):
                    xdy += x[b, c, flat] * dy[b, c, o]
                for d in range(nd):
                    dcoords[d] += corner_weight_derivative(coords, b, o, k, d, nd) * xdy
        if want_dgrid:
            for d in range(nd):
                g = dcoords[d] * slope[b, o, d]
                if to_flow:
                    dgrid[b, d, o] = dgrid[b, d, o] + g if accum_grid else g
                else:
                    dgrid[b, o, d] = dgrid[b, o, d] + g if accum_grid else g


# ---------------------------------------------------------------------------- AffineGrid
def _batches(n, shared):
    """Each of n batches reads batch 0 (``shared``) or its own."""
    return blas.batch_map(n, (1,) if shared else (n,), (n,))


@forward("AffineGrid")
def affine_grid_forward(op, inputs, outputs):
    """grid[b] = base theta[b]^T."""
    theta = inputs[0]
    batch, nd, _ = theta.shape
    base = device.kept(op, "base", op.base_for(theta.dtype))
    n_points = base.shape[0]
    blas.matmul(base.reshape(1, n_points, nd + 1), theta,
                outputs[0].reshape(batch, n_points, nd), trans_b=True,
                a_batch=_batches(batch, True), b_batch=_batches(batch, False))


@backward("AffineGrid")
def affine_grid_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dtheta[b] (+)= dgrid[b]^T base."""
    if not propagate_down[0]:
        return
    dtheta = input_grads[0]
    batch, nd, _ = dtheta.shape
    base = device.kept(op, "base", op.base_for(dtheta.dtype))
    n_points = base.shape[0]
    blas.matmul(output_grads[0].reshape(batch, n_points, nd), base.reshape(1, n_points, nd + 1),
                dtheta, trans_a=True, accum=accum[0], a_batch=_batches(batch, False),
                b_batch=_batches(batch, True))


# ---------------------------------------------------------------------------- warps
def _coordinates(op, inputs):
    """(coords, slope) of shape (B, O, nd) in device buffers kept on the op: the CPU's
    ``op.coordinates`` (WarpByFlow: pixel units, aligned corners, 'repeat' padding)."""
    batch, _, n_out = op.y_view
    nd = len(op.spatial)
    grid = inputs[1]
    from_flow = op.name == "WarpByFlow"
    grid3 = grid.reshape(batch, nd, n_out) if from_flow else grid.reshape(batch, n_out, nd)
    if from_flow:
        flags = (True, True, cpu_geometric.REPEAT)
    else:
        flags = (False, bool(op.align_corners), op.padding)
    kept = op.__dict__.setdefault("device_coordinates", {})
    if grid.dtype not in kept:
        kept[grid.dtype] = (device.empty((batch, n_out, nd), grid.dtype),
                            device.empty((batch, n_out, nd), grid.dtype))
    coords, slope = kept[grid.dtype]
    device.launch(coordinates_kernel, coords.size, grid3, from_flow, op.spatial[-1],
                  device.kept(op, "sizes", op.sizes), *flags, coords, slope)
    return coords, slope


def _channel_first(op):
    return not op.channel_last


@forward("WarpByGrid", "WarpByFlow", when=_channel_first)
def warp_forward(op, inputs, outputs):
    coords, _ = _coordinates(op, inputs)
    y = outputs[0].reshape(op.y_view)
    device.launch(warp_kernel, y.size, inputs[0].reshape(op.x_view), coords,
                  device.kept(op, "sizes", op.sizes), device.kept(op, "strides", op.strides),
                  op.nearest, y)


@backward("WarpByGrid", "WarpByFlow")
def warp_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    want_dx, want_dgrid = bool(propagate_down[0]), bool(propagate_down[1])
    if not (want_dx or want_dgrid):
        return
    coords, slope = _coordinates(op, inputs)
    dy = output_grads[0].reshape(op.y_view)
    dx = input_grads[0].reshape(op.x_view) if want_dx else dy   # dy: a stand-in, not written
    if want_dx and not accum[0]:
        device.fill(dx, 0)
    x = inputs[0].reshape(op.x_view) if want_dgrid else dy       # dy: a stand-in, not read
    to_flow = op.name == "WarpByFlow"
    if want_dgrid:
        dgrid = input_grads[1].reshape(coords.shape[0], coords.shape[2], coords.shape[1]) \
            if to_flow else input_grads[1].reshape(coords.shape)
    else:
        dgrid = coords   # a stand-in, not written
    device.launch(warp_backward_kernel, coords.shape[0] * coords.shape[1], x, coords, slope,
                  device.kept(op, "sizes", op.sizes), device.kept(op, "strides", op.strides),
                  op.nearest, dy, dx, dgrid, want_dx, want_dgrid, to_flow,
                  bool(accum[1]) if want_dgrid else False)


# ---------------------------------------------------------------------------- grad-rule internals
@device_function
def corner_element(t, shape, coords, sizes, strides, nearest):
    """(b, c, o, k, flat): element t of a (batch, channels, n_out, n_corners) corners array and
    the flat image position of its corner (-1 outside the image)."""
    b, c, ok = unravel3(t, shape[1], shape[2] * shape[3])
    _, o, k = unravel3(ok, shape[2], shape[3])
    flat, _ = corner(coords, sizes, strides, b, o, k, coords.shape[2], nearest)
    return b, c, o, k, flat


@kernel
def gather_corners_kernel(x, coords, sizes, strides, nearest, corners):
    """corners[b, c, o, k] = x[b, c, corner k of sample (b, o)] (0 outside the image)."""
    t = cuda.grid(1)
    if t < corners.size:
        b, c, o, k, flat = corner_element(t, corners.shape, coords, sizes, strides, nearest)
        corners[b, c, o, k] = x[b, c, flat] if flat >= 0 else 0.0


@kernel
def floor_kernel(coords, base):
    i = cuda.grid(1)
    if i < base.size:
        n_out, nd = base.shape[1], base.shape[2]
        b, o, d = unravel3(i, n_out, nd)
        base[b, o, d] = math.floor(coords[b, o, d])


@kernel
def scatter_corners_kernel(dcorners, coords, sizes, strides, nearest, dx):
    """dx[b, c, corner k of (b, o)] += dcorners[b, c, o, k] (atomic)."""
    t = cuda.grid(1)
    if t < dcorners.size:
        b, c, o, k, flat = corner_element(t, dcorners.shape, coords, sizes, strides, nearest)
        if flat >= 0:
            cuda.atomic.add(dx, (b, c, flat), dcorners[b, c, o, k])


@kernel
def times_slope_kernel(dcoords, slope, dgrid, accum):
    i = cuda.grid(1)
    if i < dgrid.size:
        g = dcoords[i] * slope[i]
        store(dgrid, i, g, accum)


@forward("WarpCoordinates")
def warp_coordinates_forward(op, inputs, outputs):
    coords = outputs[0]
    device.launch(coordinates_kernel, coords.size, inputs[0], False, 1,
                  device.kept(op, "sizes", op.sizes), bool(op.pixel_units),
                  bool(op.align_corners), op.padding, coords, outputs[1])


@backward("WarpCoordinates")
def warp_coordinates_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                              accum):
    """dgrid (+)= dcoords * slope."""
    if propagate_down[0]:
        dgrid = input_grads[0]
        device.launch(times_slope_kernel, dgrid.size, output_grads[0].reshape(dgrid.size),
                      outputs[1].reshape(dgrid.size), dgrid.reshape(dgrid.size), accum[0])


@forward("GridCorners")
def grid_corners_forward(op, inputs, outputs):
    x, coords = inputs
    sizes, strides = device.kept(op, "sizes", op.sizes), device.kept(op, "strides", op.strides)
    device.launch(gather_corners_kernel, outputs[0].size, x, coords, sizes, strides,
                  op.nearest, outputs[0])
    device.launch(floor_kernel, outputs[1].size, coords, outputs[1])


@backward("GridCorners")
def grid_corners_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                          accum):
    """dx (+)= the corner gradients scattered back (the coordinates get none)."""
    if propagate_down[0]:
        dx = input_grads[0]
        if not accum[0]:
            device.fill(dx, 0)
        device.launch(scatter_corners_kernel, output_grads[0].size, output_grads[0], inputs[1],
                      device.kept(op, "sizes", op.sizes), device.kept(op, "strides", op.strides),
                      op.nearest, dx)
