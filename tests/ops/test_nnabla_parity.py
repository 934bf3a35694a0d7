"""Behaviours the differential fixtures (tests/test_differential.py) found differing from nnabla
1.39, each pinned here on its own with the value nnabla gives."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ops.registry import OpValueError


def var(a, need_grad=False, dtype=np.float32):
    return nn.Variable.from_numpy_array(np.asarray(a, dtype), need_grad=need_grad)


def run(y):
    y.forward()
    return y.d


def test_slice_with_fewer_entries_slices_the_last_axes():
    x = var(np.arange(24.0).reshape(2, 3, 4))
    y = run(F.slice(x, (1,), (3,), (1,)))
    np.testing.assert_array_equal(y, x.d[:, :, 1:3])
    y = run(F.slice(x, (0, 1), (2, 3), (1, 1)))
    np.testing.assert_array_equal(y, x.d[:, 0:2, 1:3])


def test_broadcast_to_fills_x_shape_with_y():
    x, y = var(np.zeros((2, 3, 4))), var(np.arange(3.0))
    np.testing.assert_array_equal(run(F.broadcast_to(x, y, axis=1)),
                                  np.broadcast_to(np.arange(3.0).reshape(1, 3, 1), (2, 3, 4)))
    y = var(np.arange(12.0).reshape(3, 4))
    for axis in (-1, -2):   # any negative axis aligns y with x's last axes
        np.testing.assert_array_equal(run(F.broadcast_to(x, y, axis=axis)),
                                      np.broadcast_to(y.d, (2, 3, 4)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_grad_by_value_keeps_x_shape(dtype):
    x = var(np.ones((1, 3)), True, dtype)
    z = F.clip_grad_by_value(x, var(np.full((1, 3), -0.5)), var(np.full((1, 3), 0.5)))
    assert run(z).shape == (1, 3)
    with pytest.raises(OpValueError, match="min of shape .* must broadcast to x's shape"):
        F.clip_grad_by_value(x, var(np.full((2, 3), -0.5)), var(np.full((2, 3), 0.5)))


def test_reduce_mean_of_nothing_is_nan():
    assert np.isnan(run(F.reduce_mean(var(np.zeros((0, 3))))))


def test_mean_subtraction_of_an_empty_batch():
    rmean, t = var(np.zeros((3,))), var([2.0])
    y = F.mean_subtraction(var(np.zeros((0, 3))), rmean, t)
    assert run(y).shape == (0, 3)
    assert np.isnan(rmean.d).all() and t.d[0] == 3


def test_empty_inputs_get_errors_naming_the_function():
    with pytest.raises(OpValueError, match="Split: cannot split axis 0 of size 0"):
        F.split(var(np.zeros((0, 3))), axis=0)
    with pytest.raises(OpValueError, match="RNN: x of shape .* has no time steps"):
        F.rnn(var(np.zeros((0, 2, 4))), var(np.zeros((1, 1, 2, 5))), var(np.zeros((1, 5, 9))))
    with pytest.raises(RuntimeError, match="ScatterAdd"):   # as nnabla's: a RuntimeError
        F.scatter_add(var(np.zeros((0, 4))), var(np.zeros((2, 4)), dtype=np.int32), var(np.zeros((2, 4))))


def test_batch_normalization_needs_mean_and_variance_together():
    x = var(np.zeros((2, 3)))
    with pytest.raises(OpValueError, match="running mean and variance must be given together"):
        F.batch_normalization(x, var(np.zeros((1, 3))), var(np.ones((1, 3))), mean=var(np.zeros((1, 3))),
                              variance=None, batch_stat=True)


@pytest.mark.parametrize("fn", [F.binary_cross_entropy, F.sigmoid_cross_entropy, F.binary_error])
def test_losses_nnabla_does_not_broadcast_need_one_shape(fn):
    with pytest.raises(OpValueError, match="must have the same shape"):
        fn(var(np.full((2, 3), 0.5)), var(np.ones((1, 3))))


def test_one_hot_negative_index_counts_from_the_end():
    np.testing.assert_array_equal(run(F.one_hot(var([[-1], [2]], dtype=np.int32), (4,))),
                                  [[0, 0, 0, 1], [0, 0, 1, 0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_norm_normalization_divides_by_the_norm_or_eps(dtype):
    x = np.array([[3.0, -4.0], [0.3, 0.4]], dtype)
    y = run(F.norm_normalization(var(x, dtype=dtype), axes=(1,), eps=1.0))
    np.testing.assert_allclose(y, [[0.6, -0.8], [0.3, 0.4]], rtol=1e-6)   # max(||x||, eps)
    y = run(F.norm_normalization(var(x, dtype=dtype), axes=()))            # each element alone
    np.testing.assert_allclose(y, np.sign(x))


def test_clip_grad_by_norm_with_no_axes_clips_each_element():
    x = var([[2.0, -3.0]], need_grad=True)
    y = F.clip_grad_by_norm(x, clip_norm=1.0, axes=())
    y.forward()
    x.g = 0
    y.backward(np.array([[0.5, -4.0]], np.float32))
    np.testing.assert_allclose(x.g, [[1.0, -1.0]])
