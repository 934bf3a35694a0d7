"""Whole training steps of small CNNs on the device: no host-device copies after the first step
but the loss read, buffers reused from the device pool, and the CPU's losses."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.cuda_ops import device
from nnabla_jit.ext_utils import get_extension_context

from .compare import written_on_device


def lenet(x):
    h = F.max_pooling(F.relu(PF.convolution(x, 2, (3, 3), name="conv1")), (2, 2))
    h = F.max_pooling(F.relu(PF.convolution(h, 3, (2, 2), name="conv2")), (2, 2))
    h = F.relu(PF.affine(h, 4, name="fc1"))
    return PF.affine(h, 3, name="fc2")


def bn_cnn(x):
    h = x
    for i, maps in enumerate((2, 3)):
        h = PF.convolution(h, maps, (3, 3), pad=(1, 1), with_bias=False, name="conv%d" % i)
        h = F.max_pooling(F.relu(PF.batch_normalization(h, name="bn%d" % i)), (2, 2))
    return PF.affine(h, 3, name="fc")


def squares(x):
    """A variable used twice by one node: its gradient goes through a temporary."""
    h = PF.affine(x, 4, name="fc1")
    return PF.affine(h * h, 3, name="fc2")


def _training(ctx, net):
    nn.clear_parameters()
    nn.random.seed(0)
    rng = np.random.RandomState(0)
    with nn.context_scope(ctx):
        x = nn.Variable.from_numpy_array(rng.rand(2, 1, 8, 8).astype(np.float32))
        t = nn.Variable.from_numpy_array(rng.randint(0, 3, (2, 1)).astype(np.int32))
        loss = F.mean(F.softmax_cross_entropy(net(x), t))
    solver = S.Momentum(0.1)
    solver.set_parameters(nn.get_parameters())

    def step():
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.weight_decay(1e-4)
        solver.update()
        return float(loss.d)
    return step


@pytest.mark.parametrize("net", [lenet, bn_cnn, squares], ids=["lenet", "bn-cnn", "squares"])
def test_a_cnn_step_after_the_first_copies_only_the_loss(net):
    step = _training(get_extension_context("cudnn"), net)
    losses = [step()]
    device.reset_stats()
    losses.append(step())
    copies = device.stats()
    assert copies["host_to_device"] == 0, copies
    assert copies["device_to_host"] == 1 and copies["device_to_host_bytes"] == 4, copies
    # The second step still allocates what the first one's clearing order left out of the
    # pool when it was needed; from then on every buffer comes from the pool.
    device.reset_stats()
    losses.append(step())
    copies = device.stats()
    assert copies["allocations"] == 0 and copies["reused"] > 0, copies
    assert copies["host_to_device"] == 0 and copies["device_to_host"] == 1, copies
    for p in nn.get_parameters().values():
        assert written_on_device(p.data)
    cpu = _training(nn.Context(), net)
    np.testing.assert_allclose(losses, [cpu() for _ in range(3)], rtol=1e-4)
