"""Prod and Norm on the device against the CPU kernels (tiny shapes)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def away_from_zero(*shape):
    return (rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)).astype(np.float32)


@pytest.mark.parametrize("build", [lambda x: F.prod(x, axis=1),
                                   lambda x: F.prod(x, axis=(0, 2), keepdims=True),
                                   lambda x: F.norm(x, p=2, axis=2),
                                   lambda x: F.norm(x, p=3, axis=(0, 2)),
                                   lambda x: F.norm(x, p=1)],
                         ids=["prod", "prod over axes apart", "norm", "norm p=3 over axes apart",
                              "norm p=1 of all"])
def test_product_and_norm(build):
    assert_same_on_cuda(build, away_from_zero(2, 3, 2), rtol=1e-4)


def test_product_with_a_zero_and_accumulated_gradients():
    x = away_from_zero(2, 3)
    x[1, 1] = 0.0
    assert_same_on_cuda(lambda x: F.prod(x, axis=1) + F.prod(x, axis=1) * 2.0, x)


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data())
def test_drawn_axes(shape, data):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    p = data.draw(st.sampled_from([1.0, 2.0, 3.0]))
    assert_same_on_cuda(lambda x: F.prod(x, axis=axes) + F.norm(x, p=p, axis=axes),
                        away_from_zero(*shape), rtol=1e-4)
