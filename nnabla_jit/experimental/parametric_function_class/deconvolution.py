"""``Deconvolution`` (``Deconv1d``, ``Deconv2d``, ``Deconv3d``, ``DeconvNd``). The weight is
``(inmaps, outmaps // group) + kernel``, the layout ``F.deconvolution`` takes; everything else
is ``Convolution``'s."""
from ... import functions as F
from ...initializer import ConstantInitializer, UniformInitializer, calc_uniform_lim_glorot
from .convolution import Convolution
from .module import Module

__all__ = ["Deconvolution", "Deconv1d", "Deconv2d", "Deconv3d", "DeconvNd", "Module",
           "ConstantInitializer", "UniformInitializer", "calc_uniform_lim_glorot"]


class Deconvolution(Convolution):
    function = staticmethod(F.deconvolution)

    @staticmethod
    def weight_shape(inmaps, outmaps, group, kernel):
        return (inmaps, outmaps // group) + tuple(kernel)


Deconv1d = Deconv2d = Deconv3d = DeconvNd = Deconvolution
