"""Creating a function object from nnabla's ``Function`` message (nnabla's
``nnabla.utils.load_function``)."""
from .. import function as function_module
from ..ops.registry import TABLE
from ..serialization.function_args import read_args

__all__ = []


def _create_function_instance(ctx, f):
    """The function object of type ``f.type`` with ``f``'s arguments, built in ``ctx``
    (``nnabla_jit.function.<Type>(ctx, **args)``, as nnabla's ``nnabla.function`` classes)."""
    spec = TABLE.get(f.type)
    if spec is None:
        raise ValueError("_create_function_instance: unknown function type {!r}".format(f.type))
    cls = getattr(function_module, f.type, None)
    if cls is None:
        raise NotImplementedError("_create_function_instance: nnabla_jit.function has no {} class"
                                  .format(f.type))
    return cls(ctx, **read_args(f, spec))
