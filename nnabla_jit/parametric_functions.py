"""``nnabla_jit.parametric_functions`` (``PF``): functions that create their parameters.

Each PF function runs under a parameter scope named after it (``affine``, ``conv``, ``bn``, ...)
and, when ``name=`` is given, under that scope first: ``PF.affine(x, 10, name='fc1')`` creates
``fc1/affine/W`` and ``fc1/affine/b``, exactly as nnabla does, so parameter files cross between
the two libraries.
"""
import functools
import inspect

import numpy as np

from . import functions as F
from .parameter import get_parameter_or_create, parameter_scope

__all__ = ["parametric_function_api"]


def parametric_function_api(scope_name=None, param_desc=None):
    """Decorator: run the function under ``parameter_scope(scope_name)`` and add a ``name``
    argument that puts that scope under ``name``. ``param_desc`` lists (name, description,
    shape, need_grad) for the docstring."""
    def decorate(func):
        scope = scope_name or func.__name__
        sig = inspect.signature(func)
        if "fix_parameters" not in sig.parameters:
            raise TypeError("parametric function {} must take fix_parameters".format(func.__name__))

        @functools.wraps(func)
        def wrapper(*args, name=None, **kwargs):
            if name is None:
                with parameter_scope(scope):
                    return func(*args, **kwargs)
            with parameter_scope(name):
                with parameter_scope(scope):
                    return func(*args, **kwargs)

        params = list(sig.parameters.values()) + [
            inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY if any(
                p.kind == inspect.Parameter.VAR_POSITIONAL for p in sig.parameters.values())
                else inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
        wrapper.__signature__ = sig.replace(parameters=params)
        if param_desc:
            wrapper.__doc__ = (func.__doc__ or "") + "\n    Parameters registered under scope '{}':\n{}".format(
                scope, "\n".join("        {} (need_grad={}): {} (shape {})".format(n, g, d, s)
                                 for n, d, s, g in param_desc))
        wrapper.__scope_name__ = scope
        wrapper.__parametric_function_api_base__ = func
        return wrapper
    return decorate


def _append_api(*names):
    """Families appended below register their public names here."""
    __all__.extend(names)


# ============================================================================ layers
# (each family appends its parametric functions below this line)
