"""AffineGrid, WarpByGrid and WarpByFlow on the device against the CPU kernels."""
import numpy as np
import pytest

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

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
