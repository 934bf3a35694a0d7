"""Dropout on the device draws the CPU's units (mask drawn on the host from one stream)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit import random as nn_random

from .compare import cuda_context, run, written_on_device

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def twice(build, *arrays):
    """(y, input gradients) of build under the CPU and the CUDA context, from one seed."""
    results = []
    for ctx in (nn.Context(), cuda_context()):
        nn_random.seed(3)
        y, xs = run(ctx, build, arrays)
        results.append((y, [x.g.copy() for x in xs]))
    return results


@pytest.mark.parametrize("build", [
    lambda x: F.dropout(x, p=0.3),
    lambda x: F.dropout(x, p=0.5, seed=11) + F.dropout(x, p=0.2) * 2.0,   # dx accumulates
], ids=["global stream", "own seed, gradients accumulate"])
def test_dropout(build):
    (y_cpu, g_cpu), (y_gpu, g_gpu) = twice(build, signed(3, 5))
    assert written_on_device(y_gpu.data)
    np.testing.assert_allclose(y_gpu.d, y_cpu.d, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g_gpu[0], g_cpu[0], rtol=1e-6, atol=1e-7)


def test_grad_rule_reads_the_mask_drawn_for_the_device():
    """nn.grad's DropoutMask multiplies, on the device, by the mask the device applied; so
    does its own backward (a second-order gradient)."""
    x0 = signed(4, 3)
    with nn.context_scope(cuda_context()):
        x = nn.Variable.from_numpy_array(x0, need_grad=True)
        z = nn.Variable.from_numpy_array(signed(4, 3), need_grad=True)
        y = F.dropout(x, p=0.5)
        dx = nn.grad([F.sum(y * z)], [x])[0]        # mask * z / (1 - p), by DropoutMask
        w = nn.Variable.from_numpy_array(signed(4, 3), need_grad=True)
        second = F.sum(dx * w)
    F.sink(y, second).forward()
    assert written_on_device(dx.data)
    scale = np.where(y.d != 0, 2.0, 0.0)
    np.testing.assert_allclose(dx.d, scale * z.d, rtol=1e-6)
    z.grad.zero()
    second.backward()   # to z through DropoutMask's backward: mask * w / (1 - p)
    assert written_on_device(z.grad)
    np.testing.assert_allclose(z.g, scale * w.d, rtol=1e-6)
