"""Grad rules of the geometric ops (``ops/geometric.py``): graphs of F ops, differentiable again.
"""
import numpy as np

from .. import functions as F
from ..function import build
from ..ops import geometric as geo
from ..ops.geometric import target_grid
from ..ops.registry import grad_rule
from ..variable import Variable
from .adjoint import linear_adjoint


@grad_rule('AffineGrid')
def affine_grid_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, size=None,
                     align_corners=False):
    batch, nd = input_shapes[0][0], len(size)
    base = target_grid(tuple(size), align_corners)
    base_v = Variable.from_numpy_array(np.broadcast_to(base, (batch,) + base.shape).copy())
    dgrid = F.reshape(grad_inputs[0], (batch, base.shape[0], nd), inplace=False)
    return [F.batch_matmul(dgrid, base_v, True, False)]


# ------------------------------------------------------------------ warping (see ops/geometric.py)
def _node(op, inputs):
    return build(op, inputs)


@grad_rule('WarpCoordinates')
def warp_coordinates_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [grad_inputs[0] * outputs[1]]   # the slope is piecewise constant


def _corners_adjoint(dcorners, coords, x_shape, spatial, nearest):
    """dx of GridCorners' corner values (its coordinates held fixed)."""
    return linear_adjoint("GridCorners", dict(spatial=tuple(spatial), nearest=nearest), x_shape, [dcorners],
                          held=[coords], source_inputs=("x", "coords"))


@grad_rule('GridCorners')
def grid_corners_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, spatial=(),
                      nearest=False):
    return [_corners_adjoint(grad_inputs[0], inputs[1], input_shapes[0], spatial, nearest), None]


def _warp_grads(dy, x, coords, spatial, nearest):
    """F-built (dx, dcoords) of y = warp(x, coords) for (B, C, O) dy, (B, C, pixels) x and
    (B, O, nd) coordinates; dcoords is None for nearest (zero almost everywhere)."""
    corners, base = _node(geo.GridCorners(input_names=("x", "coords"), spatial=spatial,
                                          nearest=nearest), [x, coords])
    B, C, O = dy.shape
    nd = len(spatial)
    dy4 = F.reshape(dy, (B, C, O, 1), inplace=False)
    if nearest:
        return _corners_adjoint(dy4, coords, x.shape, spatial, nearest), None

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
    dx = _corners_adjoint(dy4 * weights, coords, x.shape, spatial, nearest)
    g = F.sum(dy4 * corners, axis=1)   # (B, O, corners): dy . corner value
    dfrac = []
    for d in range(nd):
        terms = [column(g, k) * (weight(k, d) if (k >> d) & 1 else -weight(k, d))
                 for k in corners_k]
        dfrac.append(F.add_n(*terms))
    return dx, F.stack(*dfrac, axis=2)


@grad_rule('WarpByGrid')
def warp_by_grid_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, mode="linear",
                      padding_mode="zero", align_corners=False, channel_last=False):
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


@grad_rule('WarpByFlow')
def warp_by_flow_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
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
