"""nnabla's buffer-clearing rules, as its clear_called_flag_recorder sees them: the root's
gradient, Sink inputs, recomputation (order, what it frees again, what it records), running
statistics kept by clear_no_need_grad, an in-place Reshape sharing its input's buffer, and
clear_called on a new NdArray. Expected flags checked against nnabla 1.39."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
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
    monkeypatch.setattr(common, "STRICT_READS", False)   # NNABLA_JIT_UNCOMPUTED_READS=zeros
    x = nn.Variable((2, 3), need_grad=True)
    t = nn.Variable.from_numpy_array(np.array([[1], [2]]))
    F.mean(F.softmax_cross_entropy(x, t)).backward()
    np.testing.assert_allclose(x.g, [[0, -0.5, 0], [0, 0, -0.5]])
