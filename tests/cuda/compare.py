"""Run one graph under the CPU context and under a CUDA context and compare."""
import numpy as np

import nnabla_jit as nn
from nnabla_jit.cuda_ops.device import DeviceMirror
from nnabla_jit.ext_utils import get_extension_context


def cuda_context(**kw):
    return get_extension_context("cuda", **kw)


def written_on_device(nd):
    """Whether ``nd``'s newest values are on the device (a CUDA kernel wrote them and the host
    has not read them since)."""
    return isinstance(nd.device_mirror, DeviceMirror) and nd.device_mirror.host_stale


def run(ctx, build, arrays, no_grad=(), backward=True):
    """Forward, and backward seeded with a fixed gradient, of ``build(*variables)`` under
    ``ctx``; returns the output Variable and the input Variables."""
    with nn.context_scope(ctx):
        xs = [nn.Variable.from_numpy_array(a, need_grad=backward and i not in no_grad)
              for i, a in enumerate(arrays)]
        y = build(*xs)
    y.forward()
    if backward:
        y.backward(np.linspace(-1, 1, y.size).reshape(y.shape).astype(np.float32))
    return y, xs


def assert_same_on_cuda(build, *arrays, no_grad=(), backward=True, rtol=1e-5, atol=1e-6):
    """The CUDA context computes, on the device, the CPU's output and input gradients."""
    y_cpu, x_cpu = run(nn.Context(), build, arrays, no_grad, backward)
    y_gpu, x_gpu = run(cuda_context(), build, arrays, no_grad, backward)
    assert written_on_device(y_gpu.data)
    assert y_gpu.d.dtype == y_cpu.d.dtype
    np.testing.assert_allclose(y_gpu.d, y_cpu.d, rtol=rtol, atol=atol)
    for a, b in zip(x_gpu, x_cpu):
        if a.need_grad:
            assert written_on_device(a.grad)
            np.testing.assert_allclose(a.g, b.g, rtol=rtol, atol=atol)
    return y_gpu
