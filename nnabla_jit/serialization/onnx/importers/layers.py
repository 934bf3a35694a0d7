"""ONNX layers: Gemm / MatMul (as Affine when the weight is a constant), Conv, ConvTranspose,
pools, normalizations and random generators.

Symmetric pads are nnabla's ``pad``; other pads are an explicit F.pad before the layer (-inf
for max pooling) or, for transposed convolutions, a crop after it.
"""
import numpy as np

from .... import functions as F
from ..builder import Unsupported
from .table import imports


def _prod(shape):
    return int(np.prod(shape, dtype=np.int64))


def weight(c, name, array_fn=None, need_grad=True):
    """The Variable of weight ``name``: a constant (transformed by ``array_fn``) becomes a
    parameter named after it."""
    if not c.is_const(name) or array_fn is None:
        return c.var(name)
    return c.parameter(name, array_fn(c.consts[name]), need_grad)


def reshaped(c, name, shape, need_grad=True):
    """Input ``name`` with shape ``shape`` (a constant reshaped before it is registered)."""
    if c.is_const(name):
        return weight(c, name, lambda a: a.reshape(shape), need_grad)
    return F.reshape(c.var(name), tuple(shape))


# ------------------------------------------------------------------------------ products
@imports("Gemm")
def gemm(c, node):
    a_name, b_name = node.inputs[:2]
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    trans_a, trans_b = node.attr("transA", 0), node.attr("transB", 0)
    a = c.var(a_name)
    if trans_a:
        a = F.transpose(a, (1, 0))
    c_name = node.input(2)
    n_out = c.shape(b_name)[0 if trans_b else 1]
    if c.is_const(b_name):
        w = weight(c, b_name, lambda b: (b.T if trans_b else b) * alpha)
        bias = None
        shape = c.shape(c_name) if c_name else None
        per_output = (c_name and c.is_const(c_name) and len(shape) <= 2 and all(d == 1 for d in shape[:-1])
                      and (not shape or shape[-1] in (1, n_out)))
        if per_output:
            bias = weight(c, c_name, lambda b: np.broadcast_to(b.reshape(-1) * beta, (n_out,)).copy())
            c_name = None
        y = F.affine(a, w, bias)
    else:
        y = F.batch_matmul(a, c.var(b_name), False, bool(trans_b))
        y = F.mul_scalar(y, alpha) if alpha != 1.0 else y
    if c_name:
        bias = c.var(c_name)
        y = F.add2(y, F.mul_scalar(bias, beta) if beta != 1.0 else bias)
    return y


@imports("MatMul")
def matmul(c, node):
    a_name, b_name = node.inputs
    a_shape, b_shape = c.shape(a_name), c.shape(b_name)
    if c.is_const(b_name) and len(b_shape) == 2 and len(a_shape) >= 2 and not c.is_const(a_name):
        return F.affine(c.var(a_name), c.var(b_name), base_axis=len(a_shape) - 1)
    a, b = c.var(a_name), c.var(b_name)
    if a.ndim == 1:
        a = F.reshape(a, (1,) + a.shape)
    if b.ndim == 1:
        b = F.reshape(b, b.shape + (1,))
    y = F.batch_matmul(a, b)
    batch = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    # A 1-D operand's added axis is dropped again.
    rows = tuple(a_shape[-2:-1]) if len(a_shape) >= 2 else ()
    columns = tuple(b_shape[-1:]) if len(b_shape) >= 2 else ()
    shape = batch + rows + columns
    return y if y.shape == shape else F.reshape(y, shape)


# ------------------------------------------------------------------------------ windows
def _explicit_pads(node, in_sizes, kernel, stride, dilation):
    """(begins, ends) from ``pads`` or ``auto_pad``."""
    n = len(kernel)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(in_sizes, kernel, stride, dilation):
            total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
            small = total // 2
            begins.append(small if auto == "SAME_UPPER" else total - small)
            ends.append(total - begins[-1])
        return begins, ends
    if auto == "VALID":
        return [0] * n, [0] * n
    pads = list(node.attr("pads") or [0] * (2 * n))
    return pads[:n], pads[n:]


def _window_args(c, node, x, kernel=None):
    kernel = list(kernel or node.attr("kernel_shape"))
    n = len(kernel)
    stride = list(node.attr("strides") or [1] * n)
    dilation = list(node.attr("dilations") or [1] * n)
    begins, ends = _explicit_pads(node, x.shape[-n:], kernel, stride, dilation)
    return kernel, stride, dilation, begins, ends


def _pad_explicitly(x, begins, ends, value=0.0):
    width = [0, 0] * (x.ndim - len(begins))
    for b, e in zip(begins, ends):
        width += [b, e]
    return F.pad(x, tuple(width), "constant", value)


@imports("Conv")
def conv(c, node):
    x, w = c.var(node.inputs[0]), c.var(node.inputs[1])
    kernel, stride, dilation, begins, ends = _window_args(c, node, x, w.shape[2:])
    bias = c.var(node.input(2)) if node.input(2) else None
    if begins != ends:
        x, begins = _pad_explicitly(x, begins, ends), [0] * len(begins)
    return F.convolution(x, w, bias, 1, tuple(begins), tuple(stride), tuple(dilation),
                         node.attr("group", 1))


def _input_sized(v, size, stride):
    """Per-output-position maps (N, C, OH, OW) spread to nnabla's input-sized ones: the value of
    output o at o * stride, zeros between."""
    n, channels, oh, ow = v.shape
    (sh, sw), (h, w) = stride, size
    if (sh, sw) != (1, 1):
        v = F.pad(F.reshape(v, (n, channels, oh, 1, ow, 1)), (0, sh - 1, 0, 0, 0, sw - 1))
        v = F.reshape(v, (n, channels, oh * sh, ow * sw))
    rows, cols = v.shape[2:]
    if (rows, cols) == (h, w):
        return v
    v = F.slice(v, (0, 0, 0, 0), (n, channels, min(rows, h), min(cols, w)), (1, 1, 1, 1))
    return F.pad(v, (0, max(h - rows, 0), 0, max(w - cols, 0)))


@imports("DeformConv")
def deform_conv(c, node):
    x, w = c.var(node.inputs[0]), c.var(node.inputs[1])
    kernel, stride, dilation, begins, ends = _window_args(c, node, x, w.shape[2:])
    if begins != ends:
        raise Unsupported("asymmetric pads are not supported for DeformConv")
    size = x.shape[2:]
    offset = _input_sized(c.var(node.inputs[2]), size, stride)
    mask = _input_sized(c.var(node.input(4)), size, stride) if node.input(4) else None
    bias = c.var(node.input(3)) if node.input(3) else None
    return F.deformable_convolution(x, w, offset, mask, bias, 1, tuple(begins), tuple(stride),
                                    tuple(dilation), node.attr("group", 1), node.attr("offset_group", 1))


@imports("ConvTranspose")
def conv_transpose(c, node):
    x, w = c.var(node.inputs[0]), c.var(node.inputs[1])
    n = w.ndim - 2
    kernel = list(w.shape[2:])
    stride = list(node.attr("strides") or [1] * n)
    dilation = list(node.attr("dilations") or [1] * n)
    out_pad = list(node.attr("output_padding") or [0] * n)
    auto = node.attr("auto_pad", "NOTSET")
    target = node.attr("output_shape")
    if not target and auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [i * s for i, s in zip(x.shape[2:], stride)]
    if target:
        full = [s * (i - 1) + o + (k - 1) * d + 1 for i, s, o, k, d in
                zip(x.shape[2:], stride, out_pad, kernel, dilation)]
        totals = [f - t for f, t in zip(full, target[-n:])]
        upper = auto == "SAME_UPPER"
        begins = [t // 2 if upper else t - t // 2 for t in totals]
        ends = [t - b for t, b in zip(totals, begins)]
    else:
        begins, ends = _explicit_pads(node, x.shape[2:], kernel, stride, dilation)
    bias = c.var(node.input(2)) if node.input(2) else None
    symmetric = begins == ends
    y = F.deconvolution(x, w, bias, 1, tuple(begins if symmetric else [0] * n), tuple(stride),
                        tuple(dilation), node.attr("group", 1), output_padding=tuple(out_pad))
    if symmetric:
        return y
    start = [0, 0] + begins
    stop = list(y.shape[:2]) + [s - e for s, e in zip(y.shape[2:], ends)]
    return F.slice(y, tuple(start), tuple(stop), (1,) * y.ndim)


def _ceil_ends(node, sizes, kernel, stride, begins, ends):
    """End pads for which a floor-mode pool gives ``ceil_mode``'s output count (ONNX drops a
    last window that would start in the end padding)."""
    if not node.attr("ceil_mode", 0):
        return ends
    out = []
    for n, k, s, b, e in zip(sizes, kernel, stride, begins, ends):
        count = -(-(n + b + e - k) // s) + 1
        if (count - 1) * s >= n + b:
            count -= 1
        out.append(max(e, (count - 1) * s + k - n - b))
    return out


def _window_count(node, size, k, s, b, e):
    """ONNX's number of windows along one axis (``k``: the dilated kernel extent)."""
    if not node.attr("ceil_mode", 0):
        return (size + b + e - k) // s + 1
    count = -(-(size + b + e - k) // s) + 1
    return count - 1 if (count - 1) * s >= size + b else count


def window_taps(node, x, kernel, stride, dilation, begins, ends, value=0.0):
    """The inputs of a (dilated, ceil-mode) pooling as one strided slice per kernel position,
    each of the output's shape; the reduction over them is the pooling. Returns the taps and
    the per-position count of inputs inside the declared padding (for averages)."""
    n = len(kernel)
    sizes = x.shape[-n:]
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    counts = [_window_count(node, *a) for a in zip(sizes, extents, stride, begins, ends)]
    extra = [max(0, (m - 1) * s + k - (size + b + e)) for m, s, k, size, b, e in
             zip(counts, stride, extents, sizes, begins, ends)]
    padded = _pad_explicitly(x, begins, [e + a for e, a in zip(ends, extra)], value)
    inside = np.pad(np.ones(sizes, np.float32), [(b, e) for b, e in zip(begins, ends)], constant_values=0.0)
    inside_padded = np.pad(np.ones(inside.shape, np.float32), [(0, a) for a in extra])
    inside = np.pad(inside, [(0, a) for a in extra])
    taps, real, declared = [], [], []
    lead = x.ndim - n
    for offset in np.ndindex(*kernel):
        starts = [o * d for o, d in zip(offset, dilation)]
        stops = [b + (m - 1) * s + 1 for b, m, s in zip(starts, counts, stride)]
        taps.append(F.slice(padded, (0,) * lead + tuple(starts), tuple(padded.shape[:lead]) + tuple(stops),
                            (1,) * lead + tuple(stride)))
        at = tuple(slice(b, e, s) for b, e, s in zip(starts, stops, stride))
        real.append(inside[at])
        declared.append(inside_padded[at])
    return taps, np.sum(real, axis=0), np.sum(declared, axis=0)


def pool_by_taps(c, node, x, kind):
    """MaxPool / AveragePool / LpPool over their taps: dilations and ceil_mode windows."""
    kernel, stride, dilation, begins, ends = _window_args(c, node, x)
    if kind == "max":
        taps, _, _ = window_taps(node, x, kernel, stride, dilation, begins, ends, -np.inf)
        y = taps[0]
        for t in taps[1:]:
            y = F.maximum2(y, t)
        return y
    if kind == "lp":
        p = float(node.attr("p", 2))
        taps, _, _ = window_taps(node, F.pow_scalar(F.abs(x), p), kernel, stride, dilation, begins, ends)
        return F.pow_scalar(F.add_n(*taps) if len(taps) > 1 else taps[0], 1.0 / p)
    taps, real, declared = window_taps(node, x, kernel, stride, dilation, begins, ends)
    divisor = declared if node.attr("count_include_pad", 0) else real
    shape = (1,) * (x.ndim - len(kernel)) + divisor.shape
    inverse = c.parameter(node.outputs[0] + "_window_sizes", (1.0 / divisor).reshape(shape), need_grad=False)
    total = F.add_n(*taps) if len(taps) > 1 else taps[0]
    return F.mul2(total, F.broadcast(inverse, total.shape))


@imports("MaxPool")
def max_pool(c, node):
    if len(node.outputs) > 1 and node.outputs[1]:
        raise Unsupported("the Indices output of MaxPool is not supported")
    x = c.var(node.inputs[0])
    kernel, stride, dilation, begins, ends = _window_args(c, node, x)
    if len(kernel) == 1 or any(d != 1 for d in dilation):   # nnabla pools 2-d and 3-d only
        return pool_by_taps(c, node, x, "max")
    sizes = x.shape[-len(kernel):]
    ends = _ceil_ends(node, sizes, kernel, stride, begins, ends)
    if begins == ends:
        return F.max_pooling(x, tuple(kernel), tuple(stride), True, tuple(begins))
    onnx_count = [(n + b + e - k) // s + 1 for n, k, s, b, e in zip(sizes, kernel, stride, begins, ends)]
    nnabla_count = [(n + b + s - 1) // s for n, s, b in zip(sizes, stride, begins)]
    if onnx_count == nnabla_count:   # nnabla's ignore_border=False windows
        return F.max_pooling(x, tuple(kernel), tuple(stride), False, tuple(begins))
    padded = _pad_explicitly(x, begins, ends, -np.inf)
    return F.max_pooling(padded, tuple(kernel), tuple(stride), True, (0,) * len(kernel))


@imports("AveragePool")
def average_pool(c, node):
    x = c.var(node.inputs[0])
    kernel, stride, dilation, begins, ends = _window_args(c, node, x)
    including = bool(node.attr("count_include_pad", 0))
    sizes = x.shape[-len(kernel):]
    if (len(kernel) == 1 or any(d != 1 for d in dilation)   # nnabla pools 2-d and 3-d only
            or _ceil_ends(node, sizes, kernel, stride, begins, ends) != ends):
        return pool_by_taps(c, node, x, "average")
    if begins == ends:
        return F.average_pooling(x, tuple(kernel), tuple(stride), True, tuple(begins),
                                 including_pad=including)
    zeros = (0,) * len(kernel)
    sums = F.sum_pooling(_pad_explicitly(x, begins, ends), tuple(kernel), tuple(stride), True, zeros)
    if including:
        return F.mul_scalar(sums, 1.0 / _prod(kernel))
    ones = _pad_explicitly(F.constant(1.0, x.shape), begins, ends)
    return F.div2(sums, F.sum_pooling(ones, tuple(kernel), tuple(stride), True, zeros))


@imports("GlobalAveragePool", "GlobalMaxPool")
def global_pool(c, node):
    x = c.var(node.inputs[0])
    if node.op_type == "GlobalAveragePool" and x.ndim == 4:
        return F.global_average_pooling(x)
    fn = F.mean if node.op_type == "GlobalAveragePool" else F.max
    return fn(x, tuple(range(2, x.ndim)), keepdims=True)


# ------------------------------------------------------------------------------ normalization
def _channel_stat_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


@imports("BatchNormalization")
def batch_normalization(c, node):
    if node.attr("training_mode", 0) or any(node.outputs[1:]):
        raise Unsupported("training mode (batch statistics, running-statistics outputs) is not supported")
    x = c.var(node.inputs[0])
    shape = _channel_stat_shape(x)
    gamma, beta, mean, var = (reshaped(c, node.inputs[k], shape, need_grad=k < 3) for k in (1, 2, 3, 4))
    return F.batch_normalization(x, beta, gamma, mean, var, axes=[1], eps=node.attr("epsilon", 1e-5),
                                 batch_stat=False)


@imports("InstanceNormalization")
def instance_normalization(c, node):
    x = c.var(node.inputs[0])
    shape = _channel_stat_shape(x)
    gamma, beta = reshaped(c, node.inputs[1], shape), reshaped(c, node.inputs[2], shape)
    return F.instance_normalization(x, beta, gamma, channel_axis=1, batch_axis=0,
                                    eps=node.attr("epsilon", 1e-5))


@imports("LayerNormalization")
def layer_normalization(c, node):
    x = c.var(node.inputs[0])
    axis = node.attr("axis", -1) % x.ndim
    eps = node.attr("epsilon", 1e-5)
    if any(node.outputs[1:]):   # the statistics too: normalize explicitly
        axes = tuple(range(axis, x.ndim))
        mean = F.mean(x, axes, True)
        centered = F.sub2(x, F.broadcast(mean, x.shape))
        inv_std = F.pow_scalar(F.add_scalar(F.mean(F.mul2(centered, centered), axes, True), eps), -0.5)
        y = F.mul2(centered, F.broadcast(inv_std, x.shape))
        stat_shape = tuple(x.shape[:axis]) + (1,) * (x.ndim - axis)
        for k, add in ((1, False), (2, True)):
            if node.input(k):
                param = F.reshape(c.var(node.input(k)), (1,) * (x.ndim - len(c.shape(node.input(k))))
                                  + tuple(c.shape(node.input(k))))
                y = (F.add2 if add else F.mul2)(y, F.broadcast(param, x.shape))
        return [y, F.reshape(mean, stat_shape), F.reshape(inv_std, stat_shape)]
    shape = (1,) * axis + tuple(x.shape[axis:])

    def param(name):
        if name is None:
            return None
        if c.is_const(name):
            return weight(c, name, lambda a: np.broadcast_to(a, shape[axis:]).reshape(shape).copy())
        return F.reshape(c.var(name), shape)
    return F.layer_normalization(x, param(node.input(2)), param(node.input(1)),
                                 batch_axis=list(range(axis)), eps=eps)


# ------------------------------------------------------------------------------ random
def _seed(node):
    seed = node.attr("seed")
    return -1 if seed is None else int(seed)


@imports("RandomUniform")
def random_uniform(c, node):
    return F.rand(node.attr("low", 0.0), node.attr("high", 1.0), tuple(node.attr("shape")), _seed(node))


@imports("RandomNormal")
def random_normal(c, node):
    return F.randn(node.attr("mean", 0.0), node.attr("scale", 1.0), tuple(node.attr("shape")), _seed(node))

