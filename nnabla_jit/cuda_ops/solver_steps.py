"""The solvers' updates on the device: the functions of ``nnabla_jit.solver_kernels`` (same
names and arguments) over numba.cuda device arrays, so ``nnabla_jit.solvers`` runs one update
rule on either side.

Each kernel is one thread per element running the formula of ``ops/solver_steps.py`` (the CPU
kernels' loop bodies, compiled here as device functions); scalars are converted to the
parameter's real type first, as the CPU kernels convert them. Lars, Lamb and clipping by norm
need squared norms: they are summed on the device (float64, a block reduction and one atomic
add per block) and a one-thread kernel turns them into the rate, stored in the parameter's
type, which the update kernel reads, so nothing is copied to the host.
"""
import numpy as np
from numba import float64

from ..ops import solver_steps as cpu_steps
from . import device
from .device import block_sum
from .registry import device_function, kernel

cuda = None  # numba.cuda, bound by device.load()

on_device = True   # what nnabla_jit.solvers asks of a kernel namespace

BLOCK = 128   # threads per block of the norm reduction (a power of two: the combine halves it)
MAX_NORM_BLOCKS = 64

sgd_step = device_function(cpu_steps.sgd_step.py_func)
momentum_step = device_function(cpu_steps.momentum_step.py_func)
rms_step = device_function(cpu_steps.rms_step.py_func)
adadelta_step = device_function(cpu_steps.adadelta_step.py_func)
rmsprop_graves_step = device_function(cpu_steps.rmsprop_graves_step.py_func)
adam_step = device_function(cpu_steps.adam_step.py_func)
adamax_step = device_function(cpu_steps.adamax_step.py_func)
adabelief_step = device_function(cpu_steps.adabelief_step.py_func)
lamb_direction_step = device_function(cpu_steps.lamb_direction_step.py_func)
lion_step = device_function(cpu_steps.lion_step.py_func)
add_scaled_step = device_function(cpu_steps.add_scaled_step.py_func)
scale_step = device_function(cpu_steps.scale_step.py_func)
lars_rate = device_function(cpu_steps.lars_rate.py_func)
lamb_rate = device_function(cpu_steps.lamb_rate.py_func)
clip_factor = device_function(cpu_steps.clip_factor.py_func)


# ---------------------------------------------------------------------------- kernels
@kernel
def sgd_kernel(w, g, lr):
    i = cuda.grid(1)
    if i < w.size:
        sgd_step(w, g, i, lr)


@kernel
def momentum_kernel(w, g, m, rate, momentum, one, grad_decay, weight_decay, nesterov):
    """Momentum / Nesterov / SgdW / Lars; ``rate[0]`` is the learning rate (Lars' is computed on
    the device)."""
    i = cuda.grid(1)
    if i < w.size:
        momentum_step(w, g, m, i, rate[0], momentum, one, grad_decay, weight_decay, nesterov)


@kernel
def rms_kernel(w, g, v, lr, keep, add, eps):
    i = cuda.grid(1)
    if i < w.size:
        rms_step(w, g, v, i, lr, keep, add, eps)


@kernel
def adadelta_kernel(w, g, e_sqr_grad, e_sqr_delta, lr, decay, complement, eps):
    i = cuda.grid(1)
    if i < w.size:
        adadelta_step(w, g, e_sqr_grad, e_sqr_delta, i, lr, decay, complement, eps)


@kernel
def rmsprop_graves_kernel(w, g, n, g_mean, d, lr, decay, complement, momentum, eps):
    i = cuda.grid(1)
    if i < w.size:
        rmsprop_graves_step(w, g, n, g_mean, d, i, lr, decay, complement, momentum, eps)


@kernel
def adam_kernel(w, g, m, v, v_hat, step, beta1, complement1, beta2, complement2, eps, lower,
                upper, weight_decay, amsgrad):
    i = cuda.grid(1)
    if i < w.size:
        adam_step(w, g, m, v, v_hat, i, step, beta1, complement1, beta2, complement2, eps, lower,
                  upper, weight_decay, amsgrad)


@kernel
def adamax_kernel(w, g, m, u, step, beta1, complement1, beta2, eps):
    i = cuda.grid(1)
    if i < w.size:
        adamax_step(w, g, m, u, i, step, beta1, complement1, beta2, eps)


@kernel
def adabelief_kernel(w, g, m, s, s_max, step, beta1, complement1, beta2, complement2, eps,
                     bias_correction2, keep_weight, adaptive, amsgrad):
    i = cuda.grid(1)
    if i < w.size:
        adabelief_step(w, g, m, s, s_max, i, step, beta1, complement1, beta2, complement2, eps,
                       bias_correction2, keep_weight, adaptive, amsgrad)


@kernel
def lamb_direction_kernel(w, g, m, v, r, beta1, complement1, beta2, complement2, correction1,
                          correction2, eps, decay):
    i = cuda.grid(1)
    if i < w.size:
        lamb_direction_step(w, g, m, v, r, i, beta1, complement1, beta2, complement2,
                            correction1, correction2, eps, decay)


@kernel
def lion_kernel(w, g, m, lr, beta1, complement1, beta2, complement2, decay, one, zero):
    i = cuda.grid(1)
    if i < w.size:
        lion_step(w, g, m, i, lr, beta1, complement1, beta2, complement2, decay, one, zero)


@kernel
def add_scaled_kernel(g, w, rate):
    """g += rate[0] w (Lamb's last step, and weight decay)."""
    i = cuda.grid(1)
    if i < g.size:
        add_scaled_step(g, w, i, rate[0])


@kernel
def scale_kernel(g, factor):
    i = cuda.grid(1)
    if i < g.size:
        scale_step(g, i, factor[0])


@kernel
def squared_norm_kernel(a, out, k):
    """out[k] += sum(a^2) in float64 (out[k] zeroed before the launch)."""
    partial = cuda.shared.array(BLOCK, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    acc = 0.0
    while i < a.size:
        acc += float(a[i]) * float(a[i])
        i += cuda.gridsize(1)
    partial[t] = acc
    block_sum(partial, t, cuda.blockDim.x)
    if t == 0:
        cuda.atomic.add(out, k, partial[0])


@kernel
def lars_rate_kernel(norms, rate, lr, coefficient, eps, decay):
    rate[0] = lars_rate(norms[0], norms[1], lr, coefficient, eps, decay)


@kernel
def lamb_rate_kernel(norms, rate, eta, eps, gamma_l, gamma_u):
    rate[0] = -lamb_rate(norms[0], norms[1], eta, eps, gamma_l, gamma_u)


@kernel
def clip_factor_kernel(norms, factor, bound):
    factor[0] = clip_factor(norms[0], bound)


# ---------------------------------------------------------------------------- helpers
def _scratch(name, size, dtype):
    return device.workspace("solver " + name, size, dtype)


def _flat(*arrays):
    return [device.flat(a) for a in arrays]


def _squared_norms(*arrays):
    """Device float64 array of the arrays' squared L2 norms."""
    norms = _scratch("norms", len(arrays), np.float64)
    device.fill(norms, 0)
    for k, a in enumerate(arrays):
        if a.size:
            threads = min(BLOCK, 1 << max(a.size - 1, 0).bit_length())
            blocks = min(MAX_NORM_BLOCKS, (a.size + threads - 1) // threads)
            squared_norm_kernel[blocks, threads](device.flat(a), norms, k)
    return norms


def _on_device_scalar(w, value):
    """A one-element device array of w's type holding ``value``: a rate a kernel reads as
    ``rate[0]``."""
    rate = _scratch("rate", 1, w.dtype)
    device.fill(rate, w.dtype.type(value))
    return rate


# ---------------------------------------------------------------------------- updates
def sgd_update(w, g, lr_):
    device.launch(sgd_kernel, w.size, *_flat(w, g), w.dtype.type(lr_))


def momentum_update(w, g, m, lr_, momentum_, grad_decay_, weight_decay_, nesterov):
    real = w.dtype.type
    device.launch(momentum_kernel, w.size, *_flat(w, g, m), _on_device_scalar(w, lr_),
                  real(momentum_), real(1.0), real(grad_decay_), real(weight_decay_), nesterov)


def lars_update(w, g, v, lr_, momentum_, coefficient, eps, decay_):
    real = w.dtype.type
    norms = _squared_norms(w, g)
    rate = _scratch("rate", 1, w.dtype)
    lars_rate_kernel[1, 1](norms, rate, lr_, coefficient, eps, decay_)
    device.launch(momentum_kernel, w.size, *_flat(w, g, v), rate, real(momentum_), real(1.0),
                  real(decay_), real(0.0), False)


def rms_update(w, g, v, lr_, keep_, add_, eps_):
    real = w.dtype.type
    device.launch(rms_kernel, w.size, *_flat(w, g, v), real(lr_), real(keep_), real(add_),
                  real(eps_))


def adadelta_update(w, g, e_sqr_grad, e_sqr_delta, lr_, decay_, eps_):
    real = w.dtype.type
    device.launch(adadelta_kernel, w.size, *_flat(w, g, e_sqr_grad, e_sqr_delta), real(lr_),
                  real(decay_), real(1.0 - decay_), real(eps_))


def rmsprop_graves_update(w, g, n, g_mean, d, lr_, decay_, momentum_, eps_):
    real = w.dtype.type
    device.launch(rmsprop_graves_kernel, w.size, *_flat(w, g, n, g_mean, d), real(lr_),
                  real(decay_), real(1.0 - decay_), real(momentum_), real(eps_))


def adam_update(w, g, m, v, v_hat, step_, beta1_, beta2_, eps_, lower_, upper_, weight_decay_,
                amsgrad):
    real = w.dtype.type
    device.launch(adam_kernel, w.size, *_flat(w, g, m, v, v_hat), real(step_), real(beta1_),
                  real(1.0 - beta1_), real(beta2_), real(1.0 - beta2_), real(eps_), real(lower_),
                  real(upper_), real(weight_decay_), amsgrad)


def adamax_update(w, g, m, u, step_, beta1_, beta2_, eps_):
    real = w.dtype.type
    device.launch(adamax_kernel, w.size, *_flat(w, g, m, u), real(step_), real(beta1_),
                  real(1.0 - beta1_), real(beta2_), real(eps_))


def adabelief_update(w, g, m, s, s_max, step_, beta1_, beta2_, eps_, bias_correction2_,
                     keep_weight_, adaptive, amsgrad):
    real = w.dtype.type
    device.launch(adabelief_kernel, w.size, *_flat(w, g, m, s, s_max), real(step_),
                  real(beta1_), real(1.0 - beta1_), real(beta2_), real(1.0 - beta2_), real(eps_),
                  real(bias_correction2_), real(keep_weight_), adaptive, amsgrad)


def lamb_update(w, g, m, v, r, eta_, beta1_, beta2_, correction1_, correction2_, eps_, decay_,
                gamma_l, gamma_u):
    """As the CPU's; ``r`` (the direction's scratch) may be None: a device buffer is used."""
    real = w.dtype.type
    if r is None:
        r = _scratch("direction", w.size, w.dtype)
    flat_w, flat_r = _flat(w, r)
    device.launch(lamb_direction_kernel, w.size, *_flat(w, g, m, v), flat_r, real(beta1_),
                  real(1.0 - beta1_), real(beta2_), real(1.0 - beta2_), real(correction1_),
                  real(correction2_), real(eps_), real(decay_))
    norms = _squared_norms(r, w)
    rate = _scratch("rate", 1, w.dtype)
    lamb_rate_kernel[1, 1](norms, rate, eta_, eps_, gamma_l, gamma_u)   # -rate: w += -rate r
    device.launch(add_scaled_kernel, w.size, flat_w, flat_r, rate)


def lion_update(w, g, m, lr_, beta1_, beta2_, decay_):
    real = w.dtype.type
    device.launch(lion_kernel, w.size, *_flat(w, g, m), real(lr_), real(beta1_),
                  real(1.0 - beta1_), real(beta2_), real(1.0 - beta2_), real(decay_), real(1.0),
                  real(0.0))


# ---------------------------------------------------------------------------- gradient tools
def param_values(param, dtype):
    """The parameter Variable's values as a device array of ``dtype``."""
    return device.read(param.data, dtype)


def add_scaled(g, w, rate_):
    """g += rate w"""
    device.launch(add_scaled_kernel, g.size, *_flat(g, w), _on_device_scalar(g, rate_))


def scale(g, factor_):
    """g *= factor"""
    device.launch(scale_kernel, g.size, device.flat(g), _on_device_scalar(g, factor_))


def clip_by_norm(g, bound):
    """g *= bound / |g| where |g| > bound, all on the device."""
    norms = _squared_norms(g)
    factor = _scratch("rate", 1, g.dtype)
    clip_factor_kernel[1, 1](norms, factor, bound)
    device.launch(scale_kernel, g.size, device.flat(g), factor)
