"""Shift, Meshgrid, Shape and Assign against NumPy, with gradients to second order."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from tests.ops.test_indexing import check_clear_no_need_grad
from nnabla_jit.testing import check_function, strategies as nst


def V(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a), need_grad=need_grad)


def run(y):
    y.forward()
    return y.d


# ------------------------------------------------------------------------------ Shift
def shift_ref(x, shifts, border_mode):
    shifts = tuple(shifts)[max(len(shifts) - x.ndim, 0):]
    shifts = (0,) * (x.ndim - len(shifts)) + shifts
    for axis, (n, s) in enumerate(zip(x.shape, shifts)):
        if border_mode == "nearest":
            src = np.clip(np.arange(n) - s, 0, n - 1)
        else:   # mirror with the edge repeated; a reference independent of the kernel's
            period = list(range(n)) + list(range(n - 1, -1, -1))
            src = [period[(j - 1 if j < -2 * n else j) % (2 * n)] for j in np.arange(n) - s]
        x = np.take(x, src, axis=axis)
    return x


@given(nst.arrays(nst.shapes(1, 3, max_side=4)), st.lists(st.integers(-9, 9), min_size=1, max_size=4),
       st.sampled_from(["nearest", "reflect"]))
def test_shift(x, shifts, border_mode):
    check_function(lambda v: F.shift(v, shifts, border_mode), [x],
                   lambda a: shift_ref(a, shifts, border_mode))


def test_shift_matches_nnabla_examples():
    x = V(np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(run(F.shift(x, (0, 3), "reflect"))[0], [2, 1, 0, 0])
    np.testing.assert_array_equal(run(F.shift(x, (0, 9), "reflect"))[0], [1, 0, 1, 2])
    np.testing.assert_array_equal(run(F.shift(x, (0, -9), "reflect"))[0], [1, 2, 3, 3])
    np.testing.assert_array_equal(run(F.shift(x, (2,)))[1], [4, 4, 4, 5])   # last axis
    np.testing.assert_array_equal(run(F.shift(x)), x.d)                    # default: no shift


# ------------------------------------------------------------------------------ Meshgrid
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.booleans(), st.integers(0, 2 ** 31 - 1))
def test_meshgrid(sizes, ij_indexing, seed):
    rng = np.random.RandomState(seed)
    xs = [rng.uniform(-1, 1, n) for n in sizes]
    check_function(lambda *vs: F.meshgrid(*vs, ij_indexing=ij_indexing), xs,
                   lambda *a: np.meshgrid(*a, indexing="ij" if ij_indexing else "xy"))


def test_meshgrid_single_input_and_errors():
    y = F.meshgrid(V(np.array([1.0, 2.0])))
    assert isinstance(y, nn.Variable) and y.shape == (2,)
    with pytest.raises(ValueError, match="Meshgrid: needs one or more 1-D inputs"):
        F.meshgrid(nn.Variable((2, 2)), nn.Variable((3,)))


# ------------------------------------------------------------------------------ Shape
@pytest.mark.parametrize("start, end", [(0, 0), (1, 0), (-2, 0), (1, 3), (0, -1), (5, 0), (-10, 0), (2, 1)])
def test_shape(start, end):
    shape = (2, 3, 4, 5)
    want = list(shape)[start:end if end != 0 else None]
    y = F.shape(nn.Variable(shape), start, end)
    assert y.shape == (len(want),)
    np.testing.assert_array_equal(run(y), want)


def test_shape_gradient_is_zero():
    x = np.random.RandomState(0).randn(2, 3)
    check_function(F.shape, [x], lambda a: np.array(a.shape, np.float64))


# ------------------------------------------------------------------------------ Assign
def test_assign_updates_dst_and_passes_the_gradient_to_dst():
    dst = V(np.zeros((2, 2)), need_grad=True)
    src = V(np.array([[1.0, 2.0], [3.0, 4.0]]), need_grad=True)
    y = F.assign(dst, src)
    np.testing.assert_array_equal(run(y), src.d)
    np.testing.assert_array_equal(dst.d, src.d)
    dst.g, src.g = 5, 5
    y.backward(np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(dst.g, [[6, 7], [8, 9]])
    np.testing.assert_array_equal(src.g, [[5, 5], [5, 5]])   # as in nnabla: src gets nothing
    g = nn.grad([y], [dst])[0]
    np.testing.assert_array_equal(run(g), np.ones((2, 2)))


def test_assign_shape_mismatch():
    with pytest.raises(ValueError, match=r"Assign: dst of shape \(2, 2\) and src of shape \(2, 3\)"):
        F.assign(nn.Variable((2, 2)), nn.Variable((2, 3)))


@pytest.mark.parametrize("fn, inputs", [
    (lambda x: F.shift(x, (1, -1), "reflect"), [np.random.RandomState(0).randn(2, 3)]),
    (lambda a, b: F.meshgrid(a, b), [np.ones(2), np.ones(3)]),
    (F.shape, [np.ones((2, 3))]),
    (F.assign, [np.ones((2, 3)), np.ones((2, 3))]),
])
def test_grad_depends_flags(fn, inputs):
    check_clear_no_need_grad(fn, inputs)
