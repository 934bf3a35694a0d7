"""Gathers and scatters through index arrays on the device against the CPU kernels (tiny
shapes)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import assert_same_on_cuda, cuda_context, run, written_on_device

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


CASES = [   # (name, build, arrays, inputs without gradient)
    ("gather", lambda x, i: F.gather(x, i, axis=1), [signed(2, 3, 2), np.array([[2, 0, 2]])],
     (1,)),
    ("gather with batch dims", lambda x, i: F.gather(x, i, axis=1, batch_dims=1),
     [signed(2, 3, 2), np.array([[1, 1], [0, 2]])], (1,)),
    ("gather float indices", lambda x, i: F.gather(x, i, axis=0),
     [signed(3, 2), np.array([2.7, 0.2], np.float32)], (1,)),
    ("gather_nd", lambda x, i: F.gather_nd(x, i),
     [signed(3, 2, 2), np.array([[0, -1, 0], [1, 0, 1]])], (1,)),
    ("embed", lambda i, w: F.embed(i, w), [np.array([[3, 0], [3, 1]]), signed(4, 3)], (0,)),
    ("scatter_nd", lambda d, i: F.scatter_nd(d, i, shape=(3, 2, 2)),
     [signed(2, 2), np.array([[0, 2], [1, 0]])], (1,)),
    ("scatter_nd add", lambda d, i: F.scatter_nd(d, i, shape=(3, 2), add=True),
     [signed(3, 2), np.array([[1, 0, 1]])], (1,)),
    ("scatter_add", lambda x0, i, x1: F.scatter_add(x0, i, x1, axis=1),
     [signed(2, 3), np.array([[2, 2], [0, 1]]), signed(2, 2)], (1,)),
    ("gradients accumulate", lambda x, i: F.gather(x, i, axis=0) * 2.0 + F.gather_nd(x, i),
     [signed(3, 2), np.array([[2, 0]])], (1,)),
]


@pytest.mark.parametrize("name, build, arrays, no_grad", CASES, ids=[c[0] for c in CASES])
def test_indexing(name, build, arrays, no_grad):
    assert_same_on_cuda(build, *arrays, no_grad=no_grad)


def test_scatter_add_without_the_gradient_of_x0():
    assert_same_on_cuda(lambda x0, i, x1: F.scatter_add(x0, i, x1, axis=0), signed(3, 2),
                        np.array([[0, 2]]), signed(1, 2), no_grad=(0, 1))


def test_scatter_nd_updates_out_on_the_device():
    data, index, out = signed(2), np.array([[2, 0]]), signed(3)
    build = (lambda d, i, o: F.scatter_nd(d, i, out=o))
    y_cpu, cpu = run(nn.Context(), build, [data, index, out], no_grad=(1, 2))
    y_gpu, gpu = run(cuda_context(), build, [data, index, out], no_grad=(1, 2))
    assert written_on_device(gpu[2].data) and written_on_device(y_gpu.data)
    np.testing.assert_allclose(gpu[2].d, cpu[2].d)
    np.testing.assert_allclose(gpu[0].g, cpu[0].g)


@pytest.mark.parametrize("build, arrays", [
    (lambda x, i: F.gather(x, i, axis=0), [signed(3, 2), np.array([0, 3])]),
    (lambda x, i: F.gather_nd(x, i), [signed(3, 2), np.array([[0, -4]])]),
    (lambda i, w: F.embed(i, w), [np.array([4]), signed(4, 2)]),
])
def test_out_of_range_indices_raise_the_cpu_error(build, arrays):
    with pytest.raises(ValueError, match="out of range"):
        run(cuda_context(), build, arrays, no_grad=(0, 1), backward=False)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("build, arrays", [
    (lambda x, i: F.gather(x, i, axis=0), lambda b: [signed(3, 2), np.array([0, b], np.float32)]),
    (lambda x, i: F.gather_nd(x, i), lambda b: [signed(3, 2), np.array([[0, b]], np.float32)]),
    (lambda i, w: F.embed(i, w), lambda b: [np.array([b], np.float32), signed(4, 2)]),
    (lambda x0, i, x1: F.scatter_add(x0, i, x1, axis=0),
     lambda b: [signed(3, 2), np.array([[0, b]], np.float32), signed(1, 2)]),
    (lambda i: F.one_hot(i, (3,)), lambda b: [np.array([[0], [b]], np.float32)]),
], ids=["gather", "gather_nd", "embed", "scatter_add", "one_hot"])
def test_nan_and_infinite_indices_raise(build, arrays, bad):
    """The GPU casts NaN to index 0: the kernels check the float before the cast."""
    with pytest.raises(ValueError, match="not an integer index"):
        run(cuda_context(), build, arrays(bad), no_grad=tuple(range(3)), backward=False)
