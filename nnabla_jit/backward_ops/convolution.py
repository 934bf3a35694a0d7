"""Backward kernels and grad rules of the convolutions (see ``ops/convolution.py``).

Backward passes run the geometry's products in the other direction: a convolution's input
gradient is the transposed product of dy, its filter gradient the correlation of x and dy, and
a deconvolution the other way round. The grad rules build the same as graph nodes: a
Deconvolution (or Convolution) for the data and the internal ConvolutionFilterGrad for the
filter, whose own rule is again a Deconvolution and a Convolution -- so any order works.
FusedConvolution's rule differentiates the graph of the ops it fuses. DeformableConvolution,
AdaptiveSeparableConvolution and PatchCorrelation have backward kernels but, as in nnabla, no
grad rule.
"""
import numpy as np
from numba import prange, uint64

from ..ops.kernels import parallel_kernel

# The geometry's write modes (ops/convolution.py): add into the output, or overwrite it.
_ADD, _ZERO = 0, 1


def _mode(accum):
    return _ADD if accum else _ZERO


@parallel_kernel
def channel_sums(a2, out, accum, channel_last):
    """out[c] (+)= sum over samples and positions of channel c; a2 is (B, C * S) with element
    (c, s) at c * S + s, or at s * C + c channel-last."""
    B = a2.shape[0]
    C = out.shape[0]
    S = a2.shape[1] // C if C > 0 else 0
    cs, ss = (1, C) if channel_last else (S, 1)
    for c in prange(C):
        acc = 0.0
        for b in range(B):
            sample = a2[b]
            for s in range(S):
                acc += sample[uint64(c * cs + s * ss)]
        out[c] = out[c] + acc if accum else acc


def _bias_grad(a2, db, accum, channel_last):
    channel_sums.for_size(a2.size)(a2, db, accum, channel_last)


def convolution_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """Convolution and DepthwiseConvolution: dx = conv^T(dy, W), dW = corr(x, dy), db = sum dy."""
    geo, dy = op.geo, grad_outputs[0]
    x, w = inputs[0], inputs[1]
    if propagate_down[0]:
        geo.map_to_image(dy, w, grad_inputs[0], init=_mode(accum[0]))
    bias = len(inputs) > 2 and propagate_down[2]
    if propagate_down[1]:   # with the bias gradient from the same transposed dy
        geo.filter_grad(x, dy, grad_inputs[1], accum[1], reuse_col=True, out_b=grad_inputs[2] if bias else None,
                        b_accumulate=bias and accum[2])
    elif bias:
        _bias_grad(geo.map2(dy), grad_inputs[2], accum[2], geo.channel_last)


def deconvolution_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """Deconvolution and DepthwiseDeconvolution: dx = conv(dy, W), dW = corr(dy, x)."""
    geo, dy = op.geo, grad_outputs[0]
    x, w = inputs[0], inputs[1]
    if propagate_down[0]:
        geo.image_to_map(dy, w, grad_inputs[0], init=_mode(accum[0]))
    if propagate_down[1]:   # the col of dy is still in the buffer when dx was just computed
        geo.filter_grad(dy, x, grad_inputs[1], accum[1], reuse_col=propagate_down[0])
    if len(inputs) > 2 and propagate_down[2]:
        _bias_grad(geo.img2(dy), grad_inputs[2], accum[2], geo.channel_last)


def filter_grad_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """ConvolutionFilterGrad(img, mp) is bilinear: d img = conv^T(mp, g), d mp = conv(img, g)."""
    geo, g = op.geo, grad_outputs[0]
    img, mp = inputs
    if propagate_down[0]:
        geo.map_to_image(mp, g, grad_inputs[0], init=_mode(accum[0]))
    if propagate_down[1]:
        geo.image_to_map(img, g, grad_inputs[1], init=_mode(accum[1]), reuse_col=True)


# ------------------------------------------------------------------------------ grad rules
def _layout(shape, base_axis, channel_last):
    """(channel axis, spatial dims) of a validated image or map shape."""
    n = len(shape)
    base_axis %= n
    if channel_last:
        return n - 1, tuple(shape[base_axis:-1])
    return base_axis, tuple(shape[base_axis + 1:])


def _output_padding(img_sp, map_sp, kernel, pad, stride, dilation):
    """The Deconvolution output_padding that gives back the image size from the map size."""
    return tuple(i - ((o - 1) * s - 2 * p + d * (k - 1) + 1)
                 for i, o, k, p, s, d in zip(img_sp, map_sp, kernel, pad, stride, dilation))


def _kernel(w_shape, channel_last):
    return tuple(w_shape[1:-1] if channel_last else w_shape[2:])


def _sum_but(dy, shape, axis):
    from .. import functions as F
    return F.sum(dy, axis=[a for a in range(len(shape)) if a != axis])


def _filter_grad_node(img, mp, w_shape, base_axis, pad, stride, dilation, group, channel_last):
    from ..function import build
    from ..ops.registry import REGISTRY
    op = REGISTRY["ConvolutionFilterGrad"](
        input_names=("img", "mp"), w_shape=w_shape, base_axis=base_axis, pad=pad, stride=stride,
        dilation=dilation, group=group, channel_last=channel_last)
    return build(op, [img, mp])


def _wanted(inputs, i):
    return len(inputs) > i and inputs[i].need_grad


def convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1, pad=None,
                     stride=None, dilation=None, group=1, channel_last=False):
    from .. import functions as F
    dy, (x, w) = grad_inputs[0], inputs[:2]
    axis, img_sp = _layout(input_shapes[0], base_axis, channel_last)
    _, map_sp = _layout(output_shapes[0], base_axis, channel_last)
    w_shape = tuple(input_shapes[1])
    grads = [None] * len(inputs)
    if _wanted(inputs, 0):
        op = _output_padding(img_sp, map_sp, _kernel(w_shape, channel_last), pad, stride, dilation)
        grads[0] = F.deconvolution(dy, w, None, base_axis, pad, stride, dilation, group, channel_last, op)
    if _wanted(inputs, 1):
        grads[1] = _filter_grad_node(x, dy, w_shape, base_axis, pad, stride, dilation, group, channel_last)
    if _wanted(inputs, 2):
        grads[2] = _sum_but(dy, output_shapes[0], axis)
    return grads


def deconvolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1, pad=None,
                       stride=None, dilation=None, group=1, channel_last=False, output_padding=None):
    from .. import functions as F
    dy, (x, w) = grad_inputs[0], inputs[:2]
    axis, _ = _layout(output_shapes[0], base_axis, channel_last)
    grads = [None] * len(inputs)
    if _wanted(inputs, 0):
        grads[0] = F.convolution(dy, w, None, base_axis, pad, stride, dilation, group, channel_last)
    if _wanted(inputs, 1):
        grads[1] = _filter_grad_node(dy, x, tuple(input_shapes[1]), base_axis, pad, stride, dilation, group,
                                     channel_last)
    if _wanted(inputs, 2):
        grads[2] = _sum_but(dy, output_shapes[0], axis)
    return grads


def depthwise_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                               pad=None, stride=None, dilation=None, multiplier=1):
    """DepthwiseConvolution is Convolution with group = C and W viewed as (C * m, 1, *k)."""
    from .. import functions as F
    dy, (x, w) = grad_inputs[0], inputs[:2]
    axis, img_sp = _layout(input_shapes[0], base_axis, False)
    _, map_sp = _layout(output_shapes[0], base_axis, False)
    w_shape = tuple(input_shapes[1])
    w_view = (w_shape[0], 1) + w_shape[1:]
    C = input_shapes[0][axis]
    grads = [None] * len(inputs)
    if _wanted(inputs, 0):
        op = _output_padding(img_sp, map_sp, w_shape[1:], pad, stride, dilation)
        grads[0] = F.deconvolution(dy, F.reshape(w, w_view, inplace=False), None, base_axis, pad, stride,
                                   dilation, C, False, op)
    if _wanted(inputs, 1):
        grads[1] = F.reshape(_filter_grad_node(x, dy, w_view, base_axis, pad, stride, dilation, C, False),
                             w_shape, inplace=False)
    if _wanted(inputs, 2):
        grads[2] = _sum_but(dy, output_shapes[0], axis)
    return grads


def depthwise_deconvolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                                 pad=None, stride=None, dilation=None, divisor=1):
    """DepthwiseDeconvolution is Deconvolution with group = C / divisor and W (C, 1, *k)."""
    from .. import functions as F
    dy, (x, w) = grad_inputs[0], inputs[:2]
    axis, _ = _layout(input_shapes[0], base_axis, False)
    w_shape = tuple(input_shapes[1])
    w_view = (w_shape[0], 1) + w_shape[1:]
    group = input_shapes[0][axis] // divisor
    grads = [None] * len(inputs)
    if _wanted(inputs, 0):
        grads[0] = F.convolution(dy, F.reshape(w, w_view, inplace=False), None, base_axis, pad, stride,
                                 dilation, group, False)
    if _wanted(inputs, 1):
        grads[1] = F.reshape(_filter_grad_node(dy, x, w_view, base_axis, pad, stride, dilation, group, False),
                             w_shape, inplace=False)
    if _wanted(inputs, 2):
        grads[2] = _sum_but(dy, output_shapes[0], axis)
    return grads


def filter_grad_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, w_shape=None, base_axis=1,
                     pad=None, stride=None, dilation=None, group=1, channel_last=False):
    from .. import functions as F
    g, (img, mp) = grad_inputs[0], inputs
    _, img_sp = _layout(input_shapes[0], base_axis, channel_last)
    _, map_sp = _layout(input_shapes[1], base_axis, channel_last)
    grads = [None, None]
    if img.need_grad:
        op = _output_padding(img_sp, map_sp, _kernel(w_shape, channel_last), pad, stride, dilation)
        grads[0] = F.deconvolution(mp, g, None, base_axis, pad, stride, dilation, group, channel_last, op)
    if mp.need_grad:
        grads[1] = F.convolution(img, g, None, base_axis, pad, stride, dilation, group, channel_last)
    return grads


# ------------------------------------------------------------------------------ extras
def _zeroed(array, accum):
    """``array`` ready to be added into: cleared unless the gradient accumulates."""
    if not accum:
        array.fill(0)
    return array


def deformable_convolution_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    names = op.input_names
    a = dict(zip(names, inputs))
    want = {n: (grad_inputs[i], accum[i]) for i, n in enumerate(names) if propagate_down[i]}
    geo, dy = op.geo, grad_outputs[0]
    geo.sample_with(a["offset"], a.get("mask"))
    if "weight" in want:
        geo.filter_grad(a["x"], dy, want["weight"][0], want["weight"][1], reuse_col=True)
    if "bias" in want:
        _bias_grad(geo.map2(dy), *want["bias"], False)
    sampled = {n: _zeroed(*want[n]) for n in ("x", "offset", "mask") if n in want}
    if sampled:
        geo.sampling_grads(dy, a["weight"], a["x"], sampled.get("x"), sampled.get("offset"), sampled.get("mask"))


@parallel_kernel
def adaptive_separable_backward_kernel(x, kv, kh, dy, dx, dkv, dkh, want_x, want_kv, want_kh):
    """Add the gradients of AdaptiveSeparableConvolution into dx, dkv, dkh (those wanted)."""
    N, C, H, W = x.shape
    _, Kv, Ho, Wo = kv.shape
    Kh = kh.shape[1]
    for n in prange(N):
        for c in range(C):
            for h in range(Ho):
                for w in range(Wo):
                    g = dy[n, c, h, w]
                    for i in range(Kv):
                        for j in range(Kh):
                            v = x[n, c, h + i, w + j]
                            if want_x:
                                dx[n, c, h + i, w + j] += g * kv[n, i, h, w] * kh[n, j, h, w]
                            if want_kv:
                                dkv[n, i, h, w] += g * v * kh[n, j, h, w]
                            if want_kh:
                                dkh[n, j, h, w] += g * v * kv[n, i, h, w]


def adaptive_separable_convolution_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down,
                                            accum):
    x, kv, kh = inputs
    dummy = np.zeros((0, 0, 0, 0), x.dtype)
    grads = [_zeroed(grad_inputs[i], accum[i]) if propagate_down[i] else dummy for i in range(3)]
    adaptive_separable_backward_kernel.for_size(grad_outputs[0].size * kv.shape[1] * kh.shape[1])(
        x, kv, kh, grad_outputs[0], *grads, *propagate_down[:3])


@parallel_kernel
def patch_correlation_backward_kernel(x1, x2, dy, dx1, dx2, patch, shift, patch_step, shift_step, top, left,
                                      want1, want2):
    """Add the gradients of PatchCorrelation into dx1 and dx2 (those wanted)."""
    N, H, W, C = x1.shape
    _, Ho, Wo, Cy, Cx = dy.shape
    for n in prange(N):
        for ho in range(Ho):
            for wo in range(Wo):
                for iy in range(Cy):
                    dyy = iy * shift_step[0] - shift[0]
                    for ix in range(Cx):
                        dxx = ix * shift_step[1] - shift[1]
                        g = dy[n, ho, wo, iy, ix]
                        for kh in range(patch[0]):
                            h1 = ho * patch_step[0] + kh - top
                            h2 = h1 + dyy
                            if h1 < 0 or h1 >= H or h2 < 0 or h2 >= H:
                                continue
                            for kw in range(patch[1]):
                                w1 = wo * patch_step[1] + kw - left
                                w2 = w1 + dxx
                                if w1 < 0 or w1 >= W or w2 < 0 or w2 >= W:
                                    continue
                                for c in range(C):
                                    if want1:
                                        dx1[n, h1, w1, c] += g * x2[n, h2, w2, c]
                                    if want2:
                                        dx2[n, h2, w2, c] += g * x1[n, h1, w1, c]


def patch_correlation_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    x1, x2 = inputs
    dummy = np.zeros((0, 0, 0, 0), x1.dtype)
    grads = [_zeroed(grad_inputs[i], accum[i]) if propagate_down[i] else dummy for i in range(2)]
    patch_correlation_backward_kernel.for_size(grad_outputs[0].size * x1.shape[3])(
        x1, x2, grad_outputs[0], *grads, *op.args_a, op.padding[0], op.padding[2], *propagate_down[:2])


NONLINEARITY_ARGS = {"leaky_relu": 1, "elu": 1}


def _nonlinearity(F, h, name, args):
    if name == "identity":
        return h
    if name in ("leaky_relu", "elu"):
        return getattr(F, name)(h, *args)
    return getattr(F, name)(h)


def fused_convolution_graph(v, base_axis=1, pad=None, stride=None, dilation=None, group=1, channel_last=False,
                            decay_rate=0.9, eps=1e-5, batch_stat=True, nonlinearity="relu", nonlinearity_args=(),
                            pad_mode="constant", constant_value=0.0, keep_running_stats=False):
    """What FusedConvolution computes, built from F on the Variables ``v`` (by input name).
    ``keep_running_stats``: give the batch normalization scratch running statistics, so that a
    gradient graph does not update the real ones again."""
    from .. import functions as F
    x = v["x"]
    if pad_mode != "constant" or constant_value != 0:
        widths = tuple(p for q in pad for p in (q, q)) + ((0, 0) if channel_last else ())
        x = F.pad(x, widths, pad_mode, constant_value)
        pad = (0,) * len(pad)
    h = F.convolution(x, v["weight"], v.get("bias"), base_axis, pad, stride, dilation, group, channel_last)
    if "beta" in v:
        mean, variance = v["mean"], v["variance"]
        if keep_running_stats and batch_stat:   # batch statistics: the running ones are only written
            from ..variable import Variable
            mean, variance = Variable(mean.shape), Variable(variance.shape)
        axis = len(h.shape) - 1 if channel_last else base_axis % len(h.shape)
        h = F.batch_normalization(h, v["beta"], v["gamma"], mean, variance, [axis], decay_rate, eps, batch_stat)
    if "z" in v:
        h = F.add2(h, v["z"])
    return _nonlinearity(F, h, nonlinearity, nonlinearity_args)


def _fused_input_names(input_shapes):
    """Which optional inputs a FusedConvolution has, from their number and ranks: the bias is
    1-d, the batch normalization parameters come four together, z is last."""
    rest = input_shapes[2:]
    has_bias = len(rest) > 0 and len(rest[0]) == 1
    has_bn = len(rest) - has_bias >= 4
    names = ["x", "weight"] + ["bias"] * has_bias + ["beta", "gamma", "mean", "variance"] * has_bn
    return names + ["z"] * (len(input_shapes) - len(names))


def fused_convolution_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    """The gradient of the graph FusedConvolution stands for (running statistics get none)."""
    from ..grad import grad
    names = _fused_input_names(input_shapes)
    y = fused_convolution_graph(dict(zip(names, inputs)), keep_running_stats=True, **args)
    wanted = [i for i, (n, v) in enumerate(zip(names, inputs)) if v.need_grad and n not in ("mean", "variance")]
    grads = [None] * len(inputs)
    if wanted:
        for i, g in zip(wanted, grad([y], [inputs[i] for i in wanted], grad_outputs=[grad_inputs[0]])):
            grads[i] = g
    return grads
