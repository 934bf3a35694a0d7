"""nnabla's ``Module`` (``nn.Module``): a model as an object that owns its parameters.

    class ConvBn(nn.Module):
        def __init__(self, outmaps):
            self.outmaps = outmaps
        def call(self, x, training=True):
            h = PF.convolution(x, self.outmaps, (3, 3), pad=(1, 1), with_bias=False)
            return PF.batch_normalization(h, batch_stat=training)

    m = ConvBn(16); y = m(x)
    m.get_parameters()          # {'conv/W': ..., 'bn/beta': ..., ...}

Every method a subclass defines runs inside the module's own parameter scope (so parameters
created by PF calls belong to the module, not to the global scope) and inside the graph
builder's module scope (so a call on ``nn.ProtoVariable`` inputs captures a network, see
:mod:`nnabla_jit.core.graph_def`). Modules assigned as attributes are submodules; their
parameters appear under ``@<attribute name>/``.
"""
import re
from collections import OrderedDict
from functools import wraps

from .. import parameter as _param
from ..parameter import get_parameters, load_parameters, save_parameters
from .graph_def import current_graph_builder, module_scope

__all__ = ["Module", "MetaClass", "ParamMemo", "insert_parent_name", "module_scope",
           "current_graph_builder"]


def insert_parent_name(name, params):
    """``params`` with every key prefixed by ``@name/``."""
    return OrderedDict(("@{}/{}".format(name, k), v) for k, v in params.items())


class ParamMemo:
    """Drops parameters already seen (a submodule shared by two parents is listed once)."""

    def __init__(self):
        self._memo = set()

    def filter_and_update(self, params):
        out = OrderedDict()
        for k, v in params.items():
            if v in self._memo:
                continue
            out[k] = v
            self._memo.add(v)
        return out


class MetaClass(type):
    """Wraps every method a Module subclass defines so that it runs in the module's scopes."""

    @staticmethod
    def method_wrapper(method):
        @wraps(method)
        def in_module_scopes(self, *args, **kwargs):
            with module_scope(current_graph_builder(), self) as result:
                with _param.parameter_scope("", self.parameter_scope):
                    outputs = method(self, *args, **kwargs)
                result["outputs"] = outputs if isinstance(outputs, (list, tuple)) else [outputs]
                return outputs
        return in_module_scopes

    def __new__(meta, classname, bases, class_dict):
        if bases:   # not the Module base class itself
            class_dict = {k: (MetaClass.method_wrapper(v) if callable(v) and not isinstance(
                              v, (type, staticmethod, classmethod)) else v) for k, v in class_dict.items()}
        return type.__new__(meta, classname, bases, class_dict)


class Module(metaclass=MetaClass):
    """Base class of models: define ``call(self, *inputs)``; call the module to build it."""

    _recursive_attrs = ["training"]

    def __repr__(self):
        return self.__class__.__name__

    @property
    def training(self):
        """Whether the module builds its training graph (set recursively on submodules)."""
        return self.__dict__.setdefault("training", True)

    @property
    def parameter_scope(self):
        """The module's own parameter scope (an OrderedDict)."""
        return self.__dict__.setdefault("_parameter_scope", OrderedDict())

    @property
    def submodules(self):
        """Submodules by attribute name, in assignment order."""
        return self.__dict__.setdefault("_submodules", OrderedDict())

    def get_scope_name(self):
        for name, module in self.submodules.items():
            return "/".join(("@" + name, module.get_scope_name())).strip("/")
        return ""

    def get_parameters(self, recursive=True, grad_only=False, memo=None):
        """OrderedDict path -> parameter: the submodules' (``@name/...``, recursively) then the
        module's own; a parameter shared by several submodules is listed once."""
        params = OrderedDict()
        memo = memo if memo is not None else ParamMemo()
        if recursive:
            for name, module in self.submodules.items():
                params.update(insert_parent_name(
                    name, module.get_parameters(recursive=recursive, grad_only=grad_only, memo=memo)))
        with _param.parameter_scope("", self.parameter_scope):
            params.update(memo.filter_and_update(get_parameters(grad_only=grad_only)))
        return params

    def load_parameters(self, path, extension=".h5", raise_if_missing=True):
        """Load the parameters in ``path`` into this module (and its submodules)."""
        scope = OrderedDict()
        with _param.parameter_scope("", scope):
            load_parameters(path, extension=extension)
            params = get_parameters(grad_only=False)
        self.set_parameters(params, raise_if_missing=raise_if_missing)

    def save_parameters(self, path, extension=".h5"):
        """Save this module's parameters (paths as in ``get_parameters``)."""
        save_parameters(path, params=self.get_parameters(grad_only=False), extension=extension)

    def set_parameter(self, key, param, raise_if_missing=False):
        """Set parameter ``key``; ``@sub/rest`` goes to submodule ``sub``."""
        if key.startswith("@"):
            pos = key.find("/")
            if pos < 0 or pos == len(key) - 1:
                raise ValueError("Invalid parameter key {}. A module parameter scope represented as "
                                 "`@name` must be followed by `/`.".format(key))
            name, rest = key[1:pos], key[pos + 1:]
            if name in self.submodules:
                self.submodules[name].set_parameter(rest, param, raise_if_missing=raise_if_missing)
            elif raise_if_missing:
                raise ValueError("A child module {} cannot be found in {}. This error is raised because "
                                 "`raise_if_missing` is specified as True. Please turn off if you allow "
                                 "it.".format(name, self))
            return
        with _param.parameter_scope("", self.parameter_scope):
            _param.set_parameter(key, param)

    def set_parameters(self, params, raise_if_missing=False):
        for key, param in params.items():
            self.set_parameter(key, param, raise_if_missing=raise_if_missing)

    def update_parameter(self):
        self.set_parameters(self.get_parameters())

    def zero_grad(self):
        """Set the gradients of all parameters to 0."""
        for param in self.get_parameters().values():
            param.grad.zero()

    def __len__(self):
        return len(self.submodules)

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self.submodules[name] = value
            value.__dict__["_name"] = name
            value.__dict__["_parent"] = self
            return
        self.__dict__[name] = value
        if name in self._recursive_attrs:
            for module in self.submodules.values():
                setattr(module, name, value)

    def __getattr__(self, name):
        submodules = self.__dict__.get("_submodules")
        if submodules is not None and name in submodules:
            return submodules[name]
        raise AttributeError("{!r} object has no attribute {!r}".format(type(self).__name__, name))

    @property
    def name(self):
        """The attribute name in the parent, else the class name in snake case."""
        if "_name" in self.__dict__:
            return self.__dict__["_name"]
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.__class__.__name__).lower()

    @property
    def parent(self):
        return self.__dict__.get("_parent", None)

    def is_root(self):
        return self.parent is None

    def get_path_name(self):
        if self.is_root():
            return "@" + self.name
        parent = self.parent.get_path_name()
        return "/".join([parent, "@" + self.name]) if parent else "@" + self.name

    def __call__(self, *args, **kwargs):
        return self.call(*args, **kwargs)

    def call(self, *args, **kwargs):
        """Build the module's graph on its inputs; subclasses implement it."""
        raise NotImplementedError("call(*av, **kw) must be implemented.")
