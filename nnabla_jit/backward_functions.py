"""nnabla's ``backward_functions``: the grad rules ``nn.grad`` uses, by function type name.

The registry is filled from the op registry (each op's ``grad``); ``register(name, fn)`` adds or
replaces a rule. A rule has nnabla's signature::

    fn(grad_inputs, inputs, input_shapes, outputs, output_shapes, **function_args)

and returns one Variable (or None) per input of the forward function.
"""
from collections import OrderedDict

from .ops.registry import REGISTRY

registry = OrderedDict((name, cls.grad) for name, cls in REGISTRY.items() if cls.grad is not None)


def register(func_name, func):
    """Use ``func`` as the grad rule of functions of type ``func_name`` (e.g. 'Affine')."""
    if not callable(func):
        raise TypeError("register: the grad rule for {} must be callable".format(func_name))
    registry[func_name] = func


def show_registry():
    """Print, for every function, which parts exist (see nnabla_jit.utils.inspection)."""
    from .utils.inspection import registry_table
    print(registry_table())
