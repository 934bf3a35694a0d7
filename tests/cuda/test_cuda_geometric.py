"""AffineGrid, WarpByGrid and WarpByFlow on the device against the CPU kernels."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import assert_same_on_cuda, cuda_context

rng = np.random.RandomState(0)


def signed(*shape, scale=1.0):
    return (rng.uniform(-1, 1, shape) * scale).astype(np.float32)


def theta(batch, nd):
    return (np.eye(nd, nd + 1) + signed(batch, nd, nd + 1, scale=0.3)).astype(np.float32)


CASES = [
    ("affine grid 2-d", lambda t: F.affine_grid(t, (2, 3)), [theta(2, 2)]),
    ("affine grid 3-d aligned", lambda t: F.affine_grid(t, (2, 2, 3), align_corners=True),
     [theta(1, 3)]),
    ("warp linear, zero padding", lambda x, g: F.warp_by_grid(x, g),
     [signed(1, 2, 3, 4), signed(1, 2, 3, 2, scale=1.3)]),
    ("warp linear, reflect, aligned",
     lambda x, g: F.warp_by_grid(x, g, padding_mode="reflect", align_corners=True),
     [signed(2, 1, 3, 3), signed(2, 2, 2, 2, scale=2.5)]),
    ("warp nearest, repeat",
     lambda x, g: F.warp_by_grid(x, g, mode="nearest", padding_mode="repeat"),
     [signed(1, 2, 3, 3), signed(1, 2, 2, 2, scale=1.3)]),
    ("warp trilinear", lambda x, g: F.warp_by_grid(x, g),
     [signed(1, 1, 2, 2, 3), signed(1, 2, 2, 2, 3)]),
    ("warp by flow", F.warp_by_flow, [signed(1, 2, 3, 4), signed(1, 2, 3, 4, scale=1.5)]),
    ("affine grid into a warp, gradients accumulate",
     lambda x, t: (F.warp_by_grid(x, F.affine_grid(t, (2, 3)))
                   + F.warp_by_grid(x, F.affine_grid(t, (2, 3)) * 0.5)),
     [signed(2, 1, 3, 3), theta(2, 2)]),
]


@pytest.mark.parametrize("name, build, arrays", CASES, ids=[c[0] for c in CASES])
def test_geometric(name, build, arrays):
    assert_same_on_cuda(build, *arrays, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("no_grad", [(0,), (1,)], ids=["grid only", "x only"])
def test_some_gradients(no_grad):
    assert_same_on_cuda(lambda x, g: F.warp_by_grid(x, g), signed(1, 2, 3, 3),
                        signed(1, 2, 2, 2), no_grad=no_grad, rtol=1e-4, atol=1e-5)


def test_grad_rule_internals():
    """nn.grad of a warp (WarpCoordinates, GridCorners and their gradients on the device)
    against the CPU: first derivatives as a graph, then differentiated again."""
    x0, g0 = signed(1, 2, 3, 3), signed(1, 2, 2, 2, scale=1.2)
    results = []
    for ctx in (nn.Context(), cuda_context()):
        with nn.context_scope(ctx):
            x = nn.Variable.from_numpy_array(x0, need_grad=True)
            g = nn.Variable.from_numpy_array(g0, need_grad=True)
            y = F.warp_by_grid(x, g, padding_mode="reflect")
            dx, dg = nn.grad([F.sum(y * y)], [x, g])
            total = F.sum(dx * dx) + F.sum(dg * 0.5)
        total.forward()
        total.backward()
        results.append([v.copy() for v in (dx.d, dg.d, x.g, g.g)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
