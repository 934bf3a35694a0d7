"""Pooling with ignore_border=True and a kernel larger than the (padded) input: nnabla's
output size divides with C++ truncation, so such a kernel still gives one clipped window."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F


@pytest.mark.parametrize("shape, kernel, stride, pad, out", [
    ((2, 3, 1, 1), (2, 2), None, (0, 0), (1, 1)),
    ((2, 3, 3, 3), (5, 5), None, (0, 0), (1, 1)),
    ((2, 3, 3, 3), (6, 6), (4, 4), (1, 1), (1, 1)),
])
def test_a_kernel_larger_than_the_input_pools_the_clipped_window(shape, kernel, stride, pad, out):
    rng = np.random.RandomState(0)
    x = nn.Variable.from_numpy_array(rng.randn(*shape).astype(np.float32), need_grad=True)
    ymax = F.max_pooling(x, kernel, stride, True, pad)
    ysum = F.sum_pooling(x, kernel, stride, True, pad)
    yavg = F.average_pooling(x, kernel, stride, True, pad, including_pad=False)
    for y in (ymax, ysum, yavg):
        assert y.shape == shape[:2] + out
    F.sink(ymax, ysum, yavg).forward()
    np.testing.assert_allclose(ymax.d[..., 0, 0], x.d.max(axis=(2, 3)), rtol=1e-6)
    np.testing.assert_allclose(ysum.d[..., 0, 0], x.d.sum(axis=(2, 3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(yavg.d[..., 0, 0], x.d.mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)
    x.grad.zero()
    ysum.backward(np.ones(ysum.shape, np.float32))
    np.testing.assert_allclose(x.g, np.ones(shape))


def test_a_kernel_leaving_no_window_is_refused():
    with pytest.raises(ValueError, match="MaxPooling: kernel .* leave no window"):
        F.max_pooling(nn.Variable((2, 3, 1, 1)), (2, 2), (1, 1))
