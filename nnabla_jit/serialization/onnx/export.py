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
at inference (Dropout, gradient clippers) become ONNX Identity. Every model is checked with
``onnx.checker.check_model(full_check=True)``; :func:`export` moves initializers beyond
protobuf's 2 GB to an external data file.
"""
import os
from collections import OrderedDict

import numpy as np
from tqdm import tqdm

from ...graph import upstream_functions
from ...ops.registry import TABLE
from ...parameter import get_parameters, parameter_scope
from ...variable import Variable
from ..files import atomic_path, file_label, write_bytes
from .builder import GraphBuilder, Unsupported
from .dependencies import FLOAT, require_onnx
from .exporters import EXPORTERS
from .external_data import (EXTERNAL_DATA_MIN_BYTES, PROTOBUF_LIMIT, external_layout, initializer, write_external,
                            write_file)

__all__ = ["DEFAULT_OPSET", "EXTERNAL_DATA_MIN_BYTES", "OLDEST_EXPORT_OPSET", "PROTOBUF_LIMIT", "OnnxExportError",
           "export_opsets", "exportable_ops", "check_exportable", "to_model", "export", "export_nnp", "parse_opset"]

DEFAULT_OPSET = 17
OLDEST_EXPORT_OPSET = 7


def export_opsets():
    """The opsets an export writes: 7 to the newest the installed onnx defines."""
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

    def convert(self, nodes, bar=None):
        for node in nodes:
            if bar is not None:
                bar.update()
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


def _convert_graph(outputs, inputs, opset, parameters, progress):
    """(GraphBuilder, graph inputs, graph outputs) of the graph computing ``outputs``."""
    onnx = require_onnx("ONNX export")
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
    with tqdm(total=len(nodes), desc="ONNX export", unit="function", disable=not progress) as bar:
        session.convert(nodes, bar)
    if session.gaps or session.problems:
        raise session.error()
    g_outputs = _graph_outputs(onnx, session, outs)
    g.adopt_source_names()
    g_inputs = [onnx.helper.make_tensor_value_info(k, FLOAT, list(v.shape)) for k, v in ins.items()]
    return g, g_inputs, g_outputs


def _assemble(g, g_inputs, g_outputs, name, layout=None, location=None):
    """The ModelProto; initializers named in ``layout`` refer to ``location``."""
    onnx = require_onnx("ONNX export")
    from ... import __version__
    layout = layout or {}
    used = {i for node in g.nodes for i in node.input}
    initializers = [initializer(onnx, n, a, (location, layout[n]) if n in layout else None)
                    for n, a in g.initializers.items() if n in used]
    opset_ids = [onnx.helper.make_opsetid("", g.opset)]
    ir_version = onnx.helper.find_min_ir_version_for(opset_ids)
    if ir_version < 4:   # IR 3 (opsets 7 and 8) lists every initializer among the graph inputs
        g_inputs = list(g_inputs) + [onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                     for t in initializers]
    graph = onnx.helper.make_graph(g.nodes, name, g_inputs, g_outputs, initializer=initializers)
    model = onnx.helper.make_model(graph, opset_imports=opset_ids, producer_name="nnabla_jit",
                                   producer_version=__version__)
    model.ir_version = ir_version
    return model


def _used_initializers(g):
    used = {i for node in g.nodes for i in node.input}
    return OrderedDict((n, a) for n, a in g.initializers.items() if n in used)


def to_model(outputs, inputs=None, opset=DEFAULT_OPSET, parameters=None, name="nnabla_jit",
             progress=False):
    """The ONNX ``ModelProto`` of the graph computing ``outputs``, checked by
    ``onnx.checker.check_model(full_check=True)`` (shape inference included).

    Args:
        outputs: a Variable, a list of them (named ``y0``, ``y1``, ...) or a dict name -> Variable.
        inputs: the graph inputs, likewise (``x0``, ...). Default: every leaf that is not a
            parameter. Other leaves are written as constants holding their current data.
        opset (int): ONNX opset, 7 to the installed onnx's newest (some functions need a newer
            one; the error names it).
        parameters (dict): path -> Variable written as initializers under their paths
            (default: every parameter of the current scope).
        progress (bool): show a tqdm bar over the functions converted.

    A model whose initializers exceed protobuf's 2 GB cannot be a single message: write it
    with :func:`export`, which moves them to an external data file.
    """
    onnx = require_onnx("ONNX export")
    g, g_inputs, g_outputs = _convert_graph(outputs, inputs, parse_opset(opset), parameters, progress)
    size = sum(a.nbytes for a in _used_initializers(g).values())
    if size > PROTOBUF_LIMIT:
        raise ValueError("ONNX export: the initializers take {} bytes, more than protobuf's 2 GB "
                         "limit on one message; use export(path, ...), which writes them to an "
                         "external data file".format(size))
    model = _assemble(g, g_inputs, g_outputs, name)
    onnx.checker.check_model(model, full_check=True)
    return model


def _write_model(g, g_inputs, g_outputs, name, path, external_data_threshold, progress):
    """Write the model to ``path`` (atomically), its initializers to ``<path>.data`` when they
    exceed ``external_data_threshold`` bytes; check the written file with
    ``onnx.checker.check_model(path, full_check=True)`` before it replaces an old one."""
    onnx = require_onnx("ONNX export")
    arrays = _used_initializers(g)
    threshold = PROTOBUF_LIMIT if external_data_threshold is None else int(external_data_threshold)
    layout = external_layout(arrays, min(threshold, PROTOBUF_LIMIT))
    if not layout:
        model = _assemble(g, g_inputs, g_outputs, name)
        onnx.checker.check_model(model, full_check=True)
        write_bytes(path, model.SerializeToString())
        return model
    data_path = os.fspath(path) + ".data"
    location = os.path.basename(data_path)
    total = sum(arrays[n].nbytes for n in layout)
    with atomic_path(data_path) as data_tmp, atomic_path(path) as model_tmp:
        with tqdm(total=total, desc="ONNX external data", unit="B", unit_scale=True,
                  disable=not progress) as bar:
            write_external(arrays, layout, data_tmp, bar)
        # The temporary model refers to the temporary data file while it is checked.
        model = _assemble(g, g_inputs, g_outputs, name, layout, os.path.basename(data_tmp))
        write_file(model_tmp, model.SerializeToString())
        onnx.checker.check_model(model_tmp, full_check=True)
        model = _assemble(g, g_inputs, g_outputs, name, layout, location)
        write_file(model_tmp, model.SerializeToString())
    return model


def export(path, outputs, inputs=None, opset=DEFAULT_OPSET, parameters=None, name="nnabla_jit",
           external_data_threshold=None, progress=False):
    """Write the graph computing ``outputs`` to the ONNX file ``path`` (atomically); see
    :func:`to_model` for the arguments. Returns the ModelProto.

    When the initializers together take more than ``external_data_threshold`` bytes (default
    and most: protobuf's 2 GB limit), every initializer of at least 1 KiB goes to the external
    data file ``<path>.data`` beside the model (ONNX's external data: ``onnx.load`` and
    onnxruntime read it from there); the returned ModelProto refers to it.
    """
    g, g_inputs, g_outputs = _convert_graph(outputs, inputs, parse_opset(opset), parameters, progress)
    return _write_model(g, g_inputs, g_outputs, name, path, external_data_threshold, progress)


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


def _from_nnp(contents, source, convert):
    """``convert(outputs, inputs, parameters, name)`` on the executor network of ``contents``,
    built in a scope of its own."""
    from ..graph_import import ProtoNetwork
    from ..parameters import assign_to_scope
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
        return convert(outputs, inputs, get_parameters(grad_only=False), net.name)


def nnp_to_model(contents, opset=None, source="NNP"):
    """The ONNX ModelProto of an ``NnpContents``' executor network (see :func:`export_nnp`)."""
    opset = parse_opset(opset)
    return _from_nnp(contents, source, lambda outputs, inputs, parameters, name: to_model(
        outputs, inputs, opset, parameters, name))


def export_nnp(contents, path, opset=None, external_data_threshold=None, progress=False):
    """Convert an ``.nnp`` (a path, or ``NnpContents``) to the ONNX file ``path``: the network
    of its first executor, with the executor's data variables as inputs and its output
    variables as outputs. ``opset``: 7 to the installed onnx's newest,
    or 'opset_7'... (default 17). ``external_data_threshold`` and ``progress``: as for
    :func:`export`."""
    from .. import nnp
    source = file_label(contents) if isinstance(contents, (str, os.PathLike)) else "NNP"
    opset = parse_opset(opset)
    if isinstance(contents, (str, os.PathLike)):
        contents = nnp.read([contents])
    return _from_nnp(contents, source, lambda outputs, inputs, parameters, name: export(
        path, outputs, inputs, opset, parameters, name, external_data_threshold, progress))
