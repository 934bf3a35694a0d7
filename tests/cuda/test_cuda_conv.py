"""Convolution on the device against the CPU kernels (tiny shapes: the simulator is slow)."""
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
    ("2-d, bias, pad and stride",
     lambda x, w, b: F.convolution(x, w, b, pad=(1, 0), stride=(2, 1)),
     [signed(2, 3, 5, 4), signed(4, 3, 3, 2), signed(4)]),
    ("groups and dilation",
     lambda x, w: F.convolution(x, w, pad=(1, 1), dilation=(2, 1), group=2),
     [signed(1, 4, 5, 5), signed(4, 2, 2, 2)]),
    ("1-d", lambda x, w: F.convolution(x, w, pad=(1,)), [signed(2, 2, 6), signed(3, 2, 3)]),
    ("depthwise", lambda x, w: F.depthwise_convolution(x, w, pad=(1, 1), multiplier=2),
     [signed(1, 2, 4, 3), signed(4, 3, 3)]),
    ("gradients accumulate",
     lambda x, w: F.convolution(x, w, stride=(2, 2)) * 2.0 + F.convolution(x, w, stride=(2, 2)),
     [signed(1, 2, 4, 4), signed(2, 2, 1, 1)]),
]


@pytest.mark.parametrize("name, build, arrays", CASES, ids=[c[0] for c in CASES])
def test_convolution(name, build, arrays):
    assert_same_on_cuda(build, *arrays, rtol=1e-4, atol=1e-5)


def test_convolution_without_the_input_gradient():
    assert_same_on_cuda(lambda x, w, b: F.convolution(x, w, b, stride=(2, 2)),
                        signed(1, 2, 5, 5), signed(3, 2, 2, 2), signed(3), no_grad=(0,),
                        rtol=1e-4, atol=1e-5)


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(batch=st.integers(1, 2), channels=st.integers(1, 2), maps=st.integers(1, 2),
       size=st.integers(3, 5), kernel=st.integers(1, 3), stride=st.integers(1, 2),
       pad=st.integers(0, 1))
def test_drawn_convolutions(batch, channels, maps, size, kernel, stride, pad):
    x, w = signed(batch, channels, size, size), signed(maps, channels, kernel, kernel)
    assert_same_on_cuda(
        lambda x, w, b: F.convolution(x, w, b, pad=(pad, pad), stride=(stride, stride)),
        x, w, signed(maps), rtol=1e-4, atol=1e-5)


CHANNEL_LAST = [
    ("channel-last 2-d, bias, pad and stride",
     lambda x, w, b: F.convolution(x, w, b, pad=(1, 0), stride=(2, 1), channel_last=True),
     [signed(2, 5, 4, 3), signed(4, 3, 2, 3), signed(4)]),
    ("channel-last groups and dilation",
     lambda x, w: F.convolution(x, w, pad=(1, 1), dilation=(2, 1), group=2, channel_last=True),
     [signed(1, 4, 4, 4), signed(4, 2, 2, 2)]),
    ("channel-last 1-d", lambda x, w: F.convolution(x, w, pad=(1,), channel_last=True),
     [signed(2, 5, 2), signed(3, 3, 2)]),
]


@pytest.mark.parametrize("name, build, arrays", CHANNEL_LAST, ids=[c[0] for c in CHANNEL_LAST])
def test_channel_last_convolution_runs_on_the_device(name, build, arrays):
    assert_same_on_cuda(build, *arrays, rtol=1e-4, atol=1e-5)


def test_channel_last_gradients_accumulate_and_skip():
    """accum (two uses of x and w) and propagate_down (x needs no gradient) channel-last."""
    def build(x, w, b):
        y = F.convolution(x, w, b, stride=(2, 2), channel_last=True)
        return y * 2.0 + F.convolution(x, w, stride=(2, 2), channel_last=True)
    assert_same_on_cuda(build, signed(1, 4, 4, 2), signed(2, 1, 1, 2), signed(2), no_grad=(0,),
                        rtol=1e-4, atol=1e-5)
