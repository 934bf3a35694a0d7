"""Deconvolution and DepthwiseDeconvolution on the device against the CPU kernels (tiny shapes:
the simulator is slow)."""
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
    ("2-d, bias, pad, stride and output_padding",
     lambda x, w, b: F.deconvolution(x, w, b, pad=(1, 0), stride=(2, 1), output_padding=(1, 0)),
     [signed(2, 3, 3, 2), signed(3, 2, 3, 2), signed(2)]),
    ("groups and dilation",
     lambda x, w: F.deconvolution(x, w, pad=(1, 1), dilation=(2, 1), group=2),
     [signed(1, 4, 3, 3), signed(4, 1, 2, 2)]),
    ("1-d", lambda x, w: F.deconvolution(x, w, stride=(2,)), [signed(2, 2, 3), signed(2, 3, 2)]),
    ("channel-last, bias and groups",
     lambda x, w, b: F.deconvolution(x, w, b, stride=(2, 1), group=2, channel_last=True),
     [signed(2, 3, 2, 4), signed(4, 2, 1, 2), signed(4)]),
    ("depthwise, bias", lambda x, w, b: F.depthwise_deconvolution(x, w, b, pad=(1, 1), divisor=2),
     [signed(1, 4, 3, 3), signed(4, 3, 2), signed(2)]),
    ("gradients accumulate",
     lambda x, w, b: (F.deconvolution(x, w, b, stride=(2, 2)) * 2.0
                      + F.deconvolution(x, w, stride=(2, 2))),
     [signed(1, 2, 2, 2), signed(2, 2, 1, 1), signed(2)]),
]


@pytest.mark.parametrize("name, build, arrays", CASES, ids=[c[0] for c in CASES])
def test_deconvolution(name, build, arrays):
    assert_same_on_cuda(build, *arrays, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("no_grad", [(0,), (1, 2)], ids=["no dx", "only dx"])
def test_deconvolution_skips_the_gradients_not_asked_for(no_grad):
    assert_same_on_cuda(lambda x, w, b: F.deconvolution(x, w, b, stride=(2, 2)),
                        signed(1, 2, 2, 3), signed(2, 3, 2, 2), signed(3), no_grad=no_grad,
                        rtol=1e-4, atol=1e-5)


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(batch=st.integers(1, 2), channels=st.integers(1, 2), maps=st.integers(1, 2),
       size=st.integers(1, 3), kernel=st.integers(1, 3), stride=st.integers(1, 2),
       channel_last=st.booleans())
def test_drawn_deconvolutions(batch, channels, maps, size, kernel, stride, channel_last):
    shape = (batch, size, size, channels) if channel_last else (batch, channels, size, size)
    w = signed(channels, kernel, kernel, maps) if channel_last else \
        signed(channels, maps, kernel, kernel)
    assert_same_on_cuda(
        lambda x, w, b: F.deconvolution(x, w, b, stride=(stride, stride),
                                        channel_last=channel_last),
        signed(*shape), w, signed(maps), rtol=1e-4, atol=1e-5)
