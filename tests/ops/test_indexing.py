"""Indexing ops against NumPy: Gather, GatherNd, ScatterNd, ScatterAdd, BoolGather, BoolScatter,
BoolFill, NonZero, Unique, SearchSorted, Sort, TopKData, TopKGrad. Differentiable ones are
checked numerically to second order; the others raise when differentiated. Ops whose output
shape depends on the data are also run in static graphs whose data changes."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import check_backward, check_function, check_grad_rule, strategies as nst


def V(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a), need_grad=need_grad)


def run(y):
    y.forward()
    return y.d


seeds = st.integers(0, 2 ** 31 - 1)


def check_clear_no_need_grad(fn, inputs):
    """Gradients are the same when forward frees what the op's grad-depends flags say its
    backward does not read (its inputs are intermediates here, so they can be freed)."""
    def gradients(clear):
        xs = [V(a, need_grad=np.asarray(a).dtype.kind == "f") for a in inputs]
        ys = fn(*[x * 1.0 if x.need_grad else x for x in xs])
        y = ys[0] if isinstance(ys, tuple) else ys
        y.forward()
        loss = F.sum(y * V(np.random.RandomState(0).randn(*y.shape)))
        loss.forward(clear_no_need_grad=clear)
        for x in xs:
            x.g = 0
        loss.backward(clear_buffer=clear)
        return [x.g.copy() for x in xs if x.need_grad]
    for kept, cleared in zip(gradients(False), gradients(True)):
        np.testing.assert_allclose(cleared, kept, rtol=1e-6)


def assert_no_gradient(fn, *inputs):
    """Differentiating ``fn`` raises: through backward() and through nn.grad."""
    xs = [V(a, need_grad=np.asarray(a).dtype.kind == "f") for a in inputs]
    y = fn(*xs)
    y = y[0] if isinstance(y, tuple) else y
    y.forward()
    with pytest.raises(NotImplementedError, match="no gradient|has no backward"):
        y.backward()
    with pytest.raises((NotImplementedError, ValueError), match="no grad rule|no gradient"):
        nn.grad([y], [x for x in xs if x.need_grad])[0].forward()


# ------------------------------------------------------------------------------ Gather
def gather_ref(x, idx, axis, batch_dims):
    idx = idx.astype(np.int64)
    out = np.empty(x.shape[:axis] + idx.shape[batch_dims:] + x.shape[axis + 1:])
    for b in np.ndindex(*x.shape[:batch_dims]):
        out[b] = np.take(x[b], idx[b], axis=axis - batch_dims)
    return out


@st.composite
def gather_case(draw):
    rng = np.random.RandomState(draw(seeds))
    x_shape = draw(nst.shapes(1, 3, max_side=3))
    axis = draw(st.integers(0, len(x_shape) - 1))
    batch_dims = draw(st.integers(0, axis))
    idx_shape = x_shape[:batch_dims] + draw(nst.shapes(0, 2, max_side=2))
    idx = rng.randint(0, x_shape[axis], idx_shape)
    return rng.uniform(-1, 1, x_shape), idx, axis, batch_dims


@given(gather_case())
def test_gather(case):
    x, idx, axis, batch_dims = case
    check_function(lambda v, i: F.gather(v, i, axis, batch_dims), [x, idx],
                   lambda a, i: gather_ref(a, i, axis, batch_dims))


def test_gather_negative_axis_and_float_indices():
    x = np.arange(24.0).reshape(2, 3, 4)
    y = F.gather(V(x), V(np.array([1.7, 0.2])), axis=-2)   # float indices truncate, as in nnabla
    np.testing.assert_array_equal(run(y), x[:, [1, 0]])


def test_gather_errors():
    x = nn.Variable((2, 3, 4))
    with pytest.raises(ValueError, match="Gather: axis 0 must not be less than batch_dims 1"):
        F.gather(x, nn.Variable((2, 1)), axis=0, batch_dims=1)
    with pytest.raises(ValueError, match=r"Gather: x of shape \(2, 3, 4\) and indices of shape \(3, 1\) differ"):
        F.gather(x, nn.Variable((3, 1)), axis=1, batch_dims=1)
    with pytest.raises(ValueError, match="Gather: axis 3 is out of range"):
        F.gather(x, nn.Variable((1,)), axis=3)
    y = F.gather(V(np.zeros((2, 3))), V(np.array([0, 3])), axis=1)
    with pytest.raises(ValueError, match=r"Gather: index out of range \[0, 3\): got values from 0 to 3"):
        y.forward()


# ------------------------------------------------------------------------------ GatherNd / ScatterNd
@st.composite
def nd_case(draw, unique=False):
    rng = np.random.RandomState(draw(seeds))
    shape = draw(nst.shapes(1, 3, max_side=3))
    m = draw(st.integers(1, len(shape)))
    rows = draw(st.integers(1, 3))
    if unique:   # distinct index tuples: a scatter without add is then differentiable
        rows = min(rows, int(np.prod(shape[:m])))
        flat = rng.permutation(int(np.prod(shape[:m])))[:rows]
        idx = np.array(np.unravel_index(flat, shape[:m]))
    else:
        idx = np.array([rng.randint(-s, s, rows) for s in shape[:m]])
    return shape, idx


@given(nd_case(), seeds)
def test_gather_nd(case, seed):
    shape, idx = case
    x = np.random.RandomState(seed).uniform(-1, 1, shape)
    check_function(lambda v, i: F.gather_nd(v, i), [x, idx], lambda a, i: a[tuple(i)])


def test_gather_nd_with_list_indices_and_ndarray():
    data = np.arange(1.0, 11).reshape(2, 5)
    np.testing.assert_array_equal(run(F.gather_nd(V(data), [[1, 1, 0], [0, 1, 0]])), [6, 7, 1])
    y = F.gather_nd(nn.NdArray.from_numpy_array(data), [[1, 1, 0]])   # imperative
    assert isinstance(y, nn.NdArray) and y.shape == (3, 5)
    np.testing.assert_array_equal(y.data, data[[1, 1, 0]])


@given(nd_case(unique=True), st.booleans(), seeds)
def test_scatter_nd(case, add, seed):
    shape, idx = case
    data_shape = idx.shape[1:] + tuple(shape[idx.shape[0]:])
    data = np.random.RandomState(seed).uniform(-1, 1, data_shape)

    def ref(d, i):
        out = np.zeros(shape)
        out[tuple(i)] = d
        return out
    check_function(lambda d, i: F.scatter_nd(d, i, shape=shape, add=add), [data, idx], ref)


def test_scatter_nd_repeated_indices():
    data, idx = np.array([1.0, 2.0, 3.0]), [[1, 1, 0]]
    np.testing.assert_array_equal(run(F.scatter_nd(V(data), idx, shape=(3,))), [3, 2, 0])  # last wins
    x = V(data, need_grad=True)
    y = F.scatter_nd(x, idx, shape=(3,), add=True)
    np.testing.assert_array_equal(run(y), [3, 3, 0])
    check_function(lambda d: F.scatter_nd(d, idx, shape=(3,), add=True), [data])


def test_scatter_nd_into_out_updates_it_in_place():
    out = V(np.full(4, 7.0), need_grad=True)
    data = V(np.array([1.0, 2.0]), need_grad=True)
    y = F.scatter_nd(data, [[1, 3]], out=out, add=True)
    np.testing.assert_array_equal(run(y), [7, 8, 7, 9])
    np.testing.assert_array_equal(out.d, [7, 8, 7, 9])
    data.g, out.g = 0, 5
    y.backward(np.array([1.0, 10.0, 100.0, 1000.0]))
    np.testing.assert_array_equal(data.g, [10, 1000])
    np.testing.assert_array_equal(out.g, [5, 5, 5, 5])   # nnabla gives out no gradient


def test_scatter_nd_errors():
    data = nn.Variable((3,))
    with pytest.raises(TypeError, match="one of `shape` or `out`"):
        F.scatter_nd(data, [[0, 1, 2]])
    with pytest.raises(TypeError, match="only one of `shape` or `out`"):
        F.scatter_nd(data, [[0, 1, 2]], shape=(3,), out=nn.Variable((3,)))
    with pytest.raises(ValueError, match=r"ScatterNd: data of shape \(3,\) must have shape \(2,\)"):
        F.scatter_nd(data, [[0, 1]], shape=(3,))
    with pytest.raises(ValueError, match="GatherNd: indices must have at least 2 dimensions"):
        F.gather_nd(data, [0, 1])
    with pytest.raises(ValueError, match=r"GatherNd: indices of shape \(2, 1\) index 2 dimensions"):
        F.gather_nd(data, [[0], [0]])
    y = F.scatter_nd(V(np.ones(1)), [[3]], shape=(2,))
    with pytest.raises(ValueError, match="ScatterNd: index out of range for axis 0 of size 2"):
        y.forward()


# ------------------------------------------------------------------------------ ScatterAdd
def scatter_add_ref(x0, idx, x1, axis):
    out = x0.copy()
    for p in np.ndindex(*idx.shape):
        q = list(p)
        q[axis] = idx[p]
        out[tuple(q)] += x1[p]
    return out


@st.composite
def scatter_add_case(draw):
    rng = np.random.RandomState(draw(seeds))
    x0_shape = draw(nst.shapes(1, 3, max_side=3))
    axis = draw(st.integers(0, len(x0_shape) - 1))
    idx_shape = tuple(draw(st.integers(1, s)) if d != axis else draw(st.integers(1, 3))
                      for d, s in enumerate(x0_shape))
    x1_shape = tuple(i + draw(st.integers(0, 1)) for i in idx_shape)
    idx = rng.randint(0, x0_shape[axis], idx_shape)
    return rng.uniform(-1, 1, x0_shape), idx, rng.uniform(-1, 1, x1_shape), axis


@given(scatter_add_case())
def test_scatter_add(case):
    x0, idx, x1, axis = case
    check_function(lambda a, i, b: F.scatter_add(a, i, b, axis=axis), [x0, idx, x1],
                   lambda a, i, b: scatter_add_ref(a, i, b, axis))


def test_scatter_add_errors():
    with pytest.raises(ValueError, match="ScatterAdd: x0 .* must have the same number of dimensions"):
        F.scatter_add(nn.Variable((2, 3)), nn.Variable((2,)), nn.Variable((2,)))
    with pytest.raises(ValueError, match="ScatterAdd: indices of shape \\(1, 3\\) must not exceed x1"):
        F.scatter_add(nn.Variable((2, 3)), nn.Variable((1, 3)), nn.Variable((1, 2)))
    y = F.scatter_add(V(np.zeros((2, 3))), V(np.array([[-1, 0, 0]])), V(np.ones((1, 3))))
    with pytest.raises(ValueError, match="ScatterAdd: index out of range"):
        y.forward()


# ------------------------------------------------------------------------------ masks
@st.composite
def mask_case(draw, min_nnz=0):
    rng = np.random.RandomState(draw(seeds))
    mask_shape = draw(nst.shapes(1, 2, max_side=3))
    block = draw(nst.shapes(0, 2, max_side=2))
    mask = (rng.rand(*mask_shape) < 0.5).astype(np.int64)
    mask.reshape(-1)[:min_nnz] = 1
    return mask, block, rng


@given(mask_case())
def test_bool_gather(case):
    mask, block, rng = case
    x = rng.uniform(-1, 1, mask.shape + block)
    check_function(F.bool_gather, [x, mask], lambda a, m: a[m != 0])


@given(mask_case(min_nnz=1), st.booleans())
def test_bool_scatter(case, with_output):
    mask, block, rng = case
    x = rng.uniform(-1, 1, (int(mask.sum()),) + block)
    if with_output:   # values kept where the mask is zero; they get the gradient there
        out = rng.uniform(-1, 1, mask.shape + block)

        def ref(a, m, o):
            r = o.copy()
            r[m != 0] = a
            return r
        check_function(F.bool_scatter, [x, mask, out], ref)
    else:
        def ref(a, m):
            r = np.zeros(m.shape + a.shape[1:])
            r[m != 0] = a
            return r
        check_function(F.bool_scatter, [x, mask], ref)


def test_bool_scatter_output_updated_in_place_and_errors():
    out = V(np.full((3, 2), 7.0))
    y = F.bool_scatter(V(np.ones((2, 2))), V(np.array([1, 0, 1])), out)
    np.testing.assert_array_equal(run(y), [[1, 1], [7, 7], [1, 1]])
    np.testing.assert_array_equal(out.d, [[1, 1], [7, 7], [1, 1]])
    y = F.bool_scatter(V(np.ones((3, 2))), V(np.array([1, 0, 1])))
    with pytest.raises(ValueError, match="BoolScatter: the mask has 2 non-zeros but the input has 3 rows"):
        y.forward()
    with pytest.raises(ValueError, match=r"BoolScatter: output of shape \(2, 2\) must have shape \(3, 2\)"):
        F.bool_scatter(nn.Variable((2, 2)), nn.Variable((3,)), nn.Variable((2, 2)))
    with pytest.raises(ValueError, match=r"BoolGather: mask of shape \(3,\) must equal the leading"):
        F.bool_gather(nn.Variable((2, 3)), nn.Variable((3,)))


@given(nst.arrays(nst.shapes(1, 3, max_side=3)), seeds, st.floats(-3, 3))
def test_bool_fill(x, seed, value):
    rng = np.random.RandomState(seed)
    mask_shape = tuple(s if rng.rand() < 0.5 else 1 for s in x.shape)[rng.randint(0, x.ndim):]
    mask = (rng.rand(*mask_shape) < 0.5).astype(np.float64)
    check_function(lambda a, m: F.bool_fill(a, m, value), [x, mask],
                   lambda a, m: np.where(m != 0, value, a), wrt=[0])


def test_variable_bool_fill_():
    x = V(np.array([[1.0, 2.0], [3.0, 4.0]]), need_grad=True)
    mask = np.array([[1, 0], [0, 1]])
    for m in (mask, V(mask), nn.NdArray.from_numpy_array(mask)):
        y = (x * 2).bool_fill_(m, 9)
        np.testing.assert_array_equal(run(y), [[9, 4], [6, 9]])
        x.g = 0
        y.backward()
        np.testing.assert_array_equal(x.g, [[0, 2], [2, 0]])


def test_bool_fill_mask_must_broadcast():
    with pytest.raises(ValueError, match=r"BoolFill: mask of shape \(2, 3\) does not broadcast to data"):
        F.bool_fill(nn.Variable((3,)), nn.Variable((2, 3)))


def test_data_dependent_shapes_follow_the_data_in_static_graphs():
    x = V(np.arange(6.0).reshape(3, 2), need_grad=True)
    mask = V(np.array([1, 0, 1]))
    y = F.bool_gather(x, mask)
    assert y.shape == (2, 2)            # known when the graph is built: the mask holds data
    np.testing.assert_array_equal(run(y), [[0, 1], [4, 5]])
    mask.d = [1, 1, 1]                  # new mask values: the next forward reshapes y
    np.testing.assert_array_equal(run(y), x.d)
    x.g = 0
    y.backward(np.ones((3, 2)))
    np.testing.assert_array_equal(x.g, np.ones((3, 2)))
    later = nn.Variable((3,))           # no values yet: the shape is known after forward
    z = F.nonzero(later)
    assert z.shape == (1, 0)
    later.d = [0, 5, 7]
    np.testing.assert_array_equal(run(z), [[1, 2]])
    assert z.d.dtype == np.uint64


# ------------------------------------------------------------------------------ NonZero / Unique
@given(nst.shapes(0, 3, max_side=3), seeds)
def test_nonzero(shape, seed):
    x = np.where(np.random.RandomState(seed).rand(*shape) < 0.5, 0.0, 1.5)
    y = F.nonzero(V(x))
    np.testing.assert_array_equal(run(y), np.argwhere(x).T)


def test_nonzero_has_no_gradient():
    assert_no_gradient(F.nonzero, np.array([0.0, 1.0, 2.0]))


def unique_ref(x, flatten, axis, sorted_, with_index, with_inverse, with_counts):
    y, first, inverse, counts = np.unique(x.reshape(-1) if flatten else x, axis=None if flatten else axis,
                                          return_index=True, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    if not sorted_:
        order = np.argsort(first, kind="stable")
        y = np.take(y, order, axis=0 if flatten else axis)
        first, counts, inverse = first[order], counts[order], np.argsort(order)[inverse]
    return [y] + [a for a, on in zip([first, inverse, counts], [with_index, with_inverse, with_counts]) if on]


@pytest.mark.parametrize("flatten, axis", [(True, None), (False, 0), (False, 1), (False, -1)])
@pytest.mark.parametrize("sorted_", [True, False])
def test_unique(flatten, axis, sorted_):
    x = np.array([[3.0, 1, 2], [2, 3, 1], [3, 1, 2], [0, 0, 5]])
    for flags in [(False, False, False), (True, True, True), (False, True, False)]:
        ys = F.unique(V(x), flatten, axis, sorted_, *flags)
        ys = ys if isinstance(ys, tuple) else (ys,)
        want = unique_ref(x, flatten, axis, sorted_, *flags)
        assert len(ys) == len(want)
        for y, w in zip(ys, want):
            np.testing.assert_array_equal(run(y), w)
        assert all(y.d.dtype == np.int32 for y in ys[1:])


def test_unique_errors_and_no_gradient():
    with pytest.raises(ValueError, match="Unique: axis is required when flatten is False"):
        F.unique(nn.Variable((2, 3)), flatten=False)
    assert_no_gradient(F.unique, np.array([2.0, 1.0, 2.0]))


# ------------------------------------------------------------------------------ SearchSorted
@given(nst.shapes(1, 3, max_side=4), st.integers(1, 4), st.booleans(), seeds)
def test_searchsorted(shape, n_values, right, seed):
    rng = np.random.RandomState(seed)
    seq = np.sort(rng.randint(-3, 4, shape).astype(np.float64), axis=-1)
    values = rng.randint(-4, 5, shape[:-1] + (n_values,)).astype(np.float64)
    want = np.empty(values.shape)
    for r in np.ndindex(*shape[:-1]):
        want[r] = np.searchsorted(seq[r], values[r], side="right" if right else "left")
    np.testing.assert_array_equal(run(F.searchsorted(V(seq), V(values), right)), want)


def test_searchsorted_errors_and_no_gradient():
    with pytest.raises(ValueError, match="SearchSorted: sorted_sequence .* must have the same number"):
        F.searchsorted(nn.Variable((3,)), nn.Variable((2, 3)))
    assert_no_gradient(F.searchsorted, np.array([[0.0, 1.0]]), np.array([[0.5]]))


# ------------------------------------------------------------------------------ Sort
@given(nst.arrays(nst.shapes(1, 3, max_side=3)), st.data(), st.booleans())
def test_sort(x, data, reverse):
    axis = data.draw(nst.axis(x.ndim))
    order = np.argsort(-x if reverse else x, axis=axis, kind="stable")
    check_function(lambda v: F.sort(v, axis, reverse, with_index=True), [x],
                   lambda a: [np.take_along_axis(a, order, axis), order])


def test_sort_ties_are_stable_and_only_index():
    x = np.array([[3.0, 1, 2, 1, 3]])
    np.testing.assert_array_equal(run(F.sort(V(x), only_index=True)), [[1, 3, 2, 0, 4]])
    values, index = F.sort(V(x), reverse=True, with_index=True)
    np.testing.assert_array_equal(run(values), [[3, 3, 2, 1, 1]])
    np.testing.assert_array_equal(run(index), [[0, 4, 2, 1, 3]])
    assert index.d.dtype == np.uint64
    xv = V(x, need_grad=True)   # nn.grad of the indices raises (nnabla: sort_backward is not implemented)
    with pytest.raises(NotImplementedError, match="only_index=True outputs indices"):
        nn.grad([F.sort(xv, only_index=True)], [xv])
    with pytest.raises(ValueError, match="Sort: axis 2 is out of range"):
        F.sort(nn.Variable((2, 3)), axis=2)


# ------------------------------------------------------------------------------ TopK
def top_k_ref(x, k, by_abs, reduce, base_axis, largest):
    rows = x.reshape(int(np.prod(x.shape[:base_axis])), -1)
    keys = np.abs(rows) if by_abs else rows
    index = np.argsort(-keys if largest else keys, axis=1, kind="stable")[:, :k]
    values = np.take_along_axis(rows, index, 1)
    if reduce:
        return values.reshape(x.shape[:base_axis] + (k,)), index.reshape(x.shape[:base_axis] + (k,))
    out = np.zeros_like(rows)
    np.put_along_axis(out, index, values, 1)
    return out.reshape(x.shape), index


@st.composite
def top_k_case(draw):
    x = draw(nst.arrays(nst.shapes(1, 3, max_side=3)))
    base_axis = draw(st.integers(0, x.ndim - 1))
    k = draw(st.integers(1, int(np.prod(x.shape[base_axis:]))))
    return x, k, draw(st.booleans()), base_axis, draw(st.booleans())


@given(top_k_case())
def test_top_k_data(case):
    x, k, by_abs, base_axis, largest = case
    check_function(lambda v: F.top_k_data(v, k, by_abs, True, base_axis, largest, with_index=True), [x],
                   lambda a: top_k_ref(a, k, by_abs, True, base_axis, largest))


@given(top_k_case())
def test_top_k_data_not_reduced(case):
    x, k, by_abs, base_axis, largest = case

    def fn(v):
        return F.top_k_data(v, k, by_abs, False, base_axis, largest)
    np.testing.assert_allclose(run(fn(V(x))), top_k_ref(x, k, by_abs, False, base_axis, largest)[0])
    # nnabla passes the whole gradient through when not reducing.
    v = V(x, need_grad=True)
    y = fn(v)
    y.forward()
    v.g = 1
    y.backward(np.full(x.shape, 2.0))
    np.testing.assert_array_equal(v.g, np.full(x.shape, 3.0))
    check_grad_rule(fn, [x])


def test_top_k_errors():
    x = nn.Variable((2, 4))
    with pytest.raises(ValueError, match=r"TopKData: k 5 must be in \[1, 4\]"):
        F.top_k_data(x, 5)
    with pytest.raises(ValueError, match=r"TopKGrad: k 0 must be in \[1, 4\]"):
        F.top_k_grad(x, 0)
    with pytest.raises(ValueError, match="TopKData: with_index=True needs reduce=True"):
        F.top_k_data(x, 2, reduce=False, with_index=True)
    with pytest.raises(ValueError, match="TopKData: base_axis 2 is out of range"):
        F.top_k_data(x, 1, base_axis=2)


@pytest.mark.parametrize("by_abs, expected", [(False, [[0, 0, 3, 2], [5, 4, 0, 0]]),
                                              (True, [[0, -6, 3, 0], [5, 4, 0, 0]])])
def test_top_k_grad(by_abs, expected):
    x = np.array([[3.0, -5, 1, 4], [2, 2, -1, 0]])
    dy = np.array([[1.0, -6, 3, 2], [5, 4, -1, 0]])
    v = V(x, need_grad=True)
    y = F.top_k_grad(v, 2, abs=by_abs)
    np.testing.assert_array_equal(run(y), x)   # identity forward
    v.g = 10
    y.backward(dy)
    np.testing.assert_array_equal(v.g, 10 + np.array(expected))
    # The backward selects gradients (it is not the derivative of the identity), so only the
    # grad rule is checked against it.
    check_grad_rule(lambda a: F.top_k_grad(a, 2, abs=by_abs), [x])
    check_backward(lambda a: F.top_k_grad(a, 4, abs=by_abs), [x])   # k = sample size: identity


@pytest.mark.parametrize("fn, inputs", [
    (lambda x, i: F.gather(x, i, axis=1), [np.random.RandomState(0).randn(2, 3), np.array([2, 0, 2])]),
    (F.gather_nd, [np.random.RandomState(0).randn(2, 3), np.array([[1, 0], [2, 2]])]),
    (lambda d, i: F.scatter_nd(d, i, shape=(2, 3)), [np.random.RandomState(0).randn(2), np.array([[1, 0], [2, 2]])]),
    (lambda a, i, b: F.scatter_add(a, i, b, axis=1), [np.ones((2, 3)), np.array([[2, 0]]), np.ones((1, 2))]),
    (F.bool_gather, [np.random.RandomState(0).randn(3, 2), np.array([1, 0, 1])]),
    (F.bool_scatter, [np.random.RandomState(0).randn(2, 2), np.array([1, 0, 1]), np.ones((3, 2))]),
    (lambda x, m: F.bool_fill(x, m, 2.0), [np.random.RandomState(0).randn(3, 2), np.array([1.0, 0.0])]),
    (lambda x: F.sort(x, with_index=True), [np.random.RandomState(0).randn(2, 3)]),
    (lambda x: F.top_k_data(x, 2), [np.random.RandomState(0).randn(2, 3)]),
    (lambda x: F.top_k_data(x, 2, reduce=False), [np.random.RandomState(0).randn(2, 3)]),
    (lambda x: F.top_k_grad(x, 2), [np.random.RandomState(0).randn(2, 3)]),
])
def test_grad_depends_flags(fn, inputs):
    check_clear_no_need_grad(fn, inputs)
