"""Resampling and Fourier transforms. nnabla's linear Interpolate is ONNX Resize with the
matching coordinate transformation; its nearest-neighbour modes (one of which ONNX dropped after
opset 11) are gathers at the source positions nnabla_jit computes. ONNXResize is Resize itself.
FFT / IFFT are one ONNX DFT (opset 17) per signal axis, on the same (..., 2) real/imaginary
layout. STFT and ISTFT are the framing, windowed-DFT products and overlap-add nnabla_jit's
``StftGeometry`` defines, written as Gather / MatMul / ScatterElements."""
import numpy as np

from ....ops.signal import interpolate_taps
from ..builder import Unsupported
from ..dependencies import INT64
from .table import exports


def _scale_for(size, out_size):
    """The float32 scale whose product with ``size`` rounds down to ``out_size`` (out / in itself
    may fall just short, as 5 / 3 does)."""
    scale = np.float32(out_size / size)
    while np.floor(size * float(scale)) < out_size:   # runtimes multiply in double
        scale = np.nextafter(scale, np.float32(np.inf))
    return float(scale)


@exports("Interpolate")
def interpolate(g, n):
    args = n.args
    sizes = list(args["output_size"])
    in_shape, out_shape = n.in_shapes[0], n.out_shapes[0]
    first = n.ndim - len(sizes) - int(args["channel_last"])
    if args["mode"] == "linear":
        ctm = "align_corners" if args["align_corners"] else (
            "half_pixel" if args["half_pixel"] else "asymmetric")
        if g.opset < 11:   # Upsample / Resize-10 take scales only
            return g.resize(n.x, scales=[_scale_for(i, o) for i, o in zip(in_shape, out_shape)], mode="linear",
                            coordinate_transformation_mode=ctm)
        return g.resize(n.x, sizes=list(out_shape), mode="linear",
                        coordinate_transformation_mode=ctm)
    y = n.x
    for k, size in enumerate(sizes):
        axis = first + k
        index, _ = interpolate_taps("nearest", in_shape[axis], size, args["align_corners"],
                                    args["half_pixel"], args["half_pixel_for_nn"])
        y = g.op("Gather", [y, g.const(np.asarray(index[:, 0], np.int64), INT64)], axis=axis)
    return y


@exports("ONNXResize")
def onnx_resize(g, n):
    args = n.args
    ctm = args["coordinate_transformation_mode"]
    roi = list(args["roi"]) or [0.0] * n.ndim + [1.0] * n.ndim
    return g.resize(n.x, scales=list(args["scales"]) or None, sizes=list(args["sizes"]) or None,
                    roi=roi if ctm == "tf_crop_and_resize" else None,
                    mode=args["mode"], coordinate_transformation_mode=ctm,
                    cubic_coeff_a=float(args["cubic_coeff_a"]),
                    exclude_outside=int(args["exclude_outside"]),
                    extrapolation_value=float(args["extrapolation_value"]),
                    nearest_mode=args["nearest_mode"])


@exports("FFT", "IFFT")
def fft(g, n):
    """DFT per axis; ONNX's inverse DFT divides by n, nnabla's ``normalized`` by sqrt(n)."""
    if g.opset < 17:
        raise Unsupported("ONNX DFT needs opset 17 or later")
    shape = list(n.in_shapes[0])
    ndim = int(n.args["signal_ndim"])
    inverse = n.type == "IFFT"
    y = n.x
    unbatched = len(shape) - 1 == ndim     # ONNX's DFT wants a batch axis first: add one
    if unbatched:
        y = g.reshape(y, [1] + shape)
    first = len(shape) - ndim if unbatched else len(shape) - 1 - ndim
    for axis in range(first, first + ndim):
        if g.opset >= 20:
            y = g.op("DFT", [y, None, g.const(np.asarray(axis, np.int64), INT64)], inverse=int(inverse))
        else:
            y = g.op("DFT", [y], axis=axis, inverse=int(inverse))
    if unbatched:
        y = g.reshape(y, shape)
    if n.args["normalized"]:
        size = float(np.prod([shape[a] for a in range(len(shape) - 1 - ndim, len(shape) - 1)]))
        y = g.op("Mul", [y, g.scalar(size ** 0.5 if inverse else size ** -0.5)])
    return y


def _frame_positions(g, index, length):
    """``index`` (frames, N) with nnabla's -1 (outside the signal) moved to ``length``, one
    past the end, where a zero is appended."""
    return g.const(np.where(index < 0, length, index).astype(np.int64), INT64)


@exports("STFT")
def stft(g, n):
    """Frames of x (centre padding folded into the gather), times the windowed DFT matrix."""
    if n.args["as_istft_backward"]:
        raise Unsupported("as_istft_backward=True is not supported")
    geometry = n.op.geometry
    batch, length = n.in_shapes[0]
    signal = g.op("Concat", [n.x, g.const(np.zeros((batch, 1), np.float32))], axis=1)
    frames = g.op("Gather", [signal, _frame_positions(g, n.op.index, length)], axis=1)
    spectrum = g.op("MatMul", [frames, g.const(geometry.analysis.astype(np.float32))])
    count = n.op.index.shape[0]
    parts = g.transpose(g.reshape(spectrum, [batch, count, 2, geometry.bins]), [2, 0, 3, 1])
    return [g.squeeze(part, [0]) for part in g.split(parts, 0, [1, 1])]


@exports("ISTFT")
def istft(g, n):
    """Frames synthesised from the spectrum, overlap-added (ScatterElements with reduction,
    opset 16) and divided by the overlap-added squared window."""
    if n.args["as_stft_backward"]:
        raise Unsupported("as_stft_backward=True is not supported")
    if g.opset < 16:
        raise Unsupported("the overlap-add needs ScatterElements with reduction (opset 16)")
    geometry = n.op.geometry
    batch, _, count = n.in_shapes[0]
    length = n.out_shapes[0][1]
    spectrum = g.op("Concat", [g.transpose(y, [0, 2, 1]) for y in n.inputs], axis=2)
    frames = g.op("MatMul", [spectrum, g.const(geometry.synthesis.astype(np.float32))])
    positions = np.where(n.op.index < 0, length, n.op.index).reshape(1, -1)
    added = g.op("ScatterElements", [g.const(np.zeros((batch, length + 1), np.float32)),
                                     g.const(np.repeat(positions, batch, axis=0).astype(np.int64), INT64),
                                     g.reshape(frames, [batch, -1])], axis=1, reduction="add")
    signal = g.slice(added, [0], [length], [1])
    return g.op("Mul", [signal, g.const(n.op.inv_norm.astype(np.float32))])
