"""Pooling on the device against the CPU kernels (tiny shapes: the simulator is slow)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


CASES = [
    ("max 2-d overlapping", lambda x: F.max_pooling(x, (2, 2), stride=(1, 1)), [signed(1, 2, 3, 3)]),
    ("max padded, partial windows",
     lambda x: F.max_pooling(x, (2, 3), stride=(2, 2), pad=(1, 1), ignore_border=False),
     [signed(1, 1, 3, 4)]),
    ("max channel-last", lambda x: F.max_pooling(x, (2, 2), channel_last=True), [signed(1, 4, 4, 2)]),
    ("average including pad", lambda x: F.average_pooling(x, (2, 2), pad=(1, 1)), [signed(1, 2, 3, 3)]),
    ("average excluding pad",   # nnabla pools 2-d and 3-d windows only
     lambda x: F.average_pooling(x, (1, 3), stride=(1, 2), pad=(0, 1), including_pad=False),
     [signed(1, 2, 5)]),
    ("sum 3-d", lambda x: F.sum_pooling(x, (2, 1, 2)), [signed(1, 2, 2, 3)]),
    ("global average", F.global_average_pooling, [signed(2, 3, 2, 2)]),
    ("gradients accumulate",
     lambda x: F.max_pooling(x, (2, 2)) * 2.0 + F.average_pooling(x, (2, 2)) + F.max_pooling(x, (2, 2)),
     [signed(1, 1, 4, 4)]),
]


@pytest.mark.parametrize("name, build, arrays", CASES, ids=[c[0] for c in CASES])
def test_pooling(name, build, arrays):
    assert_same_on_cuda(build, *arrays)


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(kind=st.sampled_from(["max", "average", "sum"]), size=st.integers(2, 5),
       kernel=st.integers(1, 3), stride=st.integers(1, 2), pad=st.integers(0, 1),
       ignore_border=st.booleans())
def test_drawn_poolings(kind, size, kernel, stride, pad, ignore_border):
    pool = getattr(F, kind + "_pooling")
    kernel = min(kernel, size + 2 * pad)
    pad = min(pad, kernel - 1)
    args = dict(stride=(stride, stride), pad=(pad, pad))
    if kind != "average" or pad == 0:
        args["ignore_border"] = ignore_border
    assert_same_on_cuda(lambda x: pool(x, (kernel, kernel), **args), signed(1, 2, size, size))
