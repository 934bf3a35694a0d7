"""Unlink, Sink and VATNoise: nnabla's special-use functions and their unusual backwards."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import check_forward, strategies as nst


def _var(a, need_grad=True):
    return nn.Variable.from_numpy_array(np.asarray(a, np.float32), need_grad=need_grad)


# ------------------------------------------------------------------------------ Unlink
@given(nst.arrays(nst.shapes(1, 3)))
def test_unlink_forward_is_identity(x):
    check_forward(F.unlink, [x], lambda a: a)


def test_unlink_blocks_the_gradient():
    x = _var(np.arange(6).reshape(2, 3))
    x.g = 5
    y = F.unlink(x * 3) * 2 + x          # only the direct path reaches x
    y.forward()
    y.backward()
    np.testing.assert_array_equal(x.g, 6)
    g = nn.grad([F.sum(F.unlink(x) * x)], [x])[0]
    g.forward()
    np.testing.assert_allclose(g.d, x.d)   # d/dx of stop_gradient(x) * x is stop_gradient(x)


def test_unlink_leaves_a_leaf_gradient_alone():
    x = _var(np.ones((2, 2)))
    x.g = 5
    y = F.unlink(x)
    y.forward()
    y.backward()
    np.testing.assert_array_equal(x.g, 5)


# ------------------------------------------------------------------------------ Sink
def test_sink_sets_input_gradients_to_one():
    a, b = _var(np.ones((2, 2))), _var(np.ones(3))
    a.g, b.g = 3, 3
    s = F.sink(a * 2, b * 3)
    assert s.shape == ()
    s.forward()
    s.backward()
    np.testing.assert_array_equal(a.g, 3 + 2)
    np.testing.assert_array_equal(b.g, 3 + 3)
    a.g = 3
    leaf = F.sink(a)   # a leaf's gradient is set, not accumulated (as in nnabla)
    leaf.forward()
    leaf.backward()
    np.testing.assert_array_equal(a.g, 1)


def test_sink_without_one_input_grad_uses_the_gradients_set_by_the_user():
    a = _var(np.ones((2, 2)))
    a.g = 3
    a2 = a * 2
    s = F.sink(a2, one_input_grad=False)
    s.forward()
    a2.g = 7
    s.backward()
    np.testing.assert_array_equal(a.g, 3 + 2 * 7)


def test_sink_grad_rule():
    a = _var(np.ones((2, 3)))
    g = nn.grad([F.sink(a * a, a * 3)], [a])[0]
    g.forward()
    np.testing.assert_allclose(g.d, 2 * a.d + 3)
    g = nn.grad([F.sink(a * a, one_input_grad=False)], [a])[0]
    g.forward()
    np.testing.assert_array_equal(g.d, 0)


def test_sink_needs_an_input():
    with pytest.raises(ValueError, match="Sink"):
        F.sink()


# ------------------------------------------------------------------------------ VATNoise
def vat_noise_ref(x, base_axis, eps):
    rows = int(np.prod(x.shape[:base_axis]))
    x2 = x.reshape(rows, -1)
    return (eps * x2 / np.sqrt((x2 ** 2).sum(1, keepdims=True) + 1e-8)).reshape(x.shape)


@given(nst.arrays(nst.shapes(2, 4)), st.integers(1, 2), st.floats(0.5, 3.0))
def test_vat_noise_forward(x, base_axis, eps):
    base_axis = min(base_axis, x.ndim - 1)
    w = np.zeros_like(x)
    check_forward(lambda a, b: F.vat_noise(a, b, base_axis, eps), [x, w],
                  lambda a, b: vat_noise_ref(a, base_axis, eps))


def test_vat_noise_zero_input_gives_zero():
    y = F.vat_noise(_var(np.zeros((2, 3))), _var(np.zeros((2, 3))))
    y.forward()
    np.testing.assert_array_equal(y.d, 0)


@pytest.mark.parametrize("w_need_grad", [True, False])
def test_vat_noise_backward_writes_the_gradient_into_w(w_need_grad):
    x = _var(np.arange(1, 7).reshape(2, 3))
    w = _var(np.zeros((2, 3)), need_grad=w_need_grad)
    x.g, w.g = 9, 8
    y = F.vat_noise(x * 1, w, eps=2.0)
    y.forward()
    dy = np.arange(6, dtype=np.float32).reshape(2, 3)
    y.backward(dy)
    np.testing.assert_allclose(w.d, 2.0 * dy)
    np.testing.assert_array_equal(x.g, 9)   # x gets nothing
    np.testing.assert_array_equal(w.g, 8)
    gx, gw = nn.grad([y], [x, w])
    gx.forward()
    gw.forward()
    np.testing.assert_array_equal(gx.d, 0)


def test_vat_noise_rejects_a_w_of_another_size():
    with pytest.raises(ValueError, match="VATNoise.*w of shape"):
        F.vat_noise(_var(np.ones((2, 3))), _var(np.ones((2, 2))))
