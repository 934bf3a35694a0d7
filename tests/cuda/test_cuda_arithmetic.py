"""AddN and MulN on the device against the CPU kernels (tiny shapes)."""
import numpy as np
import pytest

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("fn", [F.add_n, F.mul_n], ids=["add_n", "mul_n"])
def test_n_ary(fn):
    assert_same_on_cuda(lambda a, b, c: fn(a, b, c), signed(2, 3), signed(2, 3), signed(2, 3))


@pytest.mark.parametrize("fn", [F.add_n, F.mul_n], ids=["add_n", "mul_n"])
def test_n_ary_one_input_without_gradient_and_accumulation(fn):
    assert_same_on_cuda(lambda a, b: fn(a, b) + fn(b, a) * 2.0, signed(3), signed(3),
                        no_grad=(1,))
