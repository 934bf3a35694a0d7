"""The executor: static and dynamic graphs, buffer clearing, hooks, plan caching."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit import fusion, graph
from nnabla_jit.testing import double_context, numerical_grad


def _chain():
    x = nn.Variable.from_numpy_array(np.random.randn(3, 4).astype(np.float32), need_grad=True)
    h1 = F.tanh(x)
    h2 = F.sigmoid(h1)
    h3 = F.exp(h2 * 0.5)
    loss = F.sum(h3)
    return x, (h1, h2, h3), loss


def test_clear_buffer_frees_intermediates_and_persistent_keeps_them():
    x, (h1, h2, h3), loss = _chain()
    loss.forward(clear_buffer=True)
    assert h1.data.clear_called and h2.data.clear_called and h3.data.clear_called
    assert not loss.data.clear_called and not x.data.clear_called
    expected = np.sum(np.exp(0.5 / (1 + np.exp(-np.tanh(x.d)))))
    np.testing.assert_allclose(loss.d, expected, rtol=1e-5)

    h2.persistent = True
    loss.forward(clear_buffer=True)
    assert not h2.data.clear_called
    np.testing.assert_allclose(h2.d, 1 / (1 + np.exp(-np.tanh(x.d))), rtol=1e-5)
    assert h1.data.clear_called


def test_clear_no_need_grad_keeps_what_backward_reads():
    x, (h1, h2, h3), loss = _chain()
    loss.forward(clear_no_need_grad=True)
    # tanh and sigmoid backward read their outputs; exp reads its output; mul_scalar reads nothing
    assert not h1.data.clear_called and not h2.data.clear_called and not h3.data.clear_called
    mul = h3.parent.inputs[0]          # h2 * 0.5: only the exp's input, which exp's grad ignores
    assert mul.data.clear_called
    x.g = 0
    loss.backward()
    t = np.tanh(x.d)
    s = 1 / (1 + np.exp(-t))
    e = np.exp(0.5 * s)
    np.testing.assert_allclose(x.g, e * 0.5 * s * (1 - s) * (1 - t * t), rtol=1e-4)


def test_backward_clear_buffer_frees_grads_and_data():
    x, (h1, h2, h3), loss = _chain()
    loss.forward()
    x.g = 0
    loss.backward(clear_buffer=True)
    assert h1.grad.clear_called and h2.grad.clear_called
    assert h1.data.clear_called and h2.data.clear_called
    assert not x.grad.clear_called
    t = np.tanh(x.d)
    s = 1 / (1 + np.exp(-t))
    np.testing.assert_allclose(x.g, np.exp(0.5 * s) * 0.5 * s * (1 - s) * (1 - t * t), rtol=1e-4)


def test_need_grad_false_stops_propagation():
    x = nn.Variable.from_numpy_array(np.ones(2, np.float32), need_grad=True)
    x.g = 0
    b = x * 3
    b.need_grad = False
    c = F.sum(b * x)
    c.forward()
    c.backward()
    np.testing.assert_array_equal(x.g, [3, 3])


def test_same_input_twice():
    x = nn.Variable.from_numpy_array(np.array([1.0, 2.0], np.float32), need_grad=True)
    x.g = 0
    z = F.sum(F.mul2(x, x))
    z.forward()
    z.backward()
    np.testing.assert_array_equal(x.g, [2, 4])
    x.g = 0
    a = x + 1
    z = F.sum(a * a + a)
    z.forward()
    z.backward()
    np.testing.assert_array_equal(x.g, 2 * (x.d + 1) + 1)


def test_backward_without_need_grad_does_nothing_unless_strict(monkeypatch):
    q = nn.Variable((2,))
    r = F.sum(q * 3)
    r.forward()
    r.backward()
    np.testing.assert_array_equal(q.g, 0)
    monkeypatch.setattr(graph, "STRICT_GRAD", True)
    graph.graph_changed()
    with pytest.raises(ValueError, match="need_grad"):
        r.backward()
    with pytest.raises(ValueError, match="no parent"):
        q.backward()   # a leaf: an error in nnabla too


def test_hooks_see_every_function_in_order():
    x, _, loss = _chain()
    seen_pre, seen_post = [], []
    loss.forward(function_pre_hook=lambda f: seen_pre.append(f.name),
                 function_post_hook=lambda f: seen_post.append(f.name))
    assert seen_pre == seen_post == ["Tanh", "Sigmoid", "MulScalar", "Exp", "Sum"]
    order = []
    loss.backward(function_pre_hook=lambda f: order.append(f.name))
    assert order == ["Sum", "Exp", "MulScalar", "Sigmoid", "Tanh"]


def test_forward_all_runs_shared_parts_once():
    x = nn.Variable.from_numpy_array(np.ones(3, np.float32))
    calls = []
    h = F.tanh(x)
    a, b = F.exp(h), F.sin(h)
    nn.forward_all([a, b], function_pre_hook=lambda f: calls.append(f.name))
    assert calls.count("Tanh") == 1
    np.testing.assert_allclose(a.d, np.exp(np.tanh(1)) * np.ones(3), rtol=1e-6)
    np.testing.assert_allclose(b.d, np.sin(np.tanh(1)) * np.ones(3), rtol=1e-6)


def test_static_graph_plan_sees_new_inputs():
    x = nn.Variable((2,))
    y = F.tanh(x) * 2
    for value in (0.5, -1.0, 3.0):
        x.d = value
        y.forward()
        np.testing.assert_allclose(y.d, 2 * np.tanh(value), rtol=1e-6)


def test_plan_is_rebuilt_after_rewiring_and_need_grad_change():
    x = nn.Variable.from_numpy_array(np.ones(2, np.float32), need_grad=True)
    w = nn.Variable.from_numpy_array(np.full(2, 3.0, np.float32), need_grad=True)
    y = F.sum(x * w)
    y.forward()
    x.g, w.g = 0, 0
    y.backward()
    np.testing.assert_array_equal(w.g, [1, 1])
    w.need_grad = False
    w.g = 0
    x.g = 0
    y.backward()
    np.testing.assert_array_equal(w.g, [0, 0])
    np.testing.assert_array_equal(x.g, [3, 3])


def test_auto_forward_and_set_auto_forward():
    x = nn.Variable.from_numpy_array(np.array([0.5], np.float32))
    with nn.auto_forward():
        y = F.tanh(x) + 1
    np.testing.assert_allclose(y.d, np.tanh(0.5) + 1, rtol=1e-6)
    assert not nn.get_auto_forward()
    nn.set_auto_forward(True)
    z = F.exp(x)
    nn.set_auto_forward(False)
    np.testing.assert_allclose(z.d, np.exp(0.5), rtol=1e-6)


def test_no_grad_builds_without_need_grad():
    x = nn.Variable((2,), need_grad=True)
    with nn.no_grad():
        y = F.tanh(x)
    assert not y.need_grad
    assert F.tanh(x).need_grad


def test_dead_outputs_are_handled():
    x = nn.Variable.from_numpy_array(np.arange(6, dtype=np.float32).reshape(2, 3), need_grad=True)
    first = F.split(x, axis=0)[0]    # the second output is dropped at once
    loss = F.sum(first * 2)
    loss.forward()
    x.g = 0
    loss.backward()
    np.testing.assert_array_equal(x.g, [[2, 2, 2], [0, 0, 0]])


def test_outputs_argument_reuses_variables():
    x = nn.Variable.from_numpy_array(np.ones(3, np.float32))
    out = nn.Variable((3,))
    y = F.mul_scalar(x, 2.0, outputs=[out])
    assert y is out
    y.forward()
    np.testing.assert_array_equal(out.d, [2, 2, 2])
    with pytest.raises(ValueError, match="MulScalar: 2 output variables given, 1 expected"):
        F.mul_scalar(x, 2.0, outputs=[nn.Variable((3,)), nn.Variable((3,))])
    other = nn.Variable((7,))
    y.parent.setup([x], [other])        # setup reshapes the outputs it is given
    assert other.shape == (3,)


def test_double_context_computes_in_float64():
    from nnabla_jit.context import Context
    x = nn.Variable.from_numpy_array(np.array([1e-9, 1.0]))
    with nn.context_scope(Context(["cpu:double"])):
        y = x + 1.0
    y.forward()
    assert y.d.dtype == np.float64
    assert y.d[0] != 1.0
    z = x + 1.0
    z.forward()
    assert z.d.dtype == np.float32


def test_broadcast_with_many_alternating_axes():
    """More alternating broadcast axes than the strided kernel takes: a materialized path."""
    from nnabla_jit.testing import check_function
    rng = np.random.RandomState(0)
    check_function(lambda x, y: x * y, [rng.randn(2, 1, 2, 1, 2), rng.randn(1, 2, 1, 2, 1)],
                   lambda x, y: x * y)


def test_cleared_buffers_are_reused_unless_someone_holds_them():
    from nnabla_jit import ndarray
    ndarray.clear_memory_cache()
    x = nn.Variable.from_numpy_array(np.ones((3, 7), np.float32))
    h = F.tanh(x)
    # summed along an axis: the fused tanh/exp run stores exp's values for the Sum, which then
    # frees them (a whole-array Sum would be summed in the run's own pass, storing nothing)
    y = F.sum(F.exp(h), axis=1)
    y.forward(clear_buffer=True)
    assert len(ndarray._POOL[((3, 7), np.dtype(np.float32))]) >= 1
    y.forward()
    held = h.d                      # the caller keeps a reference ...
    y.forward(clear_buffer=True)    # ... so clearing must not recycle that buffer
    before = held.copy()
    x.d = -1
    y.forward()
    np.testing.assert_array_equal(held, before)
    np.testing.assert_allclose(h.d, np.tanh(-1), rtol=1e-6)


def test_the_executor_reaches_buffers_only_through_ndarray_methods():
    """graph.py and fusion.py get arrays through the one resolver (buffers.py) and NdArray's
    methods, never through NdArray's attributes."""
    import re
    from pathlib import Path
    import nnabla_jit
    root = Path(nnabla_jit.__file__).parent
    for name in ("graph.py", "fusion.py", "buffers.py", "cuda_ops/__init__.py"):
        text = (root / name).read_text()
        assert not re.search(r"\._array\b|\._device\b", text), name


def test_an_input_used_twice_and_an_output_nobody_holds():
    """Aliased gradients (x * x) accumulate; an output dropped by the caller still gets a
    buffer and a zero gradient (split keeps only one of its outputs)."""
    x = nn.Variable.from_numpy_array(np.arange(6, dtype=np.float32).reshape(2, 3), need_grad=True)
    first = F.split(x, axis=0)[0]      # the second output is dropped at once
    y = F.sum(first * first)
    for _ in range(2):
        y.forward()
        x.g = 0
        y.backward()
    np.testing.assert_array_equal(x.g, [[0, 2, 4], [0, 0, 0]])


# ------------------------------------------------------------------ fusion from a plan's third run
def _fused_kinds(loss, flags):
    """Which of the plans of ``loss`` run fused kernels: (forward, backward)."""
    fplan = loss._cache[("forward", False, flags)]
    bplan = loss._cache[("backward", flags)]
    return (any(isinstance(r, fusion.FusedForward) for r in fplan.runners),
            any(isinstance(r, fusion.FusedBackward) for r in bplan.runners))


@pytest.mark.parametrize("flags", [False, True])
def test_a_plan_runs_op_by_op_until_its_third_run_then_fused(monkeypatch, flags):
    """A graph run once or twice compiles no fused kernel; a loop fuses from the third run
    (always that run: a program's results are the same from run to run)."""
    monkeypatch.setattr(graph, "FUSE_FROM_RUN", 3)
    x, _, loss = _chain()
    seen, values = [], []
    for _ in range(4):
        x.g = 0
        loss.forward(clear_no_need_grad=flags)
        loss.backward(clear_buffer=flags)
        seen.append(_fused_kinds(loss, flags))
        values.append((loss.d.copy(), x.g.copy()))
    assert seen == [(False, False), (False, False), (True, True), (True, True)]
    for d, g in values[1:]:
        np.testing.assert_allclose(d, values[0][0], rtol=1e-6)
        np.testing.assert_allclose(g, values[0][1], rtol=1e-6, atol=1e-7)


def test_a_changed_graph_keeps_its_count_and_a_question_is_not_a_run(monkeypatch):
    monkeypatch.setattr(graph, "FUSE_FROM_RUN", 3)
    x, _, loss = _chain()
    for _ in range(5):
        assert graph.has_grad_path(loss)   # asks the backward plan: not a run of it
    loss.forward()
    loss.backward()
    assert loss._cache[("backward", False)].runs == 1
    for _ in range(2):
        loss.forward()
        loss.backward()
    assert _fused_kinds(loss, False) == (True, True)
    graph.graph_changed()   # every plan is built again: the rebuilt one fuses from its first run
    loss.forward()
    loss.backward()
    assert _fused_kinds(loss, False) == (True, True)
    assert loss._cache[("forward", False, False)].runs == 4


def test_a_numerical_gradient_compiles_no_fused_kernel(monkeypatch):
    """numerical_grad runs its loss graph twice per element: op by op, even where plans would
    fuse from their first run."""
    monkeypatch.setattr(graph, "FUSE_FROM_RUN", 1)
    monkeypatch.setattr(graph, "FUSION", True)
    fused = []
    real = fusion.fuse_forward
    monkeypatch.setattr(fusion, "fuse_forward", lambda *a, **k: fused.append(1) or real(*a, **k))
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(2, 3), need_grad=True)
    with nn.context_scope(double_context()):
        g = numerical_grad(lambda v: F.tanh(v) * 2 + 1, [x], [np.ones((2, 3))], 0, 1e-6)
    np.testing.assert_allclose(g, 2 / np.cosh(x.d) ** 2, rtol=1e-5)
    assert fused == []
    assert graph.FUSION   # as it was before the check (the fixture set it on)
