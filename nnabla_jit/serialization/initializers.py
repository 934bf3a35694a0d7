"""The ``Initializer`` of a ``Variable`` message (``type``, ``multiplier``) as a callable.

Networks written by Neural Network Console carry how to initialise each parameter (e.g.
``NormalAffineGlorot``, multiplier 1). Loading such a network without a parameter file creates
the parameters with these rules, which are nnabla's.
"""
import numpy as np

from .. import initializer as I

__all__ = ["initializer_from_proto"]


def _affine_maps(shape):
    return shape[0], int(np.prod(shape[1:]))


def _conv_maps(shape):             # (outmaps, inmaps, *kernel)
    return shape[-3], shape[0], tuple(shape[-2:])


def _cl_conv_maps(shape):          # channel last: (outmaps, *kernel, inmaps)
    return shape[-1], shape[0], tuple(shape[1:3])


def _scaled_normal(std_of, maps_of):
    def make(multiplier, rng):
        def init(shape):
            maps = maps_of(shape)
            return I.NormalInitializer(std_of(maps[0], maps[1], *maps[2:]), rng=rng)(shape) * multiplier
        return init
    return make


def _scaled_uniform(maps_of):
    def make(multiplier, rng):
        def init(shape):
            maps = maps_of(shape)
            lim = I.calc_uniform_lim_glorot(maps[0], maps[1], *maps[2:])
            return I.UniformInitializer(lim, rng=rng)(shape) * multiplier
        return init
    return make


_RULES = {
    "Normal": lambda m, rng: I.NormalInitializer(m, rng=rng),
    "Uniform": lambda m, rng: I.UniformInitializer((-m, m), rng=rng),
    "Constant": lambda m, rng: I.ConstantInitializer(m),
    "Range": lambda m, rng: (lambda shape: I.RangeInitializer(0, 1)(shape) * m),
    "UniformAffineGlorot": _scaled_uniform(_affine_maps),
    "UniformConvolutionGlorot": _scaled_uniform(_conv_maps),
    "UniformCLConvGlorot": _scaled_uniform(_cl_conv_maps),
}
for _layout, _maps in (("Affine", _affine_maps), ("Convolution", _conv_maps), ("CLConv", _cl_conv_maps)):
    for _suffix, _std in (("He", I.calc_normal_std_he_forward), ("HeForward", I.calc_normal_std_he_forward),
                          ("HeBackward", I.calc_normal_std_he_backward), ("Glorot", I.calc_normal_std_glorot)):
        _RULES["Normal" + _layout + _suffix] = _scaled_normal(_std, _maps)


def initializer_from_proto(initializer, rng):
    """A callable ``shape -> ndarray`` for an ``Initializer`` message, or None if it names no
    rule we know (the parameter then starts at zero, as in nnabla)."""
    rule = _RULES.get(initializer.type)
    return None if rule is None else rule(initializer.multiplier, rng)
