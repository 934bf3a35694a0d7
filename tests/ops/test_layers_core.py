"""Affine, Embed, BatchMatmul, Constant, Arange and the non-elementwise activations (Softmax,
LogSoftmax, CReLU, CELU, PReLU)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import check_forward, check_function, strategies as nst


@given(data=st.data())
def test_affine_any_base_axis(data):
    shape = data.draw(nst.shapes(2, 4, 1, 3))
    base_axis = data.draw(st.integers(1, len(shape) - 1))
    inner = int(np.prod(shape[base_axis:]))
    x = data.draw(nst.arrays(st.just(shape)))
    w = data.draw(nst.arrays(st.just((inner, 2))))
    b = data.draw(nst.arrays(st.just((2,))))
    lead = shape[:base_axis]
    check_function(lambda x, w, b: F.affine(x, w, b, base_axis), [x, w, b],
                   lambda x, w, b: x.reshape(lead + (inner,)) @ w + b)
    check_function(lambda x, w: F.affine(x, w, None, base_axis), [x, w],
                   lambda x, w: x.reshape(lead + (inner,)) @ w)


def test_affine_weight_with_output_shape():
    rng = np.random.RandomState(0)
    x, w, b = rng.randn(3, 4), rng.randn(4, 2, 3), rng.randn(2, 3)
    check_function(F.affine, [x, w, b], lambda x, w, b: np.einsum("nd,dij->nij", x, w) + b)


def test_embed():
    rng = np.random.RandomState(0)
    index = np.array([[0, 3], [2, 2]])
    w = rng.randn(4, 3)
    check_function(lambda i, w: F.embed(i, w), [index, w], lambda i, w: w[i], wrt=[1])
    with pytest.raises(ValueError, match="Embed.*range"):
        F.embed(nn.Variable.from_numpy_array(np.array([4])), nn.Variable.from_numpy_array(w)).forward()


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_matmul(ta, tb):
    rng = np.random.RandomState(0)
    a = rng.randn(2, 3, 4) if not ta else rng.randn(2, 4, 3)
    b = rng.randn(1, 4, 5) if not tb else rng.randn(1, 5, 4)
    t = lambda m, f: np.swapaxes(m, -1, -2) if f else m
    check_function(lambda a, b: F.batch_matmul(a, b, ta, tb), [a, b], lambda a, b: t(a, ta) @ t(b, tb))


def test_constant_and_arange():
    check_forward(lambda: F.constant(2.5, (2, 3)), [], lambda: np.full((2, 3), 2.5))
    check_forward(lambda: F.arange(1, 4, 0.5), [], lambda: np.arange(1, 4, 0.5))
    with pytest.raises(ValueError, match="Arange.*step"):
        F.arange(0, 1, 0)


@given(data=st.data())
def test_softmax_log_softmax(data):
    x = data.draw(nst.arrays(nst.shapes(1, 3, 1, 4)))
    axis = data.draw(nst.axis(x.ndim))

    def softmax(a):
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
    check_function(lambda v: F.softmax(v, axis), [x], softmax)
    check_function(lambda v: F.log_softmax(v, axis), [x], lambda a: np.log(softmax(a)))


def test_softmax_is_stable_for_large_inputs():
    x = np.array([[1000.0, 1001.0, 1002.0]], np.float32)
    y = F.softmax(nn.Variable.from_numpy_array(x))
    y.forward()
    assert np.all(np.isfinite(y.d)) and abs(y.d.sum() - 1) < 1e-6


@given(x=nst.away_from(nst.arrays(nst.shapes(2, 3, 1, 3)), (0.0,)))
def test_crelu_celu(x):
    check_function(lambda v: F.crelu(v, 1), [x],
                   lambda a: np.concatenate([np.maximum(a, 0), np.maximum(-a, 0)], 1))
    elu = lambda a: np.where(a > 0, a, 0.8 * (np.exp(a) - 1))
    check_function(lambda v: F.celu(v, 0.8, 1), [x], lambda a: np.concatenate([elu(a), elu(-a)], 1))


@given(x=nst.away_from(nst.arrays(nst.shapes(2, 3, 2, 3)), (0.0,)), shared=st.booleans())
def test_prelu(x, shared):
    w = np.array([0.3]) if shared else np.linspace(0.1, 0.5, x.shape[1])
    shape = [1] * x.ndim
    shape[1] = w.size
    check_function(lambda v, s: F.prelu(v, s, 1), [x, w],
                   lambda a, s: np.where(a > 0, a, s.reshape(shape) * a))
