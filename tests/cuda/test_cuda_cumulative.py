"""CumSum and CumProd on the device against the CPU kernels (tiny shapes)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


FLAGS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("exclusive, reverse", FLAGS)
@pytest.mark.parametrize("op", [F.cumsum, F.cumprod])
def test_cumulative(op, exclusive, reverse):
    assert_same_on_cuda(lambda x: op(x, axis=1, exclusive=exclusive, reverse=reverse),
                        signed(2, 4, 2))


def test_cumprod_gradient_through_zeros():
    x = signed(2, 4)
    x[0, 1] = 0.0
    x[1, 2] = x[1, 3] = 0.0
    assert_same_on_cuda(lambda x: F.cumprod(x, axis=1) + F.cumprod(x, axis=1, exclusive=True),
                        x)


def test_gradients_accumulate():
    assert_same_on_cuda(lambda x: F.cumsum(x, axis=0) * 2.0 + F.cumprod(x, axis=0, reverse=True),
                        signed(3, 2))


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data())
def test_drawn_cumulations(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    op = data.draw(st.sampled_from([F.cumsum, F.cumprod]))
    exclusive, reverse = data.draw(st.sampled_from(FLAGS))
    assert_same_on_cuda(lambda x: op(x, axis=axis, exclusive=exclusive, reverse=reverse),
                        signed(*shape))
