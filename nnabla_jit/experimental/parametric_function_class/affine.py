"""``Affine`` (``Linear``): ``y = x W + b`` over the dimensions after ``base_axis``."""
import numpy as np

from ... import functions as F
from ...initializer import ConstantInitializer, UniformInitializer, calc_uniform_lim_glorot
from ...variable import Variable
from .module import Module

__all__ = ["Affine", "Linear", "Module", "ConstantInitializer", "UniformInitializer",
           "calc_uniform_lim_glorot"]


def _parameter(initializer, shape, need_grad):
    return Variable.from_numpy_array(initializer(shape), need_grad=need_grad)


class Affine(Module):
    def __init__(self, n_inmaps, n_outmaps, base_axis=1, w_init=None, b_init=None,
                 fix_parameters=False, rng=None, with_bias=True):
        n_outmap = int(np.prod(n_outmaps if hasattr(n_outmaps, "__iter__") else [n_outmaps]))
        if w_init is None:
            w_init = UniformInitializer(calc_uniform_lim_glorot(n_inmaps, n_outmap), rng=rng)
        self.W = _parameter(w_init, (n_inmaps, n_outmap), not fix_parameters)
        self.b = None
        if with_bias:
            self.b = _parameter(b_init or ConstantInitializer(), (n_outmap,), not fix_parameters)
        self.base_axis = base_axis

    def __call__(self, inp):
        return F.affine(inp, self.W, self.b, self.base_axis)


Linear = Affine
