"""Graphs under a CUDA context: host/device syncing, ops without CUDA kernels, training."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.cuda_ops import CUDA_OPS, device

from .compare import cuda_context, run, written_on_device


def test_host_writes_are_seen_by_the_device_and_device_results_by_the_host():
    with nn.context_scope(cuda_context()):
        x = nn.Variable.from_numpy_array(np.zeros((2, 3), np.float32))
        y = F.mul_scalar(x, 2.0)
    y.forward()
    held = y.d                       # the host buffer, synced from the device
    assert not held.any()
    x.d[0, 1] = 1.5                  # a write through .d makes the device copy stale
    y.forward()
    assert written_on_device(y.data)
    assert held[0, 1] == 0           # not synced until .d is read again ...
    assert y.d is held and held[0, 1] == 3.0   # ... into the same buffer
    x.d = 4.0                        # assignment (a fill)
    y.forward()
    np.testing.assert_array_equal(y.d, np.full((2, 3), 8.0))
    x.data.fill(-1.0)
    y.forward()
    np.testing.assert_array_equal(y.d, np.full((2, 3), -2.0))


def test_clearing_drops_the_device_copy():
    with nn.context_scope(cuda_context()):
        x = nn.Variable.from_numpy_array(np.ones(3, np.float32))
        y = F.exp(x)
    y.forward()
    y.data.clear()
    assert y.data.clear_called and y.data.device_mirror is None
    assert not y.d.any()             # a fresh, zeroed buffer, as on the CPU


def test_imperative_calls_on_ndarrays():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with nn.context_scope(cuda_context()):
        z = F.sum(F.tanh(nn.NdArray.from_numpy_array(a)), axis=1)
    assert isinstance(z, nn.NdArray) and written_on_device(z)
    np.testing.assert_allclose(z.data, np.tanh(a).sum(axis=1), rtol=1e-6)


def test_an_op_without_cuda_kernels_runs_its_cpu_kernels_between_device_ops():
    assert "NmsDetection2d" not in CUDA_OPS   # docs/cuda.md: stays on the host
    a = np.random.RandomState(0).randn(2, 3, 6).astype(np.float32)

    def build(x):
        u = F.tanh(x) + F.relu(x)
        h = F.nms_detection2d(u, thresh=0.3) + u    # device -> host -> device
        return F.sum(F.transpose(h, (2, 0, 1)) * 2.0, axis=0)

    outs = [run(ctx, build, [a]) for ctx in (nn.Context(), cuda_context())]
    (y_cpu, (x_cpu,)), (y_gpu, (x_gpu,)) = outs
    h = y_gpu.parent.inputs[0].parent.inputs[0].parent.inputs[0].parent.inputs[0]
    # computed on the host, then copied up for the next op
    assert h.parent.name == "NmsDetection2d" and not h.data._device.host_stale
    assert written_on_device(y_gpu.data) and written_on_device(x_gpu.grad)
    np.testing.assert_allclose(y_gpu.d, y_cpu.d, rtol=1e-5)
    np.testing.assert_allclose(x_gpu.g, x_cpu.g, rtol=1e-5)


def test_half_runs_the_cpu_kernels_with_float16_storage():
    a = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    y_cpu, (x_cpu,) = run(nn.Context(["cpu:half", "cpu:float"]), F.tanh, [a])
    y_gpu, (x_gpu,) = run(cuda_context(type_config="half"), F.tanh, [a])
    assert y_gpu.d.dtype == np.float16 and y_gpu.data._device is None
    np.testing.assert_array_equal(y_gpu.d, y_cpu.d)
    np.testing.assert_array_equal(x_gpu.g, x_cpu.g)


def test_backward_twice_accumulates_on_the_device():
    a = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    grads = []
    for ctx in (nn.Context(), cuda_context()):
        with nn.context_scope(ctx):
            x = nn.Variable.from_numpy_array(a, need_grad=True)
            y = F.sum(F.sigmoid(x) * x)
        y.forward()
        y.backward()
        once = x.g.copy()
        y.backward(0.5)
        assert written_on_device(x.grad) == (ctx.device == "cuda")
        grads.append(x.g.copy())
        np.testing.assert_allclose(grads[-1], 1.5 * once, rtol=1e-6)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5)


def _train(ctx, solver, steps=2):
    nn.clear_parameters()
    rng = np.random.RandomState(0)
    with nn.context_scope(ctx):
        x = nn.Variable.from_numpy_array(rng.randn(6, 5).astype(np.float32))
        t = nn.Variable.from_numpy_array(rng.randint(0, 3, (6, 1)).astype(np.int32))
        h = F.relu(PF.affine(x, 8, name="fc1", rng=np.random.RandomState(1)))
        loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 3, name="fc2",
                                                        rng=np.random.RandomState(2)), t))
    solver.set_parameters(nn.get_parameters())
    losses = []
    for _ in range(steps):
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
        losses.append(float(loss.d))
    return losses, {k: v.d.copy() for k, v in nn.get_parameters().items()}


@pytest.mark.parametrize("make_solver", [lambda: S.Momentum(0.1), lambda: S.Adam(0.01)],
                         ids=["Momentum", "Adam"])
def test_mlp_training_steps_match_the_cpu(make_solver):
    losses_cpu, params_cpu = _train(nn.Context(), make_solver())
    losses_gpu, params_gpu = _train(cuda_context(), make_solver())
    np.testing.assert_allclose(losses_gpu, losses_cpu, rtol=1e-5)
    assert losses_gpu[1] < losses_gpu[0]
    assert sorted(params_gpu) == sorted(params_cpu)
    for k in params_cpu:
        np.testing.assert_allclose(params_gpu[k], params_cpu[k], rtol=1e-5, atol=1e-6)


def test_backward_before_forward_is_an_error_on_the_device_too():
    from nnabla_jit.buffers import InputNotComputed
    with nn.context_scope(cuda_context()):
        z = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32), need_grad=True)
        loss = F.sum(F.tanh(z))
    with pytest.raises(InputNotComputed, match="Tanh needs the data of its output 0"):
        loss.backward()
    loss.forward()
    loss.backward()
    np.testing.assert_allclose(z.g, 1 - np.tanh(1.0) ** 2, rtol=1e-5)


def test_reset_shape_sets_up_device_nodes_again():
    with nn.context_scope(cuda_context()):
        a = nn.Variable((2, 3))
        b = F.sum(a * 2, axis=1)
    a.d = 1
    b.forward()
    a.reset_shape((5, 3), force=True)
    a.d = 1
    b.forward()
    assert written_on_device(b.data)
    np.testing.assert_array_equal(b.d, np.full(5, 6, np.float32))


def test_upload_takes_a_table_with_a_zero_stride_axis():
    device.load()
    table = np.arange(4.0)[:, None]   # NumPy calls it contiguous; its second stride is 0
    assert table.flags.c_contiguous
    np.testing.assert_array_equal(device.copy_down(device.upload(table)), table)
