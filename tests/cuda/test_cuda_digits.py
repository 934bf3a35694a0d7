"""examples/digits' CNN (conv-BN-ReLU-maxpool, conv-BN-ReLU-avgpool, two affines, Adam) trains
on the device to the CPU's losses. Slow under the simulator: tests/test_cuda.py runs it in the
slow CI step."""
import importlib.util
import os

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.solvers as S
from nnabla_jit.ext_utils import get_extension_context

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "examples",
                       "digits", "train.py")


def _example():
    spec = importlib.util.spec_from_file_location("digits_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _losses(ctx, example, images, labels, steps):
    nn.clear_parameters()
    nn.random.seed(0)
    np.random.seed(0)
    with nn.context_scope(ctx):
        x = nn.Variable((2,) + images.shape[1:])
        t = nn.Variable((2, 1))
        loss = F.mean(F.softmax_cross_entropy(example.cnn(x), t))
    solver = S.Adam(2e-3)
    solver.set_parameters(nn.get_parameters())
    losses = []
    for i in range(steps):
        x.d, t.d = images[2 * i:2 * i + 2], labels[2 * i:2 * i + 2]
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.weight_decay(1e-5)
        solver.update()
        losses.append(float(loss.d))
    return losses


@pytest.mark.slow
def test_the_digits_cnn_trains_to_the_cpu_losses():
    pytest.importorskip("sklearn", reason="the digits come with scikit-learn (a GPU image may "
                        "lack it: benchmarks/gpu_check.py's digits section uses synthetic ones)")
    example = _example()
    (images, labels), _ = example.load_split()
    cpu = _losses(nn.Context(), example, images, labels, 2)
    gpu = _losses(get_extension_context("cudnn"), example, images, labels, 2)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-4)
    assert gpu[1] != gpu[0]   # the second step ran (another batch, updated parameters)
