"""nnabla's ``Network`` message -> a graph of Function nodes, ready to run.

:class:`ProtoNetwork` reads a message (checking that every function is a known nnabla function,
implemented here, and that every name it reads is declared) and :meth:`ProtoNetwork.build`
creates the graph: one input Variable per buffer no function produces, parameters through
``get_parameter_or_create`` in the current scope (made with the message's initializer when
missing), and one ``F`` call per function with the arguments of its ``<Type>Parameter``.
A ``-1`` dimension (in shapes and in ``shape`` arguments) is the batch size.
"""
from collections import OrderedDict

import numpy as np

from .. import function_bases
from ..ops.registry import REGISTRY, TABLE
from ..parameter import get_parameter, get_parameter_or_create
from ..variable import Variable
from .function_args import read_args
from .initializers import initializer_from_proto

__all__ = ["ProtoNetwork", "ProtoVariable", "ProtoFunction", "call_proto_function",
           "check_batch_size"]


def check_batch_size(batch_size, what):
    """``batch_size`` is None (the file's) or a positive integer."""
    if batch_size is None:
        return
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise TypeError("{}: batch_size must be a positive integer or None, got {!r}".format(
            what, batch_size))
    if batch_size <= 0:
        raise ValueError("{}: batch_size must be a positive integer, got {}".format(
            what, batch_size))

# nnabla's loop-control functions (networks designed with repeats in Neural Network Console).
_LOOP_CONTROL = {"RepeatStart", "RepeatEnd", "RecurrentInput", "RecurrentOutput", "Delay"}

# Optional inputs that the arguments say are absent, so that the inputs a function message
# lists can be matched to the table's (others are told apart by count, dropping from the end).
_ABSENT_WHEN = {}
for _type in ("BatchNormalization", "GroupNormalization", "InstanceNormalization",
              "LayerNormalization", "TensorNormalization"):
    _ABSENT_WHEN[(_type, "beta")] = lambda args: bool(args.get("no_bias", False))
    _ABSENT_WHEN[(_type, "gamma")] = lambda args: bool(args.get("no_scale", False))
for _type in ("RNN", "LSTM", "GRU"):
    _ABSENT_WHEN[(_type, "weight")] = lambda args: args.get("num_layers", 1) == 1


class ProtoVariable:
    """A variable of the message: ``name``, ``type`` ('Buffer' or 'Parameter'), ``shape`` as
    written (``-1`` for the batch), and, once built, ``variable_instance``."""

    def __init__(self, proto):
        self.proto = proto
        self.name = proto.name
        self.type = proto.type
        self.shape = tuple(int(d) for d in proto.shape.dim)
        self.variable_instance = None
        self.parent = None            # name of the function producing it
        self.required = []            # names of the functions reading it

    def __repr__(self):
        return "ProtoVariable({!r}, {}, {})".format(self.name, self.type, self.shape)


class ProtoFunction:
    """A function of the message: ``name``, ``type``, ``inputs``/``outputs`` (variable names),
    ``args`` (as read from its parameter message) and, once built, ``function_instance``."""

    def __init__(self, proto, network_name):
        self.proto = proto
        self.name = proto.name
        self.type = proto.type
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        spec = TABLE.get(self.type)
        if self.type in _LOOP_CONTROL or proto.HasField("repeat_param") or proto.HasField("recurrent_param"):
            raise NotImplementedError(
                "network '{}': function '{}' ({}) uses nnabla's repeat/recurrent loop control, "
                "which nnabla_jit does not expand".format(network_name, self.name, self.type))
        if spec is None:
            raise ValueError("network '{}': function '{}' has unknown type '{}'".format(
                network_name, self.name, self.type))
        if self.type not in REGISTRY:
            raise NotImplementedError("network '{}': function '{}' needs {}, which nnabla_jit does "
                                      "not implement yet".format(network_name, self.name, self.type))
        self.spec = spec
        self.args = read_args(proto, spec)
        self.function_instance = None

    def __repr__(self):
        return "ProtoFunction({!r}, {})".format(self.name, self.type)


def _with_batch(shape, batch_size):
    return tuple(batch_size if d < 0 else d for d in shape)


class ProtoNetwork:
    """One network of an NNP: its variables, parameters and functions, and the graph built from
    them (``build``)."""

    def __init__(self, proto, batch_size=None):
        if proto.repeat_info:
            raise NotImplementedError("network '{}': repeat_info (loop control) is not supported"
                                      .format(proto.name))
        check_batch_size(batch_size, "network '{}'".format(proto.name))
        self.proto = proto
        self.name = proto.name
        self.batch_size = batch_size or proto.batch_size or 1
        self.variables = OrderedDict()
        self.parameters = OrderedDict()
        for v in proto.variable:
            pv = ProtoVariable(v)
            if v.type == "Parameter":
                self.parameters[v.name] = pv
            elif v.type == "Buffer":
                self.variables[v.name] = pv
            else:
                raise ValueError("network '{}': variable '{}' has unknown type '{}' (expected "
                                 "Buffer or Parameter)".format(self.name, v.name, v.type))
        self.functions = OrderedDict()
        for f in proto.function:
            pf = ProtoFunction(f, self.name)
            for n in pf.inputs:
                self._declared(n, pf).required.append(pf.name)
            for n in pf.outputs:
                pv = self._declared(n, pf)
                if pv.parent is not None:
                    raise ValueError("network '{}': variable '{}' is produced by both '{}' and '{}'"
                                     .format(self.name, n, pv.parent, pf.name))
                pv.parent = pf.name
            self.functions[pf.name] = pf
        self.inputs = [k for k, v in self.variables.items() if v.parent is None and v.required]
        self.outputs = [k for k, v in self.variables.items() if v.parent and not v.required]

    def _declared(self, name, pf):
        pv = self.variables.get(name) or self.parameters.get(name)
        if pv is None:
            raise ValueError("network '{}': function '{}' uses variable '{}', which the network "
                             "does not declare".format(self.name, pf.name, name))
        return pv

    def build(self, batch_size=None, rng=None):
        """Create the graph in the current parameter scope; returns ``self`` with every
        ``variable_instance`` / ``function_instance`` set."""
        check_batch_size(batch_size, "network '{}'".format(self.name))
        batch = batch_size or self.batch_size
        rng = rng if rng is not None else np.random.RandomState(0)
        for name in self.inputs:
            pv = self.variables[name]
            pv.variable_instance = Variable(_with_batch(pv.shape, batch))
        for pv in self.parameters.values():
            if pv.required or pv.parent:
                # A parameter read from a file keeps its need_grad (BN statistics stay False).
                existing = get_parameter(pv.name)
                pv.variable_instance = get_parameter_or_create(
                    pv.name, pv.shape, initializer_from_proto(pv.proto.initializer, rng),
                    need_grad=existing.need_grad if existing is not None else True)
        for pf in self.functions.values():
            self._build_function(pf, batch)
        for pv in list(self.variables.values()) + list(self.parameters.values()):
            if pv.variable_instance is not None:
                pv.variable_instance.name = pv.name
        return self

    def _build_function(self, pf, batch):
        inputs = []
        for n in pf.inputs:
            pv = self.variables.get(n) or self.parameters[n]
            if pv.variable_instance is None:
                raise ValueError("network '{}': function '{}' reads '{}' before any function "
                                 "produces it".format(self.name, pf.name, n))
            inputs.append(pv.variable_instance)
        outs = call_proto_function(pf, inputs, batch, self.name)
        pf.function_instance = outs[0].parent
        for n, v in zip(pf.outputs, outs):
            (self.variables.get(n) or self.parameters[n]).variable_instance = v


def call_proto_function(pf, inputs, batch, network_name):
    """Call the ``F`` function of ProtoFunction ``pf`` on Variables ``inputs`` -> its outputs
    (a tuple, as many as the message lists). ``batch`` replaces a ``-1`` batch in a shape."""
    args = dict(pf.args)
    shape = args.get("shape")
    # nnabla writes the batch dimension of shapes as -1. A Reshape takes its input's batch
    # (which differs from the network's when the input's shape was written fixed).
    if shape and shape[0] == -1:
        lead = inputs[0].shape[0] if pf.type == "Reshape" and inputs and inputs[0].shape else batch
        args["shape"] = (lead,) + tuple(shape[1:])
    fn = getattr(function_bases, pf.spec.snake_name)
    try:
        if any(i.variadic for i in pf.spec.inputs):
            outs = fn(*inputs, n_outputs=len(pf.outputs), **args)
        else:
            names = _present_inputs(pf, len(inputs), args)
            outs = fn(n_outputs=len(pf.outputs), **dict(zip(names, inputs)), **args)
    except (ValueError, TypeError) as e:
        raise ValueError("network '{}': cannot build function '{}' ({}): {}".format(
            network_name, pf.name, pf.type, e)) from e
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    if len(outs) != len(pf.outputs):
        raise ValueError("network '{}': function '{}' ({}) gives {} outputs, the file lists {}"
                         .format(network_name, pf.name, pf.type, len(outs), len(pf.outputs)))
    return outs


def _present_inputs(pf, count, args):
    """Names of the table inputs a function with ``count`` inputs has, in order."""
    spec = pf.spec
    names = [i.name for i in spec.inputs
             if not (i.optional and _ABSENT_WHEN.get((spec.name, i.name), lambda a: False)(args))]
    optional = [i.name for i in spec.inputs if i.optional]
    while len(names) > count and any(n in optional for n in names):
        last = max(k for k, n in enumerate(names) if n in optional)
        names.pop(last)
    if len(names) != count:
        raise ValueError("network: function '{}' ({}) has {} inputs; {} takes {}".format(
            pf.name, pf.type, count, spec.name, ", ".join(repr(i) for i in spec.inputs)))
    return names
