"""The signal family on the device against the CPU: Interpolate / ONNXResize, FFT / IFFT (a
direct DFT there, pocketfft here) and STFT / ISTFT."""
import numpy as np
import pytest

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


CASES = [
    ("fft 1-d", lambda x: F.fft(x, 1), signed(2, 5, 2)),
    ("ifft 1-d normalized", lambda x: F.ifft(x, 1, normalized=True), signed(3, 4, 2)),
    ("fft 2-d", lambda x: F.fft(x, 2), signed(2, 3, 4, 2)),
    ("ifft 3-d", lambda x: F.ifft(x, 3), signed(2, 2, 3, 2)),
    ("gradients accumulate", lambda x: F.fft(x, 1) + F.ifft(x, 1) * 2.0, signed(2, 4, 2)),
]


@pytest.mark.parametrize("name, build, x", CASES, ids=[c[0] for c in CASES])
def test_dft(name, build, x):
    assert_same_on_cuda(build, x, rtol=1e-4, atol=1e-5)


def test_no_gradient_asked():
    assert_same_on_cuda(lambda x, w: F.fft(x, 1) * w, signed(2, 4, 2), signed(2, 4, 2),
                        no_grad=(0,), rtol=1e-4, atol=1e-5)


STFT_ARGS = dict(window_size=4, stride=2, fft_size=6)
STFT_CASES = [
    ("stft reflect-padded", lambda x: F.stft(x, **STFT_ARGS), signed(2, 9)),
    ("stft hamming, no centre",
     lambda x: F.stft(x, window_type="hamming", center=False, **STFT_ARGS),
     signed(1, 10)),
    ("stft as istft backward",
     lambda x: F.stft(x, pad_mode="constant", as_istft_backward=True, **STFT_ARGS), signed(2, 8)),
]


def spectrum(batch, frames):
    return signed(batch, STFT_ARGS["fft_size"] // 2 + 1, frames), signed(batch, 4, frames)


@pytest.mark.parametrize("name, build, x", STFT_CASES, ids=[c[0] for c in STFT_CASES])
def test_stft(name, build, x):
    """Both spectrum outputs reach the gradient (concatenated)."""
    def both(x):
        yr, yi = build(x)
        return F.concatenate(yr, yi * 0.5, axis=1)
    assert_same_on_cuda(both, x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("as_stft_backward", [False, True])
def test_istft(as_stft_backward):
    args = dict(STFT_ARGS, pad_mode="constant", as_stft_backward=as_stft_backward)
    assert_same_on_cuda(lambda yr, yi: F.istft(yr, yi, **args), *spectrum(2, 4),
                        rtol=1e-4, atol=1e-5)


def test_istft_one_part_wanted_and_accumulated():
    args = dict(STFT_ARGS, pad_mode="constant")
    assert_same_on_cuda(lambda yr, yi: F.istft(yr, yi, **args) + F.istft(yr * 2.0, yi, **args),
                        *spectrum(1, 4), no_grad=(1,), rtol=1e-4, atol=1e-5)


RESIZE_CASES = [
    ("interpolate linear 2-d", lambda x: F.interpolate(x, output_size=(3, 5)), signed(1, 2, 2, 3)),
    ("interpolate nearest half-pixel, channel-last",
     lambda x: F.interpolate(x, output_size=(4,), mode="nearest", half_pixel=True,
                             align_corners=False, channel_last=True), signed(2, 3, 2)),
    ("interpolate linear 3-d aligned",
     lambda x: F.interpolate(x, output_size=(2, 3, 2), align_corners=True), signed(1, 1, 3, 2, 2)),
    ("onnx resize cubic",
     lambda x: F.onnx_resize(x, scales=(1.0, 1.0, 2.0), mode="cubic"), signed(1, 2, 4)),
    ("onnx resize crop and resize, extrapolated",
     lambda x: F.onnx_resize(x, sizes=(1, 4, 3), roi=(0, -0.2, 0, 1, 1.3, 1), mode="linear",
                             coordinate_transformation_mode="tf_crop_and_resize",
                             extrapolation_value=0.5), signed(1, 3, 3)),
    ("identity plan, gradients accumulate",
     lambda x: (F.interpolate(x, output_size=(3,))
                + F.interpolate(F.interpolate(x, output_size=(5,)), output_size=(3,))),
     signed(2, 3)),
]


@pytest.mark.parametrize("name, build, x", RESIZE_CASES, ids=[c[0] for c in RESIZE_CASES])
def test_resize(name, build, x):
    assert_same_on_cuda(build, x, rtol=1e-4, atol=1e-5)
