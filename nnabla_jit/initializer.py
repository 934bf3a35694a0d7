"""``nnabla_jit.initializer`` (``I``): parameter initializers and nnabla's fan-in/fan-out scalings.

An initializer is a callable taking ``shape`` and returning a NumPy array. The random ones draw
from ``rng`` (a ``numpy.random.RandomState``; ``nn.random.prng`` when not given, looked up when
the initializer is created) with exactly the calls nnabla makes, so a seeded run produces the same
numbers in both libraries. Float results are ``random_float_type`` (float32).
"""
import numpy as np

from . import random

__all__ = ["BaseInitializer", "NormalInitializer", "UniformInitializer", "UniformIntInitializer",
           "RangeInitializer", "ConstantInitializer", "OrthogonalInitializer",
           "WeightNormalizationScaleInitializer", "calc_normal_std_he_forward",
           "calc_normal_std_he_backward", "calc_normal_std_glorot", "calc_uniform_lim_glorot",
           "random_float_type"]

random_float_type = np.float32


def _default_rng(rng):
    return random.prng if rng is None else rng


class BaseInitializer(object):
    """Base class: subclasses implement ``__call__(shape) -> numpy.ndarray``."""

    def __call__(self, shape):
        raise NotImplementedError("{} does not implement __call__(shape)".format(type(self).__name__))


class NormalInitializer(BaseInitializer):
    """Samples of N(0, sigma^2)."""

    def __init__(self, sigma=1.0, rng=None):
        self.rng = _default_rng(rng)
        self.sigma = sigma

    def __repr__(self):
        return "{}({})".format(type(self).__name__, self.sigma)

    def __call__(self, shape):
        return random_float_type(self.rng.randn(*shape) * self.sigma)


class UniformInitializer(BaseInitializer):
    """Samples of U(lim[0], lim[1])."""

    def __init__(self, lim=(-1, 1), rng=None):
        self.rng = _default_rng(rng)
        self.lim = lim

    def __repr__(self):
        return "{}({!r})".format(type(self).__name__, self.lim)

    def __call__(self, shape):
        return random_float_type(self.rng.uniform(self.lim[0], self.lim[1], size=shape))


class UniformIntInitializer(BaseInitializer):
    """Integers drawn uniformly from [lim[0], lim[1]) (an integer array, as in nnabla)."""

    def __init__(self, lim=(0, 10), rng=None):
        self.rng = _default_rng(rng)
        self.lim = lim

    def __repr__(self):
        return "{}({!r})".format(type(self).__name__, self.lim)

    def __call__(self, shape):
        return self.rng.randint(self.lim[0], self.lim[1], size=shape)


class RangeInitializer(BaseInitializer):
    """``start + step * i`` along the last axis, repeated over the leading axes."""

    def __init__(self, start=0, step=1):
        self.start = start
        self.step = step

    def __call__(self, shape):
        ramp = self.start + np.arange(0, shape[-1], 1) * self.step
        return np.broadcast_to(ramp, shape)


class ConstantInitializer(BaseInitializer):
    """Every element equal to ``value``."""

    def __init__(self, value=0):
        self.value = value

    def __call__(self, shape):
        return random_float_type(np.ones(shape) * self.value)


class OrthogonalInitializer(BaseInitializer):
    """An orthogonal matrix (Saxe et al.) times ``gain``, reshaped to ``shape``.

    The weight is seen as a (shape[0], prod(shape[1:])) matrix; the orthonormal factor of the
    SVD of a standard normal matrix that has that shape is used.
    """

    def __init__(self, gain=1.0, rng=None):
        self.rng = _default_rng(rng)
        self.gain = gain

    def __repr__(self):
        return "{}({})".format(type(self).__name__, self.gain)

    def __call__(self, shape):
        matrix_shape = (shape[0], int(np.prod(shape[1:])))
        gaussian = self.rng.normal(0.0, 1.0, matrix_shape)
        left, _, right = np.linalg.svd(gaussian, full_matrices=False)
        orthonormal = left if left.shape == matrix_shape else right
        return random_float_type(orthonormal.reshape(shape) * self.gain)


class WeightNormalizationScaleInitializer(BaseInitializer):
    """The L2 norm of ``w`` over every axis but ``dim`` (plus ``eps`` under the root), so that a
    weight-normalized layer starts out equal to the un-normalized one."""

    def __init__(self, w, dim=0, eps=1e-12):
        self.w = w.get_unlinked_variable()
        self.dim = dim
        self.eps = eps

    def __repr__(self):
        return "{}(dim={}, eps={})".format(type(self).__name__, self.dim, self.eps)

    def __call__(self, shape):
        other_axes = tuple(a for a in range(len(self.w.shape)) if a != self.dim)
        return random_float_type(np.sqrt(np.sum(self.w.d ** 2, axis=other_axes) + self.eps))


def calc_normal_std_he_forward(inmaps, outmaps, kernel=(1, 1)):
    """He et al.'s standard deviation for the forward pass: sqrt(2 / (K * inmaps)), K the
    number of kernel elements."""
    return np.sqrt(2. / (np.prod(kernel) * inmaps))


def calc_normal_std_he_backward(inmaps, outmaps, kernel=(1, 1)):
    """He et al.'s standard deviation for the backward pass: sqrt(2 / (K * outmaps))."""
    return np.sqrt(2. / (np.prod(kernel) * outmaps))


def calc_normal_std_glorot(inmaps, outmaps, kernel=(1, 1)):
    """Glorot's standard deviation: sqrt(2 / (K * (inmaps + outmaps)))."""
    return np.sqrt(2. / (np.prod(kernel) * (inmaps + outmaps)))


def calc_uniform_lim_glorot(inmaps, outmaps, kernel=(1, 1)):
    """Glorot's uniform range (-b, b) with b = sqrt(6 / (K * (inmaps + outmaps)))."""
    bound = np.sqrt(6. / (np.prod(kernel) * (inmaps + outmaps)))
    return -bound, bound
