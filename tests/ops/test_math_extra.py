"""Linspace, Mod2, BitShift and the numpy-compatible F.dot against NumPy."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ops.registry import NoGradient
from nnabla_jit.testing import check_function


def V(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a), need_grad=need_grad)


def run(y):
    y.forward()
    return y.d


# ------------------------------------------------------------------------------ Linspace
@pytest.mark.parametrize("start, stop, num", [(0, 1, 5), (-1, 2, 7), (3, -1, 5), (2, 5, 1), (2, 5, 0)])
def test_linspace(start, stop, num):
    y = F.linspace(start, stop, num)
    assert y.shape == (num,)
    np.testing.assert_allclose(run(y), np.linspace(start, stop, num), rtol=1e-6, atol=1e-7)


def test_linspace_argument_errors():
    with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
        F.linspace(2, 5, 2.0)
    with pytest.raises(ValueError, match="number of samples, -1, must be non-negative"):
        F.linspace(2, 5, -1)


# ------------------------------------------------------------------------------ Mod2
A = np.array([-7, 7, -7, 7, 5, 6])
B = np.array([3, -3, -3, 3, 2, 4])


@pytest.mark.parametrize("x0, x1, fmod, want", [
    (A + 0.5, B.astype(np.float64), False, np.fmod(A + 0.5, B)),     # float x0: always fmod
    (A.astype(np.int32), B.astype(np.int32), False, np.mod(A, B)),   # integers: Python's mod
    (A.astype(np.int32), B.astype(np.int32), True, np.fmod(A, B)),
    (A.astype(np.int32), B + 0.5, False, np.mod(A, np.trunc(B + 0.5))),  # x1 cast to x0 type
    (np.array([250, 7], np.uint8), np.array([3, 3], np.uint8), False, [1, 1]),
])
def test_mod2(x0, x1, fmod, want):
    y = F.mod2(V(x0), V(x1), fmod)
    np.testing.assert_array_equal(run(y), want)
    assert y.d.dtype == x0.dtype   # the output keeps x0's type


def test_mod2_broadcasts_and_has_no_gradient():
    x0 = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(run(F.mod2(V(x0), V(np.array([[4.0], [5.0]])))), [[0, 1, 2], [3, 4, 0]])
    x = V(x0, need_grad=True)
    y = F.mod2(x, V(np.full((2, 3), 4.0)))
    y.forward()
    with pytest.raises(NoGradient, match="Mod2: this function has no backward"):
        y.backward()
    with pytest.raises(ValueError, match="Mod2: inputs of shapes"):
        F.mod2(nn.Variable((2, 3)), nn.Variable((3, 2)))


# ------------------------------------------------------------------------------ BitShift
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_bit_shift(dtype):
    x = np.array([255, 2, 3, 7], dtype)
    shift = np.array([1, 7, 8, 2], dtype)
    left = F.bit_shift(V(x), V(shift))
    np.testing.assert_array_equal(run(left), np.left_shift(x, shift))
    assert left.d.dtype == dtype
    right = F.bit_shift(V(x), V(shift), direction="RIGHT")
    np.testing.assert_array_equal(run(right), np.right_shift(x, shift))


def test_bit_shift_edge_cases_and_errors():
    x = V(np.array([1, 2], np.uint32))
    np.testing.assert_array_equal(run(F.bit_shift(x, V(np.array([32, 33], np.uint32)))), [0, 0])
    np.testing.assert_array_equal(run(F.bit_shift(x, V(np.array([1.7, 2.2])))), [2, 8])   # shift cast
    with pytest.raises(ValueError, match="BitShift: x must have an unsigned integer type, got int32"):
        F.bit_shift(V(np.array([1, 2], np.int32)), V(np.array([1, 1], np.int32)))
    with pytest.raises(ValueError, match="bit_shift: argument 'direction' = 'UP'"):
        F.bit_shift(x, x, direction="UP")
    y = F.bit_shift(x, V(np.array([1, 1], np.uint32)))
    y.forward()
    with pytest.raises(NoGradient, match="BitShift: this function has no backward"):
        y.parent.op.backward([], [], [], [], [True, True], [False, False])


# ------------------------------------------------------------------------------ dot
@pytest.mark.parametrize("a_shape, b_shape", [((3,), (3,)), ((2, 3), (3, 2)), ((), (2, 3)), ((2, 3), ()),
                                              ((2, 2, 3), (3,)), ((2, 3), (2, 3, 2)), ((3,), (3, 2))])
def test_dot(a_shape, b_shape):
    rng = np.random.RandomState(0)
    a, b = rng.uniform(-1, 1, a_shape), rng.uniform(-1, 1, b_shape)
    check_function(F.dot, [a, b], np.dot)


def test_dot_ndarrays_scalars_and_out():
    rng = np.random.RandomState(0)
    a, b = rng.randn(2, 3), rng.randn(3, 4)
    y = F.dot(nn.NdArray.from_numpy_array(a), nn.NdArray.from_numpy_array(b))
    assert isinstance(y, nn.NdArray)
    np.testing.assert_allclose(y.data, a @ b, rtol=1e-5)
    np.testing.assert_allclose(run(F.dot(V(a), 2.0)), 2 * a, rtol=1e-6)
    np.testing.assert_allclose(F.dot(a, b), a @ b)   # neither is an nnabla array: numpy.dot
    out = nn.NdArray((2, 4))
    assert F.dot(nn.NdArray.from_numpy_array(a), nn.NdArray.from_numpy_array(b), out) is None
    np.testing.assert_allclose(out.data, a @ b, rtol=1e-5)
    out = nn.Variable((2, 4))
    F.dot(V(a), V(b), out)
    np.testing.assert_allclose(run(out), a @ b, rtol=1e-5)
    with pytest.raises(ValueError, match=r"dot: out must be a Variable of shape \(2, 4\)"):
        F.dot(V(a), V(b), nn.Variable((4, 2)))
    with pytest.raises(TypeError, match="dot: a Variable or NdArray cannot be combined with a ndarray"):
        F.dot(V(a), b)
