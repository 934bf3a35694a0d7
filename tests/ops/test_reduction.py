"""Sum, Mean, Max, Min, Prod, Norm, ReduceSum, ReduceMean: values, indices, every axis layout
(adjacent axes, non-adjacent axes, all axes), keep_dims, gradients to second order."""
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ops import reduction
from nnabla_jit.testing import check_forward, check_function, strategies as nst


@st.composite
def array_and_axes(draw):
    shape = draw(nst.shapes(1, 4, 1, 3))
    axes = draw(nst.axes(len(shape)))
    return draw(nst.arrays(st.just(shape))), axes


@pytest.mark.parametrize("fn, ref", [(F.sum, np.sum), (F.mean, np.mean), (F.prod, np.prod)])
@given(case=array_and_axes(), keepdims=st.booleans())
def test_sum_mean_prod(fn, ref, case, keepdims):
    x, axes = case
    check_function(lambda v: fn(v, axis=axes, keepdims=keepdims), [x],
                   lambda a: ref(a, axis=axes, keepdims=keepdims))


@pytest.mark.parametrize("fn, ref", [(F.max, np.max), (F.min, np.min)])
@given(case=array_and_axes(), keepdims=st.booleans())
def test_max_min(fn, ref, case, keepdims):
    x, axes = case
    sorted_ = np.sort(x.reshape(-1))
    assume(sorted_.size < 2 or np.min(np.diff(sorted_)) > 1e-3)   # no ties: a unique arg
    check_function(lambda v: fn(v, axis=axes, keepdims=keepdims), [x],
                   lambda a: ref(a, axis=axes, keepdims=keepdims))


def test_max_min_index_outputs():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::-1].copy()
    v = nn.Variable.from_numpy_array(x)
    y, i = F.max(v, axis=(0, 2), with_index=True)
    y.forward()
    i.forward()
    np.testing.assert_array_equal(y.d, [23, 19, 15])
    np.testing.assert_array_equal(i.d, [7, 7, 7])          # flat over the reduced axes
    assert i.d.dtype == np.uint64
    j = F.min(v, axis=1, only_index=True)
    j.forward()
    np.testing.assert_array_equal(j.d, np.argmin(x, axis=1))


@given(case=array_and_axes(), p=st.sampled_from([1.5, 2.0, 3.0]))
def test_norm(case, p):
    x, axes = case
    x = np.where(np.abs(x) < 0.1, 0.5, x)
    check_function(lambda v: F.norm(v, p=p, axis=axes), [x],
                   lambda a: (np.abs(a) ** p).sum(axis=axes) ** (1 / p))


def test_prod_gradient_with_zeros_is_exact():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 4.0]])
    v = nn.Variable.from_numpy_array(x, need_grad=True)
    y = F.prod(v, axis=1)
    y.forward()
    v.g = 0
    y.backward()
    np.testing.assert_array_equal(v.g, [[0, 6, 0], [0, 0, 0]])


@given(x=nst.arrays(nst.shapes(1, 3, 1, 4)))
def test_reduce_sum_mean(x):
    check_function(F.reduce_sum, [x], np.sum)
    check_function(F.reduce_mean, [x], np.mean)


def test_large_whole_array_sum_is_accurate():
    x = np.random.RandomState(0).randn(1 << 18).astype(np.float32)
    check_forward(F.sum, [x], lambda a: a.astype(np.float64).sum(), atol=1e-3, rtol=1e-6)
    y = F.mean(nn.Variable.from_numpy_array(x))
    y.forward()
    np.testing.assert_allclose(y.d, x.astype(np.float64).mean(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("variant", ["serial", "parallel"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1000, 1), (3, 7, 5), (100, 3, 2), (2, 0, 3), (1, 5, 1)])
@pytest.mark.parametrize("accum", [False, True])
def test_broadcast_back_covers_every_element(variant, dtype, shape, accum):
    """The sum's gradient kernel, cut into blocks of the reduced axis, writes every element
    once, whatever the number of kept rows."""
    rng = np.random.RandomState(0)
    dy = rng.randn(shape[0], shape[2]).astype(dtype)
    dx = rng.randn(*shape).astype(dtype)
    want = 0.5 * dy[:, None, :] + (dx if accum else np.zeros_like(dx))
    getattr(reduction.broadcast_back, variant)(dy, dx, 0.5, accum)
    np.testing.assert_allclose(dx, want, rtol=1e-6)
