"""Interpolate, ONNXResize, FFT / IFFT and STFT / ISTFT against NumPy references; all are
linear, so gradients are checked numerically to second order."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import check_forward, check_function, strategies as nst


def _var(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a, np.float32), need_grad=need_grad)


def resize_axis(x, axis, index, weight):
    """sum_k weight[j, k] * x[..., index[j, k], ...] along ``axis``."""
    x = np.moveaxis(x, axis, -1)
    y = (x[..., index] * weight).sum(-1)
    return np.moveaxis(y, -1, axis)


# ------------------------------------------------------------------------------ Interpolate
def interpolate_source(mode, n_in, n_out, align_corners, half_pixel, half_pixel_for_nn):
    """(index, weight) per output position, from nnabla's documented coordinate table."""
    j = np.arange(n_out, dtype=np.float64)
    if mode == "nearest" and half_pixel_for_nn:
        src = (j + 0.5) * n_in / n_out
        return np.minimum(np.floor(src), n_in - 1).astype(int)[:, None], np.ones((n_out, 1))
    if align_corners:
        src = j * (n_in - 1) / (n_out - 1) if n_out > 1 else 0 * j
    elif half_pixel:
        src = (j + 0.5) * n_in / n_out - 0.5 if n_out > 1 else 0 * j
    else:
        src = j * n_in / n_out
    src = np.clip(src, 0, n_in - 1)
    low = np.floor(src).astype(int)
    if mode == "nearest":
        return low[:, None], np.ones((n_out, 1))
    high = np.minimum(low + 1, n_in - 1)
    frac = src - low
    return np.stack([low, high], 1), np.stack([1 - frac, frac], 1)


def interpolate_ref(x, output_size, mode, align_corners=True, half_pixel=False,
                    half_pixel_for_nn=False, channel_last=False):
    nd = len(output_size)
    first = x.ndim - nd - int(channel_last)
    for k, n_out in enumerate(output_size):
        axis = first + k
        x = resize_axis(x, axis, *interpolate_source(mode, x.shape[axis], n_out, align_corners,
                                                      half_pixel, half_pixel_for_nn))
    return x


COORDINATES = [dict(), dict(align_corners=True), dict(half_pixel=True),
               dict(half_pixel_for_nn=True)]


@given(st.integers(1, 3), st.sampled_from(["linear", "nearest"]), st.sampled_from(COORDINATES),
       st.data())
def test_interpolate_forward(nd, mode, coords, data):
    shape = data.draw(nst.shapes(nd + 1, nd + 2, 1, 5))
    x = np.random.RandomState(len(shape)).randn(*shape)
    size = tuple(data.draw(st.lists(st.integers(1, 7), min_size=nd, max_size=nd)))
    kw = {"align_corners": False, **coords}
    check_forward(lambda v: F.interpolate(v, output_size=size, mode=mode, **kw), [x],
                  lambda a: interpolate_ref(a, size, mode, **kw))


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("coords", COORDINATES)
def test_interpolate_gradients(mode, coords):
    x = np.random.RandomState(0).randn(1, 2, 3, 4)
    kw = {"align_corners": False, **coords}
    check_function(lambda v: F.interpolate(v, output_size=(4, 3), mode=mode, **kw), [x],
                   lambda a: interpolate_ref(a, (4, 3), mode, **kw))


def test_interpolate_channel_last_and_scale():
    x = np.random.RandomState(1).randn(2, 3, 4, 2)
    check_function(lambda v: F.interpolate(v, scale=(1.5, 0.6), mode="linear", half_pixel=True,
                                           channel_last=True), [x],
                   lambda a: interpolate_ref(a, (4, 2), "linear", False, True, channel_last=True))
    y = F.interpolate(_var(np.ones((1, 1, 4, 5))), scale=(2, 2))
    assert y.shape == (1, 1, 8, 10)


def test_interpolate_errors():
    x = _var(np.ones((1, 2, 4, 4)))
    with pytest.raises(ValueError, match="either scale or output_size"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="Interpolate.*align_corners=True and half_pixel=True"):
        F.interpolate(x, output_size=(2, 2), align_corners=True, half_pixel=True)
    with pytest.raises(ValueError, match="Interpolate.*1, 2 or 3 entries"):
        F.interpolate(x, output_size=(1, 2, 2, 2))
    with pytest.raises(ValueError, match="Interpolate.*has only 2"):
        F.interpolate(_var(np.ones((3, 4))), output_size=(1, 2, 2))
    with pytest.raises(ValueError, match="Interpolate.*negative"):
        F.interpolate(x, output_size=(2, -1))


# ------------------------------------------------------------------------------ ONNXResize
def onnx_source(mode, ctm, n_in, n_out, scale, start, end, nearest_mode, cubic_a, exclude):
    """ONNX Resize (opset 13) coordinate transform and taps of one axis, and the rows that
    tf_crop_and_resize extrapolates."""
    j = np.arange(n_out, dtype=np.float64)
    if ctm == "half_pixel":
        src = (j + 0.5) / scale - 0.5
    elif ctm == "pytorch_half_pixel":
        src = (j + 0.5) / scale - 0.5 if n_out > 1 else 0 * j
    elif ctm == "align_corners":
        src = j * (n_in - 1) / (n_out - 1) if n_out > 1 else 0 * j
    elif ctm == "asymmetric":
        src = j / scale
    else:
        src = (start * (n_in - 1) + j * (end - start) * (n_in - 1) / (n_out - 1) if n_out > 1
               else 0 * j + 0.5 * (start + end) * (n_in - 1))
    outside = (src < 0) | (src > n_in - 1) if ctm == "tf_crop_and_resize" else np.zeros(n_out, bool)
    if mode == "nearest":
        rounding = {"round_prefer_floor": lambda s: np.ceil(s - 0.5),
                    "round_prefer_ceil": lambda s: np.floor(s + 0.5),
                    "floor": np.floor, "ceil": np.ceil}[nearest_mode]
        return np.clip(rounding(src), 0, n_in - 1).astype(int)[:, None], np.ones((n_out, 1)), outside
    if mode == "linear":
        src = np.clip(src, 0, n_in - 1)
        low = np.floor(src).astype(int)
        frac = src - low
        return np.stack([low, np.minimum(low + 1, n_in - 1)], 1), np.stack([1 - frac, frac], 1), outside
    low = np.floor(src).astype(int)
    t = np.stack([src - low + 1, src - low, low + 1 - src, low + 2 - src], 1)   # distances
    a = cubic_a
    w = np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a)
    index = low[:, None] + np.arange(-1, 3)
    if exclude:
        w = np.where((index >= 0) & (index < n_in), w, 0)
        w = w / w.sum(1, keepdims=True)
    return np.clip(index, 0, n_in - 1), w, outside


def onnx_resize_ref(x, sizes, mode, ctm, roi=None, nearest_mode="round_prefer_floor",
                    cubic_a=-0.75, exclude=0, fill=0.0, scales=None):
    nd = x.ndim
    roi = roi or (0,) * nd + (1,) * nd
    scales = scales or [o / i for o, i in zip(sizes, x.shape)]
    for axis in range(nd):
        n_in, n_out = x.shape[axis], sizes[axis]
        if n_in == n_out and ctm != "tf_crop_and_resize":
            continue
        index, weight, outside = onnx_source(mode, ctm, n_in, n_out, scales[axis], roi[axis],
                                             roi[nd + axis], nearest_mode, cubic_a, exclude)
        x = resize_axis(x, axis, index, weight)
        x = np.moveaxis(np.where(outside, fill, np.moveaxis(x, axis, -1)), -1, axis)
    return x


ONNX_MODES = [("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_floor"),
              ("nearest", "align_corners", "round_prefer_ceil"), ("nearest", "half_pixel", "ceil"),
              ("linear", "half_pixel", None), ("linear", "pytorch_half_pixel", None),
              ("linear", "align_corners", None), ("linear", "asymmetric", None),
              ("cubic", "half_pixel", None), ("cubic", "align_corners", None)]


@given(st.sampled_from(ONNX_MODES), st.integers(0, 1), st.lists(st.integers(1, 7), min_size=2,
                                                                  max_size=2))
def test_onnx_resize_forward(mode_ctm, exclude, size):
    mode, ctm, nearest = mode_ctm
    x = np.random.RandomState(sum(size)).randn(1, 2, 4, 5)
    sizes = (1, 2) + tuple(size)
    kw = dict(mode=mode, coordinate_transformation_mode=ctm,
              nearest_mode=nearest or "round_prefer_floor", exclude_outside=exclude)
    check_forward(lambda v: F.onnx_resize(v, sizes=sizes, **kw), [x],
                  lambda a: onnx_resize_ref(a, sizes, mode, ctm, None, kw["nearest_mode"],
                                            exclude=exclude))


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_onnx_resize_tf_crop_and_resize(mode):
    x = np.random.RandomState(2).randn(1, 2, 4, 5)
    roi = (0, 0, 0.1, -0.2, 1, 1, 0.8, 1.1)
    check_function(lambda v: F.onnx_resize(v, roi=roi, sizes=(1, 2, 3, 6), mode=mode,
                                           coordinate_transformation_mode="tf_crop_and_resize",
                                           extrapolation_value=-3.0), [x],
                   lambda a: onnx_resize_ref(a, (1, 2, 3, 6), mode, "tf_crop_and_resize", roi,
                                             fill=-3.0))


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_onnx_resize_scales_and_gradients(mode):
    x = np.random.RandomState(3).randn(1, 1, 3, 4)
    check_function(lambda v: F.onnx_resize(v, scales=(1, 1, 1.5, 0.75), mode=mode), [x],
                   lambda a: onnx_resize_ref(a, (1, 1, 4, 3), mode, "half_pixel",
                                             scales=(1, 1, 1.5, 0.75)))


def test_onnx_resize_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    x = np.random.RandomState(4).randn(1, 2, 5, 6).astype(np.float32)
    node = helper.make_node("Resize", ["X", "roi", "scales", "sizes"], ["Y"], mode="cubic",
                            coordinate_transformation_mode="pytorch_half_pixel")
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor("roi", TensorProto.FLOAT, [0], []),
                     helper.make_tensor("scales", TensorProto.FLOAT, [0], []),
                     helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 2, 8, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    y = F.onnx_resize(_var(x), sizes=(1, 2, 8, 4), mode="cubic",
                      coordinate_transformation_mode="pytorch_half_pixel")
    y.forward()
    np.testing.assert_allclose(y.d, want, atol=1e-5)


def test_onnx_resize_errors():
    x = _var(np.ones((1, 1, 4, 4)))
    with pytest.raises(ValueError, match="ONNXResize.*exactly one of scales"):
        F.onnx_resize(x)
    with pytest.raises(ValueError, match="ONNXResize.*sizes"):
        F.onnx_resize(x, sizes=(2, 2))
    with pytest.raises(ValueError, match="ONNXResize.*roi"):
        F.onnx_resize(x, sizes=(1, 1, 2, 2), coordinate_transformation_mode="tf_crop_and_resize",
                      roi=(0, 1))


# ------------------------------------------------------------------------------ FFT
def fft_ref(x, signal_ndim, normalized, inverse):
    z = x[..., 0] + 1j * x[..., 1]
    axes = tuple(range(z.ndim - signal_ndim, z.ndim))
    norm = "ortho" if normalized else "backward"
    r = np.fft.ifftn(z, axes=axes, norm=norm) if inverse else np.fft.fftn(z, axes=axes, norm=norm)
    return np.stack([r.real, r.imag], -1)


@given(st.integers(1, 3), st.booleans(), st.booleans(), st.data())
def test_fft_and_ifft(signal_ndim, normalized, inverse, data):
    shape = data.draw(nst.shapes(signal_ndim, signal_ndim + 1, 1, 3)) + (2,)
    if int(np.prod(shape)) > 30:
        shape = shape[-signal_ndim - 1:]
    x = np.random.RandomState(len(shape)).randn(*shape)
    fn = F.ifft if inverse else F.fft
    check_function(lambda v: fn(v, signal_ndim, normalized), [x],
                   lambda a: fft_ref(a, signal_ndim, normalized, inverse))


def test_ifft_inverts_fft():
    x = np.random.RandomState(5).randn(2, 4, 3, 2)
    y = F.ifft(F.fft(_var(x), 2), 2)
    y.forward()
    np.testing.assert_allclose(y.d, x, atol=1e-5)


def test_fft_errors():
    with pytest.raises(ValueError, match="FFT.*signal_ndim=4"):
        F.fft(_var(np.ones((2, 2, 2, 2, 2))), 4)
    with pytest.raises(ValueError, match="IFFT.*\\(real, imag\\)"):
        F.ifft(_var(np.ones((4, 3))), 1)


# ------------------------------------------------------------------------------ STFT / ISTFT
def window_ref(kind, size, n):
    k = np.arange(size)
    w = {"hanning": 0.5 - 0.5 * np.cos(2 * np.pi * k / size),
         "hamming": 0.54 - 0.46 * np.cos(2 * np.pi * k / size),
         "rectangular": np.ones(size)}[kind]
    full = np.zeros(n)
    full[(n - size) // 2:(n - size) // 2 + size] = w
    return full


def stft_ref(x, size, stride, n, kind, center, pad_mode):
    if center:
        x = np.pad(x, ((0, 0), (n // 2, n // 2)), mode=pad_mode)
    count = (x.shape[1] - n) // stride + 1
    frames = np.stack([x[:, f * stride:f * stride + n] for f in range(count)], 1)
    spec = np.fft.rfft(frames * window_ref(kind, size, n), axis=2)
    return spec.real.transpose(0, 2, 1), spec.imag.transpose(0, 2, 1)


def istft_ref(yr, yi, size, stride, n, kind, center):
    frames = np.fft.irfft((yr + 1j * yi).transpose(0, 2, 1), n=n, axis=2) * window_ref(kind, size, n)
    length = n + stride * (frames.shape[1] - 1)
    out, norm = np.zeros((yr.shape[0], length)), np.zeros(length)
    for f in range(frames.shape[1]):
        out[:, f * stride:f * stride + n] += frames[:, f]
        norm[f * stride:f * stride + n] += window_ref(kind, size, n) ** 2
    out = out / np.where(norm > 0, norm, 1)   # zero only in the cropped centre padding
    return out[:, n // 2:length - n // 2] if center else out


STFT_CASES = [(9, 4, 2, 4, "hanning", True, "reflect"), (10, 3, 3, 4, "hamming", True, "constant"),
              (11, 4, 2, 4, "rectangular", False, "reflect"), (9, 5, 2, 5, "hanning", True, "reflect")]


@pytest.mark.parametrize("T,size,stride,n,kind,center,pad_mode", STFT_CASES)
def test_stft(T, size, stride, n, kind, center, pad_mode):
    x = np.random.RandomState(T).randn(2, T)
    check_function(lambda v: F.stft(v, size, stride, n, kind, center, pad_mode), [x],
                   lambda a: stft_ref(a, size, stride, n, kind, center, pad_mode))


@pytest.mark.parametrize("frames,size,stride,n,kind,center", [
    (4, 4, 2, 4, "hanning", True), (3, 4, 2, 4, "rectangular", False), (4, 5, 1, 5, "hamming", True)])
def test_istft(frames, size, stride, n, kind, center):
    rng = np.random.RandomState(frames)
    yr, yi = rng.randn(1, n // 2 + 1, frames), rng.randn(1, n // 2 + 1, frames)
    check_function(lambda a, b: F.istft(a, b, size, stride, n, kind, center, "constant"), [yr, yi],
                   lambda a, b: istft_ref(a, b, size, stride, n, kind, center))


def test_istft_inverts_stft():
    x = np.random.RandomState(6).randn(2, 40)
    yr, yi = F.stft(_var(x), 8, 2, 8, "hanning", True, "constant")
    y = F.istft(yr, yi, 8, 2, 8, "hanning", True, "constant")
    y.forward()
    np.testing.assert_allclose(y.d, x, atol=1e-5)


def test_stft_adjoint_modes():
    """ISTFT(as_stft_backward) is the transpose of STFT and STFT(as_istft_backward) that of
    ISTFT: <A x, y> = <x, A^T y>."""
    rng = np.random.RandomState(8)
    args = (4, 2, 4, "hanning", True, "reflect")
    x = rng.randn(1, 14)
    yr, yi = F.stft(_var(x), *args)
    nn.forward_all([yr, yi])
    dr, di = rng.randn(*yr.shape), rng.randn(*yi.shape)
    back = F.istft(_var(dr), _var(di), *args, as_stft_backward=True)
    back.forward()
    np.testing.assert_allclose((yr.d * dr).sum() + (yi.d * di).sum(), (x * back.d).sum(), rtol=1e-4)
    istft_args = args[:5] + ("constant",)
    y = F.istft(_var(dr), _var(di), *istft_args)
    y.forward()
    g = rng.randn(*y.shape)
    fr, fi = F.stft(_var(g), *istft_args, as_istft_backward=True)
    nn.forward_all([fr, fi])
    np.testing.assert_allclose((y.d * g).sum(), (fr.d * dr).sum() + (fi.d * di).sum(), rtol=1e-4)
    check_function(lambda a, b: F.istft(a, b, *args, as_stft_backward=True), [dr, di])
    check_function(lambda a: F.stft(a, *istft_args, as_istft_backward=True), [g])


def test_stft_gradient_when_frames_do_not_cover_the_signal():
    """13 samples give the frames of 12: the transpose has to know the length (nnabla's rule
    returns a gradient of the wrong shape here)."""
    x = np.random.RandomState(7).randn(1, 13)
    check_function(lambda v: F.stft(v, 4, 2, 4, "hanning", True, "reflect"), [x],
                   lambda a: stft_ref(a, 4, 2, 4, "hanning", True, "reflect"))


def test_stft_errors():
    x = _var(np.ones((1, 16)))
    with pytest.raises(ValueError, match="STFT.*window_size=9 must not exceed fft_size=8"):
        F.stft(x, 9, 2, 8)
    with pytest.raises(ValueError, match="STFT.*\\(batch, samples\\)"):
        F.stft(_var(np.ones(16)), 4, 2, 4)
    with pytest.raises(ValueError, match="STFT.*reflect padding"):
        F.stft(_var(np.ones((1, 2))), 4, 2, 4)
    y = _var(np.ones((1, 5, 4)))
    with pytest.raises(ValueError, match="ISTFT.*pad_mode must be 'constant'"):
        F.istft(y, y, 8, 2, 8)
    with pytest.raises(ValueError, match="ISTFT.*multiple of stride"):
        F.istft(y, y, 8, 3, 8, pad_mode="constant")
    with pytest.raises(ValueError, match="ISTFT.*NOLA"):
        F.istft(y, y, 4, 4, 8, center=False, pad_mode="constant")
    with pytest.raises(ValueError, match="ISTFT.*y_r"):
        F.istft(y, _var(np.ones((1, 4, 4))), 8, 2, 8, pad_mode="constant")
