"""``Deconvolution`` (``Deconv1d``, ``Deconv2d``, ``Deconv3d``, ``DeconvNd``). The weight is
``(inmaps, outmaps // group) + kernel``, the layout ``F.deconvolution`` takes."""
from ... import functions as F
from ...initializer import ConstantInitializer, UniformInitializer, calc_uniform_lim_glorot
from .affine import _parameter
from .module import Module

__all__ = ["Deconvolution", "Deconv1d", "Deconv2d", "Deconv3d", "DeconvNd", "Module",
           "ConstantInitializer", "UniformInitializer", "calc_uniform_lim_glorot"]


class Deconvolution(Module):
    def __init__(self, inmaps, outmaps, kernel, pad=None, stride=None, dilation=None, group=1,
                 w_init=None, b_init=None, base_axis=1, fix_parameters=False, rng=None,
                 with_bias=True):
        if w_init is None:
            w_init = UniformInitializer(calc_uniform_lim_glorot(inmaps, outmaps, tuple(kernel)), rng=rng)
        self.W = _parameter(w_init, (inmaps, outmaps // group) + tuple(kernel), not fix_parameters)
        self.b = None
        if with_bias:
            self.b = _parameter(b_init or ConstantInitializer(), (outmaps,), not fix_parameters)
        self.base_axis, self.pad, self.stride = base_axis, pad, stride
        self.dilation, self.group = dilation, group

    def __call__(self, inp):
        return F.deconvolution(inp, self.W, self.b, self.base_axis, self.pad, self.stride,
                               self.dilation, self.group)


Deconv1d = Deconv2d = Deconv3d = DeconvNd = Deconvolution
