"""The per-element formulas of the solvers' updates, shared by the CPU kernels
(``nnabla_jit.solver_kernels``, one ``prange`` loop each) and the CUDA kernels
(``nnabla_jit.cuda_ops.solver_steps``, one thread per element), so both compute one update.

Each ``*_step`` updates element ``i`` of the weights ``w``, their gradient ``g`` and the
solver's state arrays (flat, of one size) in place. Scalars arrive already converted to the
arrays' real type (float32 for float32 parameters, as in nnabla: a float literal would promote
the arithmetic to double). The ``*_rate`` functions turn float64 squared norms into the
per-parameter rate of Lars and Lamb.

The functions are leaves (they call no other numba function), so the CUDA side can compile
their ``py_func`` as device functions.
"""
import math

from numba import njit

__all__ = ["sgd_step", "momentum_step", "rms_step", "adadelta_step", "rmsprop_graves_step",
           "adam_step", "adamax_step", "adabelief_step", "lamb_direction_step", "lion_step",
           "add_scaled_step", "scale_step", "lars_rate", "lamb_rate", "clip_factor"]


@njit(inline="always")
def sgd_step(w, g, i, lr):
    """w -= lr g"""
    w[i] -= lr * g[i]


@njit(inline="always")
def momentum_step(w, g, m, i, lr, momentum, one, grad_decay, weight_decay, nesterov):
    """Heavy-ball momentum on ``g + grad_decay w`` with a decoupled ``weight_decay`` term;
    ``nesterov``: Nesterov's look-ahead form, where ``m`` holds the negated velocity."""
    gi = g[i] + grad_decay * w[i]
    if nesterov:
        previous = m[i]
        mi = momentum * previous - lr * gi
        m[i] = mi
        w[i] += -momentum * previous + (one + momentum) * mi
    else:
        mi = momentum * m[i] + lr * gi
        m[i] = mi
        w[i] = w[i] - mi - weight_decay * w[i]


@njit(inline="always")
def rms_step(w, g, v, i, lr, keep, add, eps):
    """v = keep v + add g^2;  w -= lr g / (sqrt(v) + eps)"""
    gi = g[i]
    vi = keep * v[i] + add * gi * gi
    v[i] = vi
    w[i] -= lr * gi / (math.sqrt(vi) + eps)


@njit(inline="always")
def adadelta_step(w, g, e_sqr_grad, e_sqr_delta, i, lr, decay, complement, eps):
    """AdaDelta: the step is g scaled by RMS[delta]_{t-1} / RMS[g]_t."""
    gi = g[i]
    eg = decay * e_sqr_grad[i] + complement * gi * gi
    e_sqr_grad[i] = eg
    delta = math.sqrt((e_sqr_delta[i] + eps) / (eg + eps)) * gi
    e_sqr_delta[i] = decay * e_sqr_delta[i] + complement * delta * delta
    w[i] -= lr * delta


@njit(inline="always")
def rmsprop_graves_step(w, g, n, g_mean, d, i, lr, decay, complement, momentum, eps):
    """Graves' RMSprop: the step is normalised by the centred second moment n - g_mean^2."""
    gi = g[i]
    ni = decay * n[i] + complement * gi * gi
    mi = decay * g_mean[i] + complement * gi
    n[i] = ni
    g_mean[i] = mi
    di = momentum * d[i] - lr * gi / math.sqrt(ni - mi * mi + eps)
    d[i] = di
    w[i] += di


@njit(inline="always")
def adam_step(w, g, m, v, v_hat, i, step, beta1, complement1, beta2, complement2, eps, lower,
              upper, weight_decay, amsgrad):
    """The Adam family: w -= clip(step / (sqrt(v) + eps), lower, upper) m + weight_decay w
    (with ``amsgrad`` the running maximum ``v_hat`` of v replaces v)."""
    gi = g[i]
    mi = beta1 * m[i] + complement1 * gi
    vi = beta2 * v[i] + complement2 * gi * gi
    m[i] = mi
    v[i] = vi
    if amsgrad:
        if v_hat[i] > vi:
            vi = v_hat[i]
        v_hat[i] = vi
    rate = step / (math.sqrt(vi) + eps)
    # Written as two ifs (not min/max) so that a NaN rate stays NaN.
    if rate < lower:
        rate = lower
    if rate > upper:
        rate = upper
    w[i] = w[i] - rate * mi - weight_decay * w[i]


@njit(inline="always")
def adamax_step(w, g, m, u, i, step, beta1, complement1, beta2, eps):
    """Adamax: the second moment is the decayed infinity norm u = max(beta2 u, |g|)."""
    gi = g[i]
    mi = beta1 * m[i] + complement1 * gi
    ui = beta2 * u[i]
    if abs(gi) > ui:
        ui = abs(gi)
    m[i] = mi
    u[i] = ui
    w[i] -= step * mi / (ui + eps)


@njit(inline="always")
def adabelief_step(w, g, m, s, s_max, i, step, beta1, complement1, beta2, complement2, eps,
                   bias_correction2, keep_weight, adaptive, amsgrad):
    """AdaBelief (see ``solver_kernels.adabelief_update``)."""
    gi = g[i]
    mi = beta1 * m[i] + complement1 * gi
    m[i] = mi
    belief = gi - mi
    si = beta2 * s[i] + complement2 * belief * belief
    if amsgrad:
        s[i] = si
        if s_max[i] > si:
            si = s_max[i]
        si += eps
        s_max[i] = si
    else:
        si += eps
        s[i] = si
    wi = w[i] * keep_weight
    if adaptive:
        wi -= step * mi / (math.sqrt(si / bias_correction2) + eps)
    else:
        wi -= step * mi
    w[i] = wi


@njit(inline="always")
def lamb_direction_step(w, g, m, v, r, i, beta1, complement1, beta2, complement2, correction1,
                        correction2, eps, decay):
    """LAMB's moments, and its direction r = Adam's (bias-corrected) step + decay w."""
    gi = g[i]
    mi = beta1 * m[i] + complement1 * gi
    vi = beta2 * v[i] + complement2 * gi * gi
    m[i] = mi
    v[i] = vi
    r[i] = (mi / correction1) / (math.sqrt(vi / correction2) + eps) + decay * w[i]


@njit(inline="always")
def lion_step(w, g, m, i, lr, beta1, complement1, beta2, complement2, decay, one, zero):
    """Lion: w -= lr (sign(beta1 m + (1 - beta1) g) + decay w);  m = beta2 m + (1 - beta2) g."""
    gi = g[i]
    c = beta1 * m[i] + complement1 * gi
    sign = one if c > zero else (-one if c < zero else zero)
    m[i] = beta2 * m[i] + complement2 * gi
    w[i] = w[i] - lr * (sign + decay * w[i])


@njit(inline="always")
def add_scaled_step(g, w, i, rate):
    """g += rate w"""
    g[i] += rate * w[i]


@njit(inline="always")
def scale_step(g, i, factor):
    """g *= factor"""
    g[i] *= factor


@njit(inline="always")
def lars_rate(w_squared, g_squared, lr, coefficient, eps, decay):
    """LARS' rate lr coefficient |w| / (|g| + decay |w|). As in nnabla, the local rate is 1
    when ``|w| < eps``, and ``eps`` joins the denominator only when it is below ``eps``."""
    w_norm = math.sqrt(w_squared)
    denominator = math.sqrt(g_squared) + decay * w_norm
    if denominator < eps:
        denominator += eps
    local_lr = 1.0 if w_norm < eps else coefficient * w_norm / denominator
    return lr * local_lr


@njit(inline="always")
def lamb_rate(r_squared, w_squared, eta, eps, gamma_l, gamma_u):
    """LAMB's rate eta clip(|w|, gamma_l, gamma_u) / |r| (eta when ``|r| < eps``)."""
    r_norm = math.sqrt(r_squared)
    trust = min(max(math.sqrt(w_squared), gamma_l), gamma_u)
    return eta * (1.0 if r_norm < eps else trust / r_norm)


@njit(inline="always")
def clip_factor(squared_norm, bound):
    """The factor scaling a gradient of L2 norm sqrt(squared_norm) down to ``bound``, 1 when it
    is within it."""
    if squared_norm > bound * bound:
        return bound / math.sqrt(squared_norm)
    return 1.0
