"""Writing one function into nnabla's ``Function`` message (nnabla's
``nnabla.utils.save_function``, used by ``utils.save``)."""
from ..serialization.function_args import write_args

__all__ = []


def _create_function_nntxt(f, name, function):
    """Fill the ``Function`` message ``f`` from ``function`` ({'type', 'inputs', 'outputs',
    'args'}), naming it ``name``; the arguments go to the type's parameter message."""
    f.name = name
    f.type = function["type"]
    f.input.extend(function["inputs"])
    f.output.extend(function["outputs"])
    write_args(f, f.type, function.get("args", {}))
    return f
