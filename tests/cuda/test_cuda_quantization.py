"""The elementwise quantizers on the device against the CPU kernels."""
import numpy as np
import pytest

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def spread(*shape):
    """Values over several powers of two, both signs, with ties of the fixed-point grid and
    range edges (no log2 ties: float32 and the simulator's float64 log2 round those apart)."""
    x = (rng.uniform(-1, 1, shape) * 2.0 ** rng.randint(-9, 4, shape)).astype(np.float32)
    x.flat[:6] = [0.0, 0.03125, -0.09375, 7.9375, -8.5, 3.0]
    return x


CASES = [
    ("fixed point signed, fine-grained STE", lambda x: F.fixed_point_quantize(x, n=5, delta=0.0625)),
    ("fixed point unsigned, plain STE",
     lambda x: F.fixed_point_quantize(x, sign=False, n=4, delta=0.25, ste_fine_grained=False)),
    ("pow2 signed with zero", lambda x: F.pow2_quantize(x, n=5, m=1)),
    ("pow2 unsigned without zero, plain STE",
     lambda x: F.pow2_quantize(x, sign=False, with_zero=False, n=4, m=2, ste_fine_grained=False)),
    ("gradients accumulate",
     lambda x: F.pow2_quantize(x, n=5) + F.fixed_point_quantize(x, n=5) * 2.0),
]


@pytest.mark.parametrize("name, build", CASES, ids=[c[0] for c in CASES])
def test_quantizers(name, build):
    assert_same_on_cuda(build, spread(3, 8))


def test_no_gradient_asked():
    """propagate_down False: only the other input's gradient is written."""
    assert_same_on_cuda(lambda x, w: F.fixed_point_quantize(x, n=5) * w, spread(2, 4),
                        spread(2, 4), no_grad=(0,))
