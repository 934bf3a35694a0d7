"""TopNError, BinaryError, ConfusionMatrix: forward against NumPy; none has a gradient."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ops.registry import NoGradient
from nnabla_jit.testing import check_forward
from nnabla_jit.testing import strategies as nst


def var(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a), need_grad=need_grad)


@st.composite
def scores_and_labels(draw):
    """Scores with few distinct values (ties matter), labels along a drawn axis, some -1."""
    shape = draw(nst.shapes(1, 2, 1, 4))
    classes = draw(st.integers(2, 5))
    axis = draw(st.integers(0, len(shape)))
    shape = shape[:axis] + (classes,) + shape[axis:]
    rng = np.random.RandomState(draw(st.integers(0, 2 ** 16)))
    x = rng.randint(0, 4, shape).astype(np.float64)
    t = rng.randint(-1, classes, shape[:axis] + (1,) + shape[axis + 1:])
    return x, t, axis


def top_n_error_reference(x, t, axis, n):
    label_score = np.take_along_axis(x, np.maximum(t, 0), axis)
    # nnabla counts the other classes scoring at least as high as the label (ties count)
    at_least = (x >= label_score).sum(axis=axis, keepdims=True) - 1
    return np.where(t >= 0, (at_least >= n).astype(np.float64), 0.0)


@given(scores_and_labels(), st.integers(0, 3))
def test_top_n_error(case, n):
    x, t, axis = case
    check_forward(lambda x, t: F.top_n_error(x, t, axis, n), [x, t],
                  lambda x, t: top_n_error_reference(x, t, axis, n))


def test_top_n_error_counts_ties_as_errors():
    x = var([[0.1, 0.5, 0.3, 0.5], [0.9, 0.05, 0.02, 0.03], [0.2, 0.2, 0.2, 0.2]])
    y = F.top_n_error(x, var([[1], [0], [3]]))
    y.forward()
    np.testing.assert_array_equal(y.d, [[1], [0], [1]])   # values checked against nnabla 1.39


@given(nst.arrays(nst.shapes(1, 3, 1, 4), low=0.0, high=1.0), st.integers(0, 2 ** 16))
def test_binary_error(x, seed):
    t = np.random.RandomState(seed).uniform(0, 1, x.shape)
    x = np.where(np.abs(x - 0.5) < 0.01, 0.5, x)   # exercise the threshold itself
    check_forward(F.binary_error, [x, t], lambda x, t: ((x >= 0.5) != (t >= 0.5)).astype(np.float64))


@given(scores_and_labels())
def test_confusion_matrix(case):
    x, t, axis = case
    classes = x.shape[axis]
    xv = var(x)
    y = F.confusion_matrix(xv, var(t), axis)
    y.forward()
    want = np.zeros((classes, classes), np.int64)
    predicted = np.argmax(x, axis=axis)   # the first of tied maxima, as nnabla
    for label, pred in zip(np.squeeze(t, axis).ravel(), predicted.ravel()):
        if label >= 0:
            want[label, pred] += 1
    assert y.d.dtype == np.int32
    np.testing.assert_array_equal(y.d, want)


@pytest.mark.parametrize("build", [
    lambda x, t: F.top_n_error(x, t),
    lambda x, t: F.binary_error(x, F.reshape(t, (2, 1)) * F.constant(1.0, (2, 3))),
    lambda x, t: F.confusion_matrix(x, t),
])
def test_validation_ops_have_no_gradient(build):
    x = var(np.random.RandomState(0).randn(2, 3), True)
    y = build(x, var([[0.0], [2.0]]))
    y.forward()
    x.g = 0
    y.backward()   # nnabla passes over metrics: no gradient, no error
    np.testing.assert_array_equal(x.g, 0)
    loss = F.sum(x * x)
    F.sink(loss, y).backward()   # so a loss and its metric train together
    np.testing.assert_allclose(x.g, 2 * x.d, rtol=1e-6)
    with pytest.raises(ValueError, match="no grad rule"):
        nn.grad([y], [x])


def test_validation_ops_raise_under_strict_grad(monkeypatch):
    from nnabla_jit import graph
    monkeypatch.setattr(graph, "STRICT_GRAD", True)
    graph.graph_changed()
    x = var(np.random.RandomState(0).randn(2, 3), True)
    y = F.top_n_error(x, var([[0.0], [2.0]]))
    y.forward()
    with pytest.raises(NoGradient, match="TopNError: this function has no backward"):
        F.sink(F.sum(x * x), y).backward()

