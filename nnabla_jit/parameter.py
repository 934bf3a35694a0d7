"""Parameters: the scoped registry PF layers create their weights in, and its files.

Scopes nest as ordered dicts (``nn.parameter_scope('fc1')`` -> ``fc1/affine/W``), in creation
order, as in nnabla. ``save_parameters`` / ``load_parameters`` read and write nnabla's ``.h5``
and ``.protobuf`` layouts (see ``serialization/parameters.py``).
"""
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np

from . import function as _function
from .thread_state import ThreadSettings
from .variable import Variable

__all__ = ["parameter_scope", "get_current_parameter_scope", "get_parameters", "clear_parameters",
           "get_parameter", "set_parameter", "get_parameter_or_create", "save_parameters",
           "load_parameters", "pop_parameter", "set_parameter_from_proto", "no_grad", "root_scope"]

_root_scope = OrderedDict()
# The current scope is per thread (see thread_state.py); every thread starts at the shared root.
_state = ThreadSettings({"scope": _root_scope})


def get_current_parameter_scope():
    """The current scope: the ordered dict of parameters and sub-scopes (as nnabla returns)."""
    return _state["scope"]


@contextmanager
def parameter_scope(name, scope=None):
    """Create parameters under ``name`` (nested with '/' or nested ``with`` blocks)."""
    names = [n for n in str(name).strip("/").split("/")]
    if scope is not None and not isinstance(scope, dict):
        raise ValueError("parameter_scope: scope must be a dict, got {}".format(type(scope).__name__))
    prev = _state["scope"]
    current = prev if scope is None else scope
    for n in names:
        if not n:
            continue
        child = current.get(n)
        if child is None:
            child = current[n] = OrderedDict()
        elif not isinstance(child, dict):
            raise ValueError("parameter_scope: '{}' is a parameter, not a scope".format(n))
        current = child
    with _state.scoped("scope", current):
        yield current


def get_parameters(params=None, path="", grad_only=True):
    """OrderedDict of the parameters under the current scope, keyed by path relative to it.
    ``grad_only`` keeps only those with need_grad=True."""
    out = OrderedDict() if params is None else params

    def walk(scope, prefix):
        for k, v in scope.items():
            key = prefix + "/" + k if prefix else k
            if isinstance(v, dict):
                walk(v, key)
            elif not grad_only or v.need_grad:
                out[key] = v
    walk(_state["scope"], path)
    return out


def _registered_parameter_ids():
    """The ids of every registered parameter's body, all scopes (Variable.no_grad's copies of
    them have need_grad False, as nnabla's)."""
    ids = set()

    def walk(scope):
        for v in scope.values():
            if isinstance(v, dict):
                walk(v)
            else:
                ids.add(id(v._body))
    walk(_root_scope)
    return ids


_function.register_parameter_ids(_registered_parameter_ids)


def clear_parameters():
    """Remove every parameter under the current scope."""
    _state["scope"].clear()


def _lookup(name, create_scopes=False):
    parts = name.split("/")
    scope = _state["scope"]
    for p in parts[:-1]:
        child = scope.get(p)
        if child is None:
            if not create_scopes:
                return None, parts[-1]
            child = scope[p] = OrderedDict()
        if not isinstance(child, dict):
            return None, parts[-1]
        scope = child
    return scope, parts[-1]


def get_parameter(key):
    """The parameter registered as ``key`` under the current scope, or None."""
    scope, leaf = _lookup(key)
    if scope is None:
        return None
    v = scope.get(leaf)
    return v if isinstance(v, Variable) else None


def set_parameter(key, param):
    """Register ``param`` (a Variable) as ``key`` under the current scope."""
    if not isinstance(param, Variable):
        raise TypeError("set_parameter: {} is not a Variable".format(type(param).__name__))
    scope, leaf = _lookup(key, create_scopes=True)
    scope[leaf] = param


def _create_parameter_by_initializer(initializer, shape, need_grad):
    """A new parameter Variable made by ``initializer`` (nnabla's helper name)."""
    return _create(initializer, shape, need_grad)


def _create(initializer, shape, need_grad):
    if initializer is None:
        if shape is None:
            raise ValueError("get_parameter_or_create: give a shape or an initializer")
        v = Variable(shape, need_grad=need_grad)
        v.data.zero()
        return v
    if isinstance(initializer, np.ndarray):
        if shape is not None and tuple(shape) != initializer.shape:
            raise ValueError("get_parameter_or_create: initializer array of shape {} for shape {}"
                             .format(initializer.shape, tuple(shape)))
        return Variable.from_numpy_array(initializer, need_grad=need_grad)
    if callable(initializer):
        if shape is None:
            raise ValueError("get_parameter_or_create: an initializer needs a shape")
        data = np.asarray(initializer(shape=list(map(int, shape))))
        v = Variable.from_numpy_array(data.astype(np.float32) if data.dtype == np.float64 else data,
                                      need_grad=need_grad)
        return v
    raise ValueError("get_parameter_or_create: initializer must be a numpy array or a callable "
                     "initializer, got {}".format(type(initializer).__name__))


def get_parameter_or_create(name, shape=None, initializer=None, need_grad=True, as_need_grad=None):
    """The parameter ``name`` under the current scope, created with ``initializer`` if missing.

    Returns a variable unlinked from the registered one (same buffers), whose need_grad is
    ``as_need_grad`` (default ``need_grad``; False inside ``nn.no_grad()``).
    """
    if as_need_grad is None:
        as_need_grad = need_grad
    if _function.get_no_grad():
        as_need_grad = False
    param = get_parameter(name)
    if param is not None:
        if shape is not None and param.shape != tuple(shape):
            raise ValueError("parameter '{}' exists with shape {}, not {}; call nn.clear_parameters() "
                             "to start afresh".format(name, param.shape, tuple(shape)))
        if need_grad != param.need_grad:
            param.need_grad = need_grad
    else:
        param = _create(initializer, shape, need_grad)
        set_parameter(name, param)
    v = param.get_unlinked_variable(need_grad=as_need_grad)
    v.name = name.split("/")[-1]
    return v


def save_parameters(path, params=None, extension=None):
    """Save parameters (all under the current scope by default) to ``.h5`` or ``.protobuf``."""
    from .serialization import parameters as files
    params = get_parameters(grad_only=False) if params is None else params
    files.save(path, params, extension)


def load_parameters(path, proto=None, needs_proto=False, extension=".nntxt"):
    """Load ``.h5`` / ``.protobuf`` (or the parameters of ``.nnp``) into the current scope.

    All or nothing: a file that cannot be read fully changes no parameter.
    """
    from .serialization import parameters as files
    return files.load(path, proto, needs_proto, extension)


def pop_parameter(key):
    """Remove the parameter ``key`` from the current scope and return it (None if absent)."""
    scope, leaf = _lookup(key)
    if scope is None or not isinstance(scope.get(leaf), Variable):
        return None
    return scope.pop(leaf)


def set_parameter_from_proto(proto):
    """Create or overwrite the parameters held in an ``NNablaProtoBuf`` message."""
    for p in proto.parameter:
        data = np.reshape(np.asarray(p.data, dtype=np.float32), tuple(p.shape.dim))
        param = get_parameter(p.variable_name)
        if param is None:
            set_parameter(p.variable_name, Variable.from_numpy_array(data, need_grad=p.need_grad))
        else:
            param.d = data
            param.need_grad = p.need_grad


def no_grad(no_grad_=True):
    """``with nn.parameter.no_grad():`` builds variables with need_grad=False (see
    ``nn.no_grad``)."""
    return _function.no_grad(no_grad_)


# nnabla's module globals: the root scope object, and (derived) the current one.
root_scope = _root_scope


def __getattr__(name):
    if name == "current_scope":
        return _state["scope"]
    if name == "current_no_grad":
        return _function.get_no_grad()
    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
