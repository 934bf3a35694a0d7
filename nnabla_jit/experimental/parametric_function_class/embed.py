"""``Embed``: rows of a ``(n_inputs, n_features)`` table picked by integer inputs."""
import numpy as np

from ... import functions as F
from ...initializer import UniformInitializer
from .affine import _parameter
from .module import Module

__all__ = ["Embed", "Module", "UniformInitializer"]


class Embed(Module):
    def __init__(self, n_inputs, n_features, w_init=None, fix_parameters=False):
        if w_init is None:
            w_init = UniformInitializer((-np.sqrt(3.), np.sqrt(3)))
        self.W = _parameter(w_init, (n_inputs, n_features), not fix_parameters)

    def __call__(self, inp):
        return F.embed(inp, self.W)
