"""Sort, TopKData / TopKGrad, SearchSorted and BoolScatter (the sorting and mask parts of the
indexing family) on the device against the CPU kernels (tiny shapes): forward, and backward
with accumulated gradients and inputs without one."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import assert_same_on_cuda, cuda_context, run, written_on_device

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def with_ties(*shape):
    """Values from a few levels, so lines hold equal elements (stability shows)."""
    return rng.randint(-2, 3, shape).astype(np.float32) / 2


def first_of(outputs):
    return outputs[0] if isinstance(outputs, (list, tuple)) else outputs


CASES = [   # (name, build, arrays, inputs without gradient)
    ("sort inner axis", lambda x: F.sort(x, axis=1), [with_ties(2, 5, 2)], ()),
    ("sort reverse, long line", lambda x: F.sort(x, reverse=True), [with_ties(2, 11)], ()),
    ("sort values with index", lambda x: F.sort(x, axis=0, with_index=True)[0],
     [with_ties(7, 2)], ()),
    ("top_k_data", lambda x: F.top_k_data(x, 3), [with_ties(2, 6)], ()),
    ("top_k_data smallest magnitude", lambda x: F.top_k_data(x, 2, abs=True, largest=False),
     [with_ties(2, 2, 3)], ()),
    ("top_k_data base_axis 2", lambda x: F.top_k_data(x, 2, base_axis=2), [signed(2, 2, 3)], ()),
    ("top_k_data not reducing", lambda x: F.top_k_data(x, 2, reduce=False), [with_ties(2, 5)], ()),
    ("top_k_grad", lambda x: F.top_k_grad(x, 2), [signed(2, 5)], ()),
    ("top_k_grad by magnitude", lambda x: F.top_k_grad(x * x, 3, abs=True), [signed(3, 4)], ()),
    ("bool_scatter", lambda x, m: F.bool_scatter(x, m), [signed(3, 2), np.array([[1, 0], [1, 1]])],
     (1,)),
    ("bool_scatter into output", lambda x, m, o: F.bool_scatter(x, m, o),
     [signed(2, 3), np.array([0.0, np.nan, 0.0, 2.0], np.float32), signed(4, 3)], (1,)),
    ("bool_scatter, output only", lambda x, m, o: F.bool_scatter(x, m, o),
     [signed(1), np.array([0, 1, 0]), signed(3)], (0, 1)),
    ("gradients accumulate",
     lambda x: F.sort(x, axis=1) * 2.0 + F.top_k_data(x, 4, reduce=False) + F.top_k_grad(x, 1),
     [with_ties(2, 4)], ()),
]


@pytest.mark.parametrize("name, build, arrays, no_grad", CASES, ids=[c[0] for c in CASES])
def test_sorting(name, build, arrays, no_grad):
    assert_same_on_cuda(build, *arrays, no_grad=no_grad)


@pytest.mark.parametrize("build, n_outputs", [
    (lambda x: F.sort(x, axis=1, reverse=True, with_index=True), 2),
    (lambda x: F.sort(x, axis=0, only_index=True), 1),
    (lambda x: F.top_k_data(x, 3, with_index=True, abs=True), 2),
])
def test_index_outputs(build, n_outputs):
    x = with_ties(5, 4)
    with nn.context_scope(cuda_context()):
        gpu = build(nn.Variable.from_numpy_array(x))
    cpu = build(nn.Variable.from_numpy_array(x))
    gpu, cpu = (list(o) if n_outputs > 1 else [o] for o in (gpu, cpu))
    nn.forward_all(gpu)
    nn.forward_all(cpu)
    for a, b in zip(gpu, cpu):
        assert written_on_device(a.data)
        assert a.d.dtype == b.d.dtype
        np.testing.assert_array_equal(a.d, b.d)


def test_sort_nan_goes_last_and_long_lines_match():
    x = np.array([[3, np.nan, 1, 1, -2, np.nan, 0, 5, 1, -2, 4, 4, 7, 0, 1, 2, 3]], np.float32)
    for reverse in (False, True):
        build = (lambda v: F.sort(v, reverse=reverse))
        assert_same_on_cuda(build, x)


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3), data=st.data())
def test_drawn_sorts_and_selections(shape, data):
    """Any line length (merge passes with a partial last run) and axis, with ties."""
    x = with_ties(*shape)
    axis = data.draw(st.integers(0, len(shape) - 1))
    reverse = data.draw(st.booleans())
    k = data.draw(st.integers(1, int(np.prod(shape[axis:]))))
    assert_same_on_cuda(lambda v: F.sort(v, axis=axis, reverse=reverse), x)
    assert_same_on_cuda(lambda v: F.top_k_data(v, k, base_axis=axis, largest=not reverse), x)


@pytest.mark.parametrize("right", [False, True])
def test_search_sorted(right):
    seq = np.sort(with_ties(2, 2, 5), axis=-1)
    values = with_ties(2, 2, 3)
    y = assert_same_on_cuda(lambda s, v: F.searchsorted(s, v, right=right), seq, values,
                            backward=False)
    assert y.shape == values.shape


def test_bool_scatter_count_mismatch_raises_the_cpu_error():
    with pytest.raises(ValueError, match="non-zeros"):
        run(cuda_context(), lambda x, m: F.bool_scatter(x, m), [signed(2, 2), np.array([1, 0, 0])],
            no_grad=(0, 1), backward=False)
