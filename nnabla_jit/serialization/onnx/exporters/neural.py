"""Affine, convolutions and poolings.

ONNX's Conv / ConvTranspose / pools take (N, C, *spatial): inputs with other leading dims are
reshaped to it and back, channel-last ones transposed (their filters too). nnabla's
``ignore_border=False`` pools are ONNX pools with the end padding that gives nnabla's output
count; average pools whose windows then differ from ONNX's are divided by nnabla's own window
sizes.
"""
import numpy as np

from ....ops.pooling_geometry import window_extents
from ....composite_functions import fused_convolution_graph
from ..builder import Unsupported
from .table import exports


def _prod(shape):
    return int(np.prod(shape, dtype=np.int64))


# ------------------------------------------------------------------------------ affine
def _affine(g, n, weight, scale=None):
    """x (flattened from base_axis) @ weight (flattened after its first axis), times a
    per-output ``scale``, plus the bias."""
    base = n.args["base_axis"] % n.ndim
    x_shape, w_shape = n.in_shapes[0], n.shape("weight")
    rows, inner, outer = _prod(x_shape[:base]), w_shape[0], _prod(w_shape[1:])
    x = n.x if len(x_shape) == 2 and base == 1 else g.reshape(n.x, [rows, inner])
    w = weight if len(w_shape) == 2 else g.reshape(weight, [inner, outer])
    bias = n.input("bias")
    bias = None if bias is None else g.reshape(bias, [outer])
    if scale is None:
        # Gemm's C is optional from opset 11 on.
        y = g.op("Gemm", [x, w, bias if bias is not None or g.opset >= 11 else g.scalar(0.0)])
    else:
        y = g.op("Mul", [g.op("MatMul", [x, w]), g.reshape(scale, [outer])])
        y = y if bias is None else g.op("Add", [y, bias])
    return y if n.out_shapes[0] == (rows, outer) else g.reshape(y, n.out_shapes[0])


def binarized(g, n):
    """sign(weight), 0 mapped to quantize_zero_to, as the binary layers compute it."""
    w = n.input("weight")
    zero = g.op("Equal", [w, g.scalar(0.0)])
    return g.where(zero, g.scalar(n.args["quantize_zero_to"]), g.op("Sign", [w]))


def _mean_abs(g, n, axes):
    """Mean |weight| over ``axes`` (the binary-weight layers' alpha)."""
    return g.reduce("ReduceMean", g.op("Abs", [n.input("weight")]), axes, True)


@exports("Affine")
def affine(g, n):
    return _affine(g, n, n.input("weight"))


@exports("BinaryConnectAffine")
def binary_connect_affine(g, n):
    return _affine(g, n, binarized(g, n))


@exports("BinaryWeightAffine")
def binary_weight_affine(g, n):
    return _affine(g, n, binarized(g, n), scale=_mean_abs(g, n, [0]))


# ------------------------------------------------------------------------------ convolution
def _channel_first(g, x, shape, base, channel_last):
    """x as (N, C, *spatial) and that shape: channels moved ahead of the spatial axes, the
    leading axes merged."""
    lead = list(shape[:base])
    if channel_last:
        perm = list(range(base)) + [len(shape) - 1] + list(range(base, len(shape) - 1))
        x = g.transpose(x, perm)
        shape = [shape[p] for p in perm]
    if len(lead) != 1:
        x = g.reshape(x, [_prod(lead)] + list(shape[base:]))
    return x


def _restore(g, y, out_shape, base, channel_last):
    """The (N, C, *spatial) result back in the node's layout ``out_shape``."""
    lead = list(out_shape[:base])
    if channel_last:
        first = lead + [out_shape[-1]] + list(out_shape[base:-1])
    else:
        first = list(out_shape)
    if len(lead) != 1:
        y = g.reshape(y, first)
    if channel_last:
        nd = len(first)
        y = g.transpose(y, list(range(base)) + list(range(base + 1, nd)) + [base])
    return y


def _filter_channel_first(g, w, spatial, channel_last):
    """(M, *kernel, C) filters -> (M, C, *kernel)."""
    if not channel_last:
        return w
    return g.transpose(w, [0, spatial + 1] + list(range(1, spatial + 1)))


def conv(g, n, op_type, weight, group, channel_last=False, scale=None, **attrs):
    """Conv / ConvTranspose of the node's x with ``weight`` (already ONNX-shaped but for the
    channel-last axis order), bias and the node's pad/stride/dilation."""
    args = n.args
    base = args["base_axis"] % n.ndim
    pad = [int(p) for p in args["pad"]]
    spatial = len(pad)
    x = _channel_first(g, n.x, n.in_shapes[0], base, channel_last)
    w = _filter_channel_first(g, weight, spatial, channel_last)
    if scale is not None:
        w = g.op("Mul", [w, scale])
    y = g.op(op_type, [x, w, n.input("bias")], pads=pad + pad, strides=[int(s) for s in args["stride"]],
             dilations=[int(d) for d in args["dilation"]], group=int(group), **attrs)
    return _restore(g, y, n.out_shapes[0], base, channel_last)


@exports("Convolution")
def convolution(g, n):
    return conv(g, n, "Conv", n.input("weight"), n.args["group"], n.args["channel_last"])


@exports("DepthwiseConvolution")
def depthwise_convolution(g, n):
    w_shape = n.shape("weight")
    channels = n.in_shapes[0][n.args["base_axis"] % n.ndim]
    w = g.reshape(n.input("weight"), [w_shape[0], 1] + list(w_shape[1:]))
    return conv(g, n, "Conv", w, channels)


@exports("Deconvolution")
def deconvolution(g, n):
    return conv(g, n, "ConvTranspose", n.input("weight"), n.args["group"], n.args["channel_last"],
                output_padding=[int(p) for p in n.args["output_padding"]])


@exports("DepthwiseDeconvolution")
def depthwise_deconvolution(g, n):
    w_shape = n.shape("weight")
    w = g.reshape(n.input("weight"), [w_shape[0], 1] + list(w_shape[1:]))
    return conv(g, n, "ConvTranspose", w, w_shape[0] // n.args["divisor"])


@exports("BinaryConnectConvolution")
def binary_connect_convolution(g, n):
    return conv(g, n, "Conv", binarized(g, n), n.args["group"])


@exports("BinaryWeightConvolution")
def binary_weight_convolution(g, n):
    alpha = _mean_abs(g, n, list(range(1, len(n.shape("weight")))))
    return conv(g, n, "Conv", binarized(g, n), n.args["group"], scale=alpha)


@exports("DeformableConvolution")
def deformable_convolution(g, n):
    """ONNX DeformConv (opset 19): offsets as (dy, dx) per tap and group, as nnabla's, but one
    per output position (nnabla reads them at o * stride of input-sized maps)."""
    if g.opset < 19:
        raise Unsupported("ONNX DeformConv needs opset 19 or later")
    args = n.args
    pad = [int(p) for p in args["pad"]]
    stride = [int(s) for s in args["stride"]]
    out_size = list(n.out_shapes[0][-2:])

    def per_output(name):
        if name is None:
            return None
        ends = [o * s for o, s in zip(out_size, stride)]
        return g.slice(name, [0, 0], ends, [n.ndim - 2, n.ndim - 1], stride)
    return g.op("DeformConv", [n.x, n.input("weight"), per_output(n.input("offset")), n.input("bias"),
                               per_output(n.input("mask"))],
                pads=pad + pad, strides=[int(s) for s in args["stride"]],
                dilations=[int(d) for d in args["dilation"]], group=int(args["group"]),
                offset_group=int(args["deformable_group"]))


@exports("FusedConvolution")
def fused_convolution(g, n):
    """Exported as the convolution, batch normalization, addition and nonlinearity it fuses."""
    return n.lower(lambda *inputs: fused_convolution_graph(dict(zip(n.slots, inputs)), **n.args))


# ------------------------------------------------------------------------------ pooling
def _pool_layout(g, n, kernel_dims):
    """x as (N, C, *pooled) for ONNX pools, and a function restoring the node's layout."""
    shape = list(n.in_shapes[0])
    channel_last = n.args.get("channel_last", False)
    end = len(shape) - 1 if channel_last else len(shape)
    first = end - kernel_dims
    x = n.x
    perm = None
    if channel_last:
        perm = list(range(first)) + [len(shape) - 1] + list(range(first, len(shape) - 1))
        x = g.transpose(x, perm)
        shape = [shape[p] for p in perm]
    lead = shape[:-kernel_dims]
    if len(lead) != 2:
        x = g.reshape(x, [1, _prod(lead)] + shape[-kernel_dims:])
    out = list(n.out_shapes[0])

    def restore(y):
        if perm is not None:
            permuted = [out[p] for p in perm]
            return g.transpose(g.reshape(y, permuted), list(np.argsort(perm)))
        return y if len(lead) == 2 else g.reshape(y, out)
    return x, restore


def _pooled_sizes(n, kernel_dims):
    shape = n.in_shapes[0]
    end = len(shape) - 1 if n.args.get("channel_last", False) else len(shape)
    return list(shape[end - kernel_dims:end]), list(n.out_shapes[0][end - kernel_dims:end])


def _pool_attrs(n):
    """kernel_shape, strides and pads; ignore_border=False pads the end until ONNX's output
    count is nnabla's."""
    kernel = [int(k) for k in n.args["kernel"]]
    stride = [int(s) for s in n.args["stride"]]
    pad = [int(p) for p in n.args["pad"]]
    sizes, outs = _pooled_sizes(n, len(kernel))
    if n.args["ignore_border"]:
        end = pad
    else:
        end = [max(0, (o - 1) * s + k - size - p)
               for size, o, k, s, p in zip(sizes, outs, kernel, stride, pad)]
    return dict(kernel_shape=kernel, strides=stride, pads=pad + end)


@exports("MaxPooling")
def max_pooling(g, n):
    x, restore = _pool_layout(g, n, len(n.args["kernel"]))
    return restore(g.op("MaxPool", [x], **_pool_attrs(n)))


def _window_sums(g, n, x):
    """Sum over each window (zeros in the padding), as a depthwise convolution with a kernel
    of ones: AveragePool's handling of padding differs between onnxruntime releases."""
    kernel = [int(k) for k in n.args["kernel"]]
    attrs = _pool_attrs(n)
    channels = _layout_channels(n, len(kernel))
    ones = g.const(np.ones([channels, 1] + kernel, np.float32))
    return g.op("Conv", [x, ones], group=channels, kernel_shape=kernel, strides=attrs["strides"],
                pads=attrs["pads"])


def _layout_channels(n, kernel_dims):
    """The channel count of the (N, C, spatial...) layout ``_pool_layout`` makes."""
    shape = list(n.in_shapes[0])
    if n.args.get("channel_last", False):
        shape = shape[:-kernel_dims - 1] + [shape[-1]] + shape[-kernel_dims - 1:-1]
    lead = shape[:-kernel_dims]
    return lead[1] if len(lead) == 2 else _prod(lead)


@exports("SumPooling")
def sum_pooling(g, n):
    x, restore = _pool_layout(g, n, len(n.args["kernel"]))
    return restore(_window_sums(g, n, x))


@exports("AveragePooling")
def average_pooling(g, n):
    args = n.args
    kernel = args["kernel"]
    x, restore = _pool_layout(g, n, len(kernel))
    if args["ignore_border"]:
        y = g.op("AveragePool", [x], count_include_pad=int(args["including_pad"]), **_pool_attrs(n))
        return restore(y)
    sizes, outs = _pooled_sizes(n, len(kernel))
    counts = np.ones(outs, np.float64)
    for d, (size, k, s, p, o) in enumerate(zip(sizes, kernel, args["stride"], args["pad"], outs)):
        along = window_extents(size, k, s, p, o, args["including_pad"])
        counts = counts * along.reshape([-1] + [1] * (len(outs) - d - 1))
    return restore(g.op("Div", [_window_sums(g, n, x), g.const(counts.astype(np.float32))]))


@exports("GlobalAveragePooling")
def global_average_pooling(g, n):
    if n.ndim >= 3:
        y = g.op("GlobalAveragePool", [n.x])
    else:
        y = g.reduce("ReduceMean", n.x, list(range(1, n.ndim)), True)
    shape = n.in_shapes[0]
    onnx_shape = tuple(shape[:2]) + (1,) * (len(shape) - 2)
    return y if onnx_shape == n.out_shapes[0] else g.reshape(y, n.out_shapes[0])


@exports("Unpooling")
def unpooling(g, n):
    """Each element repeated kernel times: nearest-neighbour resizing by the kernel."""
    scales = [float(o) / i for o, i in zip(n.out_shapes[0], n.in_shapes[0])]
    return g.resize(n.x, scales=scales, mode="nearest", coordinate_transformation_mode="asymmetric",
                    nearest_mode="floor")
