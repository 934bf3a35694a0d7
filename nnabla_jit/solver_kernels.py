"""The update kernels of ``nnabla_jit.solvers``: one fused loop per solver family.

Each kernel updates one parameter in place, in one call: the weights ``w``, their gradient ``g``
and the solver's state arrays for that parameter, all C-contiguous and of the parameter's shape
(any rank; the kernels see them flat). Scalars that depend only on the step count (bias
corrections, bounds, the scheduled decay) are computed once per parameter in Python and passed
in, so the loops hold only the per-element arithmetic.

Two things keep the loops vectorised (several times faster than numba's defaults here):

* The arithmetic runs in the parameter's precision: float32 as in nnabla, float64 for float64
  parameters. Scalars arrive as Python floats, named with a trailing underscore (``lr_``), and
  are converted once to ``real = w.dtype.type`` under their plain names; constants are built
  the same way (``one``), since a float literal would promote the expression to double. Only
  the norms of Lars and Lamb accumulate in float64.
* Kernels compile with numba's ``error_model="numpy"`` (``parallel_kernel``'s default): a
  division by zero gives inf / NaN as in nnabla's C++, and the loop carries no zero-divisor
  check, which with numba's default model keeps any loop that divides from vectorising.

A family kernel is parametrised by scalars where its members differ only in a coefficient or a
flag (Momentum / Nesterov / SgdW / Lars share ``momentum_step``; Adam, AdamW, AdaBound,
AMSGRAD and AMSBound share :func:`adam_update`). Each kernel is compiled serial and parallel
(:mod:`nnabla_jit.ops.kernels`); the solver picks the variant from the parameter size.

The per-element formulas live in :mod:`nnabla_jit.ops.solver_steps`, shared with the CUDA
kernels (``nnabla_jit.cuda_ops.solver_steps``); these kernels are their loops.
"""
import math

from numba import njit, prange

from .ops import solver_steps as steps
from .ops.kernels import parallel_kernel

__all__ = ["sgd_update", "momentum_update", "lars_update", "rms_update", "adadelta_update",
           "rmsprop_graves_update", "adam_update", "adamax_update", "adabelief_update",
           "lamb_update", "lion_update", "add_scaled", "scale", "sum_of_squares", "nonfinite_flags"]


@njit(inline="always")
def _square(x):
    return float(x) * float(x)


@njit(inline="always")
def _squared_norm(a):
    """sum(a^2) in float64, over four interleaved partial sums: one chain of dependent
    additions would run at a quarter of the speed (and numba may not reorder them)."""
    s0 = s1 = s2 = s3 = 0.0
    quads = a.size // 4
    for j in prange(quads):
        i = 4 * j
        s0 += _square(a[i])
        s1 += _square(a[i + 1])
        s2 += _square(a[i + 2])
        s3 += _square(a[i + 3])
    for i in range(4 * quads, a.size):
        s0 += _square(a[i])
    return (s0 + s1) + (s2 + s3)


@parallel_kernel
def sgd_update(w, g, lr_):
    """w -= lr g"""
    lr = w.dtype.type(lr_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    for i in prange(w.size):
        steps.sgd_step(w, g, i, lr)


@parallel_kernel
def momentum_update(w, g, m, lr_, momentum_, grad_decay_, weight_decay_, nesterov):
    """Heavy-ball momentum on ``g + grad_decay w`` with a decoupled ``weight_decay`` term
    (Momentum, SgdW); ``nesterov`` switches to Nesterov's look-ahead form, where ``m`` holds
    the negated velocity as in nnabla."""
    real = w.dtype.type
    lr, momentum, one = real(lr_), real(momentum_), real(1.0)
    grad_decay, weight_decay = real(grad_decay_), real(weight_decay_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    m = m.reshape(m.size)
    for i in prange(w.size):
        steps.momentum_step(w, g, m, i, lr, momentum, one, grad_decay, weight_decay, nesterov)


@parallel_kernel
def lars_update(w, g, v, lr_, momentum_, coefficient, eps, decay_):
    """LARS: momentum with the layer-wise rate ``coefficient |w| / (|g| + decay |w|)`` on the
    gradient ``g + decay w``.

    As in nnabla, the rate is 1 when ``|w| < eps``, and ``eps`` joins the denominator only
    when the denominator itself is below ``eps``.
    """
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    v = v.reshape(v.size)
    real = w.dtype.type
    rate = real(steps.lars_rate(_squared_norm(w), _squared_norm(g), lr_, coefficient, eps, decay_))
    momentum, one, decay, zero = real(momentum_), real(1.0), real(decay_), real(0.0)
    for i in prange(w.size):
        steps.momentum_step(w, g, v, i, rate, momentum, one, decay, zero, False)


@parallel_kernel
def rms_update(w, g, v, lr_, keep_, add_, eps_):
    """v = keep v + add g^2;  w -= lr g / (sqrt(v) + eps)   (Adagrad: keep = add = 1)."""
    real = w.dtype.type
    lr, keep, add, eps = real(lr_), real(keep_), real(add_), real(eps_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    v = v.reshape(v.size)
    for i in prange(w.size):
        steps.rms_step(w, g, v, i, lr, keep, add, eps)


@parallel_kernel
def adadelta_update(w, g, e_sqr_grad, e_sqr_delta, lr_, decay_, eps_):
    """AdaDelta: the step is g scaled by RMS[delta]_{t-1} / RMS[g]_t."""
    real = w.dtype.type
    lr, decay, complement, eps = real(lr_), real(decay_), real(1.0 - decay_), real(eps_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    e_sqr_grad = e_sqr_grad.reshape(e_sqr_grad.size)
    e_sqr_delta = e_sqr_delta.reshape(e_sqr_delta.size)
    for i in prange(w.size):
        steps.adadelta_step(w, g, e_sqr_grad, e_sqr_delta, i, lr, decay, complement, eps)


@parallel_kernel
def rmsprop_graves_update(w, g, n, g_mean, d, lr_, decay_, momentum_, eps_):
    """Graves' RMSprop: the step is normalised by the centred second moment n - g_mean^2."""
    real = w.dtype.type
    lr, decay, complement = real(lr_), real(decay_), real(1.0 - decay_)
    momentum, eps = real(momentum_), real(eps_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    n = n.reshape(n.size)
    g_mean = g_mean.reshape(g_mean.size)
    d = d.reshape(d.size)
    for i in prange(w.size):
        steps.rmsprop_graves_step(w, g, n, g_mean, d, i, lr, decay, complement, momentum, eps)


@parallel_kernel
def adam_update(w, g, m, v, v_hat, step_, beta1_, beta2_, eps_, lower_, upper_, weight_decay_,
                amsgrad):
    """The Adam family: w -= clip(step / (sqrt(v) + eps), lower, upper) m + weight_decay w.

    ``step`` carries the learning rate and any bias correction; ``lower`` / ``upper`` are
    AdaBound's bounds (0 and inf for plain Adam); ``weight_decay`` is AdamW's decoupled term.
    With ``amsgrad`` the running maximum ``v_hat`` of ``v`` replaces ``v`` (otherwise ``v_hat``
    is not touched and callers pass ``v`` for it).
    """
    real = w.dtype.type
    step, eps = real(step_), real(eps_)
    beta1, complement1 = real(beta1_), real(1.0 - beta1_)
    beta2, complement2 = real(beta2_), real(1.0 - beta2_)
    lower, upper, weight_decay = real(lower_), real(upper_), real(weight_decay_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    m = m.reshape(m.size)
    v = v.reshape(v.size)
    v_hat = v_hat.reshape(v_hat.size)
    for i in prange(w.size):
        steps.adam_step(w, g, m, v, v_hat, i, step, beta1, complement1, beta2, complement2, eps,
                        lower, upper, weight_decay, amsgrad)


@parallel_kernel
def adamax_update(w, g, m, u, step_, beta1_, beta2_, eps_):
    """Adamax: the second moment is the decayed infinity norm u = max(beta2 u, |g|)."""
    real = w.dtype.type
    step, eps = real(step_), real(eps_)
    beta1, complement1, beta2 = real(beta1_), real(1.0 - beta1_), real(beta2_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    m = m.reshape(m.size)
    u = u.reshape(u.size)
    for i in prange(w.size):
        steps.adamax_step(w, g, m, u, i, step, beta1, complement1, beta2, eps)


@parallel_kernel
def adabelief_update(w, g, m, s, s_max, step_, beta1_, beta2_, eps_, bias_correction2_,
                     keep_weight_, adaptive, amsgrad):
    """AdaBelief: Adam whose second moment is that of the "belief" g - m.

    ``keep_weight`` is the decoupled decay factor applied to w first. ``adaptive`` False is the
    rectified variant's warm-up phase: plain momentum SGD w -= step m. As in nnabla, eps is
    added to s (to s_max with ``amsgrad``, where s itself is stored without it) and again to
    the denominator sqrt(s / bias_correction2) + eps.
    """
    real = w.dtype.type
    step, eps = real(step_), real(eps_)
    beta1, complement1 = real(beta1_), real(1.0 - beta1_)
    beta2, complement2 = real(beta2_), real(1.0 - beta2_)
    bias_correction2, keep_weight = real(bias_correction2_), real(keep_weight_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    m = m.reshape(m.size)
    s = s.reshape(s.size)
    s_max = s_max.reshape(s_max.size)
    for i in prange(w.size):
        steps.adabelief_step(w, g, m, s, s_max, i, step, beta1, complement1, beta2, complement2,
                             eps, bias_correction2, keep_weight, adaptive, amsgrad)


@parallel_kernel
def lamb_update(w, g, m, v, r, eta_, beta1_, beta2_, correction1_, correction2_, eps_, decay_,
                gamma_l, gamma_u):
    """LAMB: the Adam direction r (plus decay w), scaled by clip(|w|, gamma_l, gamma_u) / |r|.

    ``r`` is scratch space of w's size and type for the direction: its norm is needed before
    the step, and recomputing it inside a reduction would keep the loop from vectorising. As
    in nnabla the trust ratio is 1 when ``|r| < eps``.
    """
    real = w.dtype.type
    beta1, complement1 = real(beta1_), real(1.0 - beta1_)
    beta2, complement2 = real(beta2_), real(1.0 - beta2_)
    correction1, correction2 = real(correction1_), real(correction2_)
    eps, decay = real(eps_), real(decay_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    m = m.reshape(m.size)
    v = v.reshape(v.size)
    for i in prange(w.size):
        steps.lamb_direction_step(w, g, m, v, r, i, beta1, complement1, beta2, complement2,
                                  correction1, correction2, eps, decay)
    rate = real(steps.lamb_rate(_squared_norm(r), _squared_norm(w), eta_, eps_, gamma_l, gamma_u))
    for i in prange(w.size):
        w[i] -= rate * r[i]


@parallel_kernel
def lion_update(w, g, m, lr_, beta1_, beta2_, decay_):
    """Lion: w -= lr (sign(beta1 m + (1 - beta1) g) + decay w);  m = beta2 m + (1 - beta2) g."""
    real = w.dtype.type
    lr, decay, one, zero = real(lr_), real(decay_), real(1.0), real(0.0)
    beta1, complement1 = real(beta1_), real(1.0 - beta1_)
    beta2, complement2 = real(beta2_), real(1.0 - beta2_)
    w = w.reshape(w.size)
    g = g.reshape(g.size)
    m = m.reshape(m.size)
    for i in prange(w.size):
        steps.lion_step(w, g, m, i, lr, beta1, complement1, beta2, complement2, decay, one, zero)


# ----------------------------------------------------------------------------- gradient tools
@parallel_kernel
def add_scaled(g, w, rate_):
    """g += rate w (weight decay folded into the gradient)."""
    rate = g.dtype.type(rate_)
    g = g.reshape(g.size)
    w = w.reshape(w.size)
    for i in prange(g.size):
        steps.add_scaled_step(g, w, i, rate)


@parallel_kernel
def scale(g, factor_):
    """g *= factor"""
    factor = g.dtype.type(factor_)
    g = g.reshape(g.size)
    for i in prange(g.size):
        steps.scale_step(g, i, factor)


@parallel_kernel
def sum_of_squares(g):
    """The squared L2 norm of g, accumulated in float64."""
    return _squared_norm(g.reshape(g.size))


@parallel_kernel
def nonfinite_flags(g):
    """(number of infinities, number of NaNs) in g."""
    g = g.reshape(g.size)
    infs = 0
    nans = 0
    for i in prange(g.size):
        if math.isinf(g[i]):
            infs += 1
        elif math.isnan(g[i]):
            nans += 1
    return infs, nans
