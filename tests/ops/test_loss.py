"""Loss functions: forward against NumPy, gradients (kernel, rule, second order), label checks."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ops.registry import NoGradient
from nnabla_jit.testing import check_forward, check_function
from nnabla_jit.testing import strategies as nst


def log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def pick(a, t, axis):
    """a's element at the label along ``axis`` (0 where the label is negative)."""
    got = np.take_along_axis(a, np.maximum(t, 0).astype(np.int64), axis)
    return np.where(t >= 0, got, 0.0)


@st.composite
def labelled(draw, max_classes=4):
    """Scores of shape (batch..., classes, inner...) with labels along a drawn axis, a few of
    them negative (ignored)."""
    shape = draw(nst.shapes(2, 3, 1, 3))
    classes = draw(st.integers(2, max_classes))
    axis = draw(st.integers(0, len(shape)))
    shape = shape[:axis] + (classes,) + shape[axis:]
    x = draw(nst.arrays(st.just(shape)))
    tshape = shape[:axis] + (1,) + shape[axis + 1:]
    seed = draw(st.integers(0, 2 ** 16))
    t = np.random.RandomState(seed).randint(-1, classes, tshape)
    as_float = draw(st.booleans())
    return x, (t.astype(np.float64) if as_float else t), axis


@given(labelled())
def test_softmax_cross_entropy(case):
    x, t, axis = case
    check_function(lambda x, t: F.softmax_cross_entropy(x, t, axis), [x, t],
                   lambda x, t: -pick(log_softmax(x, axis), t, axis), wrt=[0])


def test_softmax_cross_entropy_is_stable_for_large_scores():
    x = np.array([[1000.0, 0.0, -1000.0], [-500.0, 500.0, 0.0]], np.float32)
    t = np.array([[0], [0]])
    xv = nn.Variable.from_numpy_array(x, need_grad=True)
    y = F.softmax_cross_entropy(xv, nn.Variable.from_numpy_array(t))
    y.forward()
    np.testing.assert_allclose(y.d, [[0.0], [1000.0]])
    xv.g = 0
    y.backward()
    np.testing.assert_allclose(xv.g, [[0, 0, 0], [-1, 1, 0]], atol=1e-6)


def test_negative_labels_are_ignored():
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(3, 4), need_grad=True)
    t = nn.Variable.from_numpy_array(np.array([[1], [-1], [3]]))
    for fn in (F.softmax_cross_entropy, lambda x, t: F.categorical_cross_entropy(F.softmax(x), t)):
        y = fn(x, t)
        y.forward()
        x.g = 0
        y.backward()
        assert y.d[1, 0] == 0 and np.all(x.g[1] == 0)
        assert np.all(y.d[[0, 2]] > 0) and np.any(x.g[0] != 0)


@pytest.mark.parametrize("op", ["softmax_cross_entropy", "categorical_cross_entropy"])
def test_fractional_labels_truncate_toward_zero(op):
    """nnabla casts a float label to int in C++: 2.001 is class 2, -0.5 class 0, -1.5 ignored."""
    p = np.array([1., 2., 3.]) / 6
    x = np.log(np.tile(p, (4, 1)))
    fn = getattr(F, op)
    y = fn(nn.Variable.from_numpy_array(x if op == "softmax_cross_entropy" else np.exp(x)),
           nn.Variable.from_numpy_array(np.array([[2.001], [-0.5], [-1.5], [1.999]])))
    y.forward()
    np.testing.assert_allclose(y.d.ravel(), [-np.log(p[2]), -np.log(p[0]), 0, -np.log(p[1])], rtol=1e-5)


@pytest.mark.parametrize("labels, message", [
    ([[0], [4]], r"label 4 at position \(1, 0\).*below the number of classes 4"),
    ([[np.nan], [1]], r"label nan at position \(0, 0\)"),
])
@pytest.mark.parametrize("op", ["softmax_cross_entropy", "categorical_cross_entropy", "top_n_error",
                                "confusion_matrix"])
def test_bad_labels_raise(op, labels, message):
    name = {"softmax_cross_entropy": "SoftmaxCrossEntropy", "categorical_cross_entropy": "CategoricalCrossEntropy",
            "top_n_error": "TopNError", "confusion_matrix": "ConfusionMatrix"}[op]
    x = nn.Variable.from_numpy_array(np.full((2, 4), 0.25))
    y = getattr(F, op)(x, nn.Variable.from_numpy_array(np.array(labels)))
    with pytest.raises(ValueError, match=name + ": " + message):
        y.forward()


@pytest.mark.parametrize("tshape, axis", [((2,), -1), ((2, 4), -1), ((1, 4), -1), ((2, 1), 0)])
def test_label_shape_must_match(tshape, axis):
    x = nn.Variable((2, 4))
    with pytest.raises(ValueError, match=r"SoftmaxCrossEntropy: target of shape"):
        F.softmax_cross_entropy(x, nn.Variable(tshape), axis)


@given(labelled())
def test_categorical_cross_entropy(case):
    x, t, axis = case
    p = np.exp(log_softmax(x, axis))
    check_function(lambda p, t: F.categorical_cross_entropy(p, t, axis), [p, t],
                   lambda p, t: -np.log(np.where(t >= 0, pick(p, t, axis), 1.0)), wrt=[0])


# ------------------------------------------------------------------------ elementwise losses
def pair(draw_shape=nst.shapes(1, 3, 1, 3)):
    return nst.arrays(draw_shape).flatmap(
        lambda a: st.tuples(st.just(a), nst.arrays(st.just(a.shape))))


@given(pair())
def test_sigmoid_cross_entropy(xt):
    x, t = xt
    t = (t + 2) / 4   # targets in [0, 1]
    check_function(F.sigmoid_cross_entropy, [x, t],
                   lambda x, t: -(t * np.log(1 / (1 + np.exp(-x))) + (1 - t) * np.log(1 - 1 / (1 + np.exp(-x)))),
                   wrt=[0])


def test_sigmoid_cross_entropy_is_stable_for_large_scores():
    check_forward(F.sigmoid_cross_entropy, [np.array([100.0, -100.0, 0.0]), np.array([0.0, 1.0, 0.5])],
                  lambda x, t: np.array([100.0, 100.0, np.log(2)]))


@given(pair())
def test_binary_cross_entropy(xt):
    x, t = xt
    p, t = 0.1 + 0.8 * (x + 2) / 4, (t + 2) / 4
    check_function(F.binary_cross_entropy, [p, t], lambda p, t: -(t * np.log(p) + (1 - t) * np.log(1 - p)))


def test_binary_cross_entropy_clamps_the_logarithm():
    # nnabla clamps log's argument at the float32 minimum: finite losses at p = 0 and 1
    check_forward(F.binary_cross_entropy, [np.array([0.0, 1.0]), np.array([1.0, 0.0])],
                  lambda p, t: -np.log(np.full(2, np.finfo(np.float32).tiny)), rtol=1e-6)


@given(pair())
def test_squared_error(xy):
    check_function(F.squared_error, list(xy), lambda a, b: (a - b) ** 2)


def differences(kinks, margin=0.05):
    """x0 and x1 = x0 + d with |d| at least ``margin`` away from the loss's kinks."""
    return pair().map(lambda ab: (ab[0], ab[0] + nst_away(ab[1], kinks, margin)))


def nst_away(d, kinks, margin):
    for k in kinks:
        close = np.abs(d - k) < margin
        d = np.where(close, k + np.where(d >= k, 2 * margin, -2 * margin), d)
    return d


@given(differences([0.0]))
def test_absolute_error(xy):
    check_function(F.absolute_error, list(xy), lambda a, b: np.abs(a - b))


@given(differences([-0.7, 0.7]))
def test_huber_loss(xy):
    def ref(a, b):
        d = np.abs(a - b)
        return np.where(d < 0.7, d ** 2, 0.7 * (2 * d - 0.7))

    check_function(lambda a, b: F.huber_loss(a, b, 0.7), list(xy), ref)


@given(differences([-0.3, 0.3]))
def test_epsilon_insensitive_loss(xy):
    check_function(lambda a, b: F.epsilon_insensitive_loss(a, b, 0.3), list(xy),
                   lambda a, b: np.maximum(np.abs(a - b) - 0.3, 0))


@given(nst.positive_arrays(nst.shapes(2, 3, 1, 3)), st.integers(0, 2), st.integers(0, 2 ** 16))
def test_kl_multinomial(p, base_axis, seed):
    base_axis = min(base_axis, p.ndim - 1)
    q = np.random.RandomState(seed).uniform(0.2, 2.0, p.shape)
    axes = tuple(range(base_axis, p.ndim))
    p, q = p / p.sum(axes, keepdims=True), q / q.sum(axes, keepdims=True)

    def ref(p, q):
        return (p * np.log(p / q)).sum(axes).reshape(p.shape[:base_axis] + (1,))

    check_function(lambda p, q: F.kl_multinomial(p, q, base_axis), [p, q], ref)


def test_label_inputs_get_no_gradient():
    """A label gets no gradient; one with need_grad=True is refused, as nnabla refuses it."""
    x = nn.Variable.from_numpy_array(np.zeros((2, 3)), need_grad=True)
    t = nn.Variable.from_numpy_array(np.array([[0.0], [2.0]]), need_grad=True)
    y = F.softmax_cross_entropy(x, t)
    y.forward()
    t.g = 7
    with pytest.raises(NoGradient, match="SoftmaxCrossEntropy gives no gradient to its input 1 "
                                         r"\(target\), which has need_grad=True"):
        y.backward()
    t.need_grad = False
    y = F.softmax_cross_entropy(x, t)
    y.forward()
    y.backward()
    assert np.all(t.g == 7)
    np.testing.assert_allclose(x.g, np.full((2, 3), 1 / 3) - np.eye(3)[[0, 2]])
