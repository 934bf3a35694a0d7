"""Backward kernels and grad rules of AffineGrid, WarpByGrid and WarpByFlow."""
import numpy as np

from ..ops.blas import gemm


def affine_grid_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[0]:
        return
    dtheta = grad_inputs[0]
    base = op.base_for(dtheta.dtype)
    dgrid = grad_outputs[0].reshape(dtheta.shape[0], base.shape[0], dtheta.shape[1])
    for b in range(dtheta.shape[0]):   # dtheta[b] = dgrid[b]^T base
        gemm(dgrid[b], base, dtheta[b], trans_a=True, accumulate=accum[0])


def affine_grid_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, size=None,
                     align_corners=False):
    from .. import functions as F
    from ..ops.geometric import target_grid
    from ..variable import Variable
    batch, nd = input_shapes[0][0], len(size)
    base = target_grid(tuple(size), align_corners)
    base_v = Variable.from_numpy_array(np.broadcast_to(base, (batch,) + base.shape).copy())
    dgrid = F.reshape(grad_inputs[0], (batch, base.shape[0], nd), inplace=False)
    return [F.batch_matmul(dgrid, base_v, True, False)]


def warp_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    want_dx, want_dgrid = propagate_down[0], propagate_down[1]
    coords, slope = op.coordinates(inputs)
    dy = op.to_channels_first(grad_outputs[0], op.y_view)
    x = op.to_channels_first(inputs[0], op.x_view) if want_dgrid else dy
    direct = want_dx and not op.channel_last
    if direct:
        dx = grad_inputs[0].reshape(op.x_view)
        if not accum[0]:
            dx.fill(0)
    else:
        dx = np.zeros(op.x_view if want_dx else (1, 1, 1), dy.dtype)
    dcoords = np.empty_like(coords)
    op.warp_backward(x, coords, op.sizes, op.strides, op.nearest, dy, dx, dcoords, want_dx,
                     want_dgrid)
    if want_dx and not direct:
        op.from_channels_first(dx, grad_inputs[0], op.spatial, accum[0])
    if want_dgrid:
        op.store_grid_gradient(dcoords * slope, grad_inputs[1], accum[1])


# ------------------------------------------------------------------ warping (see ops/geometric.py)
def _geo():
    from ..ops import geometric
    return geometric


def _node(op, inputs):
    from ..function import build
    return build(op, inputs)


def warp_coordinates_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down,
                              accum):
    if propagate_down[0]:
        g = grad_outputs[0] * outputs[1]
        if accum[0]:
            grad_inputs[0] += g
        else:
            grad_inputs[0][...] = g


def warp_coordinates_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [grad_inputs[0] * outputs[1]]   # the slope is piecewise constant


def grid_corners_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        dx = grad_inputs[0]
        if not accum[0]:
            dx.fill(0)
        dc = grad_outputs[0]
        _geo().scatter_corners.for_size(dc.size)(dc, inputs[1], op.sizes, op.strides, op.nearest, dx)


def grid_corners_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, spatial=(),
                      nearest=False):
    adjoint = _geo().GridCornersAdjoint(input_names=("dcorners", "coords"), spatial=spatial,
                                        nearest=nearest)
    return [_node(adjoint, [grad_inputs[0], inputs[1]]), None]


def grid_corners_adjoint_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down,
                                  accum):
    if propagate_down[0]:
        dc = grad_inputs[0]
        target = np.empty_like(dc) if accum[0] else dc
        base = np.empty(inputs[1].shape, dc.dtype)
        _geo().gather_corners.for_size(dc.size)(grad_outputs[0], inputs[1], op.sizes, op.strides,
                                                op.nearest, target, base)
        if accum[0]:
            dc += target


def grid_corners_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                              spatial=(), nearest=False):
    corners = _geo().GridCorners(input_names=("x", "coords"), spatial=spatial, nearest=nearest)
    return [_node(corners, [grad_inputs[0], inputs[1]])[0], None]


def _warp_grads(dy, x, coords, spatial, nearest):
    """F-built (dx, dcoords) of y = warp(x, coords) for (B, C, O) dy, (B, C, pixels) x and
    (B, O, nd) coordinates; dcoords is None for nearest (zero almost everywhere)."""
    from .. import functions as F
    geo = _geo()
    corners, base = _node(geo.GridCorners(input_names=("x", "coords"), spatial=spatial,
                                          nearest=nearest), [x, coords])
    B, C, O = dy.shape
    nd = len(spatial)
    dy4 = F.reshape(dy, (B, C, O, 1), inplace=False)
    adjoint = geo.GridCornersAdjoint(input_names=("dcorners", "coords"), spatial=spatial,
                                     nearest=nearest)
    if nearest:
        return _node(adjoint, [dy4, coords]), None

    def column(a, k):
        return F.reshape(F.slice(a, (0, 0, k), (B, O, k + 1), (1, 1, 1)), (B, O), inplace=False)

    frac = coords - base
    f = [column(frac, d) for d in range(nd)]
    corners_k = range(1 << nd)

    def factor(k, d):
        return f[d] if (k >> d) & 1 else 1 - f[d]

    def weight(k, skip=None):
        w = None
        for d in range(nd):
            if d != skip:
                w = factor(k, d) if w is None else w * factor(k, d)
        return w

    weights = F.reshape(F.stack(*[weight(k) for k in corners_k], axis=2), (B, 1, O, 1 << nd),
                        inplace=False)
    dx = _node(adjoint, [dy4 * weights, coords])
    g = F.sum(dy4 * corners, axis=1)   # (B, O, corners): dy . corner value
    dfrac = []
    for d in range(nd):
        terms = [column(g, k) * (weight(k, d) if (k >> d) & 1 else -weight(k, d))
                 for k in corners_k]
        dfrac.append(F.add_n(*terms))
    return dx, F.stack(*dfrac, axis=2)


def warp_by_grid_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, mode="linear",
                      padding_mode="zero", align_corners=False, channel_last=False):
    from .. import functions as F
    geo = _geo()
    x, grid = inputs
    xs, gs = tuple(input_shapes[0]), tuple(input_shapes[1])
    nd, B = gs[-1], gs[0]
    O = int(np.prod(gs[1:-1]))
    spatial = xs[1:-1] if channel_last else xs[2:]
    C = xs[-1] if channel_last else xs[1]
    to_first = (0, nd + 1) + tuple(range(1, nd + 1))
    to_last = (0,) + tuple(range(2, nd + 2)) + (1,)

    def channels_first(a, pixels):
        if channel_last:
            a = F.transpose(a, to_first)
        return F.reshape(a, (B, C, pixels), inplace=False)

    coords, slope = _node(geo.WarpCoordinates(input_names=("grid",), spatial=spatial,
                                              align_corners=align_corners,
                                              padding=geo.PADDING[padding_mode]),
                          [F.reshape(grid, (B, O, nd), inplace=False)])
    dx, dcoords = _warp_grads(channels_first(grad_inputs[0], O),
                              channels_first(x, int(np.prod(spatial))), coords, spatial,
                              mode == "nearest")
    dx = F.reshape(dx, (B, C) + tuple(spatial), inplace=False)
    if channel_last:
        dx = F.transpose(dx, to_last)
    dgrid = None if dcoords is None else F.reshape(dcoords * slope, gs, inplace=False)
    return [dx, dgrid]


def warp_by_flow_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    from ..variable import Variable
    geo = _geo()
    data, flow = inputs
    N, C, H, W = input_shapes[0]
    O = H * W
    yy, xx = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    pixels = np.stack([xx.reshape(-1), yy.reshape(-1)], axis=1).astype(np.float64)
    grid = F.transpose(F.reshape(flow, (N, 2, O), inplace=False), (0, 2, 1)) + \
        Variable.from_numpy_array(np.broadcast_to(pixels, (N, O, 2)).copy())
    coords, slope = _node(geo.WarpCoordinates(input_names=("grid",), spatial=(H, W),
                                              pixel_units=True, align_corners=True,
                                              padding=geo.REPEAT), [grid])
    dx, dcoords = _warp_grads(F.reshape(grad_inputs[0], (N, C, O), inplace=False),
                              F.reshape(data, (N, C, O), inplace=False), coords, (H, W), False)
    dflow = F.reshape(F.transpose(dcoords * slope, (0, 2, 1)), (N, 2, H, W), inplace=False)
    return [F.reshape(dx, (N, C, H, W), inplace=False), dflow]
