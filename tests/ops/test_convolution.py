"""Convolution, Deconvolution, DepthwiseConvolution, DepthwiseDeconvolution against NumPy
references (a direct sum over kernel taps), with gradients checked numerically to second order."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ext_utils import get_extension_context
from nnabla_jit.ops import convolution as conv_ops, convolution_tiled as conv_tiled
from nnabla_jit.ops.kernels import parallel_threshold
from nnabla_jit.testing import check_forward, check_function


# ------------------------------------------------------------------------------ references
def _channel_first(a, base_axis, channel_last):
    """a as (B, C, *spatial) and the function putting a result back into a's layout."""
    lead = a.shape[:base_axis]
    if channel_last:
        a = np.moveaxis(a, -1, base_axis)
    flat = a.reshape((int(np.prod(lead, dtype=np.int64)),) + a.shape[base_axis:])

    def restore(r):
        r = r.reshape(tuple(lead) + r.shape[1:])
        return np.moveaxis(r, base_axis, -1) if channel_last else r
    return flat, restore


@pytest.fixture
def im2col_route(monkeypatch):
    """Float32 convolutions on the im2col route (the tiled route would take them instead)."""
    monkeypatch.setenv("NNABLA_JIT_TILED_CONV", "0")


def _defaults(D, pad, stride, dilation):
    return pad or (0,) * D, stride or (1,) * D, dilation or (1,) * D


def conv_ref(x, w, b=None, base_axis=1, pad=None, stride=None, dilation=None, group=1, channel_last=False):
    xf, restore = _channel_first(np.asarray(x, np.float64), base_axis, channel_last)
    wf = np.moveaxis(w, -1, 1) if channel_last else np.asarray(w, np.float64)
    D = xf.ndim - 2
    pad, stride, dilation = _defaults(D, pad, stride, dilation)
    kernel = wf.shape[2:]
    xp = np.pad(xf, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out = [(xf.shape[2 + d] + 2 * pad[d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1 for d in range(D)]
    M, Cg = wf.shape[0], wf.shape[1]
    Mg = M // group
    y = np.zeros((xf.shape[0], M) + tuple(out))
    for tap in np.ndindex(*kernel):
        sl = tuple(slice(t * dl, t * dl + s * (o - 1) + 1, s) for t, dl, s, o in zip(tap, dilation, stride, out))
        xs = xp[(slice(None), slice(None)) + sl]
        for g in range(group):
            wt = wf[g * Mg:(g + 1) * Mg][(slice(None), slice(None)) + tap]
            y[:, g * Mg:(g + 1) * Mg] += np.einsum("mc,bc...->bm...", wt, xs[:, g * Cg:(g + 1) * Cg])
    if b is not None:
        y += np.asarray(b).reshape((1, M) + (1,) * D)
    return restore(y)


def deconv_ref(x, w, b=None, base_axis=1, pad=None, stride=None, dilation=None, group=1, channel_last=False,
               output_padding=None):
    xf, restore = _channel_first(np.asarray(x, np.float64), base_axis, channel_last)
    wf = np.moveaxis(w, -1, 1) if channel_last else np.asarray(w, np.float64)
    D = xf.ndim - 2
    pad, stride, dilation = _defaults(D, pad, stride, dilation)
    output_padding = output_padding or (0,) * D
    kernel = wf.shape[2:]
    ICg, OCg = wf.shape[0] // group, wf.shape[1]
    X = xf.shape[2:]
    full = [stride[d] * (X[d] - 1) + dilation[d] * (kernel[d] - 1) + 1 + output_padding[d] for d in range(D)]
    yp = np.zeros((xf.shape[0], OCg * group) + tuple(full))
    for tap in np.ndindex(*kernel):
        sl = tuple(slice(t * dl, t * dl + s * (n - 1) + 1, s) for t, dl, s, n in zip(tap, dilation, stride, X))
        for g in range(group):
            wt = wf[g * ICg:(g + 1) * ICg][(slice(None), slice(None)) + tap]
            yp[(slice(None), slice(g * OCg, (g + 1) * OCg)) + sl] += np.einsum(
                "mc,bm...->bc...", wt, xf[:, g * ICg:(g + 1) * ICg])
    y = yp[(slice(None), slice(None)) + tuple(slice(p, f - p) for p, f in zip(pad, full))]
    if b is not None:
        y = y + np.asarray(b).reshape((1, -1) + (1,) * D)
    return restore(y)


def depthwise_conv_ref(x, w, b, pad, stride, dilation):
    return conv_ref(x, w.reshape((w.shape[0], 1) + w.shape[1:]), b, 1, pad, stride, dilation, x.shape[1])


def depthwise_deconv_ref(x, w, b, pad, stride, dilation, divisor):
    return deconv_ref(x, w.reshape((w.shape[0], 1) + w.shape[1:]), b, 1, pad, stride, dilation,
                      x.shape[1] // divisor)


# ------------------------------------------------------------------------------ strategies
def _array(draw, shape):
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return np.random.RandomState(seed).uniform(-1, 1, shape)


@st.composite
def conv_cases(draw, max_dims=2, transposed=False):
    """Small convolutions (<= ~30 elements per input): shapes, arguments and arrays."""
    D = draw(st.integers(1, max_dims))
    group = draw(st.integers(1, 2))
    cg = draw(st.integers(1, 2 if group == 1 else 1))
    mg = draw(st.integers(1, 2 if group == 1 else 1))
    kernel = tuple(draw(st.integers(1, 3 if D == 1 else 2)) for _ in range(D))
    stride = tuple(draw(st.integers(1, 2)) for _ in range(D))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(D))
    pad = tuple(draw(st.integers(0, 1)) for _ in range(D))
    channel_last = draw(st.booleans())
    spatial = tuple(max(1, d * (k - 1) + 1 - 2 * p + draw(st.integers(0, 2)))
                    for k, d, p in zip(kernel, dilation, pad))
    if transposed:   # x is the map of a convolution: any size; output padding below the stride
        spatial = tuple(draw(st.integers(1, 3)) for _ in range(D))
        output_padding = tuple(draw(st.integers(0, s - 1)) for s in stride)
        pad = tuple(min(p, (s * (n - 1) + d * (k - 1) + o) // 2) for p, s, n, d, k, o in
                    zip(pad, stride, spatial, dilation, kernel, output_padding))
    batch = 1 if D == 2 else draw(st.integers(1, 2))
    C, M = group * cg, group * mg
    x_shape = (batch,) + ((spatial + (C,)) if channel_last else ((C,) + spatial))
    w_shape = (C, mg) if transposed else (M, cg)
    w_shape = (w_shape[0],) + kernel + (w_shape[1],) if channel_last else w_shape + kernel
    case = dict(x=_array(draw, x_shape), w=_array(draw, w_shape),
                b=_array(draw, (M,)) if draw(st.booleans()) else None,
                args=dict(pad=pad, stride=stride, dilation=dilation, group=group, channel_last=channel_last))
    if transposed:
        case["args"]["output_padding"] = output_padding
    return case


def _inputs(case):
    return [case["x"], case["w"]] + ([case["b"]] if case["b"] is not None else [])


# ------------------------------------------------------------------------------ Convolution
@given(conv_cases())
def test_convolution(case):
    a = case["args"]
    check_function(lambda x, w, b=None: F.convolution(x, w, b, 1, **a), _inputs(case),
                   lambda x, w, b=None: conv_ref(x, w, b, 1, **a))


def test_convolution_3d_base_axis_2():
    rng = np.random.RandomState(1)
    x, w, b = rng.randn(2, 1, 1, 3, 2, 2), rng.randn(2, 1, 2, 1, 2), rng.randn(2)
    args = dict(pad=(1, 0, 1), stride=(1, 2, 1), dilation=(1, 1, 2))
    check_function(lambda x, w, b: F.convolution(x, w, b, 2, **args), [x, w, b],
                   lambda x, w, b: conv_ref(x, w, b, 2, **args))


def test_convolution_4d():
    """Four spatial dims: the first two form the map plane that image_plane decodes digit by
    digit (the only case with a division)."""
    rng = np.random.RandomState(2)
    x, w = rng.randn(1, 2, 3, 2, 3, 2), rng.randn(2, 2, 2, 1, 2, 2)
    args = dict(pad=(1, 0, 1, 0), stride=(1, 2, 1, 1), dilation=(1, 1, 2, 1))
    check_function(lambda x, w: F.convolution(x, w, None, 1, **args), [x, w],
                   lambda x, w: conv_ref(x, w, None, 1, **args))


@pytest.mark.parametrize("channel_last", [False, True])
def test_convolution_forward_larger(channel_last):
    """Bigger shapes than the gradient checks use, in float32, with several dims."""
    rng = np.random.RandomState(2)
    for D, G in [(1, 1), (2, 2), (3, 1), (4, 1)]:
        sp = (7, 6, 5, 4)[:D]
        x = rng.randn(*((3,) + (sp + (4,) if channel_last else (4,) + sp))).astype(np.float32)
        k = (3, 2, 2, 1)[:D]
        w = rng.randn(*((6,) + (k + (4 // G,) if channel_last else (4 // G,) + k))).astype(np.float32)
        args = dict(pad=(1,) * D, stride=(2, 1, 1, 2)[:D], dilation=(1, 2, 1, 1)[:D], group=G,
                    channel_last=channel_last)
        check_forward(lambda x, w: F.convolution(x, w, None, 1, **args), [x, w],
                      lambda x, w: conv_ref(x, w, None, 1, **args), atol=1e-4, ctx=nn.Context())


def test_convolution_chunked_batch(monkeypatch, im2col_route):
    """A batch larger than one im2col buffer goes through in chunks with the same result."""
    monkeypatch.setattr(conv_ops, "COL_ELEMENTS", 200)
    rng = np.random.RandomState(3)
    x, w, b = rng.randn(5, 2, 4, 4), rng.randn(3, 2, 3, 3), rng.randn(3)
    args = dict(pad=(1, 1), stride=(1, 1), dilation=(1, 1), group=1, channel_last=False)
    check_function(lambda x, w, b: F.convolution(x, w, b, 1, **args), [x, w, b],
                   lambda x, w, b: conv_ref(x, w, b, 1, **args), grad_rule=False, double_backward=False)


@pytest.mark.parametrize("kept", [True, False])
def test_convolution_chain_shares_work_arrays(monkeypatch, im2col_route, kept):
    """Convolutions of one graph share scratch arrays; a node keeps its own col (for its
    backward) only when small -- both ways the chain's gradients are right."""
    if not kept:
        monkeypatch.setattr(conv_ops, "KEPT_COL_ELEMENTS", 0)
    rng = np.random.RandomState(10)
    x, w1, w2 = rng.randn(2, 1, 5, 4), rng.randn(2, 1, 2, 2), rng.randn(3, 2, 2, 1)

    def chain(x, w1, w2):
        return F.convolution(F.tanh(F.convolution(x, w1, pad=(1, 0))), w2, stride=(2, 1))
    check_function(chain, [x, w1, w2], lambda x, w1, w2: conv_ref(np.tanh(conv_ref(x, w1, pad=(1, 0))), w2,
                                                                  stride=(2, 1)), double_backward=False)


def test_convolution_backward_follows_new_input_data():
    """The filter gradient reuses the forward's im2col; a new forward with new data must not
    see the old one."""
    rng = np.random.RandomState(4)
    x = nn.Variable.from_numpy_array(rng.randn(2, 2, 5, 5).astype(np.float32))
    w = nn.Variable.from_numpy_array(rng.randn(3, 2, 3, 3).astype(np.float32), need_grad=True)
    y = F.convolution(x, w)
    for _ in range(2):
        x.d = rng.randn(2, 2, 5, 5)
        w.g = 0
        y.forward()
        y.backward()
        # d sum(y) / dW[m, c, i, j] = sum of x over the window positions of tap (i, j)
        want = np.stack([np.stack([x.d[:, c, i:i + 3, j:j + 3].sum() for j in range(3)]) for c in range(2)
                         for i in range(3)]).reshape(2, 3, 3)
        np.testing.assert_allclose(w.g, np.broadcast_to(want, (3, 2, 3, 3)), rtol=1e-4, atol=1e-4)


class _NoCol:
    """Stands in for im2col / col2im where a convolution must not build a col."""
    def for_size(self, n):
        raise AssertionError("a pointwise convolution built a col")


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("channel_last", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_pointwise_convolution_takes_no_col(monkeypatch, transposed, channel_last, with_bias):
    """A 1x1 stride-1 unpadded convolution of several samples runs on GEMMs alone (one per
    sample, or one over the batch channel-last), forward and every gradient, with accumulation."""
    monkeypatch.setattr(conv_ops, "POINTWISE_POSITIONS", 1)   # per-sample GEMMs at this size too
    monkeypatch.setattr(conv_ops, "im2col", _NoCol())
    monkeypatch.setattr(conv_ops, "col2im", _NoCol())
    rng = np.random.RandomState(11)
    C, M, sp = 3, 4, (3, 2)
    x = rng.randn(*((2,) + (sp + (C,) if channel_last else (C,) + sp)))
    w = rng.randn(*((C, 1, 1, M) if channel_last else (C, M, 1, 1))) if transposed else \
        rng.randn(*((M, 1, 1, C) if channel_last else (M, C, 1, 1)))
    b = rng.randn(M) if with_bias else None
    args = dict(channel_last=channel_last)
    f, ref = (F.deconvolution, deconv_ref) if transposed else (F.convolution, conv_ref)
    check_function(lambda x, w, b=None: f(x, w, b, 1, **args), [x, w] + ([b] if with_bias else []),
                   lambda x, w, b=None: ref(x, w, b, 1, **args), double_backward=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch", [1, 3])
def test_pointwise_convolution_matches_the_col_route(monkeypatch, dtype, batch):
    """The pointwise route and the col route give the same map and gradients (ResNet-sized
    positions, so per-sample GEMMs are taken for the batch by default)."""
    rng = np.random.RandomState(12)
    x0, w0 = rng.randn(batch, 8, 16, 16).astype(dtype), rng.randn(6, 8, 1, 1).astype(dtype)
    results = []
    config = "float" if dtype == np.float32 else "double"
    for positions in (conv_ops.POINTWISE_POSITIONS, 10 ** 9):
        monkeypatch.setattr(conv_ops, "POINTWISE_POSITIONS", positions)
        with nn.context_scope(get_extension_context("cpu", type_config=config)):
            x = nn.Variable.from_numpy_array(x0, need_grad=True)
            w = nn.Variable.from_numpy_array(w0, need_grad=True)
            y = F.convolution(x, w)
            y.forward()
            assert y.d.dtype == dtype
            assert y.parent.op.geo.pointwise == (batch == 1 or positions < 10 ** 9)
            y.backward(np.cos(y.d))
        results.append((y.d.copy(), x.g.copy(), w.g.copy()))
    tol = 1e-4 if dtype == np.float32 else 1e-10   # the two routes sum in other orders
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("channel_last", [False, True])
@pytest.mark.parametrize("img_sp, kernel, pad, stride, dilation, group", [
    ((9, 7), (3, 2), (1, 2), (2, 1), (1, 2), 1),
    ((5, 6, 7), (2, 3, 1), (0, 1, 2), (1, 2, 3), (2, 1, 1), 2),
    ((11,), (4,), (3,), (2,), (3,), 3),
    ((20, 23), (5, 5), (2, 0), (1, 1), (1, 1), 1)])
def test_im2col_tap_table_matches_row_copies(monkeypatch, channel_last, img_sp, kernel, pad, stride, dilation,
                                             group):
    """im2col through the table of tap reads (narrow maps) and through row copies build the
    same col, entry for entry: strides, dilation, padding, groups, 1-3 spatial dims."""
    rng = np.random.RandomState(15)
    C = 2 * group
    x_shape = (3,) + (img_sp + (C,) if channel_last else (C,) + img_sp)
    w_shape = (group,) + (kernel + (C // group,) if channel_last else (C // group,) + kernel)
    x = rng.randn(*x_shape).astype(np.float32)
    cols = []
    for narrow in (0, 10 ** 9):
        monkeypatch.setattr(conv_ops, "NARROW_MAP", narrow)
        geo = conv_ops.ConvGeometry(None, x_shape, w_shape, pad, stride, dilation, group, channel_last, 1)
        assert (geo.taps.size > 0) == (narrow > 0)
        col = np.full((geo.C * geo.K, geo.B * geo.O), np.nan, np.float32)
        with parallel_threshold(0 if narrow else None):   # both kernel variants
            geo._fill_col(geo.img2(x), 0, geo.B, col)
        cols.append(col)
    np.testing.assert_array_equal(cols[0], cols[1])
    assert 0 < np.count_nonzero(cols[0]) < cols[0].size   # read values and padding zeros


@pytest.mark.parametrize("position_major", [False, True])
@pytest.mark.parametrize("channel_last", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_convolution_gemm_orientations(monkeypatch, im2col_route, position_major, channel_last, with_bias):
    """The col route's GEMM orientations -- position-major forward rows laid out by rows_to_map,
    the filter gradient computed transposed, channel-last products straight on the map -- and
    the plain ones give the reference's map and gradients (float32 / float64, serial / parallel
    kernels, accumulation), with stride, dilation, padding and a batch in chunks."""
    big = 10 ** 9
    monkeypatch.setattr(conv_ops, "POSITION_MAJOR_DEPTH", 0 if position_major else big)
    monkeypatch.setattr(conv_ops, "POSITION_MAJOR_CHANNELS", big if position_major else 0)
    monkeypatch.setattr(conv_ops, "COL_ELEMENTS", 300)   # 3 samples a chunk
    rng = np.random.RandomState(13)
    C, M, sp, k = 3, 5, (7, 7), (3, 2)   # a 4 x 9 map: two blocks of 16 positions and 4 over
    x = rng.randn(*((7,) + (sp + (C,) if channel_last else (C,) + sp)))
    w = rng.randn(*((M,) + (k + (C,) if channel_last else (C,) + k)))
    b = rng.randn(M) if with_bias else None
    args = dict(pad=(1, 2), stride=(2, 1), dilation=(1, 2), channel_last=channel_last)
    check_function(lambda x, w, b=None: F.convolution(x, w, b, 1, **args), [x, w] + ([b] if with_bias else []),
                   lambda x, w, b=None: conv_ref(x, w, b, 1, **args), grad_rule=False, double_backward=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("channel_last", [False, True])
def test_convolution_filter_gradient_orientations_agree(monkeypatch, im2col_route, dtype, channel_last):
    """A LeNet-sized first layer (1 channel, 5x5): the filter gradient computed transposed and
    plain agree, added into a gradient already there (accum). (float64 takes the plain one
    either way: this checks that the switch leaves it alone.)"""
    rng = np.random.RandomState(14)
    x0 = rng.randn(*((16, 12, 12, 1) if channel_last else (16, 1, 12, 12))).astype(dtype)
    w0 = rng.randn(*((6, 5, 5, 1) if channel_last else (6, 1, 5, 5))).astype(dtype)
    config = "float" if dtype == np.float32 else "double"
    results = []
    for channels in (0, 10 ** 9):
        monkeypatch.setattr(conv_ops, "POSITION_MAJOR_CHANNELS", channels)
        with nn.context_scope(get_extension_context("cpu", type_config=config)):
            x = nn.Variable.from_numpy_array(x0, need_grad=True)
            w = nn.Variable.from_numpy_array(w0, need_grad=True)
            y = F.convolution(x, w, channel_last=channel_last)
            y.forward()
            w.g = 0.5
            y.backward(np.sin(y.d))   # accumulates into 0.5
        results.append(w.g.copy())
        assert w.g.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(results[0], results[1], rtol=tol, atol=tol * np.abs(results[0]).max())
    assert not np.allclose(results[0], 0.5)


@pytest.mark.skipif(not conv_tiled.enabled(), reason="the tiled route needs AVX-512")
@pytest.mark.parametrize("variant", [None, 0], ids=["serial", "parallel"])
@pytest.mark.parametrize("implicit", [True, False], ids=["implicit", "sampled"])
@pytest.mark.parametrize("x_shape, M, kernel, pad, stride, dilation, implicit_routes", [
    ((6, 16, 12, 12), 32, (5, 5), (0, 0), (1, 1), (1, 1), (True, True)),    # LeNet's conv2 (narrow)
    ((3, 3, 20, 37), 18, (3, 3), (1, 1), (2, 1), (1, 1), (False, False)),   # a stride: sampled
    ((2, 3, 18, 41), 9, (3, 3), (2, 2), (1, 1), (2, 2), (True, True)),      # dilated, padding 2
    ((3, 8, 40), 7, (3,), (1,), (1,), (1,), (True, True)),                  # 1-d
    ((3, 4, 9), 7, (3,), (1,), (1,), (1,), (True, True)),                   # narrow (waste) but small
    ((32, 64, 4, 4), 128, (3, 3), (1, 1), (1, 1), (1, 1), (False, False)),  # narrow and not small
    ((2, 2, 7, 7, 5), 4, (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (False, False)),   # 3-d
    ((1, 2, 6, 30), 3, (3, 3), (1, 1), (1, 1), (1, 1), (True, True)),       # one sample
    ((1, 1, 5, 5), 3, (5, 5), (2, 2), (1, 1), (1, 1), (True, True))])       # one sample, 5 x 5
def test_tiled_route_matches_the_im2col_route(monkeypatch, variant, implicit, x_shape, M, kernel, pad, stride,
                                              dilation, implicit_routes):
    """Float32 products on register tiles -- implicit (stride 1: no col) or sample by sample
    over a col in cache -- give the same map, data gradient, filter and bias gradients as the
    im2col route (to float32 rounding), for every write mode -- added, from zero, from the
    bias -- and accumulation, serial and parallel kernels (one sample: parts by channels). The
    filter gradient reads the sampled forward's kept cols, or the image again where they are
    not (im2col's route, or the implicit one)."""
    if not implicit:
        monkeypatch.setattr(conv_tiled, "implicit_plans", lambda geo: (None, None))
    rng = np.random.RandomState(21)
    x = rng.randn(*x_shape).astype(np.float32)
    w = rng.randn(M, x_shape[1], *kernel).astype(np.float32)
    b, bx = rng.randn(M).astype(np.float32), rng.randn(x_shape[1]).astype(np.float32)

    def geometry(tiled):
        geo = conv_ops.ConvGeometry(None, x_shape, w.shape, pad, stride, dilation, 1, False, 1)
        assert (geo.tiled is not None) == tiled
        return geo
    with parallel_threshold(variant):
        tiled = geometry(True)
        plain = geometry(True)
        plain.tiled = None
        for init in (conv_ops.INIT_ADD, conv_ops.INIT_ZERO, conv_ops.INIT_BIAS):
            outs = []
            for geo in (tiled, plain):
                r = np.random.RandomState(init)
                y, dx = r.randn(*geo.map_shape).astype(np.float32), r.randn(*x_shape).astype(np.float32)
                dw, dw_acc = r.randn(*w.shape).astype(np.float32), r.randn(*w.shape).astype(np.float32)
                db, db_acc = r.randn(M).astype(np.float32), r.randn(M).astype(np.float32)
                geo.image_to_map(x, w, y, b, init)
                dy = np.sin(y)
                geo.map_to_image(dy, w, dx, bx, init)
                geo.filter_grad(x, dy, dw, False, reuse_col=True)   # from the forward's cols if kept
                geo.filter_grad(x, dy, dw_acc, True, reuse_col=False, out_b=db, b_accumulate=False)
                geo.filter_grad(x, dy, dw_acc, True, reuse_col=True, out_b=db_acc, b_accumulate=True)
                outs.append((y, dx, dw, dw_acc, db, db_acc))
            for got, want in zip(*outs):
                np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    route = tiled.tiled
    forward, data_grad = implicit_routes if implicit else (False, False)
    assert (route.forward_plan is not None, route.grad_plan is not None) == (forward, data_grad)
    assert (route.kept is not None) == (not forward)   # the sampled forward keeps its cols


@pytest.mark.skipif(not conv_tiled.enabled(), reason="the tiled route needs AVX-512")
def test_tiled_route_leaves_what_it_does_not_take(monkeypatch):
    """float64 calls, grouped, channel-last and pointwise convolutions, and
    NNABLA_JIT_TILED_CONV=0 take the im2col route; a filter gradient of an image other than
    the forward's is the other image's (the forward's cols or padded samples are not reused)."""
    calls = []
    for name in ("image_to_map", "map_to_image", "filter_grad"):
        real = getattr(conv_tiled.TiledRoute, name)
        monkeypatch.setattr(conv_tiled.TiledRoute, name,
                            lambda self, *a, _real=real, _name=name: calls.append(_name) or _real(self, *a))
    rng = np.random.RandomState(22)
    x64 = rng.randn(2, 3, 6, 6)
    x, w = x64.astype(np.float32), rng.randn(4, 3, 3, 3).astype(np.float32)
    geo = conv_ops.ConvGeometry(None, x.shape, w.shape, (1, 1), (1, 1), (1, 1), 1, False, 1)
    y = np.empty(geo.map_shape, np.float32)
    geo.image_to_map(x64, w.astype(np.float64), y.astype(np.float64))
    assert calls == []
    geo.image_to_map(x, w, y)
    other, dw = x + 1, np.empty_like(w)
    geo.filter_grad(other, y, dw, reuse_col=True)
    assert calls == ["image_to_map", "filter_grad"]
    plain = conv_ops.ConvGeometry(None, x.shape, w.shape, (1, 1), (1, 1), (1, 1), 1, False, 1)
    plain.tiled = None
    want = np.empty_like(w)
    plain.filter_grad(other, y, want)
    np.testing.assert_allclose(dw, want, rtol=1e-5, atol=1e-5)
    for args in [((2, 4, 6, 6), (4, 2, 3, 3), 2, False), ((2, 6, 6, 3), (4, 3, 3, 3), 1, True),
                 ((2, 3, 6, 6), (4, 3, 1, 1), 1, False)]:
        x_shape, w_shape, group, channel_last = args
        assert conv_ops.ConvGeometry(None, x_shape, w_shape, (0, 0), (1, 1), (1, 1), group, channel_last,
                                     1).tiled is None
    monkeypatch.setenv("NNABLA_JIT_TILED_CONV", "0")
    assert conv_ops.ConvGeometry(None, x.shape, w.shape, (1, 1), (1, 1), (1, 1), 1, False, 1).tiled is None


# ------------------------------------------------------------------------------ Deconvolution
@given(conv_cases(transposed=True))
def test_deconvolution(case):
    a = case["args"]
    check_function(lambda x, w, b=None: F.deconvolution(x, w, b, 1, **a), _inputs(case),
                   lambda x, w, b=None: deconv_ref(x, w, b, 1, **a))


def test_deconvolution_forward_larger():
    rng = np.random.RandomState(5)
    x, w, b = rng.randn(3, 4, 5, 6).astype(np.float32), rng.randn(4, 3, 3, 2).astype(np.float32), rng.randn(6)
    args = dict(pad=(1, 0), stride=(2, 3), dilation=(1, 2), group=2, channel_last=False, output_padding=(1, 2))
    check_forward(lambda x, w, b: F.deconvolution(x, w, b, 1, **args), [x, w, b],
                  lambda x, w, b: deconv_ref(x, w, b, 1, **args), atol=1e-4, ctx=nn.Context())


# ------------------------------------------------------------------------------ depthwise
@st.composite
def depthwise_cases(draw, transposed=False):
    D = draw(st.integers(1, 2))
    C = draw(st.integers(1, 2))
    factor = draw(st.integers(1, 2))          # multiplier, or divisor for the transposed op
    kernel = tuple(draw(st.integers(1, 2)) for _ in range(D))
    stride = tuple(draw(st.integers(1, 2)) for _ in range(D))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(D))
    pad = tuple(draw(st.integers(0, 1)) for _ in range(D))
    spatial = tuple(d * (k - 1) + 1 + draw(st.integers(0, 2)) for k, d in zip(kernel, dilation))
    if transposed:   # keep the output non-empty
        pad = tuple(min(p, (s * (n - 1) + d * (k - 1)) // 2)
                    for p, s, n, d, k in zip(pad, stride, spatial, dilation, kernel))
    channels = C * factor if transposed else C
    w_rows = C * factor
    b_size = C if transposed else C * factor
    return dict(x=_array(draw, (1, channels) + spatial), w=_array(draw, (w_rows,) + kernel),
                b=_array(draw, (b_size,)), factor=factor, args=(pad, stride, dilation))


@given(depthwise_cases())
def test_depthwise_convolution(case):
    pad, stride, dilation = case["args"]
    m = case["factor"]
    check_function(lambda x, w, b: F.depthwise_convolution(x, w, b, 1, pad, stride, dilation, m),
                   [case["x"], case["w"], case["b"]],
                   lambda x, w, b: depthwise_conv_ref(x, w, b, pad, stride, dilation))


@given(depthwise_cases(transposed=True))
def test_depthwise_deconvolution(case):
    pad, stride, dilation = case["args"]
    d = case["factor"]
    check_function(lambda x, w, b: F.depthwise_deconvolution(x, w, b, 1, pad, stride, dilation, d),
                   [case["x"], case["w"], case["b"]],
                   lambda x, w, b: depthwise_deconv_ref(x, w, b, pad, stride, dilation, d))


# ------------------------------------------------------------------------------ errors
def _v(*shape):
    return nn.Variable(shape)


@pytest.mark.parametrize("build, message", [
    (lambda: F.convolution(_v(2, 3, 2, 2), _v(4, 3, 3, 3)), "larger than the padded input"),
    (lambda: F.convolution(_v(2, 3, 5, 5), _v(4, 3, 3, 3), stride=(0, 1)), "stride"),
    (lambda: F.convolution(_v(2, 3, 5, 5), _v(4, 3, 3, 3), dilation=(1, 0)), "dilation"),
    (lambda: F.convolution(_v(2, 3, 5, 5), _v(4, 3, 3, 3), pad=(-1, 0)), "pad"),
    (lambda: F.convolution(_v(2, 3, 5, 5), _v(4, 3, 3, 3), pad=(1,)), "pad"),
    (lambda: F.convolution(_v(2, 3, 5, 5), _v(4, 1, 3, 3), group=2), "divisible by group 2"),
    (lambda: F.convolution(_v(2, 4, 5, 5), _v(3, 2, 3, 3), group=2), "divisible by group 2"),
    (lambda: F.convolution(_v(2, 3, 5, 5), _v(4, 2, 3, 3)), r"\(4, 2, 3, 3\).*\(2, 3, 5, 5\)"),
    (lambda: F.convolution(_v(2, 3, 5, 5), _v(4, 3, 3)), r"weight of shape \(4, 3, 3\)"),
    (lambda: F.convolution(_v(2, 3, 5, 5), _v(4, 3, 3, 3), _v(3)), r"bias of shape \(3,\)"),
    (lambda: F.convolution(_v(2, 3, 5, 5), _v(4, 3, 0, 3)), "empty dimension"),
    (lambda: F.convolution(_v(2, 3), _v(4, 3)), "spatial"),
    (lambda: F.convolution(_v(2, 3, 0, 4), _v(4, 3, 1, 1), pad=(1, 1)), "must not be empty"),
    (lambda: F.deconvolution(_v(2, 4, 5, 5), _v(3, 3, 3, 3)), r"\(3, 3, 3, 3\).*\(2, 4, 5, 5\)"),
    (lambda: F.deconvolution(_v(2, 4, 5, 5), _v(4, 3, 3, 3), stride=(2, 2), output_padding=(2, 0)),
     "output_padding"),
    (lambda: F.deconvolution(_v(2, 3, 5, 5), _v(3, 3, 3, 3), group=2), "divisible by group 2"),
    (lambda: F.deconvolution(_v(1, 1, 1), _v(1, 1, 1), pad=(1,)), "no output"),
    (lambda: F.depthwise_convolution(_v(2, 3, 5, 5), _v(3, 3, 3), multiplier=2), r"\(3, 3, 3\).*multiplier 2"),
    (lambda: F.depthwise_deconvolution(_v(2, 3, 5, 5), _v(3, 3, 3), divisor=2), "divisible by divisor 2"),
])
def test_convolution_errors(build, message):
    with pytest.raises(ValueError, match=message) as e:
        build()
    assert str(e.value).split(":")[0] in ("Convolution", "Deconvolution", "DepthwiseConvolution",
                                          "DepthwiseDeconvolution")


# ------------------------------------------------------------------------------ deformable
def _bilinear(img, y, x):
    H, W = img.shape
    if y <= -1 or y >= H or x <= -1 or x >= W:
        return 0.0
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    v = 0.0
    for cy, fy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for cx, fx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= cy < H and 0 <= cx < W:
                v += fy * fx * img[cy, cx]
    return v


def deformable_ref(x, w, offset, mask=None, b=None, pad=(0, 0), stride=(1, 1), dilation=(1, 1), group=1, dg=1):
    """Sample every tap at its offset position (offsets of output (oh, ow) at (oh*sh, ow*sw)),
    then an ordinary grouped product with W."""
    N, C, H, W = x.shape
    M, Cg, KH, KW = w.shape
    K = KH * KW
    OH = (H + 2 * pad[0] - dilation[0] * (KH - 1) - 1) // stride[0] + 1
    OW = (W + 2 * pad[1] - dilation[1] * (KW - 1) - 1) // stride[1] + 1
    cols = np.zeros((N, C, K, OH, OW))
    for n, c, k, oh, ow in np.ndindex(N, C, K, OH, OW):
        g = c // (C // dg)
        ph, pw = oh * stride[0], ow * stride[1]
        yy = ph - pad[0] + (k // KW) * dilation[0] + offset[n, g * 2 * K + 2 * k, ph, pw]
        xx = pw - pad[1] + (k % KW) * dilation[1] + offset[n, g * 2 * K + 2 * k + 1, ph, pw]
        v = _bilinear(x[n, c], yy, xx)
        cols[n, c, k, oh, ow] = v * (mask[n, g * K + k, ph, pw] if mask is not None else 1)
    Mg = M // group
    y = np.zeros((N, M, OH, OW))
    for gi in range(group):
        wg = w[gi * Mg:(gi + 1) * Mg].reshape(Mg, Cg * K)
        y[:, gi * Mg:(gi + 1) * Mg] = np.einsum("mk,nkhw->nmhw", wg, cols[:, gi * Cg:(gi + 1) * Cg].reshape(
            N, Cg * K, OH, OW))
    return y + (b.reshape(1, -1, 1, 1) if b is not None else 0)


@given(st.sampled_from([
    # (x shape, M, kernel, pad, stride, dilation, group, deformable_group, mask)
    ((1, 2, 4, 4), 2, (3, 3), (1, 1), (1, 1), (1, 1), 2, 2, True),
    ((1, 2, 4, 5), 1, (2, 2), (0, 0), (2, 1), (1, 1), 1, 1, False),
    ((2, 1, 4, 3), 2, (2, 1), (1, 0), (2, 1), (2, 1), 1, 1, True),
]), st.integers(0, 2 ** 31 - 1))
def test_deformable_convolution(config, seed):
    shape, M, kernel, pad, stride, dilation, group, dg, with_mask = config
    rng = np.random.RandomState(seed)
    K = kernel[0] * kernel[1]
    x = rng.uniform(-1, 1, shape)
    w = rng.uniform(-1, 1, (M, shape[1] // group) + kernel)
    # offsets away from integers: the bilinear weights have kinks there
    offset = rng.randint(-1, 2, (shape[0], 2 * K * dg) + shape[2:]) + rng.uniform(0.1, 0.9, (shape[0], 2 * K * dg)
                                                                                  + shape[2:])
    mask = rng.uniform(0, 1, (shape[0], K * dg) + shape[2:])
    b = rng.uniform(-1, 1, M)
    args = (1, pad, stride, dilation, group, dg)
    if with_mask:
        check_function(lambda x, w, o, m, b: F.deformable_convolution(x, w, o, m, b, *args), [x, w, offset, mask, b],
                       lambda x, w, o, m, b: deformable_ref(x, w, o, m, b, pad, stride, dilation, group, dg),
                       grad_rule=False, double_backward=False)
    else:
        check_function(lambda x, w, o: F.deformable_convolution(x, w, o, None, None, *args), [x, w, offset],
                       lambda x, w, o: deformable_ref(x, w, o, None, None, pad, stride, dilation, group, dg),
                       grad_rule=False, double_backward=False)


def test_deformable_convolution_zero_offsets_is_convolution():
    rng = np.random.RandomState(6)
    x, w, b = rng.randn(2, 4, 6, 5), rng.randn(4, 2, 3, 3), rng.randn(4)
    offset = np.zeros((2, 2 * 9 * 2, 6, 5))
    args = dict(pad=(1, 1), stride=(1, 1), dilation=(1, 1), group=2)
    check_forward(lambda x, w, o, b: F.deformable_convolution(x, w, o, None, b, 1, deformable_group=2, **args),
                  [x, w, offset, b], lambda x, w, o, b: conv_ref(x, w, b, 1, **args))


# ------------------------------------------------------------------------------ adaptive separable
def adaptive_separable_ref(x, kv, kh):
    Ho, Wo = kv.shape[2:]
    y = np.zeros(x.shape[:2] + (Ho, Wo))
    for i in range(kv.shape[1]):
        for j in range(kh.shape[1]):
            y += x[:, :, i:i + Ho, j:j + Wo] * kv[:, None, i] * kh[:, None, j]
    return y


@given(st.sampled_from([((1, 2, 4, 4), 2, 3), ((2, 1, 3, 4), 1, 2), ((1, 1, 5, 3), 3, 1)]),
       st.integers(0, 2 ** 31 - 1))
def test_adaptive_separable_convolution(config, seed):
    shape, kv_size, kh_size = config
    rng = np.random.RandomState(seed)
    out = (shape[2] - kv_size + 1, shape[3] - kh_size + 1)
    inputs = [rng.uniform(-1, 1, shape), rng.uniform(-1, 1, (shape[0], kv_size) + out),
              rng.uniform(-1, 1, (shape[0], kh_size) + out)]
    check_function(F.adaptive_separable_convolution, inputs, adaptive_separable_ref, grad_rule=False,
                   double_backward=False)


# ------------------------------------------------------------------------------ patch correlation
def patch_correlation_ref(x1, x2, patch, shift, patch_step, shift_step, padding):
    """NCHW inputs -> (N, Cy, Cx, Ho, Wo)."""
    t, b, l, r = padding
    p1 = np.pad(x1, [(0, 0), (0, 0), (t, b), (l, r)])
    p2 = np.pad(x2, [(0, 0), (0, 0), (t, b), (l, r)])
    Hp, Wp = p1.shape[2:]
    Ho, Wo = (Hp - patch[0]) // patch_step[0] + 1, (Wp - patch[1]) // patch_step[1] + 1
    Cy, Cx = 2 * shift[0] // shift_step[0] + 1, 2 * shift[1] // shift_step[1] + 1
    y = np.zeros((x1.shape[0], Cy, Cx, Ho, Wo))
    for iy, ix, ho, wo, kh, kw in np.ndindex(Cy, Cx, Ho, Wo, patch[0], patch[1]):
        h1, w1 = ho * patch_step[0] + kh, wo * patch_step[1] + kw
        h2, w2 = h1 - shift[0] + iy * shift_step[0], w1 - shift[1] + ix * shift_step[1]
        if 0 <= h2 < Hp and 0 <= w2 < Wp:
            y[:, iy, ix, ho, wo] += (p1[:, :, h1, w1] * p2[:, :, h2, w2]).sum(1)
    return y


@given(st.sampled_from([((2, 2), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)), ((2, 1), (1, 2), (2, 1), (1, 2), (1, 0, 0, 1)),
                        ((1, 2), (0, 1), (1, 2), (1, 1), (0, 1, 1, 0))]),
       st.booleans(), st.integers(0, 2 ** 31 - 1))
def test_patch_correlation(args, channel_last, seed):
    rng = np.random.RandomState(seed)
    x1, x2 = rng.uniform(-1, 1, (1, 2, 3, 4)), rng.uniform(-1, 1, (1, 2, 3, 4))

    def fn(a, b):
        if channel_last:
            a, b = F.transpose(a, (0, 2, 3, 1)), F.transpose(b, (0, 2, 3, 1))
            return F.transpose(F.patch_correlation(a, b, *args, channel_last=True), (0, 3, 4, 1, 2))
        return F.patch_correlation(a, b, *args)
    check_function(fn, [x1, x2], lambda a, b: patch_correlation_ref(a, b, *args), grad_rule=False,
                   double_backward=False)


def test_patch_correlation_wrapper_arguments():
    """nnabla's documented examples: int arguments expand, padding (top, bottom, left, right)."""
    x = nn.Variable.from_numpy_array(np.ones((1, 2, 3, 4)))
    cases = [(dict(patch=(3, 4)), [24.0]), (dict(patch=(2, 3), patch_step=(2, 1)), [12.0, 12.0]),
             (dict(patch=(3, 1), shift=(0, 1), shift_step=(1, 2)), [0, 6, 6, 6, 6, 6, 6, 0]),
             (dict(patch=(3, 4), padding=(0, 1, 4, 4)), [0, 6, 12, 18, 24, 18, 12, 6, 0, 0, 4, 8, 12, 16, 12, 8, 4, 0])]
    for kwargs, want in cases:
        y = F.patch_correlation(x, x, **kwargs)
        y.forward()
        np.testing.assert_allclose(y.d.reshape(-1), want)
    assert F.patch_correlation(nn.Variable((1, 8, 12, 10)), nn.Variable((1, 8, 12, 10)), shift=2,
                               shift_step=2).shape == (1, 3, 3, 12, 10)
    with pytest.raises(ValueError, match="equal shape"):
        F.patch_correlation(x, nn.Variable((1, 2, 3, 5)))


# ------------------------------------------------------------------------------ fused
def _fused_ref(x, w, b, beta, gamma, z, pad, nonlinearity, alpha=None, eps=1e-5, pad_mode="constant", value=0.0):
    D = x.ndim - 2
    if pad_mode != "constant" or value != 0:
        widths = [(0, 0), (0, 0)] + [(p, p) for p in pad]
        x = np.pad(x, widths, {"reflect": "reflect", "repeat": "edge"}[pad_mode]) if pad_mode != "constant" else \
            np.pad(x, widths, constant_values=value)
        pad = (0,) * D
    h = conv_ref(x, w, b, 1, pad)
    if beta is not None:
        axes = (0,) + tuple(range(2, h.ndim))
        h = (h - h.mean(axes, keepdims=True)) / np.sqrt(h.var(axes, keepdims=True) + eps) * gamma + beta
    if z is not None:
        h = h + z
    return {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh, "identity": lambda v: v,
            "elu": lambda v: np.where(v >= 0, v, alpha * (np.exp(v) - 1)),
            "leaky_relu": lambda v: np.where(v > 0, v, alpha * v)}[nonlinearity](h)


def test_fused_convolution_bias_z_nonlinearity():
    rng = np.random.RandomState(7)
    x, w, b, z = rng.randn(1, 2, 3, 3), rng.randn(2, 2, 2, 2), rng.randn(2), rng.randn(1, 2, 4, 4)
    for nl, nl_args in [("elu", [0.5]), ("tanh", []), ("leaky_relu", [0.2])]:
        check_function(lambda x, w, b, z: F.fused_convolution(x, w, b, z=z, pad=(1, 1), nonlinearity=nl,
                                                              nonlinearity_args=nl_args),
                       [x, w, b, z], lambda x, w, b, z: _fused_ref(x, w, b, None, None, z, (1, 1), nl, *nl_args))


@pytest.mark.parametrize("pad_mode, value", [("reflect", 0.0), ("repeat", 0.0), ("constant", 1.5)])
def test_fused_convolution_pad_modes(pad_mode, value):
    rng = np.random.RandomState(8)
    x, w = rng.randn(1, 1, 3, 4), rng.randn(2, 1, 2, 2)
    check_function(lambda x, w: F.fused_convolution(x, w, pad=(1, 2), nonlinearity="identity", pad_mode=pad_mode,
                                                    constant_value=value),
                   [x, w], lambda x, w: _fused_ref(x, w, None, None, None, None, (1, 2), "identity",
                                                   pad_mode=pad_mode, value=value), double_backward=False)


def test_fused_convolution_batch_normalization():
    """With beta, gamma, mean and variance: batch statistics, and the running ones updated."""
    rng = np.random.RandomState(9)
    x, w, z = rng.randn(2, 2, 3, 3), rng.randn(2, 2, 2, 2), rng.randn(2, 2, 4, 4)
    beta, gamma = rng.randn(1, 2, 1, 1), rng.randn(1, 2, 1, 1)
    mean = nn.Variable.from_numpy_array(np.zeros((1, 2, 1, 1)))
    var = nn.Variable.from_numpy_array(np.ones((1, 2, 1, 1)))

    def fused(x, w, beta, gamma, z):
        return F.fused_convolution(x, w, None, beta, gamma, mean, var, z, pad=(1, 1), nonlinearity="identity")
    check_function(fused, [x, w, beta, gamma, z],
                   lambda x, w, beta, gamma, z: _fused_ref(x, w, None, beta, gamma, z, (1, 1), "identity"),
                   atol=1e-4, double_backward=False)
    with nn.context_scope(nn.Context(["cpu:double"])):
        mean.d, var.d = 0, 1
        y = fused(*[nn.Variable.from_numpy_array(a) for a in (x, w, beta, gamma, z)])
        y.forward()
    h = conv_ref(x, w, None, 1, (1, 1))
    np.testing.assert_allclose(mean.d, 0.1 * h.mean((0, 2, 3), keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(var.d, 0.9 + 0.1 * h.var((0, 2, 3), ddof=1, keepdims=True), rtol=1e-6)


# ------------------------------------------------------------------------------ no grad rule
@pytest.mark.parametrize("build", [
    lambda v: F.deformable_convolution(v(1, 1, 3, 3), v(1, 1, 1, 1), v(1, 2, 3, 3)),
    lambda v: F.adaptive_separable_convolution(v(1, 1, 3, 3), v(1, 2, 2, 2), v(1, 2, 2, 2)),
    lambda v: F.patch_correlation(v(1, 1, 3, 3), v(1, 1, 3, 3)),
])
def test_no_grad_rule_as_nnabla(build):
    """nnabla has backward but no nn.grad for these: nn.grad says so."""
    leaves = []

    def v(*shape):
        leaves.append(nn.Variable.from_numpy_array(np.random.randn(*shape), need_grad=True))
        return leaves[-1]
    y = build(v)
    y.forward()
    y.backward()   # the backward kernels exist
    with pytest.raises(ValueError, match="no grad rule"):
        nn.grad([F.sum(y)], leaves[:1])


def test_parametric_deformable_convolution():
    import nnabla_jit.parametric_functions as PF
    x = nn.Variable((2, 4, 6, 6))
    y = PF.deformable_convolution(x, 4, (3, 3), nn.Variable((2, 36, 6, 6)), nn.Variable((2, 18, 6, 6)), pad=(1, 1),
                                  group=2, deformable_group=2, name="dc")
    params = nn.get_parameters()
    assert y.shape == (2, 4, 6, 6)
    assert {k: v.shape for k, v in params.items()} == {"dc/deformable_conv/W": (4, 2, 3, 3),
                                                       "dc/deformable_conv/b": (4,)}
    assert np.all(params["dc/deformable_conv/b"].d == 0) and np.abs(params["dc/deformable_conv/W"].d).max() > 0


@pytest.mark.parametrize("build, message", [
    (lambda: F.deformable_convolution(_v(1, 2, 4, 4), _v(2, 2, 3, 3), _v(1, 9, 4, 4)), r"offset of shape"),
    (lambda: F.deformable_convolution(_v(1, 2, 4, 4), _v(2, 2, 3, 3), _v(1, 18, 4, 4), _v(1, 8, 4, 4), pad=(1, 1)),
     "mask of shape"),
    (lambda: F.deformable_convolution(_v(1, 3, 4, 4), _v(2, 3, 1, 1), _v(1, 4, 4, 4), deformable_group=2),
     "deformable_group"),
    (lambda: F.deformable_convolution(_v(1, 2, 4, 4), _v(2, 2, 1, 1), _v(1, 2, 4, 4), pad=(1, 1)),
     "without an offset"),
    (lambda: F.deformable_convolution(_v(1, 2, 4), _v(2, 2, 1), _v(1, 2, 4)), "2-d"),
    (lambda: F.adaptive_separable_convolution(_v(1, 2, 4, 4), _v(1, 2, 3, 3), _v(1, 2, 3, 2)),
     "horizontal_kernel"),
    (lambda: F.fused_convolution(_v(1, 2, 4, 4), _v(2, 2, 3, 3), beta=_v(1, 2, 1, 1)), "all of beta"),
    (lambda: F.fused_convolution(_v(1, 2, 4, 4), _v(2, 2, 3, 3), nonlinearity="elu"), "nonlinearity_args"),
    (lambda: F.fused_convolution(_v(1, 2, 4, 4), _v(2, 3, 3, 3)), r"FusedConvolution: Convolution: weight"),
])
def test_extra_convolution_errors(build, message):
    with pytest.raises(ValueError, match=message):
        build()
