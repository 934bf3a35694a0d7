"""Array manipulation: reshape, broadcast, tile, flip, pad, transpose, slice, concatenate,
stack, split, one_hot (forward, backward, grad rule, double backward)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import check_forward, check_function, strategies as nst


@given(x=nst.arrays(nst.shapes(2, 3, 1, 3)))
def test_reshape_transpose_flip(x):
    check_function(lambda v: F.reshape(v, (-1,)), [x], lambda a: a.reshape(-1))
    perm = tuple(reversed(range(x.ndim)))
    check_function(lambda v: F.transpose(v, perm), [x], lambda a: a.transpose(perm))
    check_function(lambda v: F.flip(v, (0, -1)), [x], lambda a: np.flip(a, (0, -1)))


@given(x=nst.arrays(nst.shapes(1, 3, 1, 3)), data=st.data())
def test_broadcast_and_broadcast_to(x, data):
    target = tuple(s if s != 1 else data.draw(st.integers(1, 3)) for s in x.shape)
    check_function(lambda v: F.broadcast(v, target), [x], lambda a: np.broadcast_to(a, target))
    z = np.zeros((2,) + x.shape + (2,))    # nnabla's order: the shape first, the values second
    check_function(lambda w, v: F.broadcast_to(w, v, axis=1), [z, x],
                   lambda b, a: np.broadcast_to(a.reshape((1,) + a.shape + (1,)), b.shape), wrt=[1])


# nnabla 1.39's shapes and sums for x = arange(2*3*8*8).reshape(2, 3, 8, 8) (recorded with the
# oracle): start/stop/step shorter than x's dimensions slice its last axes; a None entry of F.slice
# is filled from x.shape[i], the i-th axis, as nnabla's F.slice does (the obsolete ImageNet
# example slices (3, 64, 64) crops of (N, 3, 64, 64) images with 3 entries).
S = np.s_
@pytest.mark.parametrize("start, stop, step, shape, total, index", [
    ((1,), (3,), (1,), (2, 3, 8, 2), 18192.0, S[..., 1:3]),
    ((1, 2), (3, 6), (1, 2), (2, 3, 2, 2), 4200.0, S[..., 1:3, 2:6:2]),
    ((None, 1), (None, -1), (None, 1), (2, 3, 2, 6), 12060.0, S[..., 0:2, 1:-1]),
    ((0, 1.0, 2.0), (3, 7.0, 6.0), (1, 1, 1), (2, 3, 6, 4), 27576.0, S[:, 0:3, 1:7, 2:6]),
    ((-1,), (None,), (-1,), (2, 3, 8, 2), 18672.0, S[..., -1:-3:-1]),
])
def test_slice_with_fewer_entries_than_axes_slices_the_last_axes(start, stop, step, shape, total, index):
    x = np.arange(2 * 3 * 8 * 8, dtype=np.float32).reshape(2, 3, 8, 8)
    y = F.slice(nn.Variable.from_numpy_array(x), start, stop, step)
    y.forward()
    assert y.shape == shape and float(y.d.sum()) == total
    check_function(lambda v: F.slice(v, start, stop, step), [x.astype(np.float64) / 100],
                   lambda a: a[index])


@given(x=nst.arrays(nst.shapes(1, 2, 1, 3)), reps=st.lists(st.integers(1, 3), min_size=1, max_size=3))
def test_tile(x, reps):
    check_function(lambda v: F.tile(v, reps), [x], lambda a: np.tile(a, reps))


@pytest.mark.parametrize("mode, np_mode", [("constant", "constant"), ("reflect", "reflect"), ("repeat", "edge")])
@given(x=nst.arrays(nst.shapes(2, 3, 2, 4)), data=st.data())
def test_pad(mode, np_mode, x, data):
    widths = [data.draw(st.integers(0, min(2, x.shape[a] - 1))) for a in (-2, -2, -1, -1)]
    pad_np = [(0, 0)] * (x.ndim - 2) + [(widths[0], widths[1]), (widths[2], widths[3])]
    kwargs = {"constant_values": 0.5} if mode == "constant" else {}
    check_function(lambda v: F.pad(v, widths, mode, 0.5), [x], lambda a: np.pad(a, pad_np, np_mode, **kwargs))


@given(x=nst.arrays(nst.shapes(2, 3, 2, 5)), data=st.data())
def test_slice(x, data):
    start, stop, step = [], [], []
    for s in x.shape:
        st_ = data.draw(st.sampled_from([1, 2, -1]))
        b = data.draw(st.integers(0, s - 1))
        e = data.draw(st.integers(b + 1, s)) if st_ > 0 else data.draw(st.integers(-s - 1, b - 1))
        start.append(b)
        stop.append(e)
        step.append(st_)
    ref = x[tuple(slice(b, e if e >= -x.shape[k] else None, t) for k, (b, e, t) in enumerate(zip(start, stop, step)))]
    if ref.size == 0:
        return
    check_function(lambda v: F.slice(v, start, stop, step), [x], lambda a: ref)


@given(data=st.data())
def test_concatenate_stack_split(data):
    shape = data.draw(nst.shapes(1, 3, 1, 3))
    axis = data.draw(nst.axis(len(shape)))
    xs = [data.draw(nst.arrays(st.just(shape))) for _ in range(3)]
    check_function(lambda *v: F.concatenate(*v, axis=axis), xs, lambda *a: np.concatenate(a, axis=axis))
    check_function(lambda *v: F.stack(*v, axis=axis), xs, lambda *a: np.stack(a, axis=axis))
    check_function(lambda v: F.split(v, axis=axis), [xs[0]],
                   lambda a: tuple(np.moveaxis(a, axis, 0)))


def test_one_hot():
    index = np.array([[0, 1], [2, 0], [1, 2]])
    y = F.one_hot(nn.Variable.from_numpy_array(index), (3, 3))
    y.forward()
    want = np.zeros((3, 3, 3))
    for n, (i, j) in enumerate(index):
        want[n, i, j] = 1
    np.testing.assert_array_equal(y.d, want)
    with pytest.raises(ValueError, match="OneHot"):
        F.one_hot(nn.Variable.from_numpy_array(np.array([[3]])), (3,)).forward()


def test_errors_name_the_op():
    x = nn.Variable((2, 3))
    with pytest.raises(ValueError, match="Broadcast.*\\(2, 3\\).*\\(4, 3\\)"):
        F.broadcast(x, (4, 3))
    with pytest.raises(ValueError, match="Concatenate"):
        F.concatenate(x, nn.Variable((3, 3)), axis=1)
    with pytest.raises(ValueError, match="Slice.*step"):
        F.slice(x, (0, 0), (2, 3), (1, 0))
