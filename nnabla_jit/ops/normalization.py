"""Normalization ops: batch / layer / instance / group / tensor normalization, weight
standardization and normalization, spectral and p-norm normalization, mean subtraction and the
gradient clippers.

Every standardization sees its input as a 3-d array (O, C, I) whose statistics are taken per
``c`` over ``o`` and ``i`` (``StatLayout``): batch normalization over axis 1 of NCHW is
(N, C, HW), layer normalization of (N, ...) is (1, N, rest), group normalization is instance
normalization of the input with its channel axis split into (groups, channels / groups). When the
axes that keep their own statistics are not adjacent, the input is first transposed so that they
are. Four kernels serve every op of the family: per-channel sums, a per-channel affine map (with
BN's fused add and ReLU), and, below, the per-channel linear
combination every input gradient of the family reduces to.

Statistics are accumulated and kept in float64 whatever the compute type.
"""
import numpy as np
from numba import njit, prange

from .common import normalize_axis, shape_size, sum_to_shape
from .elementwise import elementwise
from .kernels import parallel_kernel
from .registry import TABLE, Op, accumulate, register


# ------------------------------------------------------------------ backward kernels
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


class _RowsOrPlanes:
    """One computation over (O, C, I) arrays as two kernels: ``rows`` for I == 1 (a statistic per
    column of a matrix, e.g. after an affine layer) and ``planes`` for I > 1 (per channel of
    images). Split rather than branched inside one kernel so that a network compiles only the
    one it uses (a first step on an empty cache compiles half as much); ``layout_arg`` is the
    argument whose shape decides."""

    def __init__(self, rows, planes, layout_arg=0):
        self.rows, self.planes, self.layout_arg = rows, planes, layout_arg
        self.__doc__ = planes.__doc__

    def for_size(self, n):
        """The variant for ``n`` elements of work, as a function of the kernels' arguments."""
        rows, planes, at = self.rows.for_size(n), self.planes.for_size(n), self.layout_arg
        return lambda *args: (rows if args[at].shape[2] == 1 else planes)(*args)


@parallel_kernel
def channel_linear_grad_rows(x3, d3, center, power, p, q, r, dx3, accum):
    """channel_linear_grad of (rows, channels): rows in parallel, channels in the inner loop."""
    O, C, _ = d3.shape
    for o in prange(O):
        for c in range(C):
            g = p[c] * d3[o, c, 0] + q[c] * _odd_power(x3[o, c, 0] - center[c], power) + r[c]
            dx3[o, c, 0] = dx3[o, c, 0] + g if accum else g


@parallel_kernel
def channel_linear_grad_planes(x3, d3, center, power, p, q, r, dx3, accum):
    """dx (+)= p[c] d + q[c] h + r[c], h = x - center[c] for power 2, else
    sign(x - center[c]) |x - center[c]|^(power - 1)."""
    O, C, I = d3.shape
    for k in prange(O * C):
        o = k // C
        c = k - o * C
        _row_linear_grad(x3[o, c], d3[o, c], center[c], power, p[c], q[c], r[c], dx3[o, c], accum)


channel_linear_grad = _RowsOrPlanes(channel_linear_grad_rows, channel_linear_grad_planes, layout_arg=1)


def _channel_sums(x3, d3, center, power):
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
def standardization_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    lay, slot = op.layout, op.slot
    C, M = lay.channels, max(op.stat_count, 1)

    def wanted(name):
        return name in slot and propagate_down[slot[name]]

    dy = output_grads[0]
    if op.relu:   # through the fused ReLU: only where the output is positive
        dy = dy * (outputs[0] > 0)
        if wanted("z"):
            accumulate(input_grads[slot["z"]], dy, accum[slot["z"]])
    mean, inv_std = op.saved_mean, op.saved_inv_std
    gamma = inputs[slot["gamma"]] if "gamma" in slot and inputs[slot["gamma"]] is not None else None
    x3 = lay.view(inputs[0]) if inputs[0] is not None else None
    sum_d = sum_dxc = None
    if op.channel_params:
        d3 = lay.view(dy)
        factor = gamma.reshape(-1) if gamma is not None else np.ones(C)
        one_pass = (propagate_down[0] and (op.stats_in_one_pass or not op.batch_stat) and not op.with_stats
                    and x3 is not None and d3.shape[2] > 1)
        if one_pass:   # the sums and dx per channel in one kernel, and nothing left to do for dx
            sum_d, sum_dxc = np.empty(C), np.empty(C)
            dx3 = lay.target(input_grads[0])
            standardize_planes_grad.for_size(d3.size)(x3, d3, mean, inv_std, factor.astype(np.float64), M,
                                                      op.batch_stat, sum_d, sum_dxc, dx3,
                                                      accum[0] and lay.perm is None)
            lay.store(dx3, input_grads[0], accum[0])
        elif wanted("beta") or wanted("gamma") or (propagate_down[0] and op.batch_stat):
            # x may have been freed when only dbeta (which does not read it) is wanted
            sum_d, sum_dxc = _channel_sums(x3 if x3 is not None else d3, d3, mean, 0)
        if wanted("beta"):
            accumulate(input_grads[slot["beta"]], sum_d.reshape(lay.stat_shape), accum[slot["beta"]])
        if wanted("gamma"):
            accumulate(input_grads[slot["gamma"]], (sum_dxc * inv_std).reshape(lay.stat_shape),
                       accum[slot["gamma"]])
        if one_pass:
            return
    else:
        if wanted("beta"):
            sum_to_shape(dy, input_grads[slot["beta"]], accum[slot["beta"]])
        if wanted("gamma"):
            xhat = np.empty(dy.shape, dy.dtype)
            xhat3 = lay.target(xhat)
            channel_affine.for_size(x3.size)(x3, inv_std, -mean * inv_std, x3, False, False, xhat3)
            lay.store(xhat3, xhat)
            sum_to_shape(dy * xhat, input_grads[slot["gamma"]], accum[slot["gamma"]])
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
        sums = [sum_d, sum_dxc]
        if op.with_stats:   # the batch mean and variance are outputs too
            sums += [output_grads[1].reshape(-1).astype(np.float64),
                     output_grads[2].reshape(-1).astype(np.float64)]
        sums = op.combine_grad_sums(sums)
        q = -factor * inv_std ** 3 * sums[1] / M
        r = -factor * inv_std * sums[0] / M
        if op.with_stats:
            q = q + 2.0 * sums[3] / M
            r = r + sums[2] / M
    else:
        q = r = np.zeros(C)
    _linear_grad(lay, x3 if x3 is not None else d3, d3, mean, 2, p, q, r, input_grads[0], accum[0])


def normalization_input_names(name, n_inputs, args):
    """The names of the inputs a node of ``name`` was given (optional ones may be absent)."""
    names = [i.name for i in TABLE[name].inputs
             if not (i.name == "beta" and args.get("no_bias")) and not (i.name == "gamma" and args.get("no_scale"))]
    return ["x"] + names[1:n_inputs]


# ------------------------------------------------------------------------ norms
def weight_normalization_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """y = g w n with n = (sum w^2 + eps)^-1/2: dg = n sum(dy w), dw = g n dy - g n^3 sum(dy w) w."""
    lay = op.layout
    w3, d3 = lay.view(inputs[0]), lay.view(output_grads[0])
    zeros = np.zeros(lay.channels)
    n = op.saved_inv_norm
    _, s = _channel_sums(w3, d3, zeros, 0)
    if propagate_down[1]:
        accumulate(input_grads[1], (n * s).reshape(input_grads[1].shape), accum[1])
    if propagate_down[0]:
        g = inputs[1].reshape(-1)
        _linear_grad(lay, w3, d3, zeros, 2, g * n, -g * n ** 3 * s, zeros, input_grads[0], accum[0])


def norm_normalization_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """y = x / n, n = max(||x||_p, eps): dx = dy / n - sum(dy x) n^(-1-p) sign(x) |x|^(p-1), the
    second term absent where n is eps."""
    if not propagate_down[0]:
        return
    lay = op.layout
    x3, d3 = lay.view(inputs[0]), lay.view(output_grads[0])
    zeros = np.zeros(lay.channels)
    n = op.saved_norm
    _, s = _channel_sums(x3, d3, zeros, 0)
    coef = np.where(n > op.eps, -s * n ** (-1.0 - op.p), 0.0)
    _linear_grad(lay, x3, d3, zeros, op.p, 1.0 / n, coef, zeros, input_grads[0], accum[0])


def spectral_norm_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """u, v and sigma held fixed: dW = (dy - sum(dy W) / sigma u v^T) / sigma."""
    if not propagate_down[0]:
        return
    u, v, sigma = op.saved
    w = inputs[0]
    W, D = op.matrix(w), op.matrix(output_grads[0])
    dW = (D - (np.sum(D * W) / sigma) * np.outer(u, v)) / sigma
    accumulate(input_grads[0], op.unmatrix(dW, w.shape), accum[0])


def mean_subtraction_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """nnabla's approximation: dx = dy (1 - 1 / (batch size * t)) with the updated t."""
    if propagate_down[0]:
        scale = op.saved_scale if op.update_running_mean else 1.0
        accumulate(input_grads[0], output_grads[0] * scale, accum[0])


def clip_grad_by_norm_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dx = clip_norm * dy / ||dy|| over ``axes``."""
    if not propagate_down[0]:
        return
    if op.repeated_axes:   # nnabla's forward takes them, its backward (a Norm of dy) raises
        op.fail("axes {} name an axis more than once", tuple(op.args["axes"]))
    lay = op.layout
    d3 = lay.view(output_grads[0])
    zeros = np.zeros(lay.channels)
    _, ss = _channel_sums(d3, d3, zeros, 2)
    with np.errstate(divide="ignore"):
        scale = op.clip_norm / np.sqrt(ss)
    _linear_grad(lay, d3, d3, zeros, 2, scale, zeros, zeros, input_grads[0], accum[0])


_BLOCK = 64   # channels per thread when every channel is a single column (I == 1)


@njit   # not inline="always": ten IR copies of its power branch cost half a second of compiling
def _term(x, d, m, power):
    """What channel_sums accumulates for one element besides d."""
    xc = x - m
    if power == 0:
        return d * xc
    if power == 2:
        return xc * xc
    return abs(xc) ** power


@parallel_kernel
def channel_sums_rows(x3, d3, center, power, sum_d, sum_e):
    """channel_sums of (rows, channels): each thread walks the rows over a block of channels."""
    O, C, _ = x3.shape
    for b in prange((C + _BLOCK - 1) // _BLOCK):
        lo, hi = b * _BLOCK, min(C, (b + 1) * _BLOCK)
        acc_d = np.zeros(hi - lo)
        acc_e = np.zeros(hi - lo)
        m = center[lo:hi]
        for o in range(O):
            for c in range(hi - lo):
                acc_d[c] += d3[o, lo + c, 0]
                acc_e[c] += _term(x3[o, lo + c, 0], d3[o, lo + c, 0], m[c], power)
        for c in range(hi - lo):   # a loop: slice assignment compiles numba's shape-error path (2 s)
            sum_d[lo + c] = acc_d[c]
            sum_e[lo + c] = acc_e[c]


@njit(inline="always")
def _row_sums(x, d, m, power):
    """(sum of d, sum of the ``_term``s) over one row; the power branches outside the loops, so
    that with reassociation allowed (the kernel's fastmath) each loop vectorizes."""
    n = d.size
    sum_d = 0.0
    sum_e = 0.0
    if power == 0:
        for i in range(n):
            g = np.float64(d[i])
            sum_d += g
            sum_e += g * (x[i] - m)
    elif power == 2:
        for i in range(n):
            h = x[i] - m
            sum_d += d[i]
            sum_e += h * h
    else:
        for i in range(n):
            sum_d += d[i]
            sum_e += _term(x[i], d[i], m, power)
    return sum_d, sum_e


@njit(inline="always")
def _plane_sums(x3, d3, c, center, power):
    """_row_sums over the rows of channel c of (O, C, I) arrays, added up."""
    acc_d = 0.0
    acc_e = 0.0
    for o in range(x3.shape[0]):
        row_d, row_e = _row_sums(x3[o, c], d3[o, c], center, power)
        acc_d += row_d
        acc_e += row_e
    return acc_d, acc_e


# fastmath "reassoc" only: the float64 sums may be reordered (so they vectorize: 4.7x on a
# 4 MB float32 input, and no less exact than one running sum), nothing else
@parallel_kernel(fastmath={"reassoc"})
def channel_sums_planes(x3, d3, center, power, sum_d, sum_e):
    """Per channel c of (O, C, I) arrays: sum_d[c] = sum of d, and
    sum_e[c] = sum of d * (x - center[c])        when power == 0,
               sum of |x - center[c]| ** power   otherwise,
    accumulated in float64."""
    for c in prange(x3.shape[1]):
        sum_d[c], sum_e[c] = _plane_sums(x3, d3, c, center[c], power)


channel_sums = _RowsOrPlanes(channel_sums_rows, channel_sums_planes)


@njit(inline="always")
def affine_value(x, scale, shift, z, add_z, relu):
    """x * scale + shift, plus z when ``add_z``, through a ReLU when ``relu``: one element of
    the channel affine map (the CUDA kernels compile its py_func too)."""
    v = x * scale + shift
    if add_z:
        v += z
    if relu and v < 0:
        v = 0.0
    return v


@parallel_kernel
def channel_affine_rows(x3, scale, shift, z3, add_z, relu, y3):
    """channel_affine of (rows, channels): rows in parallel, channels in the inner loop."""
    O, C, _ = x3.shape
    for o in prange(O):
        for c in range(C):
            y3[o, c, 0] = affine_value(x3[o, c, 0], scale[c], shift[c],
                                       z3[o, c, 0] if add_z else 0.0, add_z, relu)


@parallel_kernel
def channel_affine_planes(x3, scale, shift, z3, add_z, relu, y3):
    """y = x * scale[c] + shift[c], plus z when ``add_z``, through a ReLU when ``relu``."""
    O, C, I = x3.shape
    for r in prange(O * C):
        o = r // C
        c = r - o * C
        s = scale[c]
        t = shift[c]
        for i in range(I):
            y3[o, c, i] = affine_value(x3[o, c, i], s, t, z3[o, c, i] if add_z else 0.0, add_z, relu)


channel_affine = _RowsOrPlanes(channel_affine_rows, channel_affine_planes)


@parallel_kernel(fastmath={"reassoc"})   # reassociating the float64 sums only, as channel_sums_planes
def standardize_planes(x3, gamma, beta, eps, z3, add_z, relu, mean, var, y3):
    """batch_stats and the channel affine map in one kernel: per channel c of (O, C, I), its
    mean and variance (as batch_stats computes them) into mean[c], var[c], then y = x * scale +
    shift (scale = gamma[c] / sqrt(var + eps), shift = beta[c] - mean scale, as forward folds
    them) with ``affine_value``'s z and ReLU. The second pass reads the channel from cache (its
    O * I elements having just been summed): a pass over memory less than the two kernels."""
    O, C, I = x3.shape
    n = O * I
    for c in prange(C):
        shift = np.float64(x3[0, c, 0])   # summing x - one of its values keeps var exact
        acc_s, acc_e = _plane_sums(x3, x3, c, shift, 2)
        m = acc_s / n
        v = max(acc_e / n - (m - shift) ** 2, 0.0)
        mean[c] = m
        var[c] = v
        inv_std = 1.0 / np.sqrt(v + eps)
        scale = inv_std * gamma[c]
        offset = -m * inv_std * gamma[c] + beta[c]
        for o in range(O):
            x, y, z = x3[o, c], y3[o, c], z3[o, c]
            for i in range(I):
                y[i] = affine_value(x[i], scale, offset, z[i] if add_z else 0.0, add_z, relu)


@parallel_kernel(fastmath={"reassoc"})   # reassociating the float64 sums only, as channel_sums_planes
def standardize_planes_grad(x3, d3, mean, inv_std, factor, M, batch_stat, sum_d, sum_e, dx3, accum):
    """The input gradient of a channel-wise standardization in one kernel: per channel c,
    sum_d[c] = sum of d and sum_e[c] = sum of d (x - mean[c]) (as channel_sums), then
    dx (+)= p d + q (x - mean[c]) + r with standardization_backward's p, q, r (q = r = 0
    without batch statistics), while the channel is in cache."""
    O, C, I = x3.shape
    for c in prange(C):
        m = mean[c]
        acc_d, acc_e = _plane_sums(x3, d3, c, m, 0)
        sum_d[c] = acc_d
        sum_e[c] = acc_e
        p = factor[c] * inv_std[c]
        q = -factor[c] * inv_std[c] ** 3 * acc_e / M if batch_stat else 0.0
        r = -factor[c] * inv_std[c] * acc_d / M if batch_stat else 0.0
        for o in range(O):
            _row_linear_grad(x3[o, c], d3[o, c], m, 2, p, q, r, dx3[o, c], accum)


class StatLayout:
    """How an input of ``shape`` (normalized as ``work_shape``, e.g. with its channels split
    into groups) maps to (O, C, I) when the axes ``kept`` of ``work_shape`` keep their own
    statistics."""

    def __init__(self, shape, work_shape, kept):
        self.shape = tuple(shape)
        self.work_shape = tuple(work_shape)
        kept = sorted(set(kept))
        self.stat_shape = tuple(s if a in kept else 1 for a, s in enumerate(work_shape))
        size = shape_size(work_shape)
        channels = shape_size([work_shape[a] for a in kept])
        if not kept or kept[-1] - kept[0] + 1 == len(kept):
            self.perm = None
            lo, hi = (kept[0], kept[-1] + 1) if kept else (0, 0)
            self.shape3 = (shape_size(work_shape[:lo]), channels, shape_size(work_shape[hi:]))
        else:
            self.perm = tuple(kept) + tuple(a for a in range(len(work_shape)) if a not in kept)
            self.inverse = tuple(np.argsort(self.perm))
            self.shape3 = (1, channels, size // max(channels, 1))
        self.count = self.shape3[0] * self.shape3[2]   # elements behind each statistic

    @property
    def channels(self):
        return self.shape3[1]

    def view(self, a):
        """``a`` (shaped like the input) as the (O, C, I) array the kernels take."""
        a = a.reshape(self.work_shape)
        if self.perm is not None:
            a = np.ascontiguousarray(a.transpose(self.perm))
        return a.reshape(self.shape3)

    def target(self, a):
        """Where a kernel writes an (O, C, I) result destined for ``a`` (``a`` itself when no
        transpose is involved); ``store`` then puts it into ``a``."""
        return a.reshape(self.shape3) if self.perm is None else np.empty(self.shape3, a.dtype)

    def store(self, r3, a, accum=False):
        if self.perm is None:
            return
        permuted = tuple(self.work_shape[p] for p in self.perm)
        back = r3.reshape(permuted).transpose(self.inverse).reshape(a.shape)
        if accum:
            a += back
        else:
            a[...] = back


def batch_stats(layout, x3):
    """Mean and (biased) variance per channel, in float64, in one pass over the data shifted
    by one of its own values per channel (which keeps the variance free of cancellation)."""
    C, n = layout.channels, layout.count
    if n == 0:
        return np.zeros(C), np.zeros(C)
    shift = x3[0, :, 0].astype(np.float64)
    s, ss = np.empty(C), np.empty(C)
    channel_sums.for_size(x3.size)(x3, x3, shift, 2, s, ss)
    mean = s / n
    return mean, np.maximum(ss / n - (mean - shift) ** 2, 0.0)


def _axes_list(op, axes, ndim, arg, others=()):
    """The sorted non-negative axes; one named twice (also as one of ``others``, the channel
    axis) is refused, as nnabla's axis permutation has then the wrong length."""
    listed = [normalize_axis(op, int(a), ndim, arg) for a in axes]
    for k, a in enumerate(listed):
        if a in listed[:k] or a in others:
            op.fail("{} {} name axis {} more than once{}", arg, tuple(axes), a,
                    " (it is the channel axis)" if a in others else "")
    return sorted(listed)


# ------------------------------------------------------------------------ standardizations
class Standardization(Op):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta with per-channel statistics.

    Subclasses say which axes keep statistics (``layout_of``) and how gamma/beta are shaped:
    per statistic (``channel_params``: folded into the kernel's scale and shift) or broadcast
    over the input (applied in place after normalizing). With three outputs requested
    (``output_stat``) the batch mean and variance are outputs too.
    """
    n_outputs = -1
    channel_params = True   # gamma/beta shaped like the statistics
    batch_stat = True
    relu = False            # FusedBatchNormalization
    eps = 1e-5
    stats_in_one_pass = True   # batch statistics of the local input only (standardize_planes)

    # Subclasses define ``layout_of(x)``, the StatLayout of an input of shape x (no default,
    # as one could only raise: tests/ops/test_argument_checks_b.py checks every one has it).

    def param_shape_ok(self, shape, x):
        return tuple(shape) == self.layout.stat_shape

    def setup(self, *shapes):
        x = tuple(shapes[0])
        self.layout = self.layout_of(x)
        self.slot = {name: k for k, name in enumerate(self.input_names)}
        missing = [i.name for i in self.spec.inputs[1:] if not i.optional and i.name not in self.slot]
        if missing:
            self.fail("missing input(s) {}", ", ".join(missing))
        for name in ("beta", "gamma"):
            flag = "no_bias" if name == "beta" else "no_scale"
            present = name in self.slot
            if flag in self.args and bool(self.args[flag]) == present:
                self.fail("{}={} but {} is {}", flag, self.args[flag], name,
                          "given" if present else "missing")
            if present and not self.param_shape_ok(shapes[self.slot[name]], x):
                self.fail("{} of shape {} does not fit input of shape {} (expected {})", name,
                          tuple(shapes[self.slot[name]]), x, self.expected_param_shape(x))
        for name in ("mean", "variance"):
            if name in self.slot and tuple(shapes[self.slot[name]]) != self.layout.stat_shape:
                self.fail("{} of shape {} does not fit input of shape {} (expected {})", name,
                          tuple(shapes[self.slot[name]]), x, self.layout.stat_shape)
        if "z" in self.slot and tuple(shapes[self.slot["z"]]) != x:
            self.fail("z of shape {} must have the input's shape {}", tuple(shapes[self.slot["z"]]), x)
        if not self.batch_stat and ("mean" not in self.slot or "variance" not in self.slot):
            self.fail("batch_stat=False needs the running mean and variance inputs")
        if ("mean" in self.slot) != ("variance" in self.slot):
            self.fail("the running mean and variance must be given together (only {} is)",
                      "mean" if "mean" in self.slot else "variance")
        if self.n_outputs == 3 and not self.batch_stat:
            self.fail("batch_stat=False cannot output the batch mean and variance")
        self.with_stats = self.n_outputs == 3
        return [x] + [self.layout.stat_shape] * (2 if self.with_stats else 0)

    def expected_param_shape(self, x):
        return self.layout.stat_shape

    def _param(self, inputs, name):
        return inputs[self.slot[name]] if name in self.slot else None

    def forward(self, inputs, outputs):
        self.forward_fused(inputs, outputs, self._param(inputs, "z"), self.relu)

    def forward_fused(self, inputs, outputs, z, relu):
        """The forward, adding ``z`` (None: nothing) and applying a ReLU when ``relu`` as the
        values are written: FusedBatchNormalization's epilogue, which the executor also gives a
        BatchNormalization whose output only an Add2 and a ReLU read (``fusion.py``)."""
        lay = self.layout
        x3 = lay.view(inputs[0])
        beta, gamma = self._param(inputs, "beta"), self._param(inputs, "gamma")
        z3 = lay.view(z) if z is not None else x3
        y = outputs[0]
        y3 = lay.target(y)
        if self.batch_stat and self.stats_in_one_pass and lay.count and x3.shape[2] > 1:
            C = lay.channels
            factor, offset = np.ones(C), np.zeros(C)
            if self.channel_params and gamma is not None:
                factor = gamma.reshape(-1).astype(np.float64)
            if self.channel_params and beta is not None:
                offset = beta.reshape(-1).astype(np.float64)
            mean, var = np.empty(C), np.empty(C)
            standardize_planes.for_size(x3.size)(x3, factor, offset, self.eps, z3, z is not None, relu,
                                                 mean, var, y3)
            self.saved_mean, self.saved_inv_std = mean, 1.0 / np.sqrt(var + self.eps)
        else:
            if self.batch_stat:
                mean, var = self.batch_stats(x3)
            else:
                mean = self._param(inputs, "mean").reshape(-1).astype(np.float64)
                var = self._param(inputs, "variance").reshape(-1).astype(np.float64)
            inv_std = 1.0 / np.sqrt(var + self.eps)
            self.saved_mean, self.saved_inv_std = mean, inv_std
            scale, shift = inv_std, -mean * inv_std
            if self.channel_params:
                if gamma is not None:
                    scale = scale * gamma.reshape(-1)
                    shift = shift * gamma.reshape(-1)
                if beta is not None:
                    shift = shift + beta.reshape(-1)
            channel_affine.for_size(x3.size)(x3, scale, shift, z3, z is not None, relu, y3)
        lay.store(y3, y)
        if not self.channel_params:
            if gamma is not None:
                y *= gamma
            if beta is not None:
                y += beta
        if self.with_stats:
            outputs[1].reshape(-1)[...] = mean
            outputs[2].reshape(-1)[...] = var
        if self.batch_stat and not self.recomputing:
            self.update_running_stats(inputs, mean, var)

    def update_running_stats(self, inputs, mean, var):
        """Batch normalization's moving averages (the running variance is unbiased)."""

    def batch_stats(self, x3):
        """The per-channel mean and variance of the batch (``x3`` in the layout's view)."""
        return batch_stats(self.layout, x3)

    @property
    def stat_count(self):
        """How many elements each statistic is taken over."""
        return self.layout.count

    def combine_grad_sums(self, sums):
        """The per-channel sums backward takes from every element behind the statistics: here
        the local ones (SyncBatchNormalization adds the other processes')."""
        return sums

    backward = standardization_backward

    def grad_depends_input_data(self, i, j):
        if i == 0:   # dx: centred data (batch statistics) and gamma
            # and, as nnabla's kernels read them (ours keep their own copy), the running
            # statistics in inference mode: clear_no_need_grad keeps them as nnabla does
            return ((j == 0 and self.batch_stat) or self.input_names[j] == "gamma"
                    or (not self.batch_stat and self.input_names[j] in ("mean", "variance")))
        return self.input_names[i] == "gamma" and j == 0   # dgamma: the normalized data

    def grad_depends_output_data(self, i, o):
        return self.relu and o == 0


class _BatchNormalizationBase(Standardization):
    """Statistics per ``axes`` over the other axes; running mean and variance updated in place."""
    keep_input_dtypes = ()   # set per node: the running statistics are written in place

    def layout_of(self, x):
        kept = _axes_list(self, self.axes, len(x), "axes")
        return StatLayout(x, x, kept)

    def setup(self, *shapes):
        out = super().setup(*shapes)
        self.keep_input_dtypes = tuple(self.slot[n] for n in ("mean", "variance") if n in self.slot)
        self.no_grad_inputs = self.keep_input_dtypes
        return out

    def update_running_stats(self, inputs, mean, var):
        if "mean" not in self.slot:
            return
        n = self.stat_count
        unbias = n / (n - 1.0) if n > 1 else np.inf
        with np.errstate(invalid="ignore"):
            rm = inputs[self.slot["mean"]].reshape(-1)
            rv = inputs[self.slot["variance"]].reshape(-1)
            rm[...] = self.decay_rate * rm + (1.0 - self.decay_rate) * mean
            rv[...] = self.decay_rate * rv + (1.0 - self.decay_rate) * var * unbias


@register
class BatchNormalization(_BatchNormalizationBase):
    pass


@register
class SyncBatchNormalization(_BatchNormalizationBase):
    """Batch normalization over the batches of all processes of ``comm``'s ``group``: each
    process's count, mean and variance per channel are gathered and merged (Chan's pairwise
    formula, no sums of squares), and backward all-reduces the two per-channel sums the input
    gradient needs. The gradients of beta and gamma stay each process's own, like every other
    parameter gradient (the data-parallel all-reduce of the gradients sums them).

    ``comm`` is duck-typed (ops sit below the communicators): it answers ``_gather_stats`` and
    ``_sum_arrays`` on numpy arrays (``nnabla_jit.communicators.Communicator``). Without one
    (``comm=None``, as in a network loaded from a file) this is batch normalization of the
    process's own batch."""
    _total = None
    stats_in_one_pass = False   # the statistics are merged with the other processes' first

    def setup(self, *shapes):
        for method in ("_gather_stats", "_sum_arrays") if self.comm is not None else ():
            if not callable(getattr(self.comm, method, None)):
                self.fail("comm must be a communicator of nnabla_jit.communicators (e.g. "
                          "MultiProcessDataParallelCommunicator, after init()), got {}",
                          type(self.comm).__name__)
        self._group = self.group if isinstance(self.group, str) and self.group else "world"
        return super().setup(*shapes)

    def batch_stats(self, x3):
        mean, var = batch_stats(self.layout, x3)
        if self.comm is None:
            return mean, var
        local = np.concatenate([[float(self.layout.count)], mean, var])
        gathered = self.comm._gather_stats(local, self._group)    # (processes, 1 + 2 C)
        C = self.layout.channels
        counts, means, variances = gathered[:, :1], gathered[:, 1:1 + C], gathered[:, 1 + C:]
        total = counts.sum()
        self._total = int(total)
        if total == 0:
            return mean, var
        merged_mean = (counts * means).sum(axis=0) / total
        m2 = (counts * (variances + (means - merged_mean) ** 2)).sum(axis=0)
        return merged_mean, m2 / total

    @property
    def stat_count(self):
        return self.layout.count if self._total is None else self._total

    def combine_grad_sums(self, sums):
        if self.comm is None:
            return sums
        flat = np.concatenate(sums)
        self.comm._sum_arrays(flat, self._group)
        return np.split(flat, len(sums))


@register
class FusedBatchNormalization(_BatchNormalizationBase):
    """relu(batch_normalization(x) + z)."""
    relu = True


@register
class TensorNormalization(Standardization):
    """Batch normalization's statistics without running averages."""
    layout_of = _BatchNormalizationBase.layout_of


@register
class LayerNormalization(Standardization):
    """Statistics per sample (the ``batch_axis`` axes); gamma/beta shaped like one sample."""
    channel_params = False

    def layout_of(self, x):
        self.batch_axis = _axes_list(self, self.batch_axis, len(x), "batch_axis")
        return StatLayout(x, x, self.batch_axis)

    def expected_param_shape(self, x):
        return tuple(1 if a in self.batch_axis else s for a, s in enumerate(x))

    def param_shape_ok(self, shape, x):
        return tuple(shape) == self.expected_param_shape(x)


@register
class InstanceNormalization(Standardization):
    """Statistics per sample and channel; gamma/beta have the channels (and may have the batch)."""
    channel_params = False

    def layout_of(self, x):
        self.channel_axis = normalize_axis(self, self.channel_axis, len(x), "channel_axis")
        self.batch_axis = _axes_list(self, self.batch_axis, len(x), "batch_axis", (self.channel_axis,))
        return StatLayout(x, x, self.batch_axis + [self.channel_axis])

    def expected_param_shape(self, x):
        return tuple(s if a == self.channel_axis else 1 for a, s in enumerate(x))

    def param_shape_ok(self, shape, x):
        stat = self.layout.stat_shape
        return (len(shape) == len(x) and shape[self.channel_axis] == x[self.channel_axis]
                and all(s in (1, t) for s, t in zip(shape, stat)))


@register
class GroupNormalization(Standardization):
    """Instance normalization over groups of ``channels / num_groups`` channels."""
    channel_params = False

    def layout_of(self, x):
        ca = self.channel_axis = normalize_axis(self, self.channel_axis, len(x), "channel_axis")
        self.batch_axis = _axes_list(self, self.batch_axis, len(x), "batch_axis", (ca,))
        if self.num_groups < 1 or x[ca] % self.num_groups:
            self.fail("the channel dimension {} of input shape {} is not a multiple of "
                      "num_groups={}", x[ca], x, self.num_groups)
        work = x[:ca] + (self.num_groups, x[ca] // self.num_groups) + x[ca + 1:]
        kept = [a + (a > ca) for a in self.batch_axis] + [ca]
        return StatLayout(x, work, kept)

    expected_param_shape = InstanceNormalization.expected_param_shape

    def param_shape_ok(self, shape, x):
        return tuple(shape) == self.expected_param_shape(x)


@register
class WeightStandardization(Standardization):
    """Standardize a weight per output channel (``output_stat`` gives mean and variance)."""

    def layout_of(self, x):
        self.channel_axis = normalize_axis(self, self.channel_axis, len(x), "channel_axis")
        return StatLayout(x, x, [self.channel_axis])


# ------------------------------------------------------------------------ norms
def _channel_power_sums(lay, x3, power):
    """Per channel of ``lay``, the sum of |x|^power: what WeightNormalization's and
    NormNormalization's norms are made of."""
    C = lay.channels
    unused, sums = np.empty(C), np.empty(C)
    channel_sums.for_size(x3.size)(x3, x3, np.zeros(C), power, unused, sums)
    return sums


def _scale_channels(lay, x3, scale, out):
    """out = x times its channel's ``scale``."""
    y3 = lay.target(out)
    channel_affine.for_size(x3.size)(x3, scale, np.zeros(lay.channels), x3, False, False, y3)
    lay.store(y3, out)


@register
class WeightNormalization(Op):
    """w_wn = g * w / sqrt(sum over all axes but ``dim`` of w^2 + eps)."""

    def setup(self, w, g):
        self.dim = normalize_axis(self, self.dim, len(w), "dim")
        if not self.eps > 0:
            self.fail("eps={} must be positive", self.eps)
        if shape_size(g) != w[self.dim]:
            self.fail("g of shape {} must have {} elements (weight shape {}, dim {})", g, w[self.dim], w,
                      self.dim)
        self.layout = StatLayout(w, w, [self.dim])
        return [w]

    def forward(self, inputs, outputs):
        w3 = self.layout.view(inputs[0])
        self.saved_inv_norm = 1.0 / np.sqrt(_channel_power_sums(self.layout, w3, 2) + self.eps)
        _scale_channels(self.layout, w3, inputs[1].reshape(-1) * self.saved_inv_norm, outputs[0])

    backward = weight_normalization_backward

    def grad_depends_input_data(self, i, j):
        return j == 0 or i == 0


@register
class NormNormalization(Op):
    """y = x / max(||x||_p over ``axes``, eps), as nnabla's; no axes (``()``): each element its
    own norm."""

    def setup(self, x):
        if self.p <= 0:
            self.fail("p must be positive, got {}", self.p)
        self.axes = _axes_list(self, self.axes, len(x), "axes") if self.axes is not None else list(range(len(x)))
        self.layout = StatLayout(x, x, [a for a in range(len(x)) if a not in self.axes])
        return [x]

    def forward(self, inputs, outputs):
        x3 = self.layout.view(inputs[0])
        s = _channel_power_sums(self.layout, x3, self.p)
        self.saved_norm = np.maximum(s ** (1.0 / self.p), self.eps)
        _scale_channels(self.layout, x3, 1.0 / self.saved_norm, outputs[0])

    backward = norm_normalization_backward


@register
class SpectralNorm(Op):
    """W / sigma(W), sigma estimated by ``itr`` power iterations from ``u`` (updated in place
    unless ``test``). With ``output_u`` the second output is ``u`` as it was before."""
    keep_input_dtypes = (1,)
    no_grad_inputs = (1,)

    def setup(self, w, u):
        if not 0 <= self.dim < len(w):   # nnabla takes no negative dim here
            self.fail("dim {} must be in [0, {}) (weight shape {})", self.dim, len(w), w)
        if not self.eps > 0:
            self.fail("eps={} must be positive", self.eps)
        self.perm = (self.dim,) + tuple(a for a in range(len(w)) if a != self.dim)
        self.matrix_shape = (w[self.dim], shape_size(w) // max(w[self.dim], 1))
        if tuple(u) != (w[self.dim],):
            self.fail("u of shape {} must have shape ({},) (weight shape {}, dim {})", u, w[self.dim], w,
                      self.dim)
        if self.itr < 1:
            self.fail("itr must be at least 1, got {}", self.itr)
        return [w, u] if self.output_u else [w]

    def matrix(self, w):
        return np.ascontiguousarray(w.transpose(self.perm)).reshape(self.matrix_shape)

    def unmatrix(self, m, shape):
        permuted = tuple(shape[p] for p in self.perm)
        return m.reshape(permuted).transpose(np.argsort(self.perm))

    def forward(self, inputs, outputs):
        w, u_in = inputs
        # Run again for recomputation, the forward starts from the u the first run started
        # from (u_in holds the updated one by then) and updates nothing.
        if not self.recomputing:
            self.u_before = u_in.copy()
        u_start = self.u_before
        if self.output_u:
            outputs[1][...] = u_start
        W = self.matrix(w).astype(np.float64)
        u = u_start.astype(np.float64)
        for _ in range(self.itr):
            v = W.T @ u
            v /= np.sqrt(v @ v + self.eps)
            u = W @ v
            u /= np.sqrt(u @ u + self.eps)
        sigma = u @ (W @ v)
        self.saved = (u, v, sigma)
        outputs[0][...] = w / sigma
        if not self.test and not self.recomputing:
            u_in[...] = u

    backward = spectral_norm_backward

    def need_setup_recompute(self, o):
        return True   # as nnabla: recomputing needs the u the forward started from

    def grad_depends_input_data(self, i, j):
        return j == 0


@register
class MeanSubtraction(Op):
    """y = x - running mean, the running mean being the average of every batch mean seen so far
    (``t`` counts the batches); both are updated in place when ``update_running_mean``."""
    keep_input_dtypes = (1, 2)
    no_grad_inputs = (1, 2)

    def setup(self, x, rmean, t):
        self.base_axis = normalize_axis(self, self.base_axis, len(x), "base_axis")
        if tuple(rmean) != tuple(x[self.base_axis:]):
            self.fail("running mean of shape {} must have shape {} (input shape {}, base_axis {})",
                      rmean, tuple(x[self.base_axis:]), x, self.base_axis)
        if shape_size(t) != 1:
            self.fail("t must hold one value, got shape {}", t)
        self.layout = StatLayout(x, x, range(self.base_axis, len(x)))
        return [x]

    def forward(self, inputs, outputs):
        x, rmean, t = inputs
        lay = self.layout
        x3 = lay.view(x)
        flat = rmean.reshape(-1)
        if self.update_running_mean and not self.recomputing:
            mean, _ = batch_stats(lay, x3)
            if not lay.count:   # an empty batch: a NaN mean, as in nnabla
                mean = np.full_like(mean, np.nan)
            n = float(t.reshape(-1)[0])
            flat[...] = (flat * n + mean) / (n + 1)
            t.reshape(-1)[0] = n + 1
            # an empty batch leaves a NaN mean, as in nnabla, and no gradient to scale
            self.saved_scale = 1.0 - 1.0 / (lay.count * (n + 1)) if lay.count else 1.0
        C = lay.channels
        channel_affine.for_size(x3.size)(x3, np.ones(C), -flat.astype(np.float64), x3, False, False,
                                         lay.target(outputs[0]))

    backward = mean_subtraction_backward

    def grad_depends_input_data(self, i, j):
        return False


# ------------------------------------------------------------------------ gradient clipping
@register
class ClipGradByValue(elementwise("ClipGradByValue", "x0", dx0="minimum(maximum(dy, x1), x2)")):
    """y = x; dx = dy clipped into [min, max]. The output has x's shape, as in nnabla: the
    bounds broadcast to it, never it to them."""

    def setup(self, x, lo, hi):
        out = super().setup(x, lo, hi)
        if tuple(out[0]) != tuple(x):
            self.fail("min of shape {} and max of shape {} must broadcast to x's shape {}",
                      tuple(lo), tuple(hi), tuple(x))
        return out


@register
class ClipGradByNorm(Op):
    """Identity forward; backward rescales the gradient to norm ``clip_norm`` over ``axes``."""

    def setup(self, x):
        # no axes (()): each element its own norm, as in nnabla
        axes = sorted(normalize_axis(self, int(a), len(x), "axes") for a in self.axes) \
            if self.axes is not None else list(range(len(x)))
        self.repeated_axes = len(set(axes)) < len(axes)
        self.axes = axes = sorted(set(axes))
        self.layout = StatLayout(x, x, [a for a in range(len(x)) if a not in axes])
        return [x]

    def forward(self, inputs, outputs):
        outputs[0][...] = inputs[0]

    backward = clip_grad_by_norm_backward

    def grad_depends_input_data(self, i, j):
        return False
