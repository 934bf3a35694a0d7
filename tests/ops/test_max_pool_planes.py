"""MaxPooling of channel-first samples (ops/max_pool_kernels.py): the unclipped windows' written-
out loops (2x2, 3x3 and any other kernel) and the clipped ones at the borders, against the
window-by-window reference, forward and the backward's scatter to the winners. Inputs of small
integers so windows tie (the first element in (d, h, w) order wins); sizes large enough to have
unclipped windows between clipped ones."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ext_utils import get_extension_context
from nnabla_jit.ops.kernels import parallel_threshold
from nnabla_jit.ops.pooling import MAX, pool
from nnabla_jit.ops.pooling_geometry import PoolGeometry

from .test_pooling import max_pooling_backward_ref, pool_ref

GEOMETRIES = [   # shape, kernel, stride, pad, ignore_border
    ((2, 3, 8, 10), (2, 2), (2, 2), (0, 0), True),
    ((2, 3, 9, 11), (2, 2), (2, 2), (0, 0), False),      # partial windows at the ends
    ((2, 2, 9, 9), (3, 3), (2, 2), (1, 1), True),        # ResNet's stem: padded, overlapping
    ((2, 2, 7, 9), (3, 3), (1, 1), (1, 1), False),
    ((2, 2, 9, 8), (2, 3), (1, 2), (1, 0), True),        # kernel not the stride, not square
    ((1, 2, 10, 11), (4, 4), (3, 2), (2, 1), False),     # the generic loop
    ((1, 2, 6, 7, 8), (2, 3, 3), (1, 2, 2), (1, 1, 0), False),   # 3-d: further planes
    ((2, 2, 5, 6, 6), (3, 2, 2), (2, 2, 2), (0, 0, 0), True),
    ((3, 2, 3, 3), (5, 5), (2, 2), (2, 2), True),        # no unclipped window
    ((3, 9), (3,), (2,), (1,), False),                    # 1-d (ops that reach the kernel directly)
]


@pytest.mark.parametrize("shape, kernel, stride, pad, ignore_border", GEOMETRIES)
# float64 parallel left out, as nnabla_jit.testing's variants leave it (its compile is the cost)
@pytest.mark.parametrize("dtype, parallel", [(np.float32, False), (np.float32, True), (np.float64, False)])
def test_max_pooling_and_its_gradient_match_the_reference(shape, kernel, stride, pad, ignore_border, dtype,
                                                          parallel):
    if len(kernel) == 1:
        pytest.skip("F.max_pooling pools 2-d and 3-d windows only; 1-d is covered by the kernel test")
    rng = np.random.RandomState(len(shape) + sum(kernel) + sum(stride))
    xv = rng.randint(0, 4, shape).astype(dtype)   # many ties
    a = dict(kernel=kernel, stride=stride, ignore_border=ignore_border, pad=pad, channel_last=False)
    want, _ = pool_ref(xv, mode="max", **a)
    dyv = rng.uniform(-1, 1, want.shape).astype(dtype)
    want_dx = max_pooling_backward_ref(dyv, xv, **a)
    config = "float" if dtype == np.float32 else "double"
    with parallel_threshold(0 if parallel else None), \
            nn.context_scope(get_extension_context("cpu", type_config=config)):
        x = nn.Variable.from_numpy_array(xv, need_grad=True)
        y = F.max_pooling(x, **a)
        y.forward()
        x.grad.zero()
        y.backward(dyv)
    np.testing.assert_array_equal(y.d, want)
    np.testing.assert_allclose(x.g, want_dx, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape, kernel, stride, pad, ignore_border", GEOMETRIES)
@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_the_kernel_finds_the_reference_winners(shape, kernel, stride, pad, ignore_border, variant):
    class Node:
        def fail(self, message, *args):
            raise ValueError(message.format(*args))

    xv = np.random.RandomState(3).randint(0, 3, shape).astype(np.float32)
    a = dict(kernel=kernel, stride=stride, ignore_border=ignore_border, pad=pad, channel_last=False)
    want, winners = pool_ref(xv, mode="max", **a)
    geo = PoolGeometry(Node(), shape, kernel, stride, pad, ignore_border, False)
    y = np.full(geo.out_shape, np.nan, np.float32)
    index = np.full(geo.y2, -1, np.int64)
    with parallel_threshold(0 if variant == "parallel" else None):
        pool(geo, xv, y, index, MAX)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(index, winners.reshape(geo.y2))
