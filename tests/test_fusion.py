"""Elementwise fusion gives the unfused results: under the clearing flags, and without them
(where every value and gradient is stored as nnabla keeps it)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit import fusion, graph
from nnabla_jit.ext_utils import get_extension_context
from nnabla_jit.ops import kernels

pytestmark = pytest.mark.usefixtures("fuse_from_first_run")


def _run(build, fwd_flags, bwd_flags, seed=0, fuse=True):
    before, graph.FUSION = graph.FUSION, fuse
    try:
        return _run_fused_or_not(build, fwd_flags, bwd_flags, seed)
    finally:
        graph.FUSION = before


def _run_fused_or_not(build, fwd_flags, bwd_flags, seed):
    nn.clear_parameters()
    rng = np.random.RandomState(seed)
    x = nn.Variable.from_numpy_array(rng.randn(3, 5).astype(np.float32), need_grad=True)
    w = nn.Variable.from_numpy_array(rng.randn(3, 5).astype(np.float32), need_grad=True)
    outs = build(x, w)
    loss = outs[0]
    x.g, w.g = 0, 0
    for _ in range(2):           # twice: leaf gradients accumulate
        loss.forward(**fwd_flags)
        loss.backward(**bwd_flags)
    return [loss.d.copy(), x.g.copy(), w.g.copy()] + [o.d.copy() for o in outs[1:]]


GRAPHS = {
    "chain": lambda x, w: [F.sum((F.tanh(2 * x + 1) * F.sigmoid(x) - 0.5) ** 2)],
    "shared_input": lambda x, w: [F.sum(x * x + F.exp(x) * w - w / (1 + x * x))],
    "outside_consumer": lambda x, w: (lambda h: [F.sum(F.softmax(h) * F.tanh(h) + h)])(F.sin(x) * w + 1),
    "kept_intermediate": lambda x, w: (lambda h: [F.sum(F.exp(h) * 2), h.apply(persistent=True)])(
        F.tanh(x) * w + 0.5),
    "long_chain": lambda x, w: [F.sum(_chain(x, 40) * w)],
    "sum_inside": lambda x, w: [F.mean(F.sum(F.tanh(x) * w + 1.0) * 3.0 + F.sin(w))],
}


def _chain(h, n):
    for _ in range(n):
        h = F.tanh(0.5 * h + 0.1)
    return h


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_fused_matches_unfused(name):
    build = GRAPHS[name]
    want = _run(build, {}, {}, fuse=False)
    got = _run(build, {"clear_no_need_grad": True}, {"clear_buffer": True})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    rng = np.random.RandomState(0)
    loss = build(*[nn.Variable.from_numpy_array(rng.randn(3, 5).astype(np.float32)) for _ in range(2)])[0]
    loss.forward(clear_buffer=True)      # inference: only the loss survives
    np.testing.assert_allclose(loss.d, want[0], rtol=1e-5, atol=1e-6)


def test_fusion_reduces_kernel_calls():
    x = nn.Variable.from_numpy_array(np.random.randn(4).astype(np.float32), need_grad=True)
    loss = F.sum(_chain(x, 20))
    loss.forward(clear_no_need_grad=True)
    plan = loss._cache[("forward", False, True)]
    assert plan.fused and len(plan.runners) < 61 / 4
    loss.backward(clear_buffer=True)
    bplan = loss._cache[("backward", True)]
    assert bplan.fused and len(bplan.runners) < 61 / 4


def test_hooks_see_every_function_even_when_fused():
    x = nn.Variable.from_numpy_array(np.random.randn(4).astype(np.float32), need_grad=True)
    loss = F.sum(F.exp(F.tanh(x) * 2))
    loss.forward(clear_no_need_grad=True)
    seen = []
    loss.forward(clear_no_need_grad=True, function_pre_hook=lambda f: seen.append(f.name))
    assert seen == ["Tanh", "MulScalar", "Exp", "Sum"]
    seen = []
    loss.backward(clear_buffer=True, function_post_hook=lambda f: seen.append(f.name))
    assert seen == ["Sum", "Exp", "MulScalar", "Tanh"]


def test_fusion_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(graph, "FUSION", False)
    x = nn.Variable.from_numpy_array(np.random.randn(4).astype(np.float32), need_grad=True)
    loss = F.sum(F.exp(F.tanh(x) * 2))
    loss.forward(clear_no_need_grad=True)
    assert not loss._cache[("forward", False, True)].fused


def _sum_closing(x, reduce):
    return reduce((F.tanh(2 * x + 1) * F.sigmoid(x) - 0.5) ** 2)


@pytest.mark.parametrize("config, dtype", [("float", np.float32), ("double", np.float64)])
@pytest.mark.parametrize("threshold", [None, 0])   # serial kernels, then the parallel ones
@pytest.mark.parametrize("reduce", [F.sum, F.mean, lambda h: F.sum(h, keepdims=True)])
@pytest.mark.parametrize("shape", [(7, 11), (5, 2053)])   # one tile per block, then several
def test_a_whole_array_sum_of_a_fused_run_is_summed_in_its_pass_and_gives_its_gradient_as_a_scalar(monkeypatch, config, dtype, threshold, reduce, shape):
    """F.sum / F.mean of every element of a fused run's last output is computed in the run's
    forward pass (no Sum kernel, the summed values never stored), and its gradient reaches the
    fused backward as one scalar (no Sum backward, no broadcast array); values and gradients are
    the unfused ones."""
    rng = np.random.RandomState(3)
    x0 = rng.randn(*shape).astype(dtype)
    results = []
    for fuse in (False, True):
        monkeypatch.setattr(graph, "FUSION", fuse)
        with nn.context_scope(get_extension_context("cpu", type_config=config)), \
                kernels.parallel_threshold(threshold):
            x = nn.Variable.from_numpy_array(x0, need_grad=True)
            loss = _sum_closing(x, reduce)
            x.g = 1.0   # leaf gradients accumulate
            for _ in range(2):
                loss.forward(clear_no_need_grad=True)
                loss.backward(2.0, clear_buffer=True)
        assert loss.d.dtype == dtype
        results.append((loss.d.copy(), x.g.copy()))
        if fuse:
            fplan = loss._cache[("forward", False, True)]
            bplan = loss._cache[("backward", True)]
            assert len(fplan.runners) == 1 and len(bplan.runners) == 1
            assert fplan.runners[0].total is not None and bplan.runners[0].total_grad is not None
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if threshold == 0:   # the parallel sum adds in the unfused Sum's order: the same total
        assert results[1][0] == results[0][0]


def test_a_sum_whose_input_has_other_readers_keeps_it():
    """A fused run's last output read by a whole-array Sum and by another function: backward
    keeps the Sum's own step (two gradients meet there); values are the unfused ones."""
    build = lambda x, w: (lambda h: [F.sum(h) * 2 + F.mean(h * w)])(F.tanh(x) * w + 0.5)
    want = _run(build, {}, {}, fuse=False)
    got = _run(build, {"clear_no_need_grad": True}, {"clear_buffer": True})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _every_variable(loss):
    """The variables of ``loss``'s graph, in the order its functions run."""
    found, seen = [], set()

    def visit(f):
        for v in list(f.inputs) + list(f.outputs):
            if id(v) not in seen:
                seen.add(id(v))
                found.append(v)
    loss.visit(visit)
    return found


@pytest.mark.parametrize("config, dtype", [("float", np.float32), ("double", np.float64)])
@pytest.mark.parametrize("threshold", [None, 0])   # serial kernels, then the parallel ones
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_without_clearing_flags_every_value_and_gradient_is_kept(monkeypatch, config, dtype, threshold, name):
    """forward() and backward() without flags run fused and still leave every intermediate
    value and gradient in its variable, as the unfused run does (and nnabla)."""
    results = []
    for fuse in (False, True):
        monkeypatch.setattr(graph, "FUSION", fuse)
        nn.clear_parameters()
        rng = np.random.RandomState(5)
        with nn.context_scope(get_extension_context("cpu", type_config=config)), \
                kernels.parallel_threshold(threshold):
            x, w = (nn.Variable.from_numpy_array(rng.randn(3, 5).astype(dtype), need_grad=True)
                    for _ in range(2))
            loss = GRAPHS[name](x, w)[0]
            x.g, w.g = 0, 0
            for _ in range(2):
                loss.forward()
                loss.backward()
            variables = _every_variable(loss)
            results.append([(v.d.copy(), v.g.copy() if v.need_grad else None) for v in variables])
        if fuse:   # fused runners ran, not just a plan allowed to fuse
            assert any(isinstance(r, fusion.FusedForward)
                       for r in loss._cache[("forward", False, False)].runners)
            assert any(isinstance(r, fusion.FusedBackward)
                       for r in loss._cache[("backward", False)].runners)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert len(results[0]) == len(results[1])
    for (d0, g0), (d1, g1) in zip(*results):
        np.testing.assert_allclose(d1, d0, rtol=tol, atol=tol)
        if g0 is not None:
            np.testing.assert_allclose(g1, g0, rtol=tol, atol=tol)
