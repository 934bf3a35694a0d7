"""``nnabla_jit.function_bases``: one function per registered op, generated from the registry.
``nnabla_jit.functions`` (``F``) re-exports them and adds nnabla's Python-level helpers.

A generated function has nnabla's signature: inputs, then the table's arguments with their
defaults (``None`` where the default is an expression over the inputs, resolved per call), then
``n_outputs=-1, outputs=None``. Given Variables it builds a graph node; given NdArrays it runs
at once and returns NdArrays.
"""
import ast
import sys

import numpy as np

from . import ops  # noqa: F401  (registers every op)
from .context import get_current_context  # noqa: F401  (nnabla's module has these names)
from .function import build, get_auto_forward  # noqa: F401
from .ndarray import NdArray
from .ops.registry import REGISTRY, TABLE, resolve_args
from .variable import Variable

_this = sys.modules[__name__]


def _apply(cls, inputs, names, given, n_outputs=-1, outputs=None):
    """Resolve the arguments of op ``cls`` against its inputs, build the node, return outputs."""
    spec = cls.spec
    present, present_names, shapes = [], [], {}
    for name, value in zip(names, inputs):
        if isinstance(value, (list, tuple)):      # a variadic input
            present.extend(value)
            present_names.extend(name for _ in value)
            shapes[name] = [v.shape for v in value]
        elif value is not None:
            present.append(value)
            present_names.append(name)
            shapes[name] = value.shape
    args = resolve_args(spec, shapes, given) if spec is not None else dict(given)
    op = cls(input_names=present_names, **args)
    return build(op, present, n_outputs, outputs)


def _literal(text):
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, SyntaxError):
        return None


def _source_of(spec):
    """The Python source of ``F.<snake_name>`` for one table row."""
    params, passed_inputs, names = [], [], []
    variadic = any(i.variadic for i in spec.inputs)
    for inp in spec.inputs:
        if inp.variadic:
            params.append("*" + inp.name)
            passed_inputs.append(inp.name)
        else:
            params.append(inp.name + ("=None" if inp.optional else ""))
            passed_inputs.append(inp.name)
        names.append(inp.name)
    seen_default = any(i.optional for i in spec.inputs)
    for a in spec.args:
        default = None if a.default is None else (_literal(a.default) or "None")
        if default is None and (seen_default or variadic):
            default = "None"   # required, checked when the arguments are resolved
        if default is not None:
            seen_default = True
            params.append("{}={}".format(a.name, default))
        else:
            params.append(a.name)
    params += ["n_outputs=-1", "outputs=None"]
    doc = "{} ({}).\n\n    Inputs: {}\n    Arguments: {}\n    Outputs: {}\n".format(
        spec.name, spec.category, ", ".join(map(repr, spec.inputs)) or "none",
        ", ".join(map(repr, spec.args)) or "none", ", ".join(spec.outputs))
    return ('def {snake}({params}):\n    """{doc}    """\n'
            '    return _apply(REGISTRY[{name!r}], [{inputs}], {names!r}, dict({args}), n_outputs, outputs)\n'
            ).format(snake=spec.snake_name, params=", ".join(params), doc=doc, name=spec.name,
                     inputs=", ".join(passed_inputs), names=names,
                     args=", ".join("{0}={0}".format(a.name) for a in spec.args))


def _generate():
    for name, spec in TABLE.items():
        if name not in REGISTRY:
            continue
        namespace = {"_apply": _apply, "REGISTRY": REGISTRY}
        exec(compile(_source_of(spec), "<nnabla_jit.functions.{}>".format(spec.snake_name), "exec"),
             namespace)
        fn = namespace[spec.snake_name]
        fn.__module__ = __name__
        setattr(_this, spec.snake_name, fn)


_generate()
__all__ = [spec.snake_name for name, spec in TABLE.items() if name in REGISTRY]
