"""Backward kernels and grad rules of the normalization ops.

Every input gradient of the family has the form  dx = p[c] d + q[c] h(x - center[c]) + r[c]
in the (O, C, I) layout of ``ops/normalization.StatLayout`` (``channel_linear_grad``); the
per-channel coefficients come from the sums of ``ops/normalization.channel_sums``. The grad rules
rebuild the same formulas from F ops, so they can be differentiated again.
"""
import numpy as np
from numba import njit, prange

from ..ops.kernels import parallel_kernel
from ..ops.registry import REGISTRY, TABLE, accumulate
from .reduction_utils import sum_to_shape


@njit(inline="always")
def _odd_power(h, power):
    """sign(h) |h|^(power - 1), i.e. h itself for power 2."""
    if power == 2:
        return h
    return (1.0 if h > 0 else (-1.0 if h < 0 else 0.0)) * abs(h) ** (power - 1)


@njit(inline="always")
def _row_linear_grad(x, d, m, power, p, q, r, dx, accum):
    """One row of channel_linear_grad; the branches stay outside the loops so they vectorize."""
    n = d.size
    if power == 2:
        if accum:
            for i in range(n):
                dx[i] += p * d[i] + q * (x[i] - m) + r
        else:
            for i in range(n):
                dx[i] = p * d[i] + q * (x[i] - m) + r
    else:
        for i in range(n):
            g = p * d[i] + q * _odd_power(x[i] - m, power) + r
            dx[i] = dx[i] + g if accum else g


@parallel_kernel
def channel_linear_grad(x3, d3, center, power, p, q, r, dx3, accum):
    """dx (+)= p[c] d + q[c] h + r[c], h = x - center[c] for power 2, else
    sign(x - center[c]) |x - center[c]|^(power - 1)."""
    O, C, I = d3.shape
    if I == 1:   # (rows, channels): rows in parallel, channels in the inner loop
        for o in prange(O):
            for c in range(C):
                g = p[c] * d3[o, c, 0] + q[c] * _odd_power(x3[o, c, 0] - center[c], power) + r[c]
                dx3[o, c, 0] = dx3[o, c, 0] + g if accum else g
        return
    for k in prange(O * C):
        o = k // C
        c = k - o * C
        _row_linear_grad(x3[o, c], d3[o, c], center[c], power, p[c], q[c], r[c], dx3[o, c], accum)


def _channel_sums(x3, d3, center, power):
    from ..ops.normalization import channel_sums
    C = x3.shape[1]
    sum_d, sum_e = np.empty(C), np.empty(C)
    channel_sums.for_size(x3.size)(x3, d3, center, power, sum_d, sum_e)
    return sum_d, sum_e


def _linear_grad(layout, x3, d3, center, power, p, q, r, dx, accum):
    """Run channel_linear_grad into ``dx`` (shaped like the input) through the layout."""
    dx3 = layout.target(dx)
    channel_linear_grad.for_size(d3.size)(x3, d3, center, power, p, q, r, dx3, accum and layout.perm is None)
    layout.store(dx3, dx, accum)


# ------------------------------------------------------------------------ standardizations
def standardization_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    from ..ops.normalization import channel_affine
    lay, slot = op.layout, op.slot
    C, M = lay.channels, max(lay.count, 1)

    def wanted(name):
        return name in slot and propagate_down[slot[name]]

    dy = grad_outputs[0]
    if op.relu:   # through the fused ReLU: only where the output is positive
        dy = dy * (outputs[0] > 0)
        if wanted("z"):
            accumulate(grad_inputs[slot["z"]], dy, accum[slot["z"]])
    mean, inv_std = op.saved_mean, op.saved_inv_std
    gamma = inputs[slot["gamma"]] if "gamma" in slot and inputs[slot["gamma"]] is not None else None
    x3 = lay.view(inputs[0]) if inputs[0] is not None else None
    sum_d = sum_dxc = None
    if op.channel_params:
        d3 = lay.view(dy)
        factor = gamma.reshape(-1) if gamma is not None else np.ones(C)
        if wanted("beta") or wanted("gamma") or (propagate_down[0] and op.batch_stat):
            # x may have been freed when only dbeta (which does not read it) is wanted
            sum_d, sum_dxc = _channel_sums(x3 if x3 is not None else d3, d3, mean, 0)
        if wanted("beta"):
            accumulate(grad_inputs[slot["beta"]], sum_d.reshape(lay.stat_shape), accum[slot["beta"]])
        if wanted("gamma"):
            accumulate(grad_inputs[slot["gamma"]], (sum_dxc * inv_std).reshape(lay.stat_shape),
                       accum[slot["gamma"]])
    else:
        if wanted("beta"):
            sum_to_shape(dy, grad_inputs[slot["beta"]], accum[slot["beta"]])
        if wanted("gamma"):
            xhat = np.empty(dy.shape, dy.dtype)
            xhat3 = lay.target(xhat)
            channel_affine.for_size(x3.size)(x3, inv_std, -mean * inv_std, x3, False, False, xhat3)
            lay.store(xhat3, xhat)
            sum_to_shape(dy * xhat, grad_inputs[slot["gamma"]], accum[slot["gamma"]])
        if not propagate_down[0]:
            return
        d3 = lay.view(dy * gamma if gamma is not None else dy)
        factor = np.ones(C)
        if op.batch_stat:
            sum_d, sum_dxc = _channel_sums(x3, d3, mean, 0)
    if not propagate_down[0]:
        return
    p = factor * inv_std
    if op.batch_stat:
        q = -factor * inv_std ** 3 * sum_dxc / M
        r = -factor * inv_std * sum_d / M
        if op.with_stats:   # the batch mean and variance are outputs too
            q = q + 2.0 * grad_outputs[2].reshape(-1) / M
            r = r + grad_outputs[1].reshape(-1) / M
    else:
        q = r = np.zeros(C)
    _linear_grad(lay, x3 if x3 is not None else d3, d3, mean, 2, p, q, r, grad_inputs[0], accum[0])


def _input_names(name, n_inputs, args):
    """The names of the inputs a node of ``name`` was given (optional ones may be absent)."""
    names = [i.name for i in TABLE[name].inputs
             if not (i.name == "beta" and args.get("no_bias")) and not (i.name == "gamma" and args.get("no_scale"))]
    return ["x"] + names[1:n_inputs]


def _reduce_to(g, shape):
    """Sum ``g`` over the axes where ``shape`` (same rank) is 1."""
    from .. import functions as F
    axes = [a for a, (s, t) in enumerate(zip(g.shape, shape)) if t == 1 and s != 1]
    return F.sum(g, axis=axes, keepdims=True) if axes else g


def _reshape(v, shape):
    from .. import functions as F
    return v if tuple(v.shape) == tuple(shape) else F.reshape(v, shape, inplace=False)


def _standardization_rule(name):
    """The grad rule of standardization op ``name``, built from F ops."""
    def rule(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
        from .. import functions as F
        names = _input_names(name, len(inputs), args)
        given = dict(zip(names, inputs))
        x, beta, gamma = given["x"], given.get("beta"), given.get("gamma")
        lay = REGISTRY[name](**args).layout_of(tuple(x.shape))
        eps = args.get("eps", 1e-5)
        red = [a for a, (s, t) in enumerate(zip(lay.work_shape, lay.stat_shape)) if t == 1 and s != 1]
        dy = grad_inputs[0]
        if name == "FusedBatchNormalization":
            dy = dy * F.greater_scalar(outputs[0], 0.0)
        xw = _reshape(x, lay.work_shape)
        batch = args.get("batch_stat", True)
        if batch:
            mu = F.mean(xw, axis=red, keepdims=True)
            xc = xw - mu
            var = F.mean(xc ** 2, axis=red, keepdims=True)
        else:
            xc = xw - _reshape(given["mean"], lay.stat_shape)
            var = _reshape(given["variance"], lay.stat_shape)
        inv_std = (var + eps) ** -0.5
        xhat = xc * inv_std
        dw = _reshape(dy * gamma if gamma is not None else dy, lay.work_shape)
        if batch:
            dxw = inv_std * (dw - F.mean(dw, axis=red, keepdims=True)
                             - xhat * F.mean(dw * xhat, axis=red, keepdims=True))
            if len(grad_inputs) == 3:
                M = float(max(lay.count, 1))
                dxw = dxw + _reshape(grad_inputs[1], lay.stat_shape) * (1.0 / M) \
                    + _reshape(grad_inputs[2], lay.stat_shape) * xc * (2.0 / M)
        else:
            dxw = dw * inv_std
        grads = {"x": _reshape(dxw, x.shape), "z": dy}
        if beta is not None:
            grads["beta"] = _reduce_to(dy, beta.shape)
        if gamma is not None:
            grads["gamma"] = _reduce_to(dy * _reshape(xhat, x.shape), gamma.shape)
        return [grads.get(n) for n in names]
    rule.__name__ = name + "_grad"
    return rule


batch_normalization_grad = _standardization_rule("BatchNormalization")
sync_batch_normalization_grad = _standardization_rule("SyncBatchNormalization")
fused_batch_normalization_grad = _standardization_rule("FusedBatchNormalization")
tensor_normalization_grad = _standardization_rule("TensorNormalization")
layer_normalization_grad = _standardization_rule("LayerNormalization")
instance_normalization_grad = _standardization_rule("InstanceNormalization")
group_normalization_grad = _standardization_rule("GroupNormalization")
weight_standardization_grad = _standardization_rule("WeightStandardization")


# ------------------------------------------------------------------------ norms
def weight_normalization_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """y = g w n with n = (sum w^2 + eps)^-1/2: dg = n sum(dy w), dw = g n dy - g n^3 sum(dy w) w."""
    lay = op.layout
    w3, d3 = lay.view(inputs[0]), lay.view(grad_outputs[0])
    zeros = np.zeros(lay.channels)
    n = op.saved_inv_norm
    _, s = _channel_sums(w3, d3, zeros, 0)
    if propagate_down[1]:
        accumulate(grad_inputs[1], (n * s).reshape(grad_inputs[1].shape), accum[1])
    if propagate_down[0]:
        g = inputs[1].reshape(-1)
        _linear_grad(lay, w3, d3, zeros, 2, g * n, -g * n ** 3 * s, zeros, grad_inputs[0], accum[0])


def weight_normalization_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, dim=0, eps=1e-12):
    from .. import functions as F
    dy, w, g = grad_inputs[0], inputs[0], inputs[1]
    dim %= len(w.shape)
    axes = [a for a in range(len(w.shape)) if a != dim]
    inv_norm = (F.sum(w ** 2, axis=axes, keepdims=True) + eps) ** -0.5
    dyw = F.sum(dy * w, axis=axes, keepdims=True)
    gb = _reshape(g, [s if a == dim else 1 for a, s in enumerate(w.shape)])
    dw = (dy - dyw * inv_norm ** 2 * w) * gb * inv_norm
    return [dw, _reshape(dyw * inv_norm, g.shape)]


def norm_normalization_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """y = x / n, n = (sum |x|^p + eps)^(1/p): dx = dy / n - sum(dy x) n^(-1-p) sign(x) |x|^(p-1)."""
    if not propagate_down[0]:
        return
    lay = op.layout
    x3, d3 = lay.view(inputs[0]), lay.view(grad_outputs[0])
    zeros = np.zeros(lay.channels)
    n = op.saved_norm
    _, s = _channel_sums(x3, d3, zeros, 0)
    _linear_grad(lay, x3, d3, zeros, op.p, 1.0 / n, -s * n ** (-1.0 - op.p), zeros, grad_inputs[0], accum[0])


def norm_normalization_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, p=2.0, axes=None, eps=1e-12):
    from .. import functions as F
    dy, x = grad_inputs[0], inputs[0]
    axes = list(axes) if axes else list(range(len(x.shape)))
    ax = F.abs(x)
    s = F.sum(ax ** p, axis=axes, keepdims=True) + eps
    s_dyx = F.sum(dy * x, axis=axes, keepdims=True)
    # sign(x) |x|^(p-1) written as x |x|^(p-2): F.sign would pass gradients straight through
    return [dy * s ** (-1.0 / p) - s_dyx * s ** (-1.0 / p - 1.0) * x * ax ** (p - 2.0)]


def spectral_norm_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """u, v and sigma held fixed: dW = (dy - sum(dy W) / sigma u v^T) / sigma."""
    if not propagate_down[0]:
        return
    u, v, sigma = op.saved
    w = inputs[0]
    W, D = op.matrix(w), op.matrix(grad_outputs[0])
    dW = (D - (np.sum(D * W) / sigma) * np.outer(u, v)) / sigma
    accumulate(grad_inputs[0], op.unmatrix(dW, w.shape), accum[0])


def spectral_norm_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, dim=0, itr=1, eps=1e-12,
                       test=False, output_u=False):
    """Power iteration rebuilt from the u the forward started from: the ``output_u`` output, or
    the input u itself when ``test`` left it unchanged."""
    from .. import functions as F
    if not (output_u or test):
        raise ValueError("SpectralNorm: nn.grad needs output_u=True (or test=True) to know the u "
                         "the forward pass started from")
    dy, w = grad_inputs[0], inputs[0]
    u0 = outputs[1] if output_u else inputs[1]
    shape = tuple(w.shape)
    dim %= len(shape)
    perm = [dim] + [a for a in range(len(shape)) if a != dim]
    rows = shape[dim]
    cols = int(np.prod(shape)) // max(rows, 1)

    def as_matrix(a):
        return F.reshape(F.transpose(a, perm) if dim else a, (rows, cols), inplace=False)

    W = as_matrix(w)
    Wt = F.transpose(W, (1, 0))
    u = F.reshape(u0, (1, rows), inplace=False)
    for _ in range(itr):
        v = F.affine(u, W)                                  # (1, cols)
        v = v / (F.sum(v ** 2, keepdims=True) + eps) ** 0.5
        u = F.affine(v, Wt)                                 # (1, rows)
        u = u / (F.sum(u ** 2, keepdims=True) + eps) ** 0.5
    u.need_grad = False   # the singular vectors are constants of the gradient (as in nnabla)
    v.need_grad = False
    sigma = F.sum(F.affine(u, W) * v)
    D = as_matrix(dy)
    outer = F.affine(F.reshape(u, (rows, 1), inplace=False), v)
    dW = (D - F.sum(D * W) / sigma * outer) / sigma
    dW = F.reshape(dW, [shape[a] for a in perm], inplace=False)
    if dim:
        dW = F.transpose(dW, list(np.argsort(perm)))
    return [dW, None]


def mean_subtraction_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """nnabla's approximation: dx = dy (1 - 1 / (batch size * t)) with the updated t."""
    if propagate_down[0]:
        scale = op.saved_scale if op.update_running_mean else 1.0
        accumulate(grad_inputs[0], grad_outputs[0] * scale, accum[0])


def mean_subtraction_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                          update_running_mean=True):
    dy, t = grad_inputs[0], inputs[2]
    if not update_running_mean:
        return [dy, None, None]
    x_shape = tuple(input_shapes[0])
    batch = float(np.prod(x_shape[:base_axis % len(x_shape)]))
    scale = 1.0 - 1.0 / (_reshape(t, (1,) * len(x_shape)) * batch)
    return [dy * scale, None, None]


def clip_grad_by_norm_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """dx = clip_norm * dy / ||dy|| over ``axes``."""
    if not propagate_down[0]:
        return
    lay = op.layout
    d3 = lay.view(grad_outputs[0])
    zeros = np.zeros(lay.channels)
    _, ss = _channel_sums(d3, d3, zeros, 2)
    with np.errstate(divide="ignore"):
        scale = op.clip_norm / np.sqrt(ss)
    _linear_grad(lay, d3, d3, zeros, 2, scale, zeros, zeros, grad_inputs[0], accum[0])


def clip_grad_by_norm_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, clip_norm=1.0, axes=None):
    from .. import functions as F
    dy = grad_inputs[0]
    axes = list(axes) if axes else list(range(len(dy.shape)))
    return [dy * clip_norm * F.sum(dy ** 2, axis=axes, keepdims=True) ** -0.5]
