"""CUDA kernels of FFT / IFFT: a direct DFT, one thread per output frequency summing over the
whole signal (O(n) work per output, float64 with the phase reduced exactly in integers).

numba.cuda has no FFT (cuFFT would come through nvmath-python, like cuBLAS: see docs/cuda.md),
and the transforms these ops see in networks are small (a few to a few hundred points per
axis), where the direct sum costs little. One kernel serves the forward and inverse transforms
and their adjoints (the backward): they differ by the sign of the exponent and the scale, as
the CPU's ``transform`` picks them through numpy's ``norm``.
"""
import math

from numba import float64

from . import device
from .registry import backward, forward, kernel

cuda = None  # numba.cuda, bound by device.load()


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
    k0 = k // (n1 * n2)
    k1 = (k // n2) % n1
    k2 = k % n2
    re = float64(0.0)
    im = float64(0.0)
    for m in range(n):
        m0 = m // (n1 * n2)
        m1 = (m // n2) % n1
        m2 = m % n2
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
