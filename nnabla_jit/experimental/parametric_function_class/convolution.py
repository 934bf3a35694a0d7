"""``Convolution`` (``Conv1d``, ``Conv2d``, ``Conv3d``, ``ConvNd``): N-D convolution with a bias."""
from ... import functions as F
from ...initializer import ConstantInitializer, UniformInitializer, calc_uniform_lim_glorot
from .affine import _parameter
from .module import Module

__all__ = ["Convolution", "Conv1d", "Conv2d", "Conv3d", "ConvNd", "Module", "ConstantInitializer",
           "UniformInitializer", "calc_uniform_lim_glorot"]


class Convolution(Module):
    function = staticmethod(F.convolution)   # Deconvolution: F.deconvolution

    @staticmethod
    def weight_shape(inmaps, outmaps, group, kernel):
        return (outmaps, inmaps // group) + tuple(kernel)

    def __init__(self, inmaps, outmaps, kernel, pad=None, stride=None, dilation=None, group=1,
                 w_init=None, b_init=None, base_axis=1, fix_parameters=False, rng=None,
                 with_bias=True):
        if w_init is None:
            w_init = UniformInitializer(calc_uniform_lim_glorot(inmaps, outmaps, tuple(kernel)), rng=rng)
        self.W = _parameter(w_init, self.weight_shape(inmaps, outmaps, group, kernel), not fix_parameters)
        self.b = None
        if with_bias:
            self.b = _parameter(b_init or ConstantInitializer(), (outmaps,), not fix_parameters)
        self.base_axis, self.pad, self.stride = base_axis, pad, stride
        self.dilation, self.group = dilation, group

    def __call__(self, inp):
        return self.function(inp, self.W, self.b, self.base_axis, self.pad, self.stride,
                             self.dilation, self.group)


Conv1d = Conv2d = Conv3d = ConvNd = Convolution
