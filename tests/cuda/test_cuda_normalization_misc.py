"""MeanSubtraction (with its running mean) and ClipGradByNorm on the device against the CPU
kernels (tiny shapes)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from . import compare
from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("update", [True, False], ids=["updating", "fixed mean"])
def test_mean_subtraction_and_its_running_mean(update):
    x, mean, t = signed(3, 2, 2), signed(2, 2), np.array([2.0], np.float32)

    def build(x, mean, t):
        return F.mean_subtraction(x, mean, t, base_axis=1, update_running_mean=update) * 2.0

    y_cpu, ins_cpu = compare.run(nn.Context(), build, [x, mean, t], no_grad=(1, 2))
    y_gpu = assert_same_on_cuda(build, x, mean, t, no_grad=(1, 2))
    running_gpu = y_gpu.parent.inputs[0].parent.inputs
    for on_gpu, on_cpu in zip(running_gpu[1:], ins_cpu[1:]):
        assert compare.written_on_device(on_gpu.data) == update
        np.testing.assert_allclose(on_gpu.d, on_cpu.d, rtol=1e-6)


@pytest.mark.parametrize("axes", [None, (1,), (0, 2)], ids=["all", "middle", "axes apart"])
def test_clip_grad_by_norm(axes):
    assert_same_on_cuda(lambda x: F.clip_grad_by_norm(x * 3.0, clip_norm=0.5, axes=axes) * 2.0,
                        signed(2, 3, 2))


def test_clip_grad_by_norm_accumulates():
    assert_same_on_cuda(lambda x: F.clip_grad_by_norm(x, clip_norm=2.0, axes=(1,)) + x,
                        signed(2, 3))
