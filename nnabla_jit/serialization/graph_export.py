"""A graph of Function nodes -> nnabla's ``Network`` message.

The walk starts at the outputs and lists the functions producers first (the order nnabla writes
them in). Variables are named as nnabla names them: the names the caller gives; parameters by
their path in the parameter scope (``fc1/affine/W``); the rest ``@<network>/<Type>_out`` (and
``_in`` for leaves nobody named), made unique with ``_1``, ``_2``, ...; functions
``@<network>/<Type>``. With ``variable_batch_size`` the batch dimension becomes ``-1`` so the
network can be loaded at any batch size (nnabla's rule: the batch size is what the inputs of a
``base_axis`` function have before that axis).
"""
from collections import OrderedDict

import numpy as np

from ..graph import upstream_functions
from ..ops.registry import TABLE
from ..parameter import get_parameters
from ..variable import Variable
from .function_args import write_args
from .proto import nnabla_pb2

__all__ = ["network_to_proto"]


class _Names:
    """Hands out names unique within one network."""

    def __init__(self, taken):
        self.used = set(taken)

    def unique(self, base):
        name, k = base, 0
        while name in self.used:
            k += 1
            name = "{}_{}".format(base, k)
        self.used.add(name)
        return name


class _Var:
    __slots__ = ("name", "type", "shape")

    def __init__(self, name, type_, shape):
        self.name, self.type, self.shape = name, type_, list(shape)


class _Func:
    __slots__ = ("name", "type", "inputs", "outputs", "args")

    def __init__(self, name, type_, args):
        self.name, self.type, self.args = name, type_, dict(args)
        self.inputs, self.outputs = [], []


def _output_shapes(node):
    """Shapes of a node's outputs, including outputs nobody holds any more."""
    outs = node.outputs
    if all(v is not None for v in outs):
        return [v.shape for v in outs]
    return [tuple(s) for s in node.op.setup(*[v.shape for v in node.inputs])]


def _collect(net_name, outputs, names, parameters):
    """Walk the graph: the variables (buffers, then parameters) and functions, named."""
    given = OrderedDict()             # Variable -> name (Variables hash by their buffers)
    for name, var in list(names.items()) + list(outputs.items()):
        if not isinstance(var, Variable):
            raise TypeError("network '{}': '{}' must be a Variable, got {}".format(
                net_name, name, type(var).__name__))
        given[var] = name
    param_names = {var: name for name, var in parameters.items()}
    namer = _Names(list(given.values()) + list(parameters.keys()))
    buffers, params, funcs = OrderedDict(), OrderedDict(), []
    known = {}                        # id(Variable object) -> name, for variables met already

    def name_input(v, type_name):
        if id(v) in known:
            return known[id(v)]
        if v in param_names:
            name = param_names[v]
            params.setdefault(name, _Var(name, "Parameter", v.shape))
        else:
            name = given.get(v) or namer.unique("@{}/{}_in".format(net_name, type_name))
            buffers.setdefault(name, _Var(name, "Buffer", v.shape))
        known[id(v)] = name
        return name

    for node in upstream_functions(list(outputs.values())):
        type_name = node.op.name
        if getattr(node.op, "python_level", False) or type_name not in TABLE:
            raise ValueError("network '{}': function '{}' is not an nnabla function and cannot "
                             "be saved in a network file".format(net_name, type_name))
        f = _Func(namer.unique("@{}/{}".format(net_name, type_name)), type_name, node.op.args)
        f.inputs = [name_input(v, type_name) for v in node.inputs]
        for v, shape in zip(node.outputs, _output_shapes(node)):
            if v is not None and v in given:
                name = given[v]
            else:
                name = namer.unique("@{}/{}_out".format(net_name, type_name))
            if v is not None:
                known[id(v)] = name
            buffers.setdefault(name, _Var(name, "Buffer", shape))
            f.outputs.append(name)
        funcs.append(f)
    return buffers, params, funcs


def _variable_batch_size(buffers, funcs):
    """Replace the batch dimension by -1 (in shapes and in Reshape/Broadcast shape arguments).
    Returns the batch size found, or None when no function tells it."""
    batch = None
    for f in funcs:
        base_axis = f.args.get("base_axis")
        if base_axis:
            for name in f.inputs:
                if name in buffers:
                    batch = int(np.prod(buffers[name].shape[:base_axis]))
                    break
    if batch is None:
        return None
    # Outputs of functions that read no batch-carrying variable (e.g. computed from
    # parameters only) keep their shapes.
    fixed = set()
    for f in funcs:
        if not any(n in buffers and n not in fixed for n in f.inputs):
            fixed.update(f.outputs)
            continue
        shape = f.args.get("shape")
        if f.type in ("Reshape", "Broadcast") and shape and shape[0] == batch:
            source = buffers.get(f.inputs[0])
            if f.type == "Reshape" or (source is not None and len(shape) == len(source.shape)):
                f.args["shape"] = (-1,) + tuple(shape[1:])
    for name, v in buffers.items():
        if v.shape and name not in fixed and v.shape[0] == batch:
            v.shape[0] = -1
    return batch


def network_to_proto(name, outputs, names=None, batch_size=None, variable_batch_size=True,
                     parameters=None):
    """The ``Network`` message of the graph that computes ``outputs``.

    Args:
        name (str): network name.
        outputs (dict): output name -> Variable.
        names (dict): more name -> Variable (inputs, intermediates) to keep their names.
        batch_size (int): written as ``batch_size`` (default: the batch size found, or 1).
        variable_batch_size (bool): write the batch dimension as -1.
        parameters (dict): path -> parameter Variable (default: all in the current scope).
    """
    if not outputs:
        raise ValueError("network '{}': no outputs given".format(name))
    if parameters is None:
        parameters = get_parameters(grad_only=False)
    buffers, params, funcs = _collect(name, OrderedDict(outputs), OrderedDict(names or {}),
                                      parameters)
    found = _variable_batch_size(buffers, funcs) if variable_batch_size else None
    net = nnabla_pb2.Network(name=name)
    net.batch_size = int(batch_size if batch_size is not None else (found or 1))
    for v in list(buffers.values()) + list(params.values()):
        var = net.variable.add(name=v.name, type=v.type)
        var.shape.SetInParent()
        var.shape.dim.extend(int(d) for d in v.shape)
    for f in funcs:
        msg = net.function.add(name=f.name, type=f.type)
        msg.input.extend(f.inputs)
        msg.output.extend(f.outputs)
        write_args(msg, f.type, f.args)
    return net
