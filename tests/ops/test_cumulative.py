"""CumSum and CumProd: forward against NumPy for every (exclusive, reverse) combination, and
gradients (kernel, grad rule, second order) checked numerically, CumProd also through zeros."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from tests.ops.test_indexing import check_clear_no_need_grad
from nnabla_jit.testing import check_function, strategies as nst


def cumulative_ref(x, axis, exclusive, reverse, multiply):
    a = np.flip(x, axis) if reverse else x
    c = np.cumprod(a, axis) if multiply else np.cumsum(a, axis)
    if exclusive:
        first = np.ones_like(np.take(c, [0], axis)) if multiply else np.zeros_like(np.take(c, [0], axis))
        c = np.concatenate([first, np.delete(c, -1, axis)], axis)
    return np.flip(c, axis) if reverse else c


@st.composite
def cumulative_case(draw):
    x = draw(nst.arrays(nst.shapes(1, 3, max_side=3)))
    return x, draw(nst.axis(x.ndim)), draw(st.booleans()), draw(st.booleans())


@given(cumulative_case())
def test_cumsum(case):
    x, axis, exclusive, reverse = case
    check_function(lambda v: F.cumsum(v, axis, exclusive, reverse), [x],
                   lambda a: cumulative_ref(a, axis, exclusive, reverse, False))


@given(cumulative_case(), st.integers(0, 2 ** 31 - 1))
def test_cumprod_with_zeros(case, seed):
    x, axis, exclusive, reverse = case
    # Zeros (single and repeated) make the division-based gradient wrong; ours must stay exact.
    zeros = np.random.RandomState(seed).rand(*x.shape) < 0.3
    x = np.where(zeros, 0.0, x)
    check_function(lambda v: F.cumprod(v, axis, exclusive, reverse), [x],
                   lambda a: cumulative_ref(a, axis, exclusive, reverse, True))


def test_cumprod_gradient_through_two_zeros():
    x = np.array([[2.0, 0.0, 3.0, 0.0, -1.5]])
    for exclusive in (False, True):
        check_function(lambda v: F.cumprod(v, 1, exclusive, False), [x],
                       lambda a: cumulative_ref(a, 1, exclusive, False, True))


def test_cumprod_backward_known_values():
    # y = (2, 2*0, 2*0*3): dy/dx0 = dy0 + 0, dy/dx1 = 2 dy1 + 6 dy2, dy/dx2 = 0.
    x = nn.Variable.from_numpy_array(np.array([2.0, 0.0, 3.0]), need_grad=True)
    y = F.cumprod(x)
    y.forward()
    x.g = 0
    y.backward(np.array([1.0, 10.0, 100.0]))
    np.testing.assert_allclose(x.g, [1.0, 620.0, 0.0])


def test_cumsum_float32_default_axis():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = F.cumsum(nn.Variable.from_numpy_array(x))
    y.forward()
    np.testing.assert_allclose(y.d, np.cumsum(x, 0))


@pytest.mark.parametrize("fn", [F.cumsum, F.cumprod])
def test_bad_axis(fn):
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        fn(nn.Variable((2, 3)), axis=2)
    with pytest.raises(ValueError, match="at least one dimension"):
        fn(nn.Variable(()), axis=0)


@pytest.mark.parametrize("fn", [lambda x: F.cumsum(x, 1, True, True), lambda x: F.cumprod(x, 1, True, False)])
def test_grad_depends_flags(fn):
    check_clear_no_need_grad(fn, [np.random.RandomState(0).randn(2, 3)])
