"""SpectralNorm on the device against the CPU kernels (tiny shapes): the power iteration, u
updated in place (or not, in test mode and when recomputed), the output_u output and the
gradient with accum and propagate_down."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from . import compare
from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _u_of(y):
    """The u input of the SpectralNorm node under ``y`` (y = spectral_norm(...) * k)."""
    return y.parent.inputs[0].parent.inputs[1]


@pytest.mark.parametrize("dim, itr, test", [(0, 1, False), (1, 2, False), (2, 1, False),
                                            (1, 1, True)],   # nnabla takes no negative dim
                         ids=["dim 0", "dim 1, two rounds", "last dim", "test mode"])
def test_forward_backward_and_the_update_of_u(dim, itr, test):
    w = signed(3, 2, 2)
    u = signed(w.shape[dim])

    def build(w, u):
        return F.spectral_norm(w, u, dim=dim, itr=itr, test=test) * 2.0

    y_cpu, ins_cpu = compare.run(nn.Context(), build, [w, u], no_grad=(1,))
    y_gpu = assert_same_on_cuda(build, w, u, no_grad=(1,))
    u_gpu = _u_of(y_gpu)
    assert compare.written_on_device(u_gpu.data) == (not test)
    np.testing.assert_allclose(u_gpu.d, ins_cpu[1].d, rtol=1e-6, atol=1e-7)
    assert np.array_equal(u_gpu.d, u) == test


def test_output_u_is_the_u_before_the_update():
    w, u = signed(2, 3), signed(2)
    results = []
    for ctx in (nn.Context(), compare.cuda_context()):
        with nn.context_scope(ctx):
            u_var = nn.Variable.from_numpy_array(u)
            y, u_out = F.spectral_norm(nn.Variable.from_numpy_array(w), u_var, output_u=True)
            sink = F.sink(y, u_out)
        sink.forward()
        results.append((y.d.copy(), u_out, u_var.d.copy()))
    (y_cpu, u_out_cpu, u_cpu), (y_gpu, u_out_gpu, u_gpu) = results
    assert compare.written_on_device(u_out_gpu.data)
    np.testing.assert_array_equal(u_out_gpu.d, u)
    np.testing.assert_allclose(y_gpu, y_cpu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(u_gpu, u_cpu, rtol=1e-6, atol=1e-7)


def test_gradient_accumulates_into_w():
    assert_same_on_cuda(lambda w, u: F.spectral_norm(w, u, dim=1) + w * 0.5, signed(2, 3),
                        signed(3), no_grad=(1,))


def test_no_gradient_for_w_when_it_needs_none():
    w, u, x = signed(2, 3), signed(2), signed(2, 3)
    y = assert_same_on_cuda(lambda w, u, x: F.spectral_norm(w, u) * x, w, u, x, no_grad=(0, 1))
    sn = y.parent.inputs[0].parent
    assert not sn.inputs[0].need_grad


def test_recomputed_forward_starts_from_the_u_before_the_update():
    w, u = signed(3, 2), signed(3)
    results = []
    for ctx in (nn.Context(), compare.cuda_context()):
        with nn.context_scope(ctx):
            w_var = nn.Variable.from_numpy_array(w, need_grad=True)
            u_var = nn.Variable.from_numpy_array(u)
            y = F.spectral_norm(w_var, u_var, itr=1)
            y.recompute = True   # freed after forward, run again in backward
            loss = F.sum(F.tanh(y * 3.0))
        loss.forward()
        loss.backward()
        results.append((w_var, u_var.d.copy()))
    (w_cpu, u_cpu), (w_gpu, u_gpu) = results
    assert compare.written_on_device(w_gpu.grad)
    np.testing.assert_allclose(w_gpu.g, w_cpu.g, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(u_gpu, u_cpu, rtol=1e-6, atol=1e-7)   # updated once, not twice


@pytest.mark.parametrize("shape", [(0, 3), (2, 0)])
def test_an_empty_weight_runs_on_the_host(shape):
    u = np.ones(shape[0], np.float32)
    y, ins = compare.run(compare.cuda_context(), lambda w, u: F.spectral_norm(w, u),
                         [np.zeros(shape, np.float32), u], backward=False)
    assert y.d.shape == shape and not compare.written_on_device(ins[1].data)
