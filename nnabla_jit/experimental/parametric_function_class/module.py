"""The base of the layer classes: parameters are the Variable attributes of a module and of
its submodule attributes, named ``<attribute path>/<attribute>``."""
from collections import OrderedDict

from ...logger import logger
from ...parameter import load_parameters, pop_parameter, save_parameters
from ...variable import Variable

__all__ = ["Module"]


class Module:
    def __init__(self):
        pass

    def get_modules(self, memo=None, prefix=""):
        """Yield (attribute path, module) for this module and, depth first, its submodules."""
        memo = memo if memo is not None else set()
        if self in memo:
            return
        memo.add(self)
        yield prefix, self
        for name, value in self.__dict__.items():
            if isinstance(value, Module):
                yield from value.get_modules(memo, "{}/{}".format(prefix, name) if prefix else name)

    def get_parameters(self, grad_only=True):
        """OrderedDict name -> Variable of the parameters (those with need_grad only if
        ``grad_only``)."""
        params = OrderedDict()
        for prefix, module in self.get_modules():
            for name, value in module.__dict__.items():
                if isinstance(value, Variable) and (value.need_grad or not grad_only):
                    params["{}/{}".format(prefix, name)] = value
        return params

    def save_parameters(self, path, grad_only=False):
        """Save the parameters (``.h5`` or ``.protobuf``)."""
        save_parameters(path, self.get_parameters(grad_only=grad_only))

    def load_parameters(self, path):
        """Copy the values saved in ``path`` into the parameters."""
        load_parameters(path)
        for name, param in self.get_parameters(grad_only=False).items():
            loaded = pop_parameter(name)
            if loaded is None:
                raise ValueError("Module.load_parameters: {} has no parameter {}".format(path, name))
            param.d = loaded.d.copy()
            logger.info("`{}` loaded.".format(name))
