"""FFT / IFFT (a direct DFT on the device) against the CPU's pocketfft."""
import numpy as np
import pytest

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


CASES = [
    ("fft 1-d", lambda x: F.fft(x, 1), signed(2, 5, 2)),
    ("ifft 1-d normalized", lambda x: F.ifft(x, 1, normalized=True), signed(3, 4, 2)),
    ("fft 2-d", lambda x: F.fft(x, 2), signed(2, 3, 4, 2)),
    ("ifft 3-d", lambda x: F.ifft(x, 3), signed(2, 2, 3, 2)),
    ("gradients accumulate", lambda x: F.fft(x, 1) + F.ifft(x, 1) * 2.0, signed(2, 4, 2)),
]


@pytest.mark.parametrize("name, build, x", CASES, ids=[c[0] for c in CASES])
def test_dft(name, build, x):
    assert_same_on_cuda(build, x, rtol=1e-4, atol=1e-5)


def test_no_gradient_asked():
    assert_same_on_cuda(lambda x, w: F.fft(x, 1) * w, signed(2, 4, 2), signed(2, 4, 2),
                        no_grad=(0,), rtol=1e-4, atol=1e-5)
