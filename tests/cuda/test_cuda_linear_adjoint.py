"""LinearAdjoint, the ``dx = A^T dy`` node nn.grad builds of a linear op (Pad, Slice, Shift,
sum and average pooling), on the device against the CPU: its forward (the first-order
gradient, the source's backward) and its backward (the source's forward), with dy's gradient
reached from two paths, so accumulated. Tiny shapes: the simulator is slow."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.cuda_ops import CUDA_OPS

from .compare import cuda_context, written_on_device

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _grad_of_grad(ctx, op, x_value, dy_value):
    """g = nn.grad(op(x), x, dy); z = sum(g g) + sum(dy dy): g's value and dy's gradient (from
    the adjoint's backward and from dy dy)."""
    with nn.context_scope(ctx):
        x = nn.Variable.from_numpy_array(x_value, need_grad=True)
        dy = nn.Variable.from_numpy_array(dy_value, need_grad=True)
        g = nn.grad([op(x)], [x], grad_outputs=[dy])[0]
        z = F.sum(g * g) + F.sum(dy * dy)
    z.forward()
    dy.grad.zero()
    z.backward()
    return g, dy


CASES = [
    ("pad", lambda x: F.pad(x, (1, 0, 2, 1)), signed(2, 3)),
    ("pad reflect", lambda x: F.pad(x, (0, 0, 2, 1), mode="reflect"), signed(2, 4)),
    ("slice", lambda x: F.slice(x, (0, 1), (2, 4), (1, 2)), signed(2, 4)),
    ("shift", lambda x: F.shift(x, (1, -1)), signed(3, 3)),
    ("average pooling", lambda x: F.average_pooling(x, (2, 2), pad=(1, 0)), signed(1, 1, 3, 4)),
    ("sum pooling", lambda x: F.sum_pooling(x, (2, 1), stride=(1, 1)), signed(1, 2, 3, 2)),
]


@pytest.mark.parametrize("name, op, x", CASES, ids=[c[0] for c in CASES])
def test_linear_adjoint_on_the_device(name, op, x):
    assert "LinearAdjoint" in CUDA_OPS
    dy = signed(*op(nn.Variable(x.shape)).shape)
    g_cpu, dy_cpu = _grad_of_grad(nn.Context(), op, x, dy)
    g_gpu, dy_gpu = _grad_of_grad(cuda_context(), op, x, dy)
    assert g_gpu.parent.info.type_name == "LinearAdjoint"
    assert written_on_device(g_gpu.data) and written_on_device(dy_gpu.grad)
    np.testing.assert_allclose(g_gpu.d, g_cpu.d, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dy_gpu.g, dy_cpu.g, rtol=1e-5, atol=1e-6)
