"""Pooling ops against a NumPy reference that walks the windows one by one."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import check_forward, check_function


# ------------------------------------------------------------------------------ reference
def _out_size(n, k, s, p, ignore_border):
    return (n + 2 * p - k) // s + 1 if ignore_border else (n + p + s - 1) // s


def pool_ref(x, kernel, stride, ignore_border, pad, channel_last, mode, including_pad=True):
    """(y, winners): y pooled; winners[o] the flat input index of the max of window o."""
    x = np.asarray(x, np.float64)
    nk = len(kernel)
    if channel_last:
        x = np.moveaxis(x, -1, 0)
    lead, sp = x.shape[:-nk], x.shape[-nk:]
    xf = x.reshape((-1,) + sp)
    out = [_out_size(n, k, s, p, ignore_border) for n, k, s, p in zip(sp, kernel, stride, pad)]
    y = np.zeros((xf.shape[0],) + tuple(out))
    winners = np.zeros(y.shape, np.int64)
    for o in np.ndindex(*out):
        start = [o[d] * stride[d] - pad[d] for d in range(nk)]
        end = [min(start[d] + kernel[d], sp[d] + pad[d]) for d in range(nk)]
        lo = [max(s, 0) for s in start]
        hi = [min(e, n) for e, n in zip(end, sp)]
        window = xf[(slice(None),) + tuple(slice(a, b) for a, b in zip(lo, hi))].reshape(xf.shape[0], -1)
        if mode == "max":
            if window.shape[1]:
                k = window.argmax(1)
                pos = np.stack(np.unravel_index(k, [b - a for a, b in zip(lo, hi)]), 1) + np.array(lo)
            else:   # a window wholly in the padding: the element nearest to its start
                pos = np.tile([min(max(s, 0), n - 1) for s, n in zip(start, sp)], (xf.shape[0], 1))
            flat = np.ravel_multi_index(tuple(pos.T), sp)
            winners[(slice(None),) + o] = flat
            y[(slice(None),) + o] = xf.reshape(xf.shape[0], -1)[np.arange(xf.shape[0]), flat]
        else:
            total = window.sum(1)
            if mode == "average":
                size = np.prod([e - s for s, e in zip(start, end)]) if including_pad else window.shape[1]
                total = total / size if size else np.full_like(total, np.nan)
            y[(slice(None),) + o] = total
    y = y.reshape(lead + tuple(out))
    winners = winners.reshape(lead + tuple(out))
    if channel_last:
        y, winners = np.moveaxis(y, 0, -1), np.moveaxis(winners, 0, -1)
    return y, winners


def max_pooling_backward_ref(dy, x, kernel, stride, ignore_border, pad, channel_last):
    _, winners = pool_ref(x, kernel, stride, ignore_border, pad, channel_last, "max")
    nk = len(kernel)
    xs = np.moveaxis(x, -1, 0) if channel_last else x
    dys = np.moveaxis(dy, -1, 0) if channel_last else dy
    winners = np.moveaxis(winners, -1, 0) if channel_last else winners
    rows = int(np.prod(xs.shape[:-nk]))
    dx = np.zeros((rows, int(np.prod(xs.shape[-nk:]))))
    np.add.at(dx, (np.arange(rows)[:, None], winners.reshape(rows, -1)), dys.reshape(rows, -1))
    dx = dx.reshape(xs.shape)
    return np.moveaxis(dx, 0, -1) if channel_last else dx


# ------------------------------------------------------------------------------ strategies
@st.composite
def pool_cases(draw, max_elements=30):
    nk = draw(st.integers(2, 3))   # nnabla pools 2-d and 3-d windows only
    kernel = tuple(draw(st.integers(1, 3 if nk < 3 else 2)) for _ in range(nk))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nk))
    pad = tuple(draw(st.integers(0, k - 1)) for k in kernel)
    ignore_border = draw(st.booleans())
    channel_last = draw(st.booleans())
    sp = tuple(max(1, k - 2 * p + draw(st.integers(0, 2))) for k, p in zip(kernel, pad))
    n_sp = int(np.prod(sp))
    lead = (1,) if channel_last else (draw(st.integers(1, 2)),)
    channels = draw(st.integers(1, max(1, min(3, max_elements // (n_sp * lead[0])))))
    shape = lead + (sp + (channels,) if channel_last else (channels,) + sp)
    seed = draw(st.integers(0, 2 ** 31 - 1))
    # distinct values, so no two elements of a window tie for the max
    x = np.random.RandomState(seed).permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 1.0
    return x, dict(kernel=kernel, stride=stride, ignore_border=ignore_border, pad=pad, channel_last=channel_last)


# ------------------------------------------------------------------------------ tests
@given(pool_cases())
def test_max_pooling(case):
    x, a = case
    check_function(lambda x: F.max_pooling(x, **a), [x],
                   lambda x: pool_ref(x, mode="max", **a)[0])


@given(pool_cases(), st.booleans())
def test_average_pooling(case, including_pad):
    x, a = case
    check_function(lambda x: F.average_pooling(x, including_pad=including_pad, **a), [x],
                   lambda x: pool_ref(x, mode="average", including_pad=including_pad, **a)[0])


@given(pool_cases())
def test_sum_pooling(case):
    x, a = case
    check_function(lambda x: F.sum_pooling(x, **a), [x], lambda x: pool_ref(x, mode="sum", **a)[0])


@given(pool_cases(max_elements=16))
def test_max_pooling_backward(case):
    x, a = case
    y, _ = pool_ref(x, mode="max", **a)
    dy = np.random.RandomState(0).uniform(-1, 1, y.shape)
    check_function(lambda dy, x: F.max_pooling_backward(dy, x, **a), [dy, x],
                   lambda dy, x: max_pooling_backward_ref(dy, x, **a), wrt=[0])


def test_max_pooling_backward_gives_x_no_gradient():
    x = nn.Variable.from_numpy_array(np.arange(16.0).reshape(1, 1, 4, 4), need_grad=True)
    dy = nn.Variable.from_numpy_array(np.ones((1, 1, 2, 2)), need_grad=True)
    dx = F.max_pooling_backward(dy, x, (2, 2))
    gdy, gx = nn.grad([F.sum(dx * dx)], [dy, x])
    gdy.forward()
    gx.forward()
    np.testing.assert_allclose(gdy.d, 2 * np.ones((1, 1, 2, 2)))
    np.testing.assert_allclose(gx.d, np.zeros((1, 1, 4, 4)))


def test_pooling_windows_in_padding():
    """pad >= kernel gives windows wholly in the padding: max takes the nearest element (and
    its gradient), an average without the padding is 0 / 0 -- both as nnabla."""
    x = np.arange(1.0, 10.0).reshape(1, 1, 3, 3)
    a = dict(kernel=(2, 2), stride=(2, 2), ignore_border=True, pad=(2, 2), channel_last=False)
    check_function(lambda x: F.max_pooling(x, **a), [x], lambda x: pool_ref(x, mode="max", **a)[0],
                   double_backward=False)
    check_forward(lambda x: F.average_pooling(x, including_pad=False, **a), [x],
                  lambda x: pool_ref(x, mode="average", including_pad=False, **a)[0])
    check_forward(lambda x: F.average_pooling(x, **a), [x], lambda x: pool_ref(x, mode="average", **a)[0])


@pytest.mark.parametrize("channel_last", [False, True])
def test_pooling_forward_larger(channel_last):
    rng = np.random.RandomState(0)
    x = rng.randn(*((2, 7, 6, 5, 3) if channel_last else (2, 3, 7, 6, 5))).astype(np.float32)
    for mode, fn in [("max", F.max_pooling), ("average", F.average_pooling), ("sum", F.sum_pooling)]:
        for kernel, stride, pad, ib in [((2, 2), (2, 2), (0, 0), True), ((3, 2, 2), (2, 1, 2), (1, 0, 1), False)]:
            a = dict(kernel=kernel, stride=stride, ignore_border=ib, pad=pad, channel_last=channel_last)
            check_forward(lambda x: fn(x, **a), [x], lambda x: pool_ref(x, mode=mode, **a)[0], atol=1e-5,
                          ctx=nn.Context())


def test_max_pooling_backward_follows_new_input_data():
    """Backward scatters to the winners of the latest forward."""
    rng = np.random.RandomState(1)
    x = nn.Variable.from_numpy_array(rng.randn(2, 3, 4, 4).astype(np.float32), need_grad=True)
    y = F.max_pooling(x, (2, 2))
    for _ in range(2):
        x.d = rng.randn(2, 3, 4, 4)
        x.g = 0
        y.forward()
        y.backward()
        np.testing.assert_allclose(x.g, max_pooling_backward_ref(np.ones(y.shape), x.d, (2, 2), (2, 2), True,
                                                                 (0, 0), False))


@given(st.sampled_from([(2, 3), (2, 3, 4), (1, 2, 3, 2), (2, 1, 2, 1, 2)]), st.integers(0, 2 ** 31 - 1))
def test_global_average_pooling(shape, seed):
    x = np.random.RandomState(seed).uniform(-1, 1, shape)
    check_function(F.global_average_pooling, [x],
                   lambda x: x.reshape(shape[0], shape[1], -1).mean(-1).reshape(shape[0], shape[1], 1, 1))


@st.composite
def unpooling_cases(draw):
    channel_last = draw(st.booleans())
    ndim = draw(st.integers(2, 5))
    shape = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    if np.prod(shape) > 24:
        shape = shape[:2] + (1,) * (ndim - 2)
    nk = draw(st.integers(1, ndim - 1 if channel_last else ndim))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nk))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return np.random.RandomState(seed).uniform(-1, 1, shape), kernel, channel_last


def unpooling_ref(x, kernel, channel_last):
    end = x.ndim - 1 if channel_last else x.ndim
    for k, axis in zip(kernel, range(end - len(kernel), end)):
        x = np.repeat(x, k, axis=axis)
    return x


@given(unpooling_cases())
def test_unpooling(case):
    x, kernel, channel_last = case
    check_function(lambda x: F.unpooling(x, kernel, channel_last), [x],
                   lambda x: unpooling_ref(x, kernel, channel_last))


# ------------------------------------------------------------------------------ errors
def _v(*shape):
    return nn.Variable(shape)


@pytest.mark.parametrize("build, message", [
    (lambda: F.max_pooling(_v(1, 1, 4, 4), (0, 2)), "kernel"),
    (lambda: F.max_pooling(_v(1, 1, 4, 4), (2, 2), (0, 1)), "stride"),
    (lambda: F.average_pooling(_v(1, 1, 4, 4), (2, 2), pad=(-1, 0)), "pad"),
    (lambda: F.sum_pooling(_v(1, 1, 4, 4), (5, 2), (1, 1)), r"larger than the padded input.*\(1, 1, 4, 4\)"),
    (lambda: F.max_pooling(_v(1, 1, 4, 4), (2, 2), (1,)), "one entry per kernel dimension"),
    (lambda: F.max_pooling(_v(4, 4), (2, 2, 2)), "more dimensions than input"),
    (lambda: F.max_pooling(_v(2, 2, 2, 2, 2), (1, 1, 1, 1)), r"kernel \(1, 1, 1, 1\) must have 2 or 3 dimensions"),
    (lambda: F.average_pooling(_v(2, 3, 5), (2,)), r"kernel \(2,\) must have 2 or 3 dimensions"),
    (lambda: F.max_pooling(_v(4, 4), (2, 2), channel_last=True), "more dimensions than input"),
    (lambda: F.max_pooling(_v(1, 1, 0, 4), (2, 2), ignore_border=False, pad=(1, 1)), "must not be empty"),
    (lambda: F.max_pooling_backward(_v(1, 1, 3, 2), _v(1, 1, 4, 4), (2, 2)), r"dy of shape \(1, 1, 3, 2\)"),
    (lambda: F.global_average_pooling(_v(3)), "at least 2 dimensions"),
    (lambda: F.unpooling(_v(2, 3), (2, 2, 2)), "kernel"),
    (lambda: F.unpooling(_v(2, 3), (0, 2)), "positive"),
])
def test_pooling_errors(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_pooling_output_shapes():
    """ignore_border=False keeps the partial windows at the end (nnabla's output size)."""
    x = nn.Variable((1, 1, 5, 5))
    assert F.max_pooling(x, (3, 3), (2, 2), False).shape == (1, 1, 3, 3)
    assert F.max_pooling(x, (2, 2), (2, 2), False, (1, 1)).shape == (1, 1, 3, 3)
    assert F.max_pooling(x, (3, 3), (2, 2), True).shape == (1, 1, 2, 2)


# ------------------------------------------------------------------------------ RoiAlign
def _roi_sample(img, y, x):
    H, W = img.shape
    if y < -1 or y > H or x < -1 or x > W:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    y1, x1 = min(y0 + 1, H - 1), min(x0 + 1, W - 1)
    if y0 >= H - 1:
        y0, y = H - 1, float(H - 1)
    if x0 >= W - 1:
        x0, x = W - 1, float(W - 1)
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * img[y0, x0] + (1 - ly) * lx * img[y0, x1] + ly * (1 - lx) * img[y1, x0]
            + ly * lx * img[y1, x1])


def roi_align_ref(x, boxes, output_size, spatial_scale=(1.0, 1.0), sampling_ratio=-1, channel_last=False):
    """Mask R-CNN RoiAlign with pixel centres at +0.5; spatial_scale is (y, x) as nnabla's."""
    x = np.moveaxis(x, -1, 1) if channel_last else x
    OH, OW = output_size
    out = np.zeros((len(boxes), x.shape[1], OH, OW))
    for r, (b, x1, y1, x2, y2) in enumerate(boxes):
        y1, y2 = y1 * spatial_scale[0] - 0.5, y2 * spatial_scale[0] - 0.5
        x1, x2 = x1 * spatial_scale[1] - 0.5, x2 * spatial_scale[1] - 0.5
        bh, bw = (y2 - y1) / OH, (x2 - x1) / OW
        gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(bh))
        gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(bw))
        for c, oh, ow in np.ndindex(x.shape[1], OH, OW):
            acc = sum(_roi_sample(x[int(b), c], y1 + oh * bh + (iy + 0.5) * bh / gh,
                                  x1 + ow * bw + (ix + 0.5) * bw / gw) for iy in range(gh) for ix in range(gw))
            out[r, c, oh, ow] = acc / (gh * gw) if gh * gw else np.nan
    return np.moveaxis(out, 1, -1) if channel_last else out


@st.composite
def roi_cases(draw):
    seed = draw(st.integers(0, 2 ** 31 - 1))
    rng = np.random.RandomState(seed)
    channel_last = draw(st.booleans())
    N, C, H, W = 2, draw(st.integers(1, 2)), draw(st.integers(2, 4)), draw(st.integers(2, 4))
    K = draw(st.integers(1, 3))
    xs, ys = np.sort(rng.uniform(-1.5, W + 1, (K, 2)), 1), np.sort(rng.uniform(-1.5, H + 1, (K, 2)), 1)
    boxes = np.stack([rng.randint(0, N, K), xs[:, 0], ys[:, 0], xs[:, 1] + 0.3, ys[:, 1] + 0.3], 1)
    x = rng.uniform(-1, 1, (N, H, W, C) if channel_last else (N, C, H, W))
    args = dict(output_size=(draw(st.integers(1, 3)), draw(st.integers(1, 2))),
                spatial_scale=(draw(st.sampled_from([1.0, 0.5])), draw(st.sampled_from([1.0, 0.75]))),
                sampling_ratio=draw(st.sampled_from([-1, 1, 2])), channel_last=channel_last)
    return x, boxes, args


@given(roi_cases())
def test_roi_align(case):
    x, boxes, a = case
    bv = nn.Variable.from_numpy_array(boxes)
    check_function(lambda x: F.roi_align(x, bv, **a), [x], lambda x: roi_align_ref(x, boxes, **a),
                   grad_rule=False, double_backward=False, atol=1e-4)


def test_roi_align_documented_example():
    x = np.ones((1, 1, 4, 4))
    x[0, 0, 1:3, 1:3] = 2
    boxes = np.array([[0, 0, 0, 4, 4], [0, 1, 1, 3, 3]])
    y = F.roi_align(nn.Variable.from_numpy_array(x), nn.Variable.from_numpy_array(boxes), (2, 2))
    y.forward()
    np.testing.assert_allclose(y.d.reshape(2, 4), [[1.25] * 4, [2.0] * 4])


def test_roi_align_boxes_and_nn_grad():
    """Boxes get no gradient; like nnabla, RoiAlign has no nn.grad rule; an empty adaptive
    grid gives 0 / 0."""
    x = nn.Variable.from_numpy_array(np.random.randn(1, 1, 4, 4), need_grad=True)
    boxes = nn.Variable.from_numpy_array(np.array([[0, 1.0, 1.0, 1.0, 1.0]]), need_grad=True)
    y = F.roi_align(x, boxes, (1, 1))
    y.forward()
    assert np.isnan(y.d).all()
    with pytest.raises(ValueError, match="no grad rule"):
        nn.grad([F.sum(y)], [x])
    bad = F.roi_align(x, nn.Variable.from_numpy_array(np.array([[1, 0, 0, 2, 2]])), (1, 1))
    with pytest.raises(ValueError, match=r"batch indices \[1\]"):
        bad.forward()


@pytest.mark.parametrize("build, message", [
    (lambda: F.roi_align(_v(1, 2, 4), _v(1, 5), (2, 2)), "4-d"),
    (lambda: F.roi_align(_v(1, 2, 4, 4), _v(1, 4), (2, 2)), r"boxes of shape \(1, 4\)"),
    (lambda: F.roi_align(_v(1, 2, 4, 4), _v(1, 5), (0, 2)), "output_size"),
    (lambda: F.roi_align(_v(1, 2, 4, 4), _v(1, 5), (2, 2, 2)), "output_size"),
])
def test_roi_align_errors(build, message):
    with pytest.raises(ValueError, match=message):
        build()
