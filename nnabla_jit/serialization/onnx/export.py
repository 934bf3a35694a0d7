"""nnabla_jit graph (or ``.nnp`` network) -> ONNX model.

The walk visits the functions the outputs depend on, producers first, and hands each to its
converter in ``exporters/`` (keyed by the nnabla function name), which adds ONNX nodes to a
:class:`~.builder.GraphBuilder`. Leaves become graph inputs (those asked for, or by default
every leaf that is not a parameter) or initializers (parameters, under their scope path, and
other leaves' current data), all float, as nnabla keeps labels and indices. Everything that cannot be exported, function types without a
mapping and arguments a mapping cannot express, is collected first and reported in one
:class:`OnnxExportError`.

Shapes are static (the graph's own); a BatchNormalization built with ``batch_stat=True`` is
written in inference form (running statistics), and functions whose forward is the identity
at inference (Dropout, gradient clippers) become ONNX Identity.
"""
import os
from collections import OrderedDict

import numpy as np

from ...graph import upstream_functions
from ...ops.registry import TABLE
from ...parameter import get_parameters, parameter_scope
from ...variable import Variable
from ..files import file_label, write_bytes
from .builder import GraphBuilder, Unsupported
from .dependencies import FLOAT, require_onnx
from .exporters import EXPORTERS

__all__ = ["DEFAULT_OPSET", "OLDEST_EXPORT_OPSET", "OnnxExportError", "export_opsets", "exportable_ops",
           "check_exportable", "to_model", "export", "export_nnp", "parse_opset"]

DEFAULT_OPSET = 17
OLDEST_EXPORT_OPSET = 11


def export_opsets():
    """The opsets an export writes: 11 to the newest the installed onnx defines."""
    onnx = require_onnx("ONNX export")
    return range(OLDEST_EXPORT_OPSET, onnx.defs.onnx_opset_version() + 1)


class OnnxExportError(ValueError):
    """The graph holds functions (or arguments) that have no ONNX mapping."""


def exportable_ops():
    """Names of the nnabla functions with an ONNX mapping."""
    return frozenset(EXPORTERS)


def parse_opset(opset):
    """An opset number from 17, '17' or nnabla_cli's 'opset_17' (None: the default)."""
    if opset is None:
        return DEFAULT_OPSET
    text = str(opset).strip().lower()
    if text.startswith("opset_"):
        text = text[len("opset_"):]
    try:
        number = int(text)
    except ValueError:
        raise ValueError("ONNX opset must be a number such as 17 or 'opset_17', got {!r}".format(
            opset)) from None
    opsets = export_opsets()
    if number not in opsets:
        raise ValueError("ONNX opset {} is not supported (use {} to {})".format(
            number, opsets[0], opsets[-1]))
    return number


def _named(variables, prefix):
    """OrderedDict name -> Variable from a Variable, a list/tuple or a dict."""
    if variables is None:
        return OrderedDict()
    if isinstance(variables, Variable):
        variables = [variables]
    if isinstance(variables, dict):
        items = list(variables.items())
    else:
        items = [("{}{}".format(prefix, k), v) for k, v in enumerate(variables)]
    for name, v in items:
        if not isinstance(v, Variable):
            raise TypeError("ONNX export: '{}' must be a Variable, got {}".format(name, type(v).__name__))
    return OrderedDict(items)


def _table_order(names):
    order = {n: i for i, n in enumerate(TABLE)}
    return sorted(set(names), key=lambda n: (order.get(n, len(order)), n))


def _gaps(types):
    return [t for t in _table_order(types) if t not in EXPORTERS]


def check_exportable(outputs):
    """Raise :class:`OnnxExportError` naming every function type of the graph computing
    ``outputs`` (Variables, or an ``NnpContents``: all its networks) that has no ONNX mapping."""
    if hasattr(outputs, "proto"):
        types = [f.type for net in outputs.proto.network for f in net.function]
    else:
        types = [n.op.name for n in upstream_functions(list(_named(outputs, "y").values()))]
    gaps = _gaps(types)
    if gaps:
        raise OnnxExportError("no ONNX mapping for: {}".format(", ".join(gaps)))


# ------------------------------------------------------------------------------------ walk
class NodeView:
    """What a converter sees of one nnabla function node.

    ``inputs``: the ONNX names of its inputs; ``slots``: their names in the function table
    (``x``, ``weight``, ``bias`` ...); ``args``: the function's arguments; ``op``: the op
    instance (with what its setup derived); ``in_shapes`` / ``out_shapes``.
    """

    def __init__(self, session, node, inputs):
        self.op = node.op
        self.type = node.op.name
        self.args = dict(node.op.args)
        self.inputs = list(inputs)
        self.slots = list(node.op.input_names) or ["x{}".format(k) for k in range(len(inputs))]
        self.in_shapes = [tuple(v.shape) for v in node.inputs]
        self.out_shapes = [tuple(s) for s in node.output_shapes]
        self._session = session

    def input(self, slot):
        """The ONNX name of the input of table name ``slot`` (None when absent)."""
        return self.inputs[self.slots.index(slot)] if slot in self.slots else None

    def shape(self, slot):
        return self.in_shapes[self.slots.index(slot)]

    @property
    def x(self):
        return self.inputs[0]

    @property
    def ndim(self):
        return len(self.in_shapes[0])

    def lower(self, build):
        """Export ``build(*inputs)``, a graph of F calls equivalent to this node, in its place:
        returns the ONNX names of the outputs ``build`` returns."""
        proxies = [Variable(s) for s in self.in_shapes]
        outs = build(*proxies)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        for p, name in zip(proxies, self.inputs):
            self._session.values[p] = name
        self._session.convert(upstream_functions(outs))
        return [self._session.values[v] for v in outs]


class _Session:
    def __init__(self, opset):
        self.g = GraphBuilder(opset)
        self.values = {}                 # Variable -> ONNX name
        self.gaps, self.problems = [], []

    def convert(self, nodes):
        for node in nodes:
            view = NodeView(self, node, self._inputs_of(node))
            outs = self._convert_one(view)
            for v, name in zip(node.outputs, outs):
                if v is not None:
                    self.values[v] = name

    def _inputs_of(self, node):
        """The ONNX names of a node's inputs, cast to float unless the op reads them as stored
        (indices, labels), as the executor casts them to the compute type."""
        keep = node.op.keep_input_dtypes
        return [name if k in keep else self.g.as_float(name)
                for k, name in enumerate(self.values[v] for v in node.inputs)]

    def _convert_one(self, view):
        converter = EXPORTERS.get(view.type)
        if converter is None:
            self.gaps.append(view.type)
        else:
            try:
                outs = converter(self.g, view)
                return list(outs) if isinstance(outs, (list, tuple)) else [outs]
            except Unsupported as e:
                self.problems.append("{}: {}".format(view.type, e))
        return [self.g.unique(view.type + "_unconverted") for _ in view.out_shapes]

    def error(self):
        parts = []
        if self.gaps:
            parts.append("no ONNX mapping for: {}".format(", ".join(_gaps(self.gaps))))
        parts += sorted(set(self.problems))
        return OnnxExportError("cannot export to ONNX opset {}: {}".format(self.g.opset, "; ".join(parts)))


def _leaf_values(session, nodes, outs, ins, inputs_given, params):
    """Name every leaf: graph inputs (``ins``, extended with unlisted leaves when no inputs
    were given), parameters as initializers under their paths, other leaves as constants."""
    g = session.g
    param_names = {v: k for k, v in params.items()}
    for k, v in ins.items():
        session.values[v] = k
    leaves = [v for node in nodes for v in node.inputs if v.parent is None]
    leaves += [v for v in outs.values() if v.parent is None]
    for v in leaves:
        if v in session.values:
            continue
        if v in param_names:
            session.values[v] = g.const(np.asarray(v.d), FLOAT, name=param_names[v])
        elif not inputs_given:
            key = g.unique("x{}".format(len(ins)))
            ins[key] = v
            session.values[v] = key
        else:
            session.values[v] = g.const(np.asarray(v.d), FLOAT, name="constant")


def _graph_outputs(onnx, session, outs):
    """Identity nodes giving the outputs their names, and their value infos (data-dependent
    shapes, NonZero's, symbolic)."""
    g = session.g
    infos = []
    for k, v in outs.items():
        g.nodes.append(onnx.helper.make_node("Identity", [session.values[v]], [k]))
        g.dtypes[k] = g.dtype(session.values[v])
        dynamic = v.parent is not None and getattr(v.parent.op, "data_dependent", False)
        shape = ["{}_dim{}".format(k, d) for d in range(v.ndim)] if dynamic else list(v.shape)
        infos.append(onnx.helper.make_tensor_value_info(k, g.dtypes[k], shape))
    return infos


def to_model(outputs, inputs=None, opset=DEFAULT_OPSET, parameters=None, name="nnabla_jit"):
    """The ONNX ``ModelProto`` of the graph computing ``outputs`` (checked by onnx.checker).

    Args:
        outputs: a Variable, a list of them (named ``y0``, ``y1``, ...) or a dict name -> Variable.
        inputs: the graph inputs, likewise (``x0``, ...). Default: every leaf that is not a
            parameter. Other leaves are written as constants holding their current data.
        opset (int): ONNX opset, 11 to the installed onnx's newest.
        parameters (dict): path -> Variable written as initializers under their paths
            (default: every parameter of the current scope).
    """
    onnx = require_onnx("ONNX export")
    from ... import __version__
    opset = parse_opset(opset)
    outs = _named(outputs, "y")
    if not outs:
        raise ValueError("ONNX export: no outputs given")
    ins = _named(inputs, "x")
    params = parameters if parameters is not None else get_parameters(grad_only=False)
    session = _Session(opset)
    g = session.g
    for n in list(ins) + list(outs):
        g.reserve(n)
    nodes = upstream_functions(list(outs.values()))
    _leaf_values(session, nodes, outs, ins, inputs is not None, params)
    session.convert(nodes)
    if session.gaps or session.problems:
        raise session.error()
    g_outputs = _graph_outputs(onnx, session, outs)
    g.adopt_source_names()
    g_inputs = [onnx.helper.make_tensor_value_info(k, FLOAT, list(v.shape)) for k, v in ins.items()]
    used = {i for node in g.nodes for i in node.input}
    initializers = [onnx.numpy_helper.from_array(a, n) for n, a in g.initializers.items() if n in used]
    graph = onnx.helper.make_graph(g.nodes, name, g_inputs, g_outputs, initializer=initializers)
    opset_ids = [onnx.helper.make_opsetid("", opset)]
    model = onnx.helper.make_model(graph, opset_imports=opset_ids, producer_name="nnabla_jit",
                                   producer_version=__version__)
    model.ir_version = onnx.helper.find_min_ir_version_for(opset_ids)
    onnx.checker.check_model(model)
    return model


def _write(model, path):
    write_bytes(path, model.SerializeToString())


def export(path, outputs, inputs=None, opset=DEFAULT_OPSET, parameters=None, name="nnabla_jit"):
    """Write the graph computing ``outputs`` to the ONNX file ``path`` (atomically); see
    :func:`to_model` for the arguments. Returns the ModelProto."""
    model = to_model(outputs, inputs, opset, parameters, name)
    _write(model, path)
    return model


# ------------------------------------------------------------------------------------ NNP
def _network_and_ports(contents, source):
    """The network to export (the first executor's, else the only one) and its input and
    output names."""
    from ..graph_import import ProtoNetwork
    nets = OrderedDict((n.name, n) for n in contents.proto.network)
    if not nets:
        raise ValueError("ONNX export: {} holds no network".format(source))
    if contents.proto.executor:
        e = contents.proto.executor[0]
        if e.network_name not in nets:
            raise ValueError("ONNX export: {}: executor '{}' uses network '{}', which the file does "
                             "not define".format(source, e.name, e.network_name))
        data = [v.variable_name for v in e.data_variable]
        return nets[e.network_name], data, [v.variable_name for v in e.output_variable]
    if len(nets) > 1:
        raise ValueError("ONNX export: {} has {} networks and no executor saying which to export"
                         .format(source, len(nets)))
    net = next(iter(nets.values()))
    pn = ProtoNetwork(net)
    return net, list(pn.inputs), list(pn.outputs)


def nnp_to_model(contents, opset=None, source="NNP"):
    """The ONNX ModelProto of an ``NnpContents``' executor network (see :func:`export_nnp`)."""
    from ..graph_import import ProtoNetwork
    from ..parameters import assign_to_scope
    opset = parse_opset(opset)
    net, data, output_names = _network_and_ports(contents, source)
    with parameter_scope("", OrderedDict()):
        assign_to_scope(contents.parameters, source)
        pn = ProtoNetwork(net).build()
        variables = pn.variables
        for n in data + output_names:
            if n not in variables:
                raise ValueError("ONNX export: {}: variable '{}' is not in network '{}'".format(
                    source, n, net.name))
        input_names = data + [n for n in pn.inputs if n not in data]
        inputs = OrderedDict((n, variables[n].variable_instance) for n in input_names)
        outputs = OrderedDict((n, variables[n].variable_instance) for n in output_names)
        return to_model(outputs, inputs, opset, get_parameters(grad_only=False), name=net.name)


def export_nnp(contents, path, opset=None):
    """Convert an ``.nnp`` (a path, or ``NnpContents``) to the ONNX file ``path``: the network
    of its first executor, with the executor's data variables as inputs and its output
    variables as outputs. ``opset``: 11 to the installed onnx's newest,
    or 'opset_11'... (default 17)."""
    from .. import nnp
    source = file_label(contents) if isinstance(contents, (str, os.PathLike)) else "NNP"
    if isinstance(contents, (str, os.PathLike)):
        contents = nnp.read([contents])
    model = nnp_to_model(contents, opset, source)
    _write(model, path)
    return model
