"""nnabla's ``backward_functions``: the grad rules ``nn.grad`` uses, by function type name.

The registry is ``ops.registry.GRAD_RULES``, filled by the modules of ``backward_function/``;
``register(name, fn)`` adds or replaces a rule. A rule has nnabla's signature::

    fn(grad_inputs, inputs, input_shapes, outputs, output_shapes, **function_args)

and returns one Variable (or None) per input of the forward function.
"""
from . import backward_function  # noqa: F401  (files every rule)
from .ops.registry import GRAD_RULES

registry = GRAD_RULES


def register(func_name, func):
    """Use ``func`` as the grad rule of functions of type ``func_name`` (e.g. 'Affine')."""
    if not callable(func):
        raise TypeError("register: the grad rule for {} must be callable".format(func_name))
    registry[func_name] = func


def show_registry():
    """Print, for every function, which parts exist (see nnabla_jit.utils.inspection)."""
    from .utils.inspection import registry_table
    print(registry_table())
