"""CReLU, CELU and PReLU on the device against the CPU kernels (tiny shapes)."""
import numpy as np
import pytest

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("build", [lambda x: F.crelu(x, axis=1),
                                   lambda x: F.celu(x, alpha=0.7, axis=2)],
                         ids=["crelu", "celu"])
def test_concatenated_activations(build):
    assert_same_on_cuda(build, signed(2, 3, 2))


def test_concatenated_gradient_accumulates():
    assert_same_on_cuda(lambda x: F.crelu(x, axis=0) + F.celu(x, axis=0), signed(2, 3))


@pytest.mark.parametrize("slope_shape", [(1,), (3,)], ids=["one slope", "per channel"])
def test_prelu(slope_shape):
    assert_same_on_cuda(lambda x, w: F.prelu(x, w, base_axis=1), signed(2, 3, 2),
                        signed(*slope_shape))


@pytest.mark.parametrize("no_grad", [(0,), (1,)], ids=["slope only", "input only"])
def test_prelu_one_gradient(no_grad):
    assert_same_on_cuda(lambda x, w: F.prelu(x, w, base_axis=1) * 2.0 + F.prelu(x, w, base_axis=1),
                        signed(2, 3), signed(3), no_grad=no_grad)
