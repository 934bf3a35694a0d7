"""``BatchNormalization`` and ``BatchNorm1d``/``2d``/``3d`` (for 3-, 4- and 5-D inputs):
``beta``, ``gamma`` (trained) and the running ``mean``, ``var``; ``layer(x, test=True)`` uses
the running statistics."""
from ... import functions as F
from ...initializer import ConstantInitializer
from .affine import _parameter
from .module import Module

__all__ = ["BatchNormalization", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "Module",
           "ConstantInitializer"]


class BatchNormalization(Module):
    def __init__(self, n_features, n_dims, axes=[1], decay_rate=0.9, eps=1e-5, batch_stat=True,
                 output_stat=False, fix_parameters=False, param_init=None):
        if len(axes) != 1:
            raise ValueError("BatchNormalization: axes must name one axis, got {}".format(axes))
        shape = [1] * n_dims
        shape[axes[0]] = n_features
        init = dict(param_init or {})
        self.beta = _parameter(init.get("beta", ConstantInitializer(0)), shape, not fix_parameters)
        self.gamma = _parameter(init.get("gamma", ConstantInitializer(1)), shape, not fix_parameters)
        self.mean = _parameter(init.get("mean", ConstantInitializer(0)), shape, False)
        self.var = _parameter(init.get("var", ConstantInitializer(1)), shape, False)
        self.axes, self.decay_rate, self.eps, self.output_stat = axes, decay_rate, eps, output_stat

    def __call__(self, inp, test=False):
        return F.batch_normalization(inp, self.beta, self.gamma, self.mean, self.var, self.axes,
                                     self.decay_rate, self.eps, not test, self.output_stat)


def _fixed_rank(n_dims, name):
    class BatchNormND(BatchNormalization):
        def __init__(self, n_features, axes=[1], decay_rate=0.9, eps=1e-5, batch_stat=True,
                     output_stat=False, fix_parameters=False, param_init=None):
            super().__init__(n_features, n_dims, axes, decay_rate, eps, batch_stat, output_stat,
                             fix_parameters, param_init)
    BatchNormND.__name__ = BatchNormND.__qualname__ = name
    BatchNormND.__doc__ = "Batch normalization of {}-D inputs.".format(n_dims)
    return BatchNormND


BatchNorm1d = _fixed_rank(3, "BatchNorm1d")
BatchNorm2d = _fixed_rank(4, "BatchNorm2d")
BatchNorm3d = _fixed_rank(5, "BatchNorm3d")
