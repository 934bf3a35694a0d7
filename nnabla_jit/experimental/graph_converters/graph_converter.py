"""``GraphConverter`` and the ``FunctionModifier`` base of every modifier.

``GraphConverter(modifiers).convert(y)`` builds, for each modifier in turn, a new graph from
the one computing ``y``: it visits the functions in forward order and asks the modifier's
``modify(f, inputs)`` for each, where ``inputs`` are the new counterparts of ``f``'s inputs.
``modify`` returns the new output(s) of ``f`` (built from ``inputs`` with ``F`` calls) or None
to rebuild ``f`` unchanged. The original graph is left as it was; parameters the modifiers make
(folded weights, ...) are registered next to the originals.
"""
from contextlib import nullcontext

import numpy as np

from ... import functions as F
from ...function import auto_forward, build
from ...graph import upstream_functions
from ...ops.registry import REGISTRY, resolve_args
from ...parameter import get_parameters, parameter_scope, set_parameter
from ...variable import Variable

__all__ = ["FunctionModifier", "GraphConverter"]


class FunctionModifier:
    """Base class of modifiers: override :meth:`modify` (and :meth:`__finish__` to reset state
    between conversions)."""

    def __init__(self):
        self._map_func_inputs = {}   # Function -> the inputs it is to be rebuilt on
        self._counterparts = {}      # id(original Variable) -> (original, its new counterpart)
        self._graph_functions = None  # ids of the functions of the graph being converted
        self.outputs = []

    # ----------------------------------------------------------------------- the mapping
    def init_map_func_inputs(self, f, inputs):
        """Rebuild ``f`` on ``inputs`` (its first ``len(inputs)`` inputs; None keeps the usual
        counterpart)."""
        self._map_func_inputs[f] = list(inputs)

    def map_variable(self, original, new):
        """Use ``new`` wherever the graph being converted reads ``original``."""
        self._counterparts[id(original)] = (original, new)

    def counterpart(self, v):
        """The new graph's variable standing for ``v`` (``v`` itself for inputs and parameters
        nothing replaced)."""
        entry = self._counterparts.get(id(v))
        return v if entry is None else entry[1]

    def new_inputs(self, f):
        """The variables ``f`` is to be rebuilt on."""
        given = self._map_func_inputs.get(f, [])
        return [given[i] if i < len(given) and given[i] is not None else self.counterpart(v)
                for i, v in enumerate(f.inputs)]

    def consumers(self, v):
        """The functions of the graph being converted that read ``v`` (the converter's final
        Sink included, so an output of the graph always has a consumer)."""
        refs = v.function_references[::-1]   # in the order they were built
        if self._graph_functions is None:
            return refs
        return [g for g in refs if id(g) in self._graph_functions]

    def get_parameter_scope(self, v):
        """The scope of parameter ``v`` (``conv1/conv`` for ``conv1/conv/W``); '' if ``v`` is
        no registered parameter."""
        for key, p in get_parameters(grad_only=False).items():
            if p == v:
                return key.rpartition("/")[0]
        return ""

    # ----------------------------------------------------------------------- one function
    def __call__(self, f):
        inputs = self.new_inputs(f)
        o = self.modify(f, inputs)
        if o is None:
            o = self._modify_as_same(f, inputs)
        outputs = list(o) if isinstance(o, (list, tuple)) else [o]
        originals = f.outputs
        if len(outputs) != len(originals) or not all(isinstance(v, Variable) for v in outputs):
            raise ValueError("{}.modify: {} returned {!r}; expected None or {} Variable(s)".format(
                type(self).__name__, f.info.type_name, o, len(originals)))
        for old, new in zip(originals, outputs):
            if old is not None:
                self.map_variable(old, new)
        self.outputs = outputs

    def modify(self, f, inputs):
        """Return the new output(s) of ``f`` computed from ``inputs`` (the new counterparts of
        ``f.inputs``), or None to rebuild ``f`` as it is.

        Example::

            class ReLUToLeakyReLUModifier(FunctionModifier):
                def modify(self, f, inputs):
                    if f.info.type_name == 'ReLU':
                        return F.leaky_relu(inputs[0])
        """
        return None

    def _modify_as_same(self, f, inputs, **arg_changes):
        """``f``'s function (its arguments updated by ``arg_changes``) applied to ``inputs``."""
        op = f.op
        if op.python_level:   # a PythonFunction builds its own node
            return op.pyfunc(*inputs, n_outputs=len(f.outputs))
        args = dict(op.args, **arg_changes)
        return build(type(op)(input_names=op.input_names, **args), inputs, op.n_outputs)

    def _call_function(self, type_name, inputs, args, input_names=None):
        """Apply the function ``type_name`` (e.g. 'Convolution') with ``args`` to ``inputs``;
        ``input_names`` say which inputs are given when optional ones are left out in the
        middle (default: the first ``len(inputs)`` of the function's inputs)."""
        cls = REGISTRY.get(type_name)
        if cls is None:
            raise ValueError("no function named '{}'".format(type_name))
        names = list(input_names) if input_names is not None else _input_names(cls, len(inputs), args)
        if cls.spec is not None:
            shapes = {}
            for name, v in zip(names, inputs):
                shapes.setdefault(name, []).append(v.shape)
            variadic = {i.name for i in cls.spec.inputs if i.variadic}
            shapes = {k: (s if k in variadic else s[0]) for k, s in shapes.items()}
            args = resolve_args(cls.spec, shapes, args)
        return build(cls(input_names=names, **args), inputs)

    def _new_parameter(self, scope, name, data, need_grad, like=None):
        """Register ``scope/name`` holding ``data`` (in ``like``'s dtype) and return it; a
        parameter already there under that name is replaced, so converting again never
        reuses stale values."""
        data = np.asarray(data, dtype=like.d.dtype if like is not None else np.float32)
        param = Variable.from_numpy_array(data, need_grad=need_grad)
        param.name = name
        with parameter_scope(scope) if scope else nullcontext():
            set_parameter(name, param)
        return param

    # ----------------------------------------------------------------------- end of a pass
    def __finish__(self):
        """Reset the subclass's state after a conversion (override when there is any)."""

    def finish_up(self):
        """Forget this conversion's mapping, then call :meth:`__finish__`."""
        self._map_func_inputs = {}
        self._counterparts = {}
        self._graph_functions = None
        self.__finish__()


def _input_names(cls, n_inputs, args):
    """The names of ``n_inputs`` inputs given in table order (a variadic input takes what the
    others leave; BatchNormalization's beta/gamma are absent under no_bias/no_scale)."""
    if cls.spec is None:
        return ["x{}".format(i) for i in range(n_inputs)]
    specs = [i for i in cls.spec.inputs
             if not (i.name == "beta" and args.get("no_bias")) and not (i.name == "gamma" and args.get("no_scale"))]
    names = []
    for k, inp in enumerate(specs):
        if inp.variadic:
            names += [inp.name] * (n_inputs - len(names) - (len(specs) - k - 1))
        elif len(names) < n_inputs:
            names.append(inp.name)
    if len(names) != n_inputs:
        raise ValueError("{} takes the inputs {}; {} given".format(cls.name, cls.spec.inputs, n_inputs))
    return names


class GraphConverter:
    """Converts a graph with ``modifiers`` (a list; nested lists are flattened), one after
    the other: ``convert(y)`` returns the new output(s)."""

    def __init__(self, modifiers=[]):
        self._modifiers = self._prepare_modifiers(modifiers)

    def _prepare_modifiers(self, modifiers):
        flat = []
        for m in modifiers:
            if isinstance(m, (list, tuple)):
                flat += self._prepare_modifiers(m)
            elif isinstance(m, FunctionModifier):
                flat.append(m)
            else:
                raise TypeError("GraphConverter: {!r} is not a FunctionModifier".format(m))
        return flat

    def convert(self, o):
        """The outputs of the converted graph: a Variable for a Variable ``o``, a list for a
        list or tuple of them."""
        outputs = list(o) if isinstance(o, (list, tuple)) else [o]
        for v in outputs:
            if not isinstance(v, Variable):
                raise TypeError("GraphConverter.convert: expected Variables, got {}".format(type(v).__name__))
        with auto_forward(False):   # the new graph is built, not run
            for modifier in self._modifiers:
                # A Sink over the outputs gives each of them a consumer, as in nnabla, so that a
                # modifier sees a graph output as used (not foldable into what follows).
                sink = F.sink(*outputs)
                functions = upstream_functions([sink])
                modifier._graph_functions = {id(f) for f in functions}
                for f in functions[:-1]:
                    modifier(f)
                outputs = [modifier.counterpart(v) for v in outputs]
                modifier.finish_up()
        return outputs if isinstance(o, (list, tuple)) else outputs[0]
