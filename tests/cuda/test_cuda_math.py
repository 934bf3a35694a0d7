"""The generators Constant, Arange and Linspace on the device against the CPU kernels."""
import pytest

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda


@pytest.mark.parametrize("build", [lambda: F.constant(0.25, (2, 3)),
                                   lambda: F.arange(1, -2, -0.5),
                                   lambda: F.linspace(-1.0, 2.0, 4),
                                   lambda: F.linspace(3.0, 5.0, 1)],
                         ids=["constant", "arange", "linspace", "linspace of one"])
def test_generators(build):
    assert_same_on_cuda(build, backward=False, atol=0)
