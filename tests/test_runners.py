"""runners.py: the executor's runners come from the host or from the device table."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit import buffers, runners

CUDA_CONTEXT = nn.Context(backend=["cudnn:float"])


class _RecordingMemory(buffers.HostMemory):
    """Host arrays, recording the seeds it fills."""

    def __init__(self):
        self.filled = []

    def fill(self, nd, value):
        self.filled.append((nd.shape, value))
        nd.fill(value)


@pytest.fixture
def fake_cuda(monkeypatch):
    """A device registered as 'cuda' that runs nothing itself (answers None: the host runs
    every node) and records what it was asked."""
    asked = {"forward": [], "backward": [], "memory": _RecordingMemory()}

    def forward(node):
        asked["forward"].append(node.op.name)

    def backward(step, root, seed):
        asked["backward"].append(step.node.op.name)

    monkeypatch.setitem(runners.DEVICES, "cuda", None)   # restored after the test
    runners.register_device("cuda", forward, backward, asked["memory"])
    return asked


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_device_that_declines_leaves_the_node_to_the_host(fake_cuda, dtype):
    x0 = np.linspace(-1, 2, 6).reshape(2, 3).astype(dtype)
    ctx = nn.Context(backend=["cudnn:" + ("double" if dtype == np.float64 else "float")])
    with nn.context_scope(ctx):
        x = nn.Variable.from_numpy_array(x0, need_grad=True)
        y = F.sum(F.tanh(x) * 2.0)
    y.forward()
    y.backward()
    np.testing.assert_allclose(y.d, np.sum(np.tanh(x0) * 2), rtol=1e-6)
    np.testing.assert_allclose(x.g, 2 * (1 - np.tanh(x0) ** 2), rtol=1e-6)
    assert fake_cuda["forward"] == ["Tanh", "MulScalar", "Sum"]
    assert fake_cuda["backward"] == ["Sum", "MulScalar", "Tanh"]
    assert fake_cuda["memory"].filled == [((), 1)]   # the seed, in the device's memory


def test_a_device_runner_is_used(fake_cuda):
    ran = []
    host = runners.DEVICES["cuda"]

    def forward(node):
        if node.op.name == "Tanh":
            def run():
                ran.append("tanh on the device")
                node.outputs[0].data.fill(7.0)
            return run
    runners.register_device("cuda", forward, host.backward_runner, host.memory)
    with nn.context_scope(CUDA_CONTEXT):
        x = nn.Variable.from_numpy_array(np.zeros((2, 2), np.float32))
        y = F.tanh(x) + 1.0
    y.forward()
    assert ran == ["tanh on the device"]
    np.testing.assert_array_equal(y.d, np.full((2, 2), 8.0))


def test_the_host_seed_is_filled_in_host_memory():
    x = nn.Variable.from_numpy_array(np.ones(3, np.float32), need_grad=True)
    y = F.sum(x * 3.0)
    assert runners.memory_of(y.parent) is buffers.HOST
    y.forward()
    y.backward(grad=2)
    np.testing.assert_array_equal(x.g, [6.0, 6.0, 6.0])


def test_an_unregistered_device_is_one_clear_error(monkeypatch):
    monkeypatch.delitem(runners.DEVICES, "cuda")
    with nn.context_scope(CUDA_CONTEXT):
        x = nn.Variable.from_numpy_array(np.zeros(2, np.float32))
        y = F.tanh(x)
    with pytest.raises(RuntimeError, match=r"Tanh: no device registered for context device 'cuda'"):
        y.forward()


def test_the_host_name_cannot_be_registered():
    with pytest.raises(ValueError, match="'cpu' is the host's"):
        runners.register_device("cpu", None, None, buffers.HOST)
