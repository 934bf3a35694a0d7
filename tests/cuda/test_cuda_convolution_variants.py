"""Deformable convolution, adaptive separable convolution and patch correlation on the device
against the CPU kernels (tiny shapes: the simulator is slow): forward, and backward with
accumulated gradients and inputs without one."""
import numpy as np
import pytest

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def offsets(*shape):
    """Offsets that move samples across pixels and past the border (not onto integers)."""
    return (rng.uniform(-1.6, 1.6, shape) + 0.01).astype(np.float32)


CASES = [   # (name, build, arrays, inputs without gradient)
    ("deformable", lambda x, w, o: F.deformable_convolution(x, w, o, pad=(1, 1)),
     [signed(1, 2, 3, 3), signed(2, 2, 3, 3), offsets(1, 18, 3, 3)], ()),
    ("deformable masked, bias, groups, stride",
     lambda x, w, o, m, b: F.deformable_convolution(x, w, o, m, b, stride=(2, 1), group=2,
                                                    deformable_group=2),
     [signed(2, 2, 3, 3), signed(2, 1, 2, 1), offsets(2, 8, 3, 3), signed(2, 4, 3, 3), signed(2)],
     ()),
    ("deformable, offsets without gradient",
     lambda x, w, o, m: F.deformable_convolution(x, w, o, m),
     [signed(1, 1, 3, 3), signed(1, 1, 2, 2), offsets(1, 8, 3, 3), signed(1, 4, 3, 3)], (0, 2)),
    ("adaptive separable",
     lambda x, v, h: F.adaptive_separable_convolution(x, v, h),
     [signed(1, 2, 3, 4), signed(1, 2, 2, 2), signed(1, 3, 2, 2)], ()),
    ("adaptive separable, only the kernels",
     lambda x, v, h: F.adaptive_separable_convolution(x, v, h),
     [signed(2, 1, 3, 3), signed(2, 1, 3, 2), signed(2, 2, 3, 2)], (0,)),
    ("patch correlation",
     lambda a, b: F.patch_correlation(a, b, patch=(2, 1), shift=(1, 1), padding=(1, 0, 0, 1),
                                     channel_last=True),
     [signed(1, 3, 3, 2), signed(1, 3, 3, 2)], ()),
    ("patch correlation, steps",
     lambda a, b: F.patch_correlation(a, b, patch=(1, 2), shift=(2, 1), patch_step=(2, 1),
                                      shift_step=(2, 1), channel_last=True),
     [signed(1, 4, 3, 1), signed(1, 4, 3, 1)], (0,)),
    ("gradients accumulate",
     lambda a, b: F.patch_correlation(a, b, shift=(1, 0), channel_last=True) * 2.0
     + F.patch_correlation(b, a, shift=(1, 0), channel_last=True),
     [signed(1, 2, 2, 1), signed(1, 2, 2, 1)], ()),
]


@pytest.mark.parametrize("name, build, arrays, no_grad", CASES, ids=[c[0] for c in CASES])
def test_convolution_variants(name, build, arrays, no_grad):
    assert_same_on_cuda(build, *arrays, no_grad=no_grad, rtol=1e-4, atol=1e-5)
