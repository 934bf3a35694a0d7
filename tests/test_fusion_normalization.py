"""A BatchNormalization whose output only a ReLU (or an Add2, then a ReLU) reads runs with them
under the clearing flags (``fusion.NormalizationEpilogue``), and so does a tiled Convolution
with the ReLU that alone reads it: results as unfused, and never when the values in between
are wanted."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit import fusion, graph
from nnabla_jit.ext_utils import get_extension_context
from nnabla_jit.ops import convolution_tiled
from nnabla_jit.ops.kernels import parallel_threshold

from .training import momentum_steps

pytestmark = pytest.mark.usefixtures("fuse_from_first_run")


def _block(x, batch_stat):
    """conv-BN-ReLU, then conv-BN + shortcut -> ReLU, then a shortcut computed after its BN."""
    h = F.relu(PF.batch_normalization(PF.convolution(x, 6, (3, 3), pad=(1, 1), name="c1"),
                                      batch_stat=batch_stat, name="b1"))
    r = PF.batch_normalization(PF.convolution(h, 6, (3, 3), pad=(1, 1), name="c2"),
                               batch_stat=batch_stat, name="b2")
    h = F.relu(x + r)
    r = PF.batch_normalization(PF.convolution(h, 6, (1, 1), name="c3"), batch_stat=batch_stat,
                               name="b3")
    late = PF.convolution(h, 6, (1, 1), name="c4")   # built after b3: computed after it
    return F.relu(r + late)


def _train(dtype, batch_stat, fuse, monkeypatch, steps=3):
    monkeypatch.setattr(graph, "FUSION", fuse)
    nn.clear_parameters()
    rng = np.random.RandomState(0)
    x = nn.Variable.from_numpy_array(rng.randn(3, 6, 7, 7).astype(dtype))
    loss = F.mean(_block(x, batch_stat) ** 2)
    init = np.random.RandomState(1)
    for name, p in sorted(nn.get_parameters().items()):
        positive = any(k in name for k in ("gamma", "var"))
        p.d = (init.rand(*p.shape) * 0.5 + (0.5 if positive else -0.25)).astype(dtype)
    return momentum_steps(loss, 0.1, steps)


@pytest.mark.parametrize("threshold", [None, 0], ids=["serial", "parallel"])
@pytest.mark.parametrize("batch_stat", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_normalization_matches_unfused(dtype, batch_stat, threshold, monkeypatch):
    ctx = get_extension_context("cpu", type_config="double" if dtype == np.float64 else "float")
    with nn.context_scope(ctx), parallel_threshold(threshold):
        want = _train(dtype, batch_stat, False, monkeypatch)
        got = _train(dtype, batch_stat, True, monkeypatch)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got[0], want[0], rtol=tol)
    for name in want[1]:
        np.testing.assert_allclose(got[1][name], want[1][name], rtol=tol, atol=tol, err_msg=name)


def _plan_chains(root, **flags):
    plan = graph._ForwardPlan([root], flags.get("clear_buffer", False),
                              flags.get("clear_no_need_grad", False))
    return ["+".join(n.op.name for n in run.nodes) for run in plan.runners
            if isinstance(run, fusion.NormalizationEpilogue)]


def test_the_plan_runs_each_normalization_with_its_relu_and_add():
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(2, 6, 5, 5).astype(np.float32))
    y = _block(x, False)
    # the third BN's shortcut is computed after it: that BN runs alone
    assert _plan_chains(y, clear_buffer=True) == ["BatchNormalization+ReLU",
                                                  "BatchNormalization+Add2+ReLU"]
    assert _plan_chains(y) == []   # no clearing flag: every value stays readable


def test_a_normalized_value_someone_reads_is_stored(monkeypatch):
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(2, 4, 5, 5).astype(np.float32))
    h = PF.batch_normalization(x, batch_stat=False, name="kept")
    y = F.relu(h)
    g = PF.batch_normalization(x, batch_stat=False, name="twice")
    z = F.relu(g) + F.sigmoid(g)      # two readers
    h.persistent = True
    root = F.sink(y, z)
    assert _plan_chains(root, clear_buffer=True) == []
    root.forward(clear_buffer=True)
    want = np.maximum(h.d, 0)
    np.testing.assert_array_equal(y.d, want)


# ------------------------------------------------------------------------------ Convolution + ReLU
tiled = pytest.mark.skipif(not convolution_tiled.enabled(), reason="the tiled route needs AVX-512")


def _conv_relu_net(x):
    h = F.relu(PF.convolution(x, 8, (3, 3), pad=(1, 1), name="r1"))
    h = F.relu(PF.convolution(h, 6, (3, 3), name="r2", with_bias=False))
    return F.relu(PF.convolution(h, 4, (1, 1), name="r3"))   # pointwise: not tiled, runs alone


def _train_conv_relu(dtype, fuse, monkeypatch, steps=3):
    monkeypatch.setattr(graph, "FUSION", fuse)
    nn.clear_parameters()
    x = nn.Variable.from_numpy_array(np.random.RandomState(2).randn(5, 3, 9, 9).astype(dtype))
    loss = F.mean(_conv_relu_net(x) ** 2)
    init = np.random.RandomState(3)
    for name, p in sorted(nn.get_parameters().items()):
        p.d = (init.rand(*p.shape) - 0.3).astype(dtype)
    return momentum_steps(loss, 0.1, steps)


@tiled
@pytest.mark.parametrize("threshold", [None, 0], ids=["serial", "parallel"])
def test_tiled_convolution_with_its_relu_matches_unfused(threshold, monkeypatch):
    with parallel_threshold(threshold):
        want = _train_conv_relu(np.float32, False, monkeypatch)
        got = _train_conv_relu(np.float32, True, monkeypatch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for name in want[1]:
        np.testing.assert_allclose(got[1][name], want[1][name], rtol=1e-5, atol=1e-6, err_msg=name)


@tiled
def test_the_plan_runs_a_tiled_convolution_with_its_relu():
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(2, 3, 9, 9).astype(np.float32))
    y = _conv_relu_net(x)
    assert _plan_chains(y, clear_buffer=True) == ["Convolution+ReLU", "Convolution+ReLU"]
    assert _plan_chains(y) == []   # no clearing flag: the convolutions' outputs stay readable
    with nn.context_scope(get_extension_context("cpu", type_config="double")):
        x64 = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(2, 3, 9, 9))
        assert _plan_chains(_conv_relu_net(x64), clear_buffer=True) == []   # float64: no tiles
