"""CUDA kernels of the standardizations with per-channel gamma / beta over adjacent channel
axes: BatchNormalization (with its running statistics), FusedBatchNormalization (+ z, ReLU),
SyncBatchNormalization in one process, TensorNormalization and WeightStandardization. The
others (per-element gamma / beta, or statistics over non-adjacent axes) run their CPU kernels.

The input is the CPU's (O, C, I) view (``ops/normalization.py``'s ``StatLayout``) and the
algorithm is the CPU's, in three kinds of kernel:

* per-channel sums, one block per channel reducing in shared memory (float64): the batch
  statistics shifted by the channel's first element, and backward's sum(dy) and
  sum(dy (x - mean));
* one thread per channel turning them into the statistics, the running averages, the affine
  map's scale and shift, and backward's dgamma, dbeta and the coefficients p, q, r;
* one thread per element: y = x scale + shift (+ z, ReLU), and dx (+)= p dy + q (x - mean) + r.

Statistics stay in float64 on the device (``op.saved_device_stats``) between forward and
backward; the running mean and variance are updated in place on the device.
"""
import numpy as np
from numba import float64

from . import device
from .registry import backward, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

BLOCK = 128   # most threads reducing one channel (a power of two: the combine halves it)


@kernel
def channel_sums_kernel(x, d, y, center, power, first_as_center, relu, sum_d, sum_e, O, C, I):
    """Per channel c: sum_d[c] = sum of g, sum_e[c] = sum of g (x - m) (power 0) or of
    (x - m)^2 (power 2), where g = d (0 where y <= 0 with ``relu``) and m = center[c] or, with
    ``first_as_center``, the channel's first element."""
    acc_d = cuda.shared.array(BLOCK, float64)
    acc_e = cuda.shared.array(BLOCK, float64)
    c = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n_threads = cuda.blockDim.x
    m = x[c * I] if first_as_center else center[c]
    sd = 0.0
    se = 0.0
    q = t
    while q < O * I:
        o = q // I
        j = (o * C + c) * I + q - o * I
        xc = x[j] - m
        g = d[j]
        if relu and y[j] <= 0:
            g = 0.0
        sd += g
        se += xc * xc if power == 2 else g * xc
        q += n_threads
    acc_d[t] = sd
    acc_e[t] = se
    cuda.syncthreads()
    step = n_threads // 2
    while step > 0:
        if t < step:
            acc_d[t] += acc_d[t + step]
            acc_e[t] += acc_e[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        sum_d[c] = acc_d[0]
        sum_e[c] = acc_e[0]


@kernel
def statistics_kernel(x, s, ss, n, I, batch_stat, running_mean, running_var, update_running,
                      decay, unbias, eps, gamma, has_gamma, beta, has_beta, stats, mean_out,
                      var_out, with_stats):
    """Per channel: mean, variance (the batch's or the running ones), the running averages'
    update, and stats[0..3, c] = mean, 1 / sqrt(var + eps), the affine map's scale and shift."""
    c = cuda.grid(1)
    if c < stats.shape[1]:
        if batch_stat:
            if n > 0:
                shift = x[c * I]
                mean = s[c] / n
                var = max(ss[c] / n - (mean - shift) * (mean - shift), 0.0)
            else:
                mean = 0.0
                var = 0.0
            if update_running:
                running_mean[c] = decay * running_mean[c] + (1.0 - decay) * mean
                running_var[c] = decay * running_var[c] + (1.0 - decay) * var * unbias
        else:
            mean = running_mean[c]
            var = running_var[c]
        inv_std = 1.0 / (var + eps) ** 0.5
        scale = inv_std
        offset = -mean * inv_std
        if has_gamma:
            scale *= gamma[c]
            offset *= gamma[c]
        if has_beta:
            offset += beta[c]
        stats[0, c] = mean
        stats[1, c] = inv_std
        stats[2, c] = scale
        stats[3, c] = offset
        if with_stats:
            mean_out[c] = mean
            var_out[c] = var


@kernel
def channel_affine_kernel(x, stats, z, add_z, relu, y, C, I):
    """y = x scale[c] + shift[c] (+ z), through a ReLU when ``relu``."""
    i = cuda.grid(1)
    if i < y.size:
        c = (i // I) % C
        v = x[i] * stats[2, c] + stats[3, c]
        if add_z:
            v += z[i]
        if relu and v < 0:
            v = 0.0
        y[i] = v


@kernel
def gradient_coefficients_kernel(stats, sum_d, sum_dxc, count, gamma, has_gamma, batch_stat,
                                 dmean, dvar, with_stats, dbeta, want_beta, accum_beta, dgamma,
                                 want_gamma, accum_gamma, coef):
    """Per channel: dbeta (+)= sum(g), dgamma (+)= sum(g (x - mean)) / std, and the coefficients
    coef[0..2, c] = p, q, r of dx = p g + q (x - mean) + r."""
    c = cuda.grid(1)
    if c < coef.shape[1]:
        inv_std = stats[1, c]
        if want_beta:
            dbeta[c] = dbeta[c] + sum_d[c] if accum_beta else sum_d[c]
        if want_gamma:
            v = sum_dxc[c] * inv_std
            dgamma[c] = dgamma[c] + v if accum_gamma else v
        factor = gamma[c] if has_gamma else 1.0
        p = factor * inv_std
        q = 0.0
        r = 0.0
        if batch_stat:
            q = -factor * inv_std * inv_std * inv_std * sum_dxc[c] / count
            r = -factor * inv_std * sum_d[c] / count
            if with_stats:
                q += 2.0 * dvar[c] / count
                r += dmean[c] / count
        coef[0, c] = p
        coef[1, c] = q
        coef[2, c] = r


@kernel
def linear_grad_kernel(x, dy, y, relu, stats, coef, dx, accum, C, I):
    """dx (+)= p[c] g + q[c] (x - mean[c]) + r[c], g = dy (0 where y <= 0 with ``relu``)."""
    i = cuda.grid(1)
    if i < dx.size:
        c = (i // I) % C
        g = dy[i]
        if relu and y[i] <= 0:
            g = 0.0
        v = coef[0, c] * g + coef[1, c] * (x[i] - stats[0, c]) + coef[2, c]
        if accum:
            dx[i] += v
        else:
            dx[i] = v


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


def _channel_params(op):
    return op.channel_params and op.layout.perm is None


def _flat(a):
    return a.reshape(a.size)


def _slot(op, arrays, name):
    """The array of input ``name``, flat, or None when the node has no such input."""
    k = op.slot.get(name)
    return None if k is None or arrays[k] is None else _flat(arrays[k])


def _channel_sums(op, x, d, y, center, power, first_as_center, relu=False):
    """(sum_d, sum_e) per channel (``channel_sums_kernel``), in a float64 workspace."""
    O, C, I = op.layout.shape3
    sums = device.workspace("standardization sums", 2 * C, np.float64).reshape(2, C)
    stand_in = center if center is not None else sums[0]
    threads = min(BLOCK, 1 << max(O * I - 1, 0).bit_length())
    channel_sums_kernel[C, threads](x, d, y, stand_in, power, first_as_center, relu, sums[0],
                                  sums[1], O, C, I)
    return sums[0], sums[1]


def running_statistics(op):
    """The inputs the forward updates in place (BatchNormalization's running mean and variance
    in training)."""
    if not op.batch_stat or op.recomputing:
        return ()
    return tuple(op.slot[name] for name in ("mean", "variance") if name in op.slot)


@forward("BatchNormalization", "FusedBatchNormalization", "SyncBatchNormalization",
         "TensorNormalization", "WeightStandardization", when=_channel_params,
         updates=running_statistics)
def standardization_forward(op, inputs, outputs):
    O, C, I = op.layout.shape3
    x, y = _flat(inputs[0]), _flat(outputs[0])
    stats = getattr(op, "saved_device_stats", None)
    if stats is None or stats.shape[1] != C:
        stats = op.saved_device_stats = device.empty((4, C), np.float64)
    s, ss = (_channel_sums(op, x, x, x, None, 2, True) if op.batch_stat and x.size
             else (stats[0], stats[1]))   # stand-ins, not read
    rm, rv = _slot(op, inputs, "mean"), _slot(op, inputs, "variance")
    update = op.batch_stat and rm is not None and not op.recomputing
    n = op.layout.count
    gamma, beta = _slot(op, inputs, "gamma"), _slot(op, inputs, "beta")
    mean_out = _flat(outputs[1]) if op.with_stats else stats[0]
    var_out = _flat(outputs[2]) if op.with_stats else stats[0]
    device.launch(statistics_kernel, C, x if x.size else stats[0], s, ss, n, I, op.batch_stat,
                  rm if rm is not None else stats[0], rv if rv is not None else stats[0], update,
                  float(getattr(op, "decay_rate", 0.0)), n / (n - 1.0) if n > 1 else np.inf,
                  float(op.eps), gamma if gamma is not None else stats[0], gamma is not None,
                  beta if beta is not None else stats[0], beta is not None, stats, mean_out,
                  var_out, op.with_stats)
    z = _slot(op, inputs, "z")
    device.launch(channel_affine_kernel, y.size, x, stats, z if z is not None else x,
                  z is not None, op.relu, y, C, I)


@backward("BatchNormalization", "FusedBatchNormalization", "SyncBatchNormalization",
          "TensorNormalization", "WeightStandardization")
def standardization_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                             accum):
    O, C, I = op.layout.shape3
    slot = op.slot

    def wanted(name):
        return name in slot and propagate_down[slot[name]]

    dy = _flat(output_grads[0])
    y = _flat(outputs[0]) if op.relu else dy
    if wanted("z"):
        k = slot["z"]
        device.launch(masked_copy_kernel, dy.size, dy, y, _flat(input_grads[k]), accum[k])
    stats = op.saved_device_stats
    x = _flat(inputs[0]) if inputs[0] is not None else dy   # x is not read for dbeta alone
    need_sums = wanted("beta") or wanted("gamma") or (propagate_down[0] and op.batch_stat)
    if not (need_sums or propagate_down[0]):
        return
    if need_sums:
        sum_d, sum_dxc = _channel_sums(op, x, dy, y, stats[0], 0, False, op.relu)
    else:
        sum_d = sum_dxc = stats[0]   # stand-ins, not read
    coef = device.workspace("standardization coefficients", 3 * C, np.float64).reshape(3, C)
    gamma = _slot(op, inputs, "gamma")
    grad = (lambda name: _flat(input_grads[slot[name]]) if wanted(name) else stats[0])
    acc = (lambda name: bool(accum[slot[name]]) if wanted(name) else False)
    dmean = _flat(output_grads[1]) if op.with_stats else stats[0]
    dvar = _flat(output_grads[2]) if op.with_stats else stats[0]
    device.launch(gradient_coefficients_kernel, C, stats, sum_d, sum_dxc, max(op.layout.count, 1),
                  gamma if gamma is not None else stats[0], gamma is not None, op.batch_stat,
                  dmean, dvar, op.with_stats, grad("beta"), wanted("beta"), acc("beta"),
                  grad("gamma"), wanted("gamma"), acc("gamma"), coef)
    if propagate_down[0]:
        device.launch(linear_grad_kernel, dy.size, x, dy, y, op.relu, stats, coef,
                      _flat(input_grads[0]), accum[0], C, I)
