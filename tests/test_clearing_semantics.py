"""nnabla's buffer-clearing rules, as its clear_called_flag_recorder sees them: the root's
gradient, Sink inputs, recomputation (order, what it frees again, what it records), running
statistics kept by clear_no_need_grad, an in-place Reshape sharing its input's buffer, and
clear_called on a new NdArray. Expected flags checked against nnabla 1.39."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ndarray import DataFreed
from nnabla_jit.testing import clear_called_flag_recorder as recorder


@pytest.fixture
def record():
    recorder.activate_clear_called_flag_recorder()
    yield
    recorder.deactivate_clear_called_flag_recorder()


def restart():
    recorder.deactivate_clear_called_flag_recorder()
    recorder.activate_clear_called_flag_recorder()


def data_flags():
    return [[d for d, _ in f] for f in recorder.get_input_clear_called_flags()]


def grad_flags():
    return [[g for _, g in f] for f in recorder.get_output_clear_called_flags()]


def test_a_new_ndarray_is_not_clear_called_until_cleared():
    a = nn.NdArray((2,))
    assert not a.clear_called and not a.holds_values
    a.clear()
    assert a.clear_called
    a.data
    assert not a.clear_called and a.holds_values


@pytest.mark.parametrize("grad, root_freed", [(1, True), (np.ones(1), True), (None, False),
                                              (nn.NdArray.from_numpy_array(np.ones(1)), False)])
def test_backward_clear_buffer_frees_a_root_gradient_made_from_a_value(record, grad, root_freed):
    x = nn.Variable([1], need_grad=True)
    y = F.add_scalar(F.identity(x))
    y.forward(clear_no_need_grad=True)
    restart()
    y.backward(clear_buffer=True, grad=grad)
    assert grad_flags() == [[root_freed], [True]]
    assert not y.grad.clear_called   # the root's own gradient is left as it was
    np.testing.assert_array_equal(x.g, 0 if grad is None else 1)


def test_backward_clear_buffer_keeps_what_a_sink_takes(record):
    x = nn.Variable([1], need_grad=True)
    h = F.identity(x)
    y = F.sink(F.add_scalar(h), F.add_scalar(h))
    y.forward(clear_no_need_grad=True)
    restart()
    y.backward(clear_buffer=True)
    assert grad_flags() == [[True], [False], [False], [True]]


def test_recomputation_runs_depth_first_and_frees_what_no_backward_reads(record):
    a0 = nn.Variable((2, 3), need_grad=True)
    a1 = F.identity(a0).apply(recompute=True)
    a2 = F.sin(a1).apply(recompute=True)
    b0 = nn.Variable((2, 3))   # no gradient flows this way
    b1 = F.identity(b0).apply(recompute=True)
    b2 = F.sin(b1).apply(recompute=True)
    y = F.sin(F.add2(a2, b2).apply(recompute=True))
    a0.d, b0.d = 0.5, 0.25
    y.forward(clear_no_need_grad=True)
    assert data_flags() == [[False], [True], [False], [True], [True, True], [True]]
    restart()
    y.backward(clear_buffer=True)
    # recomputed: a1 (kept: sin's backward reads it), then b's chain, whose b1 is freed again;
    # then the backward steps, each recording its inputs before its frees
    assert data_flags() == [[False], [False], [False], [True], [True, True],
                            [False], [True, True], [False], [False]]
    c = np.sin(0.5) + np.sin(0.25)
    np.testing.assert_allclose(a0.g, np.cos(c) * np.cos(0.5), rtol=1e-6)


def test_an_intermediate_recomputation_freed_is_not_recomputed_again(record):
    x0 = nn.Variable((2, 3), need_grad=True)
    x1 = F.identity(x0).apply(recompute=True)
    x2 = F.sin(x1).apply(recompute=True)
    y = F.sin(F.identity(x2).apply(recompute=True))
    y.forward(clear_no_need_grad=True)
    restart()
    y.backward(clear_buffer=True)
    assert data_flags() == [[False], [False], [True], [False], [True], [False], [False]]


def test_clear_no_need_grad_keeps_the_running_statistics_of_inference_batch_norm(record):
    x = F.identity(nn.Variable([1, 1, 2], need_grad=True))
    beta, gamma, mean, var = [F.identity(nn.Variable([1, 1, 1], need_grad=True)) for _ in range(4)]
    y = F.batch_normalization(x, beta, gamma, mean, var, batch_stat=False)
    y.forward(clear_no_need_grad=True)
    assert data_flags()[-1] == [False, True, False, False, False]   # only beta freed


def test_an_in_place_reshape_shares_its_input_buffer():
    v = nn.Variable([2, 3, 4], need_grad=True)
    with nn.auto_forward():
        h = F.identity(v)
        r = h.reshape((3, 4, 2))
    h.d = 1
    assert np.all(r.d == 1)
    v.d = 3
    r2 = F.reshape(h, (4, 6), inplace=False)
    r2.forward()
    assert np.all(r.d == 3) and np.all(r2.d == 3)
    h.d = 2
    assert np.all(r.d == 2) and np.all(r2.d == 3)   # inplace=False: a copy


def test_softmax_cross_entropy_backward_before_any_forward_is_an_error():
    # nnabla reads its never-written softmax buffer there: a gradient from garbage
    x = nn.Variable((2, 3), need_grad=True)
    t = nn.Variable.from_numpy_array(np.array([[1], [2]]))
    loss = F.mean(F.softmax_cross_entropy(x, t))
    with pytest.raises(RuntimeError, match="SoftmaxCrossEntropy needs the softmax its forward"):
        loss.backward()


def test_softmax_cross_entropy_backward_before_any_forward_reads_zeros_when_asked(monkeypatch):
    from nnabla_jit.ops import common
    monkeypatch.setattr(common, "UNCOMPUTED_READS", "zeros")   # NNABLA_JIT_UNCOMPUTED_READS=zeros
    x = nn.Variable((2, 3), need_grad=True)
    t = nn.Variable.from_numpy_array(np.array([[1], [2]]))
    F.mean(F.softmax_cross_entropy(x, t)).backward()
    np.testing.assert_allclose(x.g, [[0, -0.5, 0], [0, 0, -0.5]])


# ---------------------------------------------------------------- data a user's variable shares
def _lstm_program():
    import json
    import os
    import sys
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    sys.path.insert(0, here)
    try:
        from lstm_state_program import train
    finally:
        sys.path.remove(here)
    with open(os.path.join(here, "lstm_state_oracle.json")) as f:
        oracle = json.load(f)   # nnabla 1.39: tests/fixtures/make_lstm_state_fixtures.py
    return train, oracle


@pytest.mark.parametrize("forward_kwargs", [{}, {"clear_no_need_grad": True}])
def test_lstm_states_carried_by_shared_data_train_with_nnabla_losses(forward_kwargs):
    # h0.data = h.data, then forward; backward(clear_buffer=True): the last states are the
    # next batch's initial states, so clearing leaves them. nnabla frees them and reads what
    # its memory pool left (a series that changes from run to run); kept, its losses are these.
    import nnabla_jit.initializer as I
    import nnabla_jit.parametric_functions as PF
    import nnabla_jit.solvers as S
    train, oracle = _lstm_program()
    losses = train(nn, F, PF, S, I, forward_kwargs, {"clear_buffer": True})
    np.testing.assert_allclose(losses, oracle["states_kept"], rtol=2e-6)
    # (nnabla's own clearing runs, for the record, lie within 3e-4 of these)
    for run in oracle["clear_buffer_runs_for_the_record"]:
        np.testing.assert_allclose(run, oracle["states_kept"], rtol=3e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_a_user_variable_shares_are_not_freed(dtype):
    x = nn.Variable.from_numpy_array(np.linspace(-1, 1, 6).reshape(2, 3).astype(dtype), need_grad=True)
    a = F.tanh(x)
    b = a * 2          # inside a fused elementwise run: a register unless someone holds it
    y = F.sum(F.sin(b) + 1)
    state = nn.Variable(b.shape)
    state.data = b.data
    y.forward(clear_buffer=True)
    want = 2 * np.tanh(x.d.astype(np.float64))
    np.testing.assert_allclose(state.d, want, rtol=1e-6)
    with pytest.raises(DataFreed, match="was freed by"):     # a, shared with nobody
        a.d
    y.forward(clear_no_need_grad=True)
    y.backward(clear_buffer=True)
    np.testing.assert_allclose(state.d, want, rtol=1e-6)
    np.testing.assert_allclose(b.d, want, rtol=1e-6)


# ---------------------------------------------------------------- reading data clearing freed
def _graph():
    x = nn.Variable.from_numpy_array(np.full((2, 3), 0.5, np.float32), need_grad=True)
    h = F.tanh(x * 2 + 1)
    y = F.sum(F.sin(h) * 3)
    return x, h, y


@pytest.mark.parametrize("clear", ["forward", "no_need_grad", "backward"])
def test_reading_an_intermediate_clearing_freed_is_an_error(clear):
    x, h, y = _graph()
    if clear == "forward":
        y.forward(clear_buffer=True)
        call = r"forward\(clear_buffer=True\)"
    elif clear == "no_need_grad":
        h2 = F.exp(x)     # exp's backward reads its output, so clear_no_need_grad keeps it
        y2 = F.sum(h2 + 1)
        y2.forward(clear_no_need_grad=True)
        np.testing.assert_allclose(h2.d, np.exp(0.5), rtol=1e-6)
        h = F.identity(x) * 2    # Mul2 by a scalar: its input is not needed by backward
        y = F.sum(F.identity(h) + 1)
        y.forward(clear_no_need_grad=True)
        call = r"forward\(clear_no_need_grad=True\)"
    else:
        y.forward()
        np.testing.assert_allclose(h.d, np.tanh(2.0), rtol=1e-6)
        y.backward(clear_buffer=True)
        call = r"backward\(clear_buffer=True\)"
    for read in (lambda: h.d, lambda: h.data.data, lambda: h.data.get_data("r"),
                 lambda: h.data.cast(np.float32)):
        with pytest.raises(DataFreed, match="freed by " + call + ".*persistent=True"):
            read()
    assert isinstance(DataFreed("x"), RuntimeError)


def test_what_clearing_freed_reads_again_once_written_or_computed():
    x, h, y = _graph()
    y.forward(clear_buffer=True)
    h.d = 7                              # written: no freed values are read
    np.testing.assert_array_equal(h.d, 7)
    y.forward(clear_buffer=True)         # frees h again
    h.data.get_data("w")[...] = 1        # write-only access
    np.testing.assert_array_equal(h.d, 1)
    y.forward()                          # computed again
    np.testing.assert_allclose(h.d, np.tanh(2.0), rtol=1e-6)


def test_persistent_intermediates_and_user_cleared_arrays_read_as_before():
    x, h, y = _graph()
    h.persistent = True
    y.forward(clear_buffer=True)
    np.testing.assert_allclose(h.d, np.tanh(2.0), rtol=1e-6)
    a = nn.NdArray.from_numpy_array(np.ones(3))
    a.clear()                            # the user's own clear(): fresh zeros, as documented
    np.testing.assert_array_equal(a.data, 0)


def test_as_nnabla_reading_freed_data_gives_zeros_and_warns_once(monkeypatch):
    import sys
    import warnings
    from nnabla_jit.ops import common
    monkeypatch.setitem(sys.modules, "nnabla", nn)
    monkeypatch.setattr(common, "UNCOMPUTED_READS", None)
    monkeypatch.setattr(common, "_warned", [])
    x, h, y = _graph()
    y.forward(clear_buffer=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = h.d.copy()
        y.forward(clear_buffer=True)
        second = h.d.copy()
    np.testing.assert_array_equal(first, 0)
    np.testing.assert_array_equal(second, 0)
    found = [w for w in caught if issubclass(w.category, common.UncomputedReadWarning)]
    assert len(found) == 1 and "forward(clear_buffer=True)" in str(found[0].message)


def test_freed_data_reads_zeros_silently_when_asked(monkeypatch):
    import warnings
    from nnabla_jit.ops import common
    monkeypatch.setattr(common, "UNCOMPUTED_READS", "zeros")
    x, h, y = _graph()
    y.forward(clear_buffer=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(h.d, 0)
