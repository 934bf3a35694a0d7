"""CUDA kernels of the normalizations: the standardizations (BatchNormalization with its
running statistics, FusedBatchNormalization (+ z, ReLU), SyncBatchNormalization in one process,
TensorNormalization, WeightStandardization, LayerNormalization, InstanceNormalization,
GroupNormalization), the norms (WeightNormalization, NormNormalization), MeanSubtraction,
ClipGradByNorm and SpectralNorm (its power iteration: matrix-vector products of the weight
read in place, the vectors normalised as one-channel norms).

The kernels see the input as the CPU's (O, C, I) array (``ops/normalization.py``'s
``StatLayout``); when the axes that keep their own statistics are not adjacent, the input is
first transposed into a pooled buffer (``array.move``) and the results transposed back, as the
CPU does. The algorithm is the CPU's, in a few kinds of kernel, all of them over one tiling of
the (O, C, I) data (``channel_tiles``: a thread keeps one channel and finds its elements by
additions, coalesced along I, or along C when I is small):

* per-channel sums (float64) by many blocks per channel, each storing its share, the last block
  of a channel group to arrive adding the shares up (a fixed order, whatever block is last):
  the batch statistics shifted by the channel's first element, backward's sum(dy) and
  sum(dy (x - mean)), and the norms' sum |x|^p (the per-element term is the CPU's ``_term``);
* per channel, turning them into the statistics, the running averages, the affine map's scale
  and shift, and backward's dgamma, dbeta and the coefficients p, q, r (the sums' last block
  does it in the fused kernels, one thread per channel otherwise);
* per element: y = x scale + shift (+ z, ReLU) in y's type (scale and shift rounded to it once
  per thread, as nnabla computes in float32), and dx (+)= p dy + q h(x - mean) + r in float64
  (h is the CPU's ``_odd_power``: x - mean for the standardizations).

gamma and beta shaped like the input (layer, instance and group normalization) are applied
after the standardization, read through broadcast strides (``broadcast_product_kernel``), and
their gradients are the reduction kernel's sums. Statistics stay in float64 on the device
(``op.saved_device_stats``) between forward and backward; the running mean and variance are
updated in place on the device.
"""
import numpy as np
from numba import float64, int32

from ..ops.normalization import _odd_power, _term
from . import channel_tiles, device, reduction
from .array import ADD, WRITE, move
from .channel_tiles import (THREADS, channel_totals, double_step, group_partials_done,
                            is_channel_head, tile_next, tile_start)
from .device import broadcast_strides, contiguous_strides, flat_offset
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

# Without batch statistics (inference), the statistics and the affine map in one launch
# (running_affine_kernel) instead of two; NNABLA_JIT_CUDA_FUSED_INFERENCE=0: two.
FUSED_INFERENCE = device.switch("FUSED_INFERENCE")
# With batch statistics (training), the per-channel sums and the statistics in one launch
# (batch_statistics_kernel) instead of two, and backward's sums and coefficients in one
# (gradient_sums_kernel); NNABLA_JIT_CUDA_FUSED_STATISTICS=0: two each.
FUSED_STATISTICS = device.switch("FUSED_STATISTICS")

odd_power = device_function(_odd_power.py_func)   # the CPU's per-element formulas
term = device_function(_term.py_func)
@device_function
def thread_sums(x, d, y, m, power, relu, O, C, I, tiling, active, o, p, j):
    """This thread's float64 sums of g and of ``term(x, g, m, power)`` over its elements
    (g = d, 0 where y <= 0 with ``relu``). Two cursors take its even and odd elements, and each
    pair's loads come before the pair's sums: a GPU issues in order, so one cursor would wait
    for every load before issuing the next, two keep two loads per array in flight. The sums
    are added in the thread's element order, as with one cursor."""
    sd = 0.0
    se = 0.0
    if active:
        pair = double_step(tiling)
        o2, p2, j2 = tile_next(o, p, j, C, I, tiling)
        while o < O:
            odd = o2 < O
            k = j2 if odd else j   # past the end: the even element again, added as 0
            ga = d[j]
            gb = d[k]
            xa = x[j]
            xb = x[k]
            if relu:
                if y[j] <= 0:
                    ga = 0.0
                if y[k] <= 0:
                    gb = 0.0
            eb = term(xb, gb, m, power)
            sd += ga
            se += term(xa, ga, m, power)
            sd += gb if odd else 0.0   # selects, not a branch the odd loads would sink into
            se += eb if odd else 0.0
            o, p, j = tile_next(o, p, j, C, I, pair)
            o2, p2, j2 = tile_next(o2, p2, j2, C, I, pair)
    return sd, se


@device_function
def group_sums(x, d, y, center, first_as_center, power, relu, O, C, I, tiling, partial_d,
               partial_e, arrivals, acc_d, acc_e, flag):
    """This thread's sums (thread_sums, around its channel's centre: center[c] or, with
    ``first_as_center``, the channel's first element) handed to its channel group: True in the
    group's last block to arrive, which then adds the group's shares (group_partials_done)."""
    c, active, o, p, j = tile_start(C, I, tiling)
    m = 0.0
    if active:
        m = x[c * I] if first_as_center else center[c]
    sd, se = thread_sums(x, d, y, m, power, relu, O, C, I, tiling, active, o, p, j)
    return group_partials_done(sd, se, c, active, I, tiling, partial_d, partial_e, arrivals,
                               acc_d, acc_e, flag)


@kernel
def channel_sums_kernel(x, d, y, center, power, first_as_center, relu, sum_d, sum_e,
                        partial_d, partial_e, arrivals, O, C, I, tiling):
    """Per channel c: sum_d[c] = sum of g and sum_e[c] = sum of ``term(x, g, m, power)``:
    g (x - m) for power 0, (x - m)^2 for 2, |x - m|^power otherwise, where g = d (0 where
    y <= 0 with ``relu``) and m = center[c] or, with ``first_as_center``, the channel's first
    element. Each block sums its share of the tiling, the last block of a group adds the
    group's shares."""
    acc_d = cuda.shared.array(THREADS, float64)
    acc_e = cuda.shared.array(THREADS, float64)
    flag = cuda.shared.array(1, int32)
    if group_sums(x, d, y, center, first_as_center, power, relu, O, C, I, tiling,
                  partial_d, partial_e, arrivals, acc_d, acc_e, flag):
        for k in range(tiling[0]):
            c = cuda.blockIdx.x * tiling[0] + k
            if c < C:
                channel_totals(c, partial_d, partial_e, acc_d, acc_e)
                if cuda.threadIdx.x == 0:
                    sum_d[c] = acc_d[0]
                    sum_e[c] = acc_e[0]
        if cuda.threadIdx.x == 0:
            arrivals[cuda.blockIdx.x] = 0   # ready for the next launch


@device_function
def channel_statistics(c, x, I, s, ss, n, batch_stat, running_mean, running_var,
                       update_running, decay, unbias, eps, gamma, has_gamma, beta, has_beta,
                       stats, mean_out, var_out, with_stats):
    """Channel c's mean, variance (the batch's, from the sums ``s`` and ``ss`` of x and of
    (x - its first element)^2, or the running ones), the running averages' update, and
    stats[0..3, c] = mean, 1 / sqrt(var + eps), the affine map's scale and shift."""
    if batch_stat:
        if n > 0:
            shift = x[c * I]
            mean = s / n
            var = max(ss / n - (mean - shift) * (mean - shift), 0.0)
        else:
            mean = 0.0
            var = 0.0
        if update_running:
            running_mean[c] = decay * running_mean[c] + (1.0 - decay) * mean
            running_var[c] = decay * running_var[c] + (1.0 - decay) * var * unbias
    else:
        mean = running_mean[c]
        var = running_var[c]
    inv_std, scale, offset = channel_affine(c, mean, var, eps, gamma, has_gamma, beta, has_beta)
    store_channel_stats(c, mean, var, inv_std, scale, offset, stats, mean_out, var_out,
                        with_stats)


@device_function
def channel_affine(c, mean, var, eps, gamma, has_gamma, beta, has_beta):
    """Channel c's 1 / sqrt(var + eps) and the affine map (scale, shift) y = x scale + shift
    that standardizes it and applies gamma and beta."""
    inv_std = 1.0 / (var + eps) ** 0.5
    scale = inv_std
    offset = -mean * inv_std
    if has_gamma:
        scale *= gamma[c]
        offset *= gamma[c]
    if has_beta:
        offset += beta[c]
    return inv_std, scale, offset


@device_function
def store_channel_stats(c, mean, var, inv_std, scale, offset, stats, mean_out, var_out,
                        with_stats):
    """stats[0..3, c] = mean, 1 / sqrt(var + eps), scale, shift (what backward reads), and the
    ``with_stats`` outputs."""
    stats[0, c] = mean
    stats[1, c] = inv_std
    stats[2, c] = scale
    stats[3, c] = offset
    if with_stats:
        mean_out[c] = mean
        var_out[c] = var


@kernel
def statistics_kernel(x, s, ss, n, I, batch_stat, running_mean, running_var, update_running,
                      decay, unbias, eps, gamma, has_gamma, beta, has_beta, stats, mean_out,
                      var_out, with_stats):
    """Per channel: :func:`channel_statistics` from the sums in ``s`` and ``ss``."""
    c = cuda.grid(1)
    if c < stats.shape[1]:
        channel_statistics(c, x, I, s[c], ss[c], n, batch_stat, running_mean, running_var,
                           update_running, decay, unbias, eps, gamma, has_gamma, beta, has_beta,
                           stats, mean_out, var_out, with_stats)


@kernel
def batch_statistics_kernel(x, center, first_as_center, n, running_mean, running_var,
                            update_running, decay, unbias, eps, gamma, has_gamma, beta,
                            has_beta, stats, mean_out, var_out, with_stats, partial_d, partial_e,
                            arrivals, O, C, I, tiling):
    """channel_sums_kernel's batch sums (of x and of (x - its first element)^2;
    ``first_as_center`` is True, ``center`` a float64 stand-in, so that the centre is typed as
    there) and statistics_kernel's statistics in one launch: the last block of each channel
    group turns the group's sums into the statistics."""
    acc_d = cuda.shared.array(THREADS, float64)
    acc_e = cuda.shared.array(THREADS, float64)
    flag = cuda.shared.array(1, int32)
    if group_sums(x, x, x, center, first_as_center, 2, False, O, C, I, tiling,
                  partial_d, partial_e, arrivals, acc_d, acc_e, flag):
        for k in range(tiling[0]):
            c = cuda.blockIdx.x * tiling[0] + k
            if c < C:
                channel_totals(c, partial_d, partial_e, acc_d, acc_e)
                if cuda.threadIdx.x == 0:
                    channel_statistics(c, x, I, acc_d[0], acc_e[0], n, True, running_mean,
                                       running_var, update_running, decay, unbias, eps, gamma,
                                       has_gamma, beta, has_beta, stats, mean_out, var_out,
                                       with_stats)
        if cuda.threadIdx.x == 0:
            arrivals[cuda.blockIdx.x] = 0


@kernel
def norm_statistics_kernel(s, eps, inv_power, gain, has_gain, clamp, stats):
    """Per channel of a norm: stats[0..4, c] = 0 (the centre), 1 / n with
    n = (s + eps)^(1 / power) (``clamp``: max(s^(1 / power), eps), NormNormalization's), the
    scale gain[c] / n, the shift 0, and 1 unless the clamp holds n at eps."""
    c = cuda.grid(1)
    if c < stats.shape[1]:
        kept = 1.0
        if clamp:
            norm = s[c] ** inv_power
            if norm <= eps:
                norm = eps
                kept = 0.0
            inv_norm = 1.0 / norm
        else:
            inv_norm = (s[c] + eps) ** -inv_power
        stats[0, c] = 0.0
        stats[1, c] = inv_norm
        stats[2, c] = inv_norm * gain[c] if has_gain else inv_norm
        stats[3, c] = 0.0
        stats[4, c] = kept


@device_function
def affine_value(v, scale, shift, z, j, add_z, relu, zero):
    """v scale + shift (+ z[j]), through a ReLU when ``relu``."""
    v = v * scale + shift
    if add_z:
        v += z[j]
    if relu and v < zero:
        v = zero
    return v


@device_function
def affine_elements(x, scale, shift, z, add_z, relu, y, O, C, I, tiling, o, p, j):
    """y = x scale + shift (+ z), through a ReLU when ``relu``, over this thread's elements, in
    y's type (nnabla's float32 for float32 data): ``scale`` and ``shift`` are rounded to it once.
    Two cursors as in ``thread_sums``, each pair loaded before it is stored (y may be x); past
    the end the second cursor repeats the first's element, stored twice with the same value,
    so that no branch holds its loads."""
    scale = y.dtype.type(scale)
    shift = y.dtype.type(shift)
    zero = y.dtype.type(0)
    pair = double_step(tiling)
    o2, p2, j2 = tile_next(o, p, j, C, I, tiling)
    while o < O:
        k = j2 if o2 < O else j
        va = affine_value(x[j], scale, shift, z, j, add_z, relu, zero)
        vb = affine_value(x[k], scale, shift, z, k, add_z, relu, zero)
        y[j] = va
        y[k] = vb
        o, p, j = tile_next(o, p, j, C, I, pair)
        o2, p2, j2 = tile_next(o2, p2, j2, C, I, pair)


@kernel
def channel_affine_kernel(x, stats, z, add_z, relu, y, O, C, I, tiling):
    """y = x scale[c] + shift[c] (+ z), through a ReLU when ``relu`` (stats[2..3])."""
    c, active, o, p, j = tile_start(C, I, tiling)
    if active:
        affine_elements(x, stats[2, c], stats[3, c], z, add_z, relu, y, O, C, I, tiling, o, p, j)


@kernel
def running_affine_kernel(x, running_mean, running_var, eps, gamma, has_gamma, beta, has_beta,
                          z, add_z, relu, y, stats, mean_out, var_out, with_stats, O, C, I,
                          tiling):
    """Without batch statistics, statistics_kernel and channel_affine_kernel in one launch:
    each thread computes its channel's affine map from the running mean and variance once (the
    same float64 expressions as statistics_kernel's), the thread of each channel's first
    element stores the channel's stats (for backward) and the ``with_stats`` outputs, and the
    elements are mapped as channel_affine_kernel maps them."""
    c, active, o, p, j = tile_start(C, I, tiling)
    if active:
        mean = running_mean[c]
        var = running_var[c]
        inv_std, scale, offset = channel_affine(c, mean, var, eps, gamma, has_gamma, beta,
                                                has_beta)
        if is_channel_head(c, I, tiling):
            store_channel_stats(c, mean, var, inv_std, scale, offset, stats, mean_out, var_out,
                                with_stats)
        # rounded to y's type as channel_affine_kernel rounds the float64 stats (the simulator
        # computes the lines above in the inputs' type, NumPy's rule: the same values)
        affine_elements(x, scale, offset, z, add_z, relu, y, O, C, I, tiling, o, p, j)


@kernel
def broadcast_product_kernel(a, g, has_g, g_strides, b, has_b, b_strides, shape, out):
    """out[i] = a[i] g[.] + b[.], g and b (each optional) read through broadcast strides."""
    i = cuda.grid(1)
    if i < out.size:
        v = a[i]
        if has_g:
            v *= g[flat_offset(i, shape, g_strides)]
        if has_b:
            v += b[flat_offset(i, shape, b_strides)]
        out[i] = v


@device_function
def channel_coefficients(c, s_d, s_dxc, stats, count, gamma, has_gamma, batch_stat, dmean, dvar,
                         with_stats, dbeta, want_beta, accum_beta, dgamma, want_gamma,
                         accum_gamma, coef):
    """Channel c, from its sums s_d = sum(g) and s_dxc = sum(g (x - mean)): dbeta (+)= s_d,
    dgamma (+)= s_dxc / std, and the coefficients coef[0..2, c] = p, q, r of
    dx = p g + q (x - mean) + r."""
    inv_std = stats[1, c]
    if want_beta:
        dbeta[c] = dbeta[c] + s_d if accum_beta else s_d
    if want_gamma:
        v = s_dxc * inv_std
        dgamma[c] = dgamma[c] + v if accum_gamma else v
    factor = gamma[c] if has_gamma else 1.0
    p = factor * inv_std
    q = 0.0
    r = 0.0
    if batch_stat:
        q = -factor * inv_std * inv_std * inv_std * s_dxc / count
        r = -factor * inv_std * s_d / count
        if with_stats:
            q += 2.0 * dvar[c] / count
            r += dmean[c] / count
    coef[0, c] = p
    coef[1, c] = q
    coef[2, c] = r


@kernel
def gradient_coefficients_kernel(stats, sum_d, sum_dxc, count, gamma, has_gamma, batch_stat,
                                 dmean, dvar, with_stats, dbeta, want_beta, accum_beta, dgamma,
                                 want_gamma, accum_gamma, coef):
    """Per channel: :func:`channel_coefficients` from the sums in ``sum_d`` and ``sum_dxc``."""
    c = cuda.grid(1)
    if c < coef.shape[1]:
        channel_coefficients(c, sum_d[c], sum_dxc[c], stats, count, gamma, has_gamma,
                             batch_stat, dmean, dvar, with_stats, dbeta, want_beta, accum_beta,
                             dgamma, want_gamma, accum_gamma, coef)


@kernel
def gradient_sums_kernel(x, dy, y, center, first_as_center, relu, stats, count, gamma,
                         has_gamma, batch_stat, dmean, dvar, with_stats, dbeta, want_beta,
                         accum_beta, dgamma, want_gamma, accum_gamma, coef, partial_d, partial_e,
                         arrivals, O, C, I, tiling):
    """channel_sums_kernel's backward sums (of g and of g (x - mean), ``first_as_center``
    False as there, so that the centre is typed as there) and gradient_coefficients_kernel's
    coefficients in one launch: the last block of each channel group computes the group's
    parameter gradients and coefficients."""
    acc_d = cuda.shared.array(THREADS, float64)
    acc_e = cuda.shared.array(THREADS, float64)
    flag = cuda.shared.array(1, int32)
    if group_sums(x, dy, y, center, first_as_center, 0, relu, O, C, I, tiling,
                  partial_d, partial_e, arrivals, acc_d, acc_e, flag):
        for k in range(tiling[0]):
            c = cuda.blockIdx.x * tiling[0] + k
            if c < C:
                channel_totals(c, partial_d, partial_e, acc_d, acc_e)
                if cuda.threadIdx.x == 0:
                    channel_coefficients(c, acc_d[0], acc_e[0], stats, count, gamma, has_gamma,
                                         batch_stat, dmean, dvar, with_stats, dbeta, want_beta,
                                         accum_beta, dgamma, want_gamma, accum_gamma, coef)
        if cuda.threadIdx.x == 0:
            arrivals[cuda.blockIdx.x] = 0


@kernel
def norm_coefficients_kernel(stats, sum_dx, power, gain, has_gain, dgain, want_gain,
                             accum_gain, coef):
    """Per channel of a norm y = gain x / n: dgain (+)= sum(dy x) / n, and dx = p dy + q h(x)
    with p = gain / n, q = -gain sum(dy x) / n^(1 + power)."""
    c = cuda.grid(1)
    if c < coef.shape[1]:
        inv_norm = stats[1, c]
        if want_gain:
            v = sum_dx[c] * inv_norm
            dgain[c] = dgain[c] + v if accum_gain else v
        factor = gain[c] if has_gain else 1.0
        coef[0, c] = factor * inv_norm
        coef[1, c] = -factor * sum_dx[c] * inv_norm ** (1.0 + power) * stats[4, c]
        coef[2, c] = 0.0


@kernel
def linear_grad_kernel(x, dy, y, relu, stats, coef, power, dx, accum, O, C, I, tiling):
    """dx (+)= p[c] g + q[c] h(x - mean[c]) + r[c], g = dy (0 where y <= 0 with ``relu``),
    h = ``odd_power`` (the identity for power 2); in float64 as the CPU computes it."""
    c, active, o, p, j = tile_start(C, I, tiling)
    if active:
        mean = stats[0, c]
        p_c = coef[0, c]
        q_c = coef[1, c]
        r_c = coef[2, c]
        while o < O:
            g = dy[j]
            if relu and y[j] <= 0:
                g = 0.0
            v = p_c * g + q_c * odd_power(x[j] - mean, power) + r_c
            if accum:
                dx[j] += v
            else:
                dx[j] = v
            o, p, j = tile_next(o, p, j, C, I, tiling)


@kernel
def masked_copy_kernel(dy, y, dz, accum):
    """dz (+)= dy where y > 0 (the gradient of z through the fused ReLU)."""
    i = cuda.grid(1)
    if i < dz.size:
        v = dy[i] if y[i] > 0 else 0.0
        if accum:
            dz[i] += v
        else:
            dz[i] = v


def _flat(a):
    return device.flat(a)


def _slot(op, arrays, name):
    """The array of input ``name``, flat, or None when the node has no such input."""
    k = op.slot.get(name)
    return None if k is None or arrays[k] is None else _flat(arrays[k])


# ------------------------------------------------------------------ the (O, C, I) view
def _permuted(lay):
    """(box shape, the input's strides over it) of the transposed work shape."""
    strides = contiguous_strides(lay.work_shape)
    return (tuple(lay.work_shape[p] for p in lay.perm), tuple(strides[p] for p in lay.perm))


def _view(lay, a, owned):
    """Device array ``a`` (shaped like the input) as the kernels' contiguous (O, C, I) data,
    flat: ``a`` itself, or a transposed copy from the pool (listed in ``owned``)."""
    if lay.perm is None:
        return _flat(a)
    box, strides = _permuted(lay)
    t = device.flat(_temporary(a.shape, a.dtype, owned))
    move(a, t, box, strides, contiguous_strides(box))
    return t


def _target(lay, a, owned):
    """Where a kernel writes an (O, C, I) result destined for ``a``; ``_store`` puts it there."""
    return _flat(a) if lay.perm is None else _temporary((a.size,), a.dtype, owned)


def _store(lay, t, a, accum=False):
    """Transpose the (O, C, I) result ``t`` back into ``a`` (nothing to do without a perm)."""
    if lay.perm is not None:
        box, strides = _permuted(lay)
        move(t, a, box, contiguous_strides(box), strides, mode=ADD if accum else WRITE)


def _temporary(shape, dtype, owned):
    """A pooled device array that ``_release_all(owned)`` gives back."""
    t = device.empty(shape, dtype)
    owned.append(t)
    return t


def _release_all(owned):
    """Give the temporaries back to the pool, once the launcher that made them has returned
    (``device.release`` keeps an array another reference still holds)."""
    while owned:
        device.release(owned.pop())


def _channel_sums(op, x, d, y, center, power, first_as_center, relu=False):
    """(sum_d, sum_e) per channel (``channel_sums_kernel``), in a float64 workspace."""
    C = op.layout.shape3[1]
    sums = device.reshaped(device.workspace("standardization sums", 2 * C, np.float64), 2, C)
    sum_d, sum_e = device.row(sums, 0), device.row(sums, 1)
    channel_tiles.launch(channel_sums_kernel, op.layout.shape3, x, d, y,
                         center if center is not None else sum_d, power, first_as_center, relu,
                         sum_d, sum_e, sums=True)
    return sum_d, sum_e


def _broadcast_product(a, out, g=None, b=None):
    """out = a g + b over out's shape, g and b broadcast (NumPy rules); a contiguous like out."""
    shape = tuple(out.shape) or (1,)
    stand_in = _flat(a)
    device.launch(broadcast_product_kernel, out.size, stand_in,
                  _flat(g) if g is not None else stand_in, g is not None,
                  broadcast_strides(g.shape, shape) if g is not None else (0,) * len(shape),
                  _flat(b) if b is not None else stand_in, b is not None,
                  broadcast_strides(b.shape, shape) if b is not None else (0,) * len(shape),
                  shape, _flat(out))


# ------------------------------------------------------------------ standardizations
def running_statistics(op):
    """The inputs the forward updates in place (BatchNormalization's running mean and variance
    in training)."""
    if not op.batch_stat or op.recomputing:
        return ()
    return tuple(op.slot[name] for name in ("mean", "variance") if name in op.slot)


def _one_process(op):
    """SyncBatchNormalization with a communicator merges statistics on the host."""
    return getattr(op, "comm", None) is None


def _param(op, arrays, name):
    """Input ``name`` (unflattened) or None."""
    k = op.slot.get(name)
    return None if k is None else arrays[k]


@forward("BatchNormalization", "FusedBatchNormalization", "SyncBatchNormalization",
         "TensorNormalization", "WeightStandardization", "LayerNormalization",
         "InstanceNormalization", "GroupNormalization", when=_one_process,
         updates=running_statistics)
def standardization_forward(op, inputs, outputs):
    owned = []
    _standardize(op, inputs, outputs, owned)
    _release_all(owned)


def _standardize(op, inputs, outputs, owned):
    lay = op.layout
    _, C, I = lay.shape3
    x, y = _view(lay, inputs[0], owned), _target(lay, outputs[0], owned)
    stats = getattr(op, "saved_device_stats", None)
    if stats is None or stats.shape[1] != C:
        stats = op.saved_device_stats = device.empty((4, C), np.float64)
    stand_in = device.row(stats, 0)   # for the arrays a launch does not read or write
    fused_statistics = FUSED_STATISTICS and op.batch_stat and x.size > 0
    s, ss = (_channel_sums(op, x, x, x, None, 2, True)
             if op.batch_stat and x.size and not fused_statistics else (stand_in, stand_in))
    rm, rv = _slot(op, inputs, "mean"), _slot(op, inputs, "variance")
    update = op.batch_stat and rm is not None and not op.recomputing
    n = lay.count
    per_channel = op.channel_params
    gamma = _slot(op, inputs, "gamma") if per_channel else None
    beta = _slot(op, inputs, "beta") if per_channel else None
    mean_out = _flat(outputs[1]) if op.with_stats else stand_in
    var_out = _flat(outputs[2]) if op.with_stats else stand_in
    z = _view(lay, inputs[op.slot["z"]], owned) if "z" in op.slot else None
    if FUSED_INFERENCE and not op.batch_stat and rm is not None and rv is not None and y.size:
        channel_tiles.launch(running_affine_kernel, lay.shape3, x, rm, rv, float(op.eps),
                             gamma if gamma is not None else stand_in, gamma is not None,
                             beta if beta is not None else stand_in, beta is not None,
                             z if z is not None else x, z is not None, op.relu, y, stats, mean_out,
                             var_out, op.with_stats)
    else:
        running = (rm if rm is not None else stand_in, rv if rv is not None else stand_in,
                   update, float(getattr(op, "decay_rate", 0.0)),
                   n / (n - 1.0) if n > 1 else np.inf, float(op.eps),
                   gamma if gamma is not None else stand_in, gamma is not None,
                   beta if beta is not None else stand_in, beta is not None, stats, mean_out,
                   var_out, op.with_stats)
        if fused_statistics:
            channel_tiles.launch(batch_statistics_kernel, lay.shape3, x, stand_in, True, n,
                                 *running, sums=True)
        else:
            device.launch(statistics_kernel, C, x if x.size else stand_in, s, ss, n, I,
                          op.batch_stat, *running)
        channel_tiles.launch(channel_affine_kernel, lay.shape3, x, stats, z if z is not None else x,
                             z is not None, op.relu, y)
    _store(lay, y, outputs[0])
    gamma, beta = _param(op, inputs, "gamma"), _param(op, inputs, "beta")
    if not per_channel and (gamma is not None or beta is not None):
        _broadcast_product(outputs[0], outputs[0], gamma, beta)


def _elementwise_params_grads(op, inputs, dy, input_grads, wanted, accum, owned):
    """dbeta and dgamma of per-element gamma / beta: sums of dy and dy xhat to their shapes."""
    slot, lay = op.slot, op.layout
    if wanted("beta"):
        reduction.sum_to_shape(dy, input_grads[slot["beta"]], accum[slot["beta"]])
    if wanted("gamma"):
        x = _view(lay, inputs[0], owned)
        xhat = _temporary(dy.shape, dy.dtype, owned)
        xhat_view = _target(lay, xhat, owned)
        channel_tiles.launch(channel_affine_kernel, lay.shape3, x, op.saved_device_stats, x, False,
                             False, xhat_view)   # stats' scale and shift: 1 / std, -mean / std
        _store(lay, xhat_view, xhat)
        _broadcast_product(xhat, xhat, dy)
        reduction.sum_to_shape(xhat, input_grads[slot["gamma"]], accum[slot["gamma"]])


@backward("BatchNormalization", "FusedBatchNormalization", "SyncBatchNormalization",
          "TensorNormalization", "WeightStandardization", "LayerNormalization",
          "InstanceNormalization", "GroupNormalization")
def standardization_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                             accum):
    owned = []
    _standardization_grads(op, inputs, outputs, output_grads, input_grads, propagate_down, accum,
                           owned)
    _release_all(owned)


def _standardization_grads(op, inputs, outputs, output_grads, input_grads, propagate_down, accum,
                           owned):
    lay, slot = op.layout, op.slot
    C = lay.channels

    def wanted(name):
        return name in slot and propagate_down[slot[name]]

    dy_full = output_grads[0]
    stats = op.saved_device_stats
    gamma_full = _param(op, inputs, "gamma")
    if op.channel_params:
        gamma = _flat(gamma_full) if gamma_full is not None else None
        params_wanted = wanted("beta") or wanted("gamma")
    else:   # per-element gamma / beta: their gradients here, dx from dy gamma
        _elementwise_params_grads(op, inputs, dy_full, input_grads, wanted, accum, owned)
        gamma, params_wanted = None, False
        if gamma_full is not None and propagate_down[0]:
            scaled = _temporary(dy_full.shape, dy_full.dtype, owned)
            _broadcast_product(dy_full, scaled, gamma_full)
            dy_full = scaled
    dy = _view(lay, dy_full, owned)
    y = _view(lay, outputs[0], owned) if op.relu else dy
    if op.relu and wanted("z"):   # the fused ReLU's: dz (+)= dy where y > 0
        k = slot["z"]
        dz = _target(lay, input_grads[k], owned)
        device.launch(masked_copy_kernel, dy.size, dy, y, dz, accum[k] and lay.perm is None)
        _store(lay, dz, input_grads[k], accum[k])
    need_sums = params_wanted or (propagate_down[0] and op.batch_stat)
    if not (need_sums or propagate_down[0]):
        return
    x = _view(lay, inputs[0], owned) if inputs[0] is not None else dy   # unread for dbeta alone
    stand_in = mean = device.row(stats, 0)
    fused_sums = FUSED_STATISTICS and need_sums
    if need_sums and not fused_sums:
        sum_d, sum_dxc = _channel_sums(op, x, dy, y, mean, 0, False, op.relu)
    else:
        sum_d = sum_dxc = stand_in   # not read
    coef = device.reshaped(device.workspace("standardization coefficients", 3 * C, np.float64),
                           3, C)
    grad = (lambda name: _flat(input_grads[slot[name]]) if params_wanted and wanted(name)
            else stand_in)
    acc = (lambda name: bool(accum[slot[name]]) if wanted(name) else False)
    dmean = _flat(output_grads[1]) if op.with_stats else stand_in
    dvar = _flat(output_grads[2]) if op.with_stats else stand_in
    coefficients = (stats, max(lay.count, 1), gamma if gamma is not None else stand_in,
                    gamma is not None, op.batch_stat, dmean, dvar, op.with_stats, grad("beta"),
                    params_wanted and wanted("beta"), acc("beta"), grad("gamma"),
                    params_wanted and wanted("gamma"), acc("gamma"), coef)
    if fused_sums:
        channel_tiles.launch(gradient_sums_kernel, lay.shape3, x, dy, y, mean, False, op.relu,
                             *coefficients, sums=True)
    else:
        device.launch(gradient_coefficients_kernel, C, stats, sum_d, sum_dxc,
                      *coefficients[1:])
    if propagate_down[0]:
        dx = _target(lay, input_grads[0], owned)
        channel_tiles.launch(linear_grad_kernel, lay.shape3, x, dy, y, op.relu, stats, coef, 2, dx,
                             accum[0] and lay.perm is None)
        _store(lay, dx, input_grads[0], accum[0])


# ------------------------------------------------------------------ norms
def _norm_power(op):
    return 2 if op.name == "WeightNormalization" else float(op.p)


@forward("WeightNormalization", "NormNormalization")
def norm_forward(op, inputs, outputs):
    """y = gain x / (sum |x|^p + eps)^(1/p) per channel (WeightNormalization: p = 2, the gain
    g; NormNormalization: no gain, and x / max(||x||_p, eps))."""
    owned = []
    lay = op.layout
    C = lay.channels
    power = _norm_power(op)
    x, y = _view(lay, inputs[0], owned), _target(lay, outputs[0], owned)
    zeros = device.workspace("norm centre", C, np.float64)
    device.fill(zeros, 0)
    _, s = _channel_sums(op, x, x, x, zeros, power, False)
    stats = getattr(op, "saved_device_stats", None)
    if stats is None or stats.shape[1] != C:
        stats = op.saved_device_stats = device.empty((5, C), np.float64)
    gain = _flat(inputs[1]) if len(inputs) > 1 else device.row(stats, 0)
    device.launch(norm_statistics_kernel, C, s, float(op.eps), 1.0 / power, gain,
                  len(inputs) > 1, op.name == "NormNormalization", stats)
    channel_tiles.launch(channel_affine_kernel, lay.shape3, x, stats, x, False, False, y)
    _store(lay, y, outputs[0])
    del x, y
    _release_all(owned)


@backward("WeightNormalization", "NormNormalization")
def norm_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    has_gain = len(inputs) > 1
    want_gain = has_gain and propagate_down[1]
    if not (propagate_down[0] or want_gain):
        return
    owned = []
    lay = op.layout
    C = lay.channels
    power = _norm_power(op)
    stats = op.saved_device_stats
    x, dy = _view(lay, inputs[0], owned), _view(lay, output_grads[0], owned)
    stand_in = device.row(stats, 0)
    _, s = _channel_sums(op, x, dy, dy, stand_in, 0, False)   # stats[0]: the zero centre
    coef = device.reshaped(device.workspace("standardization coefficients", 3 * C, np.float64),
                           3, C)
    device.launch(norm_coefficients_kernel, C, stats, s, power,
                  _flat(inputs[1]) if has_gain else stand_in, has_gain,
                  _flat(input_grads[1]) if want_gain else stand_in, want_gain,
                  bool(accum[1]) if want_gain else False, coef)
    if propagate_down[0]:
        dx = _target(lay, input_grads[0], owned)
        channel_tiles.launch(linear_grad_kernel, lay.shape3, x, dy, dy, False, stats, coef, power,
                             dx, accum[0] and lay.perm is None)
        _store(lay, dx, input_grads[0], accum[0])
        del dx
    del x, dy
    _release_all(owned)


# ------------------------------------------------------------------ MeanSubtraction
@kernel
def running_mean_kernel(s, count, running_mean, t, update, stats, coef):
    """Per channel: with ``update`` the running mean takes in this batch's mean s / count as the
    (t + 1)-th and coef[0] = 1 - 1 / (count (t + 1)) (nnabla's gradient scale); stats map
    x to x - running mean."""
    c = cuda.grid(1)
    if c < stats.shape[1]:
        if update:
            n = t[0]
            running_mean[c] = (running_mean[c] * n + s[c] / count) / (n + 1.0)
            coef[0, c] = 1.0 - 1.0 / (count * (n + 1.0))
            coef[1, c] = 0.0
            coef[2, c] = 0.0
        stats[0, c] = 0.0
        stats[1, c] = 1.0
        stats[2, c] = 1.0
        stats[3, c] = -running_mean[c]


@kernel
def count_batch_kernel(t):
    """t += 1 (one thread, after the running mean read t)."""
    if cuda.grid(1) == 0:
        t[0] += 1


def _updates_running_mean(op):
    return op.update_running_mean and not op.recomputing


def _mean_updated(op):
    """The inputs MeanSubtraction's forward updates in place: the running mean and t."""
    return (1, 2) if _updates_running_mean(op) else ()


def _saved(op, name, rows, C):
    """An op-owned float64 (rows, C) device array ``name`` (kept from forward to backward)."""
    array = getattr(op, name, None)
    if array is None or array.shape != (rows, C):
        array = device.empty((rows, C), np.float64)
        setattr(op, name, array)
    return array


@forward("MeanSubtraction", updates=_mean_updated)
def mean_subtraction_forward(op, inputs, outputs):
    owned = []
    lay = op.layout
    C = lay.channels
    x, y = _view(lay, inputs[0], owned), _target(lay, outputs[0], owned)
    stats = _saved(op, "saved_device_stats", 4, C)
    coef = _saved(op, "saved_device_coef", 3, C)
    update = _updates_running_mean(op)
    if update and x.size:
        zeros = device.workspace("norm centre", C, np.float64)
        device.fill(zeros, 0)
        s, _ = _channel_sums(op, x, x, x, zeros, 0, False)
    else:
        s = device.row(stats, 0)   # a stand-in, not read
    t = _flat(inputs[2])
    device.launch(running_mean_kernel, C, s, float(max(lay.count, 1)), _flat(inputs[1]), t,
                  update and x.size > 0, stats, coef)
    if update and x.size:
        device.launch(count_batch_kernel, 1, t)
    channel_tiles.launch(channel_affine_kernel, lay.shape3, x, stats, x, False, False, y)
    _store(lay, y, outputs[0])
    del x, y
    _release_all(owned)


@backward("MeanSubtraction")
def mean_subtraction_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                              accum):
    """nnabla's approximation: dx = dy (1 - 1 / (batch size * t)), t the updated count."""
    if not propagate_down[0]:
        return
    dy, dx = _flat(output_grads[0]), _flat(input_grads[0])
    if not op.update_running_mean:
        if accum[0]:
            device.add_into(dx, dy)
        else:
            device.copy(dy, dx)
        return
    owned = []
    lay = op.layout
    d = _view(lay, output_grads[0], owned)
    target = _target(lay, input_grads[0], owned)
    channel_tiles.launch(linear_grad_kernel, lay.shape3, d, d, d, False, op.saved_device_stats,
                         op.saved_device_coef, 2, target, accum[0] and lay.perm is None)
    _store(lay, target, input_grads[0], accum[0])
    del d, target
    _release_all(owned)


# ------------------------------------------------------------------ ClipGradByNorm
@forward("ClipGradByNorm")
def clip_grad_by_norm_forward(op, inputs, outputs):
    device.copy(inputs[0], outputs[0])


@backward("ClipGradByNorm")
def clip_grad_by_norm_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                               accum):
    """dx = clip_norm dy / ||dy|| over ``axes``: a norm's gradient with gain clip_norm and no
    term in dy itself (its coefficient q is given sum(dy x) = 0)."""
    if not propagate_down[0]:
        return
    owned = []
    lay = op.layout
    C = lay.channels
    d = _view(lay, output_grads[0], owned)
    zeros = device.workspace("norm centre", C, np.float64)
    device.fill(zeros, 0)
    _, squares = _channel_sums(op, d, d, d, zeros, 2, False)
    gain = device.workspace("clip norm", C, np.float64)
    device.fill(gain, float(op.clip_norm))
    stats = _temporary((5, C), np.float64, owned)
    device.launch(norm_statistics_kernel, C, squares, 0.0, 0.5, gain, True, False, stats)
    coef = device.reshaped(device.workspace("standardization coefficients", 3 * C, np.float64),
                           3, C)
    device.launch(norm_coefficients_kernel, C, stats, zeros, 2, gain, True, zeros, False, False,
                  coef)
    target = _target(lay, input_grads[0], owned)
    channel_tiles.launch(linear_grad_kernel, lay.shape3, d, d, d, False, stats, coef, 2, target,
                         accum[0] and lay.perm is None)
    _store(lay, target, input_grads[0], accum[0])
    del d, target, stats
    _release_all(owned)


# ------------------------------------------------------------------ SpectralNorm
# W, the (rows, cols) matrix of w (rows along ``dim``, cols the other axes in order), is read
# in place: W[r, c] lies at (c // inner) rows inner + r inner + c % inner, inner being the size
# of the axes after ``dim``. The vectors' dot products and normalisations are one-channel sums
# and norms (``channel_sums_kernel``, ``norm_statistics_kernel``, ``channel_affine_kernel``).
@device_function
def matrix_offset(r, c, rows, inner):
    """The flat offset in w of W[r, c]."""
    return (c // inner) * rows * inner + r * inner + c % inner


@kernel
def matvec_kernel(w, x, y, transpose, rows, inner):
    """y = W x, or W^T x with ``transpose`` (one thread per element of y, float64 sums)."""
    i = cuda.grid(1)
    if i < y.size:
        acc = 0.0
        for k in range(x.size):
            if transpose:
                acc += w[matrix_offset(k, i, rows, inner)] * x[k]
            else:
                acc += w[matrix_offset(i, k, rows, inner)] * x[k]
        y[i] = acc


@kernel
def spectral_grad_kernel(d, singular, dot, rows, inner, dx, accum):
    """dW (+)= (D - sum(D W) / sigma u v^T) / sigma, element by element of w's layout
    (singular: u, v, sigma; dot[0]: sum(D W))."""
    i = cuda.grid(1)
    if i < dx.size:
        r = (i // inner) % rows
        c = (i // (rows * inner)) * inner + i % inner
        sigma = singular[singular.size - 1]
        g = (d[i] - dot[0] / sigma * singular[r] * singular[rows + c]) / sigma
        if accum:
            dx[i] += g
        else:
            dx[i] = g


def _vector_sums(a, b, power, sums):
    """sums[1] = sum(a b) (power 0) or sum(a^2) (power 2, b unread); sums[0] is scratch."""
    zero = device.workspace("norm centre", 1, np.float64)
    device.fill(zero, 0)
    channel_tiles.launch(channel_sums_kernel, (1, 1, a.size), a, b, a, zero, power, False, False,
                         sums[0:1], sums[1:2], sums=True)


def _scale_by_inverse(s, eps, inv_power, x, y):
    """y = x (s[0] + eps)^-inv_power (y may be x)."""
    stats = device.workspace("spectral norm scale", 5, np.float64).reshape(5, 1)
    device.launch(norm_statistics_kernel, 1, s, eps, inv_power, s, False, False, stats)
    channel_tiles.launch(channel_affine_kernel, (1, 1, x.size), x, stats, x, False, False, y)


def _inner_size(op, shape):
    """The size of the axes of w after ``dim``."""
    return int(np.prod(shape[op.dim + 1:], dtype=np.int64))


def _spectral_updates(op):
    """The input SpectralNorm's forward updates in place: u, unless testing or recomputing."""
    return () if op.test or op.recomputing else (1,)


def _nonempty_weight(op):
    """An empty weight (sigma 0, nothing to compute) runs on the host."""
    return min(op.matrix_shape) > 0


@forward("SpectralNorm", when=_nonempty_weight, updates=_spectral_updates)
def spectral_norm_forward(op, inputs, outputs):
    """itr power-iteration rounds from the u the forward started from (kept on the op, so that
    a recomputation starts from it again), then y = w / sigma."""
    rows, cols = op.matrix_shape
    inner = _inner_size(op, inputs[0].shape)
    w, u_in = _flat(inputs[0]), _flat(inputs[1])
    first_run = getattr(op, "saved_device_u_before", None) is None
    u_before = _saved(op, "saved_device_u_before", 1, rows)[0]
    if first_run or not op.recomputing:
        device.copy(u_in, u_before)
    if op.output_u:
        device.copy(u_before, outputs[1])
    singular = _saved(op, "saved_device_singular", 1, rows + cols + 1)[0]   # u, v, sigma
    u, v, sigma = singular[:rows], singular[rows:rows + cols], singular[rows + cols:]
    wv = device.workspace("spectral norm Wv", rows, np.float64)
    sums = device.workspace("spectral norm sums", 2, np.float64)
    device.copy(u_before, u)
    eps = float(op.eps)
    for _ in range(op.itr):
        device.launch(matvec_kernel, cols, w, u, v, True, rows, inner)
        _vector_sums(v, v, 2, sums)
        _scale_by_inverse(sums[1:2], eps, 0.5, v, v)
        device.launch(matvec_kernel, rows, w, v, wv, False, rows, inner)
        device.copy(wv, u)
        _vector_sums(u, u, 2, sums)
        _scale_by_inverse(sums[1:2], eps, 0.5, u, u)
    _vector_sums(u, wv, 0, sums)
    device.copy(sums[1:2], sigma)
    _scale_by_inverse(sigma, 0.0, 1.0, w, _flat(outputs[0]))
    if 1 in _spectral_updates(op):
        device.copy(u, u_in)


@backward("SpectralNorm")
def spectral_norm_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """u, v and sigma held fixed: dW = (dy - sum(dy W) / sigma u v^T) / sigma."""
    if not propagate_down[0]:
        return
    rows, cols = op.matrix_shape
    inner = _inner_size(op, inputs[0].shape)
    d = _flat(output_grads[0])
    sums = device.workspace("spectral norm sums", 2, np.float64)
    _vector_sums(d, _flat(inputs[0]), 0, sums)
    device.launch(spectral_grad_kernel, d.size, d, op.saved_device_singular[0], sums[1:2], rows,
                  inner, _flat(input_grads[0]), bool(accum[0]))
