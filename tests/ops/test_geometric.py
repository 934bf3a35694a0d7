"""AffineGrid, WarpByGrid and WarpByFlow against NumPy references, with gradients (also with
respect to the grid and the flow) checked numerically to second order."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import check_backward, check_forward, check_function, check_grad_rule


def _var(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a, np.float32), need_grad=need_grad)


# ------------------------------------------------------------------------------ AffineGrid
def normalized_axis(n, align_corners):
    if align_corners:
        return np.linspace(-1, 1, n)
    return (2 * np.arange(n) + 1) / n - 1


def affine_grid_ref(theta, size, align_corners):
    axes = np.meshgrid(*[normalized_axis(n, align_corners) for n in size], indexing="ij")
    base = np.stack(list(axes[::-1]) + [np.ones(size)], -1)   # (x, y[, z], 1) at every pixel
    return np.einsum("...k,bjk->b...j", base, theta)


@given(st.sampled_from([(3, 4), (2, 3, 2)]), st.booleans(), st.integers(0, 2 ** 16))
def test_affine_grid(size, align_corners, seed):
    nd = len(size)
    theta = np.random.RandomState(seed).randn(2, nd, nd + 1)
    check_function(lambda t: F.affine_grid(t, size, align_corners), [theta],
                   lambda t: affine_grid_ref(t, size, align_corners))


def test_affine_grid_errors():
    with pytest.raises(ValueError, match="AffineGrid.*\\(B, 2, 3\\)"):
        F.affine_grid(_var(np.ones((2, 3, 3))), (3, 4))
    with pytest.raises(ValueError, match="AffineGrid.*size"):
        F.affine_grid(_var(np.ones((2, 2, 3))), (3,))


# ------------------------------------------------------------------------------ WarpByGrid
def warp_ref(x, grid, mode, padding, align_corners, channel_last=False):
    """Bilinear / trilinear (or nearest) sampling of channel-first x at unnormalised grid
    coordinates; 'repeat' clamps them, 'reflect' mirrors them; 'zero' reads 0 outside."""
    if channel_last:
        x = np.moveaxis(x, -1, 1)
    spatial = x.shape[2:]
    nd = len(spatial)
    coords = []
    for d in range(nd):
        n = spatial[nd - 1 - d]     # the grid's entry d is for the d-th axis from the last
        g = grid[..., d]
        u = (g + 1) / 2 * (n - 1) if align_corners else ((g + 1) * n - 1) / 2
        if padding == "reflect":
            lo, hi = (0, n - 1) if align_corners else (-0.5, n - 0.5)
            c = np.abs(u - lo)
            k = np.floor(c / (hi - lo))
            r = c - k * (hi - lo)
            u = np.where(k % 2 == 0, lo + r, hi - r)
        if padding != "zero":
            u = np.clip(u, 0, n - 1)
        coords.append(u)
    B, C = x.shape[:2]
    out = np.zeros((B, C) + grid.shape[1:-1])
    for b in range(B):
        corners = [(0,)] * nd if mode == "nearest" else [(0, 1)] * nd
        for bits in np.ndindex(*[len(c) for c in corners]):
            w = 1.0
            index = []
            for d in range(nd):
                u = coords[d][b]
                if mode == "nearest":
                    i = np.floor(u + 0.5).astype(int)
                else:
                    i = np.floor(u).astype(int) + bits[d]
                    w = w * np.where(bits[d], u - np.floor(u), 1 - (u - np.floor(u)))
                index.append(i)
            inside = np.all([(i >= 0) & (i < spatial[nd - 1 - d]) for d, i in enumerate(index)], 0)
            clipped = [np.clip(i, 0, spatial[nd - 1 - d] - 1) for d, i in enumerate(index)]
            values = x[b][(slice(None),) + tuple(clipped[::-1])]
            out[b] += np.where(inside, w * values, 0)
    return np.moveaxis(out, 1, -1) if channel_last else out


PADDINGS = ["zero", "repeat", "reflect"]


@given(st.sampled_from(["linear", "nearest"]), st.sampled_from(PADDINGS), st.booleans(),
       st.integers(2, 3), st.integers(0, 2 ** 16))
def test_warp_by_grid_forward(mode, padding, align_corners, nd, seed):
    rng = np.random.RandomState(seed)
    x = rng.randn(2, 2, *([3] * nd))
    grid = rng.uniform(-1.6, 1.6, (2,) + (2,) * nd + (nd,))
    check_forward(lambda a, g: F.warp_by_grid(a, g, mode, padding, align_corners), [x, grid],
                  lambda a, g: warp_ref(a, g, mode, padding, align_corners))


def _grid_away_from_pixels(grid, n, align_corners):
    """Grid values whose pixel coordinates are not near an integer (or reflection edge), so
    the piecewise-bilinear map is smooth around them."""
    u = (grid + 1) / 2 * (n - 1) if align_corners else ((grid + 1) * n - 1) / 2
    frac = u * 2 - np.floor(u * 2)
    u = np.where(np.abs(frac - 0.5) > 0.4, u + 0.25, u)
    return (2 * u / (n - 1) - 1) if align_corners else ((2 * u + 1) / n - 1)


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align_corners", [False, True])
def test_warp_by_grid_gradients(padding, align_corners):
    rng = np.random.RandomState(1)
    x = rng.randn(1, 2, 3, 3)
    grid = _grid_away_from_pixels(rng.uniform(-1.4, 1.4, (1, 2, 2, 2)), 3, align_corners)
    check_function(lambda a, g: F.warp_by_grid(a, g, "linear", padding, align_corners), [x, grid],
                   lambda a, g: warp_ref(a, g, "linear", padding, align_corners))


def test_warp_by_grid_3d_and_channel_last_gradients():
    rng = np.random.RandomState(2)
    x = rng.randn(1, 1, 2, 3, 2)
    grid = _grid_away_from_pixels(rng.uniform(-1.2, 1.2, (1, 1, 2, 2, 3)), 2, False)
    check_function(lambda a, g: F.warp_by_grid(a, g, "linear", "zero", False), [x, grid])
    xc = rng.randn(1, 3, 3, 2)
    grid = _grid_away_from_pixels(rng.uniform(-1.2, 1.2, (1, 2, 2, 2)), 3, True)
    check_function(lambda a, g: F.warp_by_grid(a, g, "linear", "reflect", True, True), [xc, grid],
                   lambda a, g: warp_ref(a, g, "linear", "reflect", True, channel_last=True))


def test_warp_by_grid_nearest_gradients():
    """Nearest sampling moves values: x gets them back; the grid gets zero (nnabla raises)."""
    rng = np.random.RandomState(3)
    x, grid = rng.randn(1, 2, 3, 3), rng.uniform(-1.2, 1.2, (1, 2, 3, 2))

    def fn(a, g):
        return F.warp_by_grid(a, g, "nearest", "repeat", False)
    check_backward(fn, [x, grid], wrt=[0])
    check_grad_rule(fn, [x, grid])
    xv, gv = _var(x, True), _var(grid, True)
    y = fn(xv, gv)
    y.forward()
    gv.g = 0
    y.backward(np.ones(y.shape))
    np.testing.assert_array_equal(gv.g, 0)


def test_warp_by_grid_errors():
    x = _var(np.ones((2, 3, 4, 4)))
    with pytest.raises(ValueError, match="WarpByGrid.*grid of shape"):
        F.warp_by_grid(x, _var(np.ones((2, 4, 4, 4))))
    with pytest.raises(ValueError, match="WarpByGrid.*x of shape"):
        F.warp_by_grid(x, _var(np.ones((3, 4, 4, 2))))


# ------------------------------------------------------------------------------ WarpByFlow
def warp_by_flow_ref(data, flow):
    N, C, H, W = data.shape
    yy, xx = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    out = np.zeros_like(data)
    for n in range(N):
        u = np.clip(xx + flow[n, 0], 0, W - 1)
        v = np.clip(yy + flow[n, 1], 0, H - 1)
        u0, v0 = np.floor(u).astype(int), np.floor(v).astype(int)
        u1, v1 = np.minimum(u0 + 1, W - 1), np.minimum(v0 + 1, H - 1)
        fu, fv = u - u0, v - v0
        d = data[n]
        out[n] = (d[:, v0, u0] * (1 - fu) * (1 - fv) + d[:, v0, u1] * fu * (1 - fv)
                  + d[:, v1, u0] * (1 - fu) * fv + d[:, v1, u1] * fu * fv)
    return out


def test_warp_by_flow():
    rng = np.random.RandomState(4)
    data = rng.randn(1, 2, 3, 4)
    flow = rng.uniform(-2, 2, (1, 2, 3, 4))
    flow = np.where(np.abs(flow - np.round(flow)) < 0.1, flow + 0.25, flow)
    check_function(F.warp_by_flow, [data, flow], warp_by_flow_ref)
    big = rng.randn(2, 3, 5, 6)
    check_forward(F.warp_by_flow, [big, rng.uniform(-3, 3, (2, 2, 5, 6))], warp_by_flow_ref)


def test_warp_by_flow_errors():
    with pytest.raises(ValueError, match="WarpByFlow.*flow"):
        F.warp_by_flow(_var(np.ones((1, 3, 4, 4))), _var(np.ones((1, 3, 4, 4))))
