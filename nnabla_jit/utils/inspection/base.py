"""The base of the function-hook tools, and the helpers that name what they report."""
import os

__all__ = ["FunctionHookCallbackBase", "listed", "parameter_names", "parameter_scope_of"]


def listed(value):
    """An argument value as nnabla shows it (its arguments are lists where ours are tuples)."""
    if isinstance(value, (tuple, list)):
        return [listed(v) for v in value]
    return value


def parameter_names(params=None):
    """``{parameter Variable: its name}`` over ``params`` (default: every registered
    parameter); Variables hash by their buffers, so unlinked twins find their name too."""
    if params is None:
        from ...parameter import get_parameters
        params = get_parameters(grad_only=False)
    return {v: k for k, v in params.items()}


def parameter_scope_of(f, names):
    """The scope (``conv1/conv``) of the parameter a function takes as its second input, as
    nnabla's tools label functions; None when that input is no named parameter."""
    if len(f.inputs) < 2:
        return None
    key = names.get(f.inputs[1])
    return os.path.dirname(key) if key else None


def _outputs(f):
    """The outputs of ``f`` still alive (an output nobody holds is gone)."""
    return [o for o in f.outputs if o is not None]



class FunctionHookCallbackBase:
    """Base of the objects whose ``pre_hook`` / ``post_hook`` properties are callbacks for the
    ``function_pre_hook`` / ``function_post_hook`` arguments of forward and backward."""

    @property
    def pre_hook(self):
        raise NotImplementedError("{} has no pre_hook".format(type(self).__name__))

    @property
    def post_hook(self):
        raise NotImplementedError("{} has no post_hook".format(type(self).__name__))


