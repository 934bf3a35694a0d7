"""ONNX ops with no single nnabla function, built from several ``F`` functions (so that the
imported graph trains and exports back): activations (HardSwish, Celu, Swish, Shrink,
ThresholdedRelu), Hardmax, LRN, the Lp ops, normalizations (MeanVarianceNormalization,
GroupNormalization, RMSNormalization), layout ops (DepthToSpace, SpaceToDepth,
ReverseSequence, Compress), CumProd, CastLike, BitShift and the losses
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
"""
import numpy as np

from .... import functions as F
from ..builder import Unsupported
from .elementwise import cast_to
from .layers import _pad_explicitly, _window_args, pool_by_taps
from .table import imports


def _prod(shape):
    return int(np.prod(shape, dtype=np.int64))


def _along(axis, ndim, values):
    """``values`` (1-D) shaped to lie along ``axis`` of an ``ndim``-D array."""
    shape = [1] * ndim
    shape[axis] = len(values)
    return np.asarray(values, np.float32).reshape(shape)


def _constant(c, node, suffix, array):
    """A fixed (not learnable) tensor of the imported graph, named after the node."""
    return c.parameter("{}_{}".format(node.outputs[0], suffix), np.asarray(array, np.float32), need_grad=False)


# ------------------------------------------------------------------------------ activations
@imports("HardSwish")
def hard_swish(c, node):
    x = c.var(node.inputs[0])
    return F.mul2(x, F.maximum_scalar(F.minimum_scalar(F.add_scalar(F.mul_scalar(x, 1.0 / 6), 0.5), 1.0), 0.0))


@imports("Celu")
def celu(c, node):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) (nnabla's CELU is another function)."""
    x, alpha = c.var(node.inputs[0]), float(node.attr("alpha", 1.0))
    negative = F.mul_scalar(F.add_scalar(F.exp(F.mul_scalar(x, 1.0 / alpha)), -1.0), alpha)
    return F.add2(F.relu(x), F.minimum_scalar(negative, 0.0))


@imports("Swish")
def swish(c, node):
    x = c.var(node.inputs[0])
    return F.mul2(x, F.sigmoid(F.mul_scalar(x, float(node.attr("alpha", 1.0)))))


@imports("ThresholdedRelu")
def thresholded_relu(c, node):
    x = c.var(node.inputs[0])
    return F.mul2(x, F.greater_scalar(x, float(node.attr("alpha", 1.0))))


@imports("Shrink")
def shrink(c, node):
    x = c.var(node.inputs[0])
    lambd, bias = float(node.attr("lambd", 0.5)), float(node.attr("bias", 0.0))
    above = F.mul2(F.add_scalar(x, -bias), F.greater_scalar(x, lambd))
    below = F.mul2(F.add_scalar(x, bias), F.less_scalar(x, -lambd))
    return F.add2(above, below)


@imports("Hardmax")
def hardmax(c, node):
    """1 at the first maximum along ``axis`` (before opset 13: of the axes from ``axis`` on,
    flattened), 0 elsewhere."""
    x = c.var(node.inputs[0])
    axis = node.attr("axis", -1 if c.opset >= 13 else 1) % x.ndim
    flat = x if c.opset >= 13 else F.reshape(x, (_prod(x.shape[:axis]), _prod(x.shape[axis:])))
    axis = axis if c.opset >= 13 else 1
    index = F.max(flat, axis, True, only_index=True)
    positions = _constant(c, node, "positions", _along(axis, flat.ndim, np.arange(flat.shape[axis])))
    y = F.equal(F.broadcast(positions, flat.shape), F.broadcast(index, flat.shape))
    return F.reshape(y, x.shape)


# ------------------------------------------------------------------------------ windows and norms
@imports("LRN")
def lrn(c, node):
    """x / (bias + alpha / size * (sum of squares over the channel window)) ** beta."""
    x = c.var(node.inputs[0])
    size = int(node.attr("size"))
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    channels = x.shape[1]
    squares = F.reshape(F.mul2(x, x), (x.shape[0], 1, channels, _prod(x.shape[2:])))
    padded = _pad_explicitly(squares, [(size - 1) // 2, 0], [size - 1 - (size - 1) // 2, 0])
    sums = F.reshape(F.sum_pooling(padded, (size, 1), (1, 1)), x.shape)
    return F.div2(x, F.pow_scalar(F.add_scalar(F.mul_scalar(sums, alpha / size), bias), beta))


@imports("LpPool")
def lp_pool(c, node):
    x = c.var(node.inputs[0])
    kernel, stride, dilation, begins, ends = _window_args(c, node, x)
    if any(d != 1 for d in dilation) or node.attr("ceil_mode", 0):
        return pool_by_taps(c, node, x, "lp")
    p = float(node.attr("p", 2))
    powered = _pad_explicitly(F.pow_scalar(F.abs(x), p), begins, ends)
    return F.pow_scalar(F.sum_pooling(powered, tuple(kernel), tuple(stride), True, (0,) * len(kernel)), 1.0 / p)


@imports("LpNormalization")
def lp_normalization(c, node):
    """x / ||x||_p along ``axis``; a zero vector stays zero."""
    x = c.var(node.inputs[0])
    axis, p = node.attr("axis", -1) % x.ndim, node.attr("p", 2)
    if p not in (1, 2):
        raise Unsupported("p must be 1 or 2, got {}".format(p))
    norm = F.norm(x, p, (axis,), True)
    return F.div2(x, F.broadcast(F.maximum_scalar(norm, 1e-30), x.shape))


@imports("MeanVarianceNormalization")
def mean_variance_normalization(c, node):
    x = c.var(node.inputs[0])
    axes = tuple(sorted(int(a) % x.ndim for a in node.attr("axes", [0, 2, 3])))
    centered = F.sub2(x, F.broadcast(F.mean(x, axes, True), x.shape))
    std = F.pow_scalar(F.add_scalar(F.mean(F.mul2(centered, centered), axes, True), 1e-9), 0.5)
    return F.div2(centered, F.broadcast(std, x.shape))


def _normalize(x, axes, eps):
    centered = F.sub2(x, F.broadcast(F.mean(x, axes, True), x.shape))
    inv_std = F.pow_scalar(F.add_scalar(F.mean(F.mul2(centered, centered), axes, True), eps), -0.5)
    return F.mul2(centered, F.broadcast(inv_std, x.shape))


def _affine(c, x, name, shape, add):
    if name is None:
        return x
    value = F.reshape(c.var(name), shape)
    return (F.add2 if add else F.mul2)(x, F.broadcast(value, x.shape))


@imports("GroupNormalization")
def group_normalization(c, node):
    """Statistics over each group of channels; scale and bias per channel (opset 21) or per
    group (opset 18)."""
    x = c.var(node.inputs[0])
    groups, eps = int(node.attr("num_groups")), float(node.attr("epsilon", 1e-5))
    n, channels = x.shape[0], x.shape[1]
    grouped = F.reshape(x, (n, groups, _prod(x.shape[1:]) // groups))
    y = _normalize(grouped, (2,), eps)
    if c.opset >= 21:
        y = F.reshape(y, x.shape)
        shape = (1, channels) + (1,) * (x.ndim - 2)
    else:
        shape = (1, groups, 1)
    y = _affine(c, _affine(c, y, node.input(1), shape, False), node.input(2), shape, True)
    return F.reshape(y, x.shape)


@imports("RMSNormalization")
def rms_normalization(c, node):
    x = c.var(node.inputs[0])
    axis = node.attr("axis", -1) % x.ndim
    axes = tuple(range(axis, x.ndim))
    inv_rms = F.pow_scalar(F.add_scalar(F.mean(F.mul2(x, x), axes, True), float(node.attr("epsilon", 1e-5))), -0.5)
    y = F.mul2(x, F.broadcast(inv_rms, x.shape))
    scale_shape = c.shape(node.inputs[1])
    shape = (1,) * (x.ndim - len(scale_shape)) + tuple(scale_shape)
    return _affine(c, y, node.inputs[1], shape, False)


# ------------------------------------------------------------------------------ layout
@imports("DepthToSpace")
def depth_to_space(c, node):
    x = c.var(node.inputs[0])
    b = int(node.attr("blocksize"))
    n, ch, h, w = x.shape
    if node.attr("mode", "DCR") == "DCR":
        y = F.transpose(F.reshape(x, (n, b, b, ch // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    else:
        y = F.transpose(F.reshape(x, (n, ch // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
    return F.reshape(y, (n, ch // (b * b), h * b, w * b))


@imports("SpaceToDepth")
def space_to_depth(c, node):
    x = c.var(node.inputs[0])
    b = int(node.attr("blocksize"))
    n, ch, h, w = x.shape
    perm = (0, 3, 5, 1, 2, 4) if node.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    y = F.transpose(F.reshape(x, (n, ch, h // b, b, w // b, b)), perm)
    return F.reshape(y, (n, ch * b * b, h // b, w // b))


def _gather_positions(c, node, x, index):
    """x at the positions ``index`` (an int array of x's shape holding, per element, the full
    index tuple along a new first axis)."""
    return F.gather_nd(x, _constant(c, node, "index", index))


@imports("ReverseSequence")
def reverse_sequence(c, node):
    x = c.var(node.inputs[0])
    lengths = [int(v) for v in c.const(node.inputs[1], "sequence_lens").reshape(-1)]
    batch_axis, time_axis = node.attr("batch_axis", 1), node.attr("time_axis", 0)
    index = np.indices(x.shape)
    times = index[time_axis].copy()
    for b, length in enumerate(lengths):
        at = [slice(None)] * x.ndim
        at[batch_axis] = b
        t = times[tuple(at)]
        times[tuple(at)] = np.where(t < length, length - 1 - t, t)
    index[time_axis] = times
    return _gather_positions(c, node, x, index)


@imports("Compress")
def compress(c, node):
    """The slices where the (constant: the output's shape depends on it) condition holds."""
    x = c.var(node.inputs[0])
    condition = np.asarray(c.const(node.inputs[1], "condition")).reshape(-1).astype(bool)
    axis = node.attr("axis")
    if axis is None:
        x, axis = F.reshape(x, (x.size,)), 0
    axis %= x.ndim
    kept = np.nonzero(condition[:x.shape[axis]])[0]
    return F.gather(x, _constant(c, node, "kept", kept), axis=axis)


# ------------------------------------------------------------------------------ arithmetic
@imports("CumProd")
def cumprod(c, node):
    x = c.var(node.inputs[0])
    axis = int(c.const(node.inputs[1], "axis").reshape(-1)[0]) % x.ndim
    return F.cumprod(x, axis, exclusive=bool(node.attr("exclusive", 0)), reverse=bool(node.attr("reverse", 0)))


@imports("CastLike")
def cast_like(c, node):
    return cast_to(c, node.inputs[0], c.elem(node.inputs[1]))


@imports("BitShift")
def bit_shift(c, node):
    """Integers live in floats here: a shift is a product or a floored quotient by 2 ** s
    (without the wrap-around of a fixed-width type)."""
    x, shift = c.var(node.inputs[0]), c.var(node.inputs[1])
    factor = F.r_pow_scalar(shift, 2.0)
    if node.attr("direction") == "LEFT":
        return F.mul2(x, factor)
    return F.floor(F.div2(x, factor))


# ------------------------------------------------------------------------------ losses
def _nll(c, node, log_prob, target_name, weight_name):
    """ONNX's negative log-likelihood of ``log_prob`` (N, C, d...) at the class indices of
    ``target_name`` (N, d...), with class weights, ignore_index and reduction."""
    target = c.var(target_name)
    classes = log_prob.shape[1]
    ignore = node.attr("ignore_index")
    if ignore is not None:
        kept = F.not_equal_scalar(target, float(ignore))
        target = F.mul2(target, kept)   # an ignored position reads class 0, then weighs 0
    picked = F.one_hot(F.reshape(target, tuple(target.shape) + (1,)), (classes,))
    perm = (0, target.ndim) + tuple(range(1, target.ndim))
    mask = F.transpose(picked, perm)                     # (N, C, d...)
    loss = F.mul_scalar(F.sum(F.mul2(log_prob, mask), (1,)), -1.0)
    weights = None
    if weight_name is not None:
        w = F.broadcast(F.reshape(c.var(weight_name), _along(1, log_prob.ndim, np.zeros(classes)).shape),
                        mask.shape)
        weights = F.sum(F.mul2(w, mask), (1,))
    if ignore is not None:
        weights = kept if weights is None else F.mul2(weights, kept)
    if weights is not None:
        loss = F.mul2(loss, weights)
    reduction = node.attr("reduction", "mean")
    if reduction == "none":
        return loss
    total = F.sum(loss)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise Unsupported("reduction '{}' is not supported".format(reduction))
    return F.div2(total, F.sum(weights)) if weights is not None else F.mul_scalar(total, 1.0 / loss.size)


@imports("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss(c, node):
    return _nll(c, node, c.var(node.inputs[0]), node.inputs[1], node.input(2))


@imports("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(c, node):
    log_prob = F.log_softmax(c.var(node.inputs[0]), axis=1)
    loss = _nll(c, node, log_prob, node.inputs[1], node.input(2))
    return [loss, log_prob] if len(node.outputs) > 1 else loss

