"""Unlink and Sink on the device against the CPU kernels."""
import numpy as np

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def test_unlink_blocks_the_gradient_of_one_path():
    assert_same_on_cuda(lambda x: F.unlink(x) * x + F.unlink(x * 2.0), signed(2, 3))


def test_sink_sets_ones():
    assert_same_on_cuda(lambda a, b: F.sink(a * 2.0, F.tanh(b)), signed(2), signed(3))
