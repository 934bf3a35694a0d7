"""CUDA kernels of the signal family: Interpolate / ONNXResize, FFT / IFFT and STFT / ISTFT.

Interpolate / ONNXResize run the CPU's separable plan (``ops/signal.py``'s ``AxisResample``
steps, their tap tables copied up once per op): one thread per output element summing its
taps (the CPU's ``tap_sum``), and backward scattering the taps with atomic adds (several
outputs read one input).

FFT / IFFT: a direct DFT, one thread per output frequency summing over the whole signal (O(n)
work per output, float64 with the phase reduced exactly in integers).

numba.cuda has no FFT (cuFFT would come through nvmath-python, like cuBLAS: see docs/cuda.md),
and the transforms these ops see in networks are small (a few to a few hundred points per
axis), where the direct sum costs little. One kernel serves the forward and inverse transforms
and their adjoints (the backward): they differ by the sign of the exponent and the scale, as
the CPU's ``transform`` picks them through numpy's ``norm``.
"""
import math

from numba import float64

from ..ops import signal as cpu_signal
from . import blas, device
from .device import store, unravel3
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

tap_sum = device_function(cpu_signal.tap_sum.py_func)


# ---------------------------------------------------------------------------- resampling
@kernel
def resample_axis_kernel(x, index, weight, outside, fill, y):
    """y[a, j, c] = sum_k weight[j, k] x[a, index[j, k], c], or ``fill`` where outside[j]."""
    t = cuda.grid(1)
    rows, inner = y.shape[1], y.shape[2]
    if t < y.size:
        a, j, c = unravel3(t, rows, inner)
        y[a, j, c] = fill if outside[j] else tap_sum(x, index, weight, a, j, c)


@kernel
def resample_axis_adjoint_kernel(dy, index, weight, outside, dx):
    """dx[a, index[j, k], c] += weight[j, k] dy[a, j, c] (atomic; rows outside get nothing)."""
    t = cuda.grid(1)
    rows, inner = dy.shape[1], dy.shape[2]
    if t < dy.size:
        a, j, c = unravel3(t, rows, inner)
        if not outside[j]:
            for k in range(index.shape[1]):
                cuda.atomic.add(dx, (a, index[j, k], c), weight[j, k] * dy[a, j, c])


def _tables(op, k, step):
    """(index, weight, outside) of plan step k on the device, copied up once."""
    return tuple(device.kept(op, "resample {} {}".format(k, name), getattr(step, name))
                 for name in ("index", "weight", "outside"))


@forward("Interpolate", "ONNXResize")
def resample_forward(op, inputs, outputs):
    x, y = inputs[0], outputs[0]
    if not op.plan:
        device.copy(x, y)
        return
    current = x
    for k, step in enumerate(op.plan):
        last = k == len(op.plan) - 1
        dst = y if last else device.empty(step.out_shape, x.dtype)
        device.launch(resample_axis_kernel, dst.size, current.reshape(step.in_view),
                      *_tables(op, k, step), step.fill, dst.reshape(step.out_view))
        if current is not x:
            device.release(current)
        current = dst


@backward("Interpolate", "ONNXResize")
def resample_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dx (+)= the transpose of the plan applied to dy, last step first."""
    if not propagate_down[0]:
        return
    dy, dx = output_grads[0], input_grads[0]
    if not op.plan:
        if accum[0]:
            device.add_into(dx, dy)
        else:
            device.copy(dy, dx)
        return
    g = dy
    for k in range(len(op.plan) - 1, -1, -1):
        step = op.plan[k]
        if k == 0:
            dst = dx
            if not accum[0]:
                device.fill(dst, 0)
        else:
            dst = device.zeros(step.in_shape, dy.dtype)
        index, weight, outside = _tables(op, k, step)
        device.launch(resample_axis_adjoint_kernel, g.size, g.reshape(step.out_view), index,
                      weight, outside, dst.reshape(step.in_view))
        if g is not dy:
            device.release(g)
        g = dst


@kernel
def dft_kernel(x, y, n0, n1, n2, sign, scale, accum):
    """y[o, k] (+)= scale * sum_m x[o, m] exp(sign 2 pi i sum_a k_a m_a / n_a) over signals
    of shape (n0, n1, n2) (flat m and k; trailing sizes 1 for fewer axes); x, y (outer, n, 2)."""
    t = cuda.grid(1)
    n = n0 * n1 * n2
    if t >= y.shape[0] * n:
        return
    o = t // n
    k = t % n
    k0, k1, k2 = unravel3(k, n1, n2)
    re = float64(0.0)
    im = float64(0.0)
    for m in range(n):
        m0, m1, m2 = unravel3(m, n1, n2)
        # the phase as a fraction of a turn, reduced in integers before the division
        turn = (k0 * m0 % n0) / n0 + (k1 * m1 % n1) / n1 + (k2 * m2 % n2) / n2
        angle = sign * 2.0 * math.pi * turn
        c = math.cos(angle)
        s = math.sin(angle)
        xr = x[o, m, 0]
        xi = x[o, m, 1]
        re += xr * c - xi * s
        im += xr * s + xi * c
    if accum:
        y[o, k, 0] += scale * re
        y[o, k, 1] += scale * im
    else:
        y[o, k, 0] = scale * re
        y[o, k, 1] = scale * im


def transform(op, x, y, adjoint, accum=False):
    """The CPU's ``transform``: y (+)= the DFT (IDFT) of x over the op's axes, or its adjoint.
    numpy's norm: 'ortho' scales either way by 1/sqrt(n); otherwise the (I)DFT, or its adjoint
    the other transform, is scaled by 1/n exactly when it is the inverse direction of the
    unnormalised pair (norm 'backward' for the forward map, 'forward' for the adjoint)."""
    sizes = [x.shape[a] for a in op.axes] + [1] * (3 - len(op.axes))
    n = op.n
    inverse = op.inverse != adjoint          # exp(+i ...): numpy's ifftn
    if op.normalized:
        scale = 1.0 / math.sqrt(n) if n else 1.0
    elif adjoint:
        scale = 1.0 / n if not inverse else 1.0   # norm='forward'
    else:
        scale = 1.0 / n if inverse else 1.0       # norm='backward'
    outer = y.size // (2 * n) if n else 0
    device.launch(dft_kernel, outer * n, x.reshape(outer, n, 2), y.reshape(outer, n, 2),
                  *sizes, 1.0 if inverse else -1.0, scale, accum)


@forward("FFT", "IFFT")
def dft_forward(op, inputs, outputs):
    transform(op, inputs[0], outputs[0], adjoint=False)


@backward("FFT", "IFFT")
def dft_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        transform(op, output_grads[0], input_grads[0], adjoint=True, accum=accum[0])


# ---------------------------------------------------------------------------- STFT / ISTFT
# The CPU's four linear maps (``ops/signal.py``'s ``StftGeometry``): frames gathered through the
# op's index, one ``blas.matmul`` with the windowed DFT (or synthesis) matrix, and the
# overlap-add scattered back with atomic adds (frames overlap).
@kernel
def gather_frames_kernel(x, index, scale, scaled, frames):
    """frames[b, f, n] = x[b, index[f, n]] (times scale[index] when ``scaled``; 0 where the
    index is -1)."""
    t = cuda.grid(1)
    n_frames, n = frames.shape[1], frames.shape[2]
    if t < frames.size:
        b, f, j = unravel3(t, n_frames, n)
        i = index[f, j]
        if i < 0:
            frames[b, f, j] = 0.0
        elif scaled:
            frames[b, f, j] = x[b, i] * scale[i]
        else:
            frames[b, f, j] = x[b, i]


@kernel
def scatter_frames_kernel(frames, index, x):
    """x[b, index[f, n]] += frames[b, f, n] (atomic; entries with index -1 are dropped)."""
    t = cuda.grid(1)
    n_frames, n = frames.shape[1], frames.shape[2]
    if t < frames.size:
        b, f, j = unravel3(t, n_frames, n)
        i = index[f, j]
        if i >= 0:
            cuda.atomic.add(x, (b, i), frames[b, f, j])


@kernel
def split_spectrum_kernel(z, yr, yi, accum_r, accum_i):
    """(yr, yi)[b, k, f] (+)= z[b, f, 0 / 1, k]."""
    t = cuda.grid(1)
    bins, n_frames = yr.shape[1], yr.shape[2]
    if t < yr.size:
        b, k, f = unravel3(t, bins, n_frames)
        store(yr, (b, k, f), z[b, f, 0, k], accum_r)
        store(yi, (b, k, f), z[b, f, 1, k], accum_i)


@kernel
def join_spectrum_kernel(yr, yi, z):
    """z[b, f, 0 / 1, k] = (yr, yi)[b, k, f]."""
    t = cuda.grid(1)
    bins, n_frames = yr.shape[1], yr.shape[2]
    if t < yr.size:
        b, k, f = unravel3(t, bins, n_frames)
        z[b, f, 0, k] = yr[b, k, f]
        z[b, f, 1, k] = yi[b, k, f]


@kernel
def scale_samples_kernel(src, scale, dst, accum):
    """dst[b, i] (+)= src[b, i] * scale[i]."""
    t = cuda.grid(1)
    length = dst.shape[1]
    if t < dst.size:
        b = t // length
        i = t % length
        v = src[b, i] * scale[i]
        store(dst, (b, i), v, accum)


def _matrix(op, name, dtype):
    host = op.geometry.matrix(name, dtype)
    return device.kept(op, name, host).reshape(1, *host.shape)


def _frames(op, batch, dtype):
    return device.empty((batch, op.index.shape[0], op.geometry.n), dtype)


def _spectrum(op, batch, dtype):
    return device.empty((batch, op.index.shape[0], 2, op.geometry.bins), dtype)


def _rows(a):
    """(1, rows, cols) of a (batch, frames, ...) array."""
    return a.reshape(1, a.shape[0] * a.shape[1], a.size // (a.shape[0] * a.shape[1]))


def _split(z, yr, yi, accum=(False, False)):
    device.launch(split_spectrum_kernel, yr.size, z, yr, yi, accum[0], accum[1])


def _join(op, yr, yi):
    z = _spectrum(op, yr.shape[0], yr.dtype)
    device.launch(join_spectrum_kernel, yr.size, yr, yi, z)
    return z


def _overlap_add(op, frames, x):
    device.launch(scatter_frames_kernel, frames.size, frames, device.kept(op, "index", op.index), x)


def spectrum_of(op, x, yr, yi, adjoint, accum=(False, False)):
    """(yr, yi) (+)= the DFT of the frames of x (STFT), or, ``adjoint``, the transpose of
    ISTFT: the frames of x / the overlap-added squared window times the synthesis matrix
    transposed."""
    frames = _frames(op, x.shape[0], x.dtype)
    # scale is not read unscaled, but must type as a vector: the kernel is compiled for both
    # branches (x itself, 2-d, made the unscaled branch fail to compile on a GPU)
    scale = device.kept(op, "inv_norm", op.inv_norm) if adjoint else x.reshape(x.size)
    device.launch(gather_frames_kernel, frames.size, x, device.kept(op, "index", op.index),
                  scale, adjoint, frames)
    z = _spectrum(op, x.shape[0], x.dtype)
    blas.matmul(_rows(frames), _matrix(op, "synthesis" if adjoint else "analysis", x.dtype),
                _rows(z), trans_b=adjoint)
    _split(z, yr, yi, accum)
    device.release(frames)
    device.release(z)


def samples_of(op, yr, yi, x, adjoint, accum=False):
    """x (+)= overlap_add(frames of the spectrum) / the overlap-added squared window (ISTFT),
    or, ``adjoint``, the transpose of STFT: the overlap-added frames of the spectrum times the
    analysis matrix transposed."""
    z = _join(op, yr, yi)
    frames = _frames(op, yr.shape[0], yr.dtype)
    blas.matmul(_rows(z), _matrix(op, "analysis" if adjoint else "synthesis", yr.dtype),
                _rows(frames), trans_b=adjoint)
    if adjoint:
        if not accum:
            device.fill(x, 0)
        _overlap_add(op, frames, x)
    else:
        summed = device.zeros(x.shape, x.dtype)
        _overlap_add(op, frames, summed)
        device.launch(scale_samples_kernel, x.size, summed,
                      device.kept(op, "inv_norm", op.inv_norm), x, accum)
        device.release(summed)
    device.release(z)
    device.release(frames)


@forward("STFT")
def stft_forward(op, inputs, outputs):
    spectrum_of(op, inputs[0], outputs[0], outputs[1], op.as_istft_backward)


@backward("STFT")
def stft_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        samples_of(op, output_grads[0], output_grads[1], input_grads[0],
                   not op.as_istft_backward, accum[0])


@forward("ISTFT")
def istft_forward(op, inputs, outputs):
    samples_of(op, inputs[0], inputs[1], outputs[0], op.as_stft_backward)


@backward("ISTFT")
def istft_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not (propagate_down[0] or propagate_down[1]):
        return
    dx = output_grads[0]
    shape = (dx.shape[0], op.geometry.bins, op.index.shape[0])
    targets = [g if pd else device.empty(shape, dx.dtype)   # an unwanted part: a temporary
               for g, pd in zip(input_grads[:2], propagate_down[:2])]
    spectrum_of(op, dx, targets[0], targets[1], not op.as_stft_backward,
                accum=tuple(bool(a and pd) for a, pd in zip(accum[:2], propagate_down[:2])))
    for g, pd in zip(targets, propagate_down[:2]):
        if not pd:
            device.release(g)
