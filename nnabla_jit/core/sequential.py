"""``nn.Sequential``: Modules applied one after the other (nnabla's ``nnabla.core.sequential``).

    block = nn.Sequential(ConvLayer(48, 1), ConvLayer(64, 3))          # named conv_layer_0, ..._1
    block = nn.Sequential(("conv1", ConvLayer(48, 1)), ("conv2", ConvLayer(64, 3)))
"""
from .module import Module

__all__ = ["Sequential"]


class Sequential(Module):
    """Each module's outputs are the next one's inputs; the last one's are returned."""

    def __init__(self, *args, **kwargs):
        for idx, entry in enumerate(args):
            name, module = entry if isinstance(entry, tuple) else (None, entry)
            if not isinstance(module, Module):
                raise TypeError("The input layer {}/{} should be a instance of nn.Module".format(
                    self.name, module.__class__.__name__))
            self.submodules[name if name is not None else "{}_{}".format(module.name, idx)] = module

    def call(self, *args, **kwargs):
        result = None
        for module in self.submodules.values():
            result = module(*args, **kwargs)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        return result
