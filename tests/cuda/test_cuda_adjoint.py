"""The bilinear adjoints (ConvolutionDataGrad / ConvolutionFilterGrad, the Deconvolution and
Affine ones) that nn.grad builds, on the device against the CPU: their forward (the first-order
gradients) and their backward (the double backward, with gradients reaching dy, x and w from
two paths, so accumulated). Tiny shapes: the simulator is slow."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import cuda_context, written_on_device

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _double_backward(ctx, op, x_value, w_value, dy_value, need_x_grad):
    """gx, gw = nn.grad(op(x, w), [x, w], dy); backward of a function of both: the values and
    the gradients of x (when asked: propagate_down), w and dy."""
    with nn.context_scope(ctx):
        x = nn.Variable.from_numpy_array(x_value, need_grad=need_x_grad)
        w = nn.Variable.from_numpy_array(w_value, need_grad=True)
        dy = nn.Variable.from_numpy_array(dy_value, need_grad=True)
        wanted = [x, w] if need_x_grad else [w]
        grads = nn.grad([op(x, w)], wanted, grad_outputs=[dy])
        z = sum(F.sum(g * g) for g in grads) + F.sum(grads[-1] * w)
    z.forward()
    for v in (x, w, dy):
        v.grad.zero()
    z.backward()
    return grads, [v for v in (x, w, dy) if v.need_grad]


CASES = [
    ("convolution", lambda x, w: F.convolution(x, w, pad=(1, 0), stride=(2, 1)),
     signed(2, 2, 4, 3), signed(3, 2, 2, 2), True),
    ("convolution, no dx", lambda x, w: F.convolution(x, w, pad=(1, 0), stride=(2, 1)),
     signed(1, 2, 4, 3), signed(3, 2, 2, 2), False),
    ("channel-last convolution",
     lambda x, w: F.convolution(x, w, stride=(2, 2), channel_last=True),
     signed(1, 4, 4, 2), signed(2, 2, 2, 2), True),
    ("deconvolution", lambda x, w: F.deconvolution(x, w, stride=(2, 1)),
     signed(1, 2, 2, 3), signed(2, 2, 2, 2), True),
    ("affine", lambda x, w: F.affine(x, w), signed(3, 4), signed(4, 2), True),
]


@pytest.mark.parametrize("name, op, x, w, need_x_grad", CASES, ids=[c[0] for c in CASES])
def test_double_backward_on_the_device(name, op, x, w, need_x_grad):
    """need_x_grad False: no DataGrad node, and FilterGrad's backward skips x (propagate_down)."""
    dy = signed(*op(nn.Variable(x.shape), nn.Variable(w.shape)).shape)
    grads_cpu, leaves_cpu = _double_backward(nn.Context(), op, x, w, dy, need_x_grad)
    grads_gpu, leaves_gpu = _double_backward(cuda_context(), op, x, w, dy, need_x_grad)
    for a, b in zip(grads_gpu, grads_cpu):
        assert written_on_device(a.data)
        np.testing.assert_allclose(a.d, b.d, rtol=1e-4, atol=1e-5)
    for a, b in zip(leaves_gpu, leaves_cpu):
        assert written_on_device(a.grad)
        np.testing.assert_allclose(a.g, b.g, rtol=1e-4, atol=1e-5)
