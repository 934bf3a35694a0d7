"""ONNX model -> nnabla_jit graph (and -> ``NnpContents``, through the NNP writer).

The graph's nodes are visited in order. A node whose inputs are all constants (initializers,
Constant nodes, shapes, which are static here) is evaluated at once with onnx's reference
implementation and stays a constant: that covers the shape arithmetic of exported models.
Every other node goes to its converter in ``importers/`` (keyed by ONNX op type), which builds
it from ``F`` functions. Constants a function reads as data become parameters of the current
scope, named after the ONNX tensor. Integer and boolean tensors live in float Variables
(nnabla's convention: labels, indices and masks are floats); the element type of each value is
tracked so that casts do what ONNX says.
"""
import math
import os
from collections import OrderedDict

import numpy as np
from tqdm import tqdm

from ... import functions as F
from ...parameter import get_parameter, get_parameter_or_create, get_parameters, parameter_scope
from ...variable import Variable
from ..files import FileFormatError, check_shape, file_label, read_bytes
from .builder import (OUTPUT_TYPE, RANDOM_OPS, TYPE_FROM_INPUT, Unsupported, elem_type_of, evaluate_node,
                      predicted_output_sizes)
from .dependencies import BOOL, FLOAT, INT64, require_onnx
from .external_data import read_external
from .importers import IMPORTERS

__all__ = ["OnnxConstantRequired", "OnnxImportError", "OnnxNetwork", "import_onnx", "importable_ops",
           "import_opsets", "nnp_from_onnx"]

# nnabla 1.39's own converter writes opset 7 by default; the newest is the installed onnx's.
OLDEST_IMPORT_OPSET = 7
# Ops converted only when their inputs are constants (they are evaluated while importing).
_CONSTANT_ONLY = {"Constant", "ConstantOfShape", "Range", "HannWindow", "HammingWindow", "BlackmanWindow",
                  "MelWeightMatrix"}
_INT_TYPES = (2, 3, 4, 5, 6, 7, 12, 13)

#: A constant the importer computes (a node whose inputs are all constants) may hold at most
#: this many elements: ``ConstantOfShape([2**26])`` is refused before it is made. Raise it for a
#: model that really folds larger constants.
MAX_FOLDED_ELEMENTS = 1 << 24


class OnnxImportError(ValueError):
    """The model uses ONNX ops (or attributes) that have no nnabla_jit mapping."""


class OnnxConstantRequired(OnnxImportError):
    """A graph input feeds a value nnabla_jit needs when building the graph (axes, a shape,
    scales, bounds ...); ``input_name`` names it. Pass its value as
    ``import_onnx(..., constants={input_name: array})``."""

    def __init__(self, message, input_name):
        super().__init__(message)
        self.input_name = input_name


def import_opsets(onnx=None):
    """The default-domain opsets the importer reads: 7 to the newest the installed onnx defines."""
    onnx = onnx or require_onnx("ONNX import")
    return range(OLDEST_IMPORT_OPSET, onnx.defs.onnx_opset_version() + 1)


def importable_ops():
    """ONNX op types (default domain) the importer converts."""
    return frozenset(IMPORTERS) | _CONSTANT_ONLY


def _tracked_type(elem):
    """The type a value is tracked as: BOOL, INT64 (any integer) or FLOAT."""
    return elem if elem == BOOL else (INT64 if elem in _INT_TYPES else FLOAT)


def _text(value):
    """Attribute strings (and lists of them) as str."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8") for v in value]
    return value


class OnnxNode:
    """What a converter sees of one ONNX node: ``op_type``, ``inputs`` (names, None for an
    omitted optional input), ``outputs`` and the attributes (``attr(name, default)``)."""

    def __init__(self, proto, onnx):
        self.proto = proto
        self.op_type = proto.op_type
        self.name = proto.name
        self.inputs = [i or None for i in proto.input]
        self.outputs = list(proto.output)
        self.attrs = {a.name: _text(onnx.helper.get_attribute_value(a)) for a in proto.attribute}

    def attr(self, name, default=None):
        return self.attrs.get(name, default)

    def input(self, k):
        return self.inputs[k] if k < len(self.inputs) else None


class ImportContext:
    """The values of the graph being imported, for the converters."""

    def __init__(self, opset, onnx):
        self.opset = opset
        self.onnx = onnx
        self.consts = {}        # name -> numpy array
        self.variables = {}     # name -> Variable
        self.types = {}         # name -> ONNX element type
        self.parameters = OrderedDict()
        self.sources = {}       # name of a computed value -> the graph inputs it is computed from

    # --- reading values ----------------------------------------------------------------
    def is_const(self, name):
        return name in self.consts

    def const(self, name, what="input"):
        """The value of a constant input; converters needing one (a shape, axes) call this."""
        if name not in self.consts:
            sources = self.sources.get(name, ())
            if len(sources) == 1:
                source = next(iter(sources))
                raise ConstantNeeded(
                    "{} '{}' must be known when importing, and it {} graph input '{}': pass its value "
                    "as import_onnx(..., constants={{'{}': array}})".format(
                        what, name, "is" if source == name else "is computed from", source, source),
                    source)
            raise Unsupported("{} '{}' must be a constant (an initializer or computed from "
                              "initializers and shapes)".format(what, name))
        return self.consts[name]

    def scalar(self, name):
        """The float value of a constant holding one element, else None."""
        if name in self.consts and self.consts[name].size == 1:
            return float(self.consts[name].reshape(-1)[0])
        return None

    def shape(self, name):
        return tuple(self.consts[name].shape) if name in self.consts else self.variables[name].shape

    def elem(self, name):
        return self.types.get(name, FLOAT)

    def var(self, name):
        """The Variable of a value; a constant becomes a parameter named after it."""
        if name in self.variables:
            return self.variables[name]
        v = self.parameter(name, self.consts[name])
        self.variables[name] = v
        return v

    def parameter(self, name, array, need_grad=None):
        """Register ``array`` as parameter ``name`` of the current scope (learnable if
        ``need_grad``, by default if it holds floats), overwriting one of that name and shape;
        a name that clashes with the scope tree gets its slashes replaced."""
        array = np.asarray(array)
        key = name
        while not _can_register(key, array.shape):
            key = key.replace("/", "_") + "_"
        existing = get_parameter(key)
        if existing is not None:
            existing.d = array
        if need_grad is None:
            need_grad = array.dtype.kind == "f"
        v = get_parameter_or_create(key, initializer=array.astype(np.float32), need_grad=need_grad)
        self.parameters[key] = get_parameter(key)
        return v

    # --- writing values ----------------------------------------------------------------
    def set(self, name, value, elem):
        if isinstance(value, Variable):
            self.variables[name] = value
        else:
            self.consts[name] = np.asarray(value)
        self.types[name] = elem


class ConstantNeeded(Unsupported):
    """Raised inside a converter; ``import_onnx`` turns it into :class:`OnnxConstantRequired`."""

    def __init__(self, message, input_name):
        super().__init__(message)
        self.input_name = input_name


def _can_register(key, shape):
    """Whether parameter ``key`` of ``shape`` fits the scope tree: no prefix of it is a
    parameter, no parameter lies under it, and one of that name has that shape."""
    parts = key.split("/")
    if any(get_parameter("/".join(parts[:k])) is not None for k in range(1, len(parts))):
        return False
    if any(p.startswith(key + "/") for p in get_parameters(grad_only=False)):
        return False
    existing = get_parameter(key)
    return existing is None or existing.shape == tuple(shape)


class OnnxNetwork:
    """An imported ONNX graph.

    Attributes:
        inputs (OrderedDict): ONNX input name -> Variable (set ``.d``, then forward the outputs).
        outputs (OrderedDict): ONNX output name -> Variable.
        parameters (OrderedDict): parameter path -> Variable, registered in the scope current
            when importing.
        model: the ONNX ModelProto.
        opset (int): its default-domain opset.
    """

    def __init__(self, model, opset, inputs, outputs, parameters):
        self.model, self.opset = model, opset
        self.inputs, self.outputs, self.parameters = inputs, outputs, parameters

    @property
    def name(self):
        return self.model.graph.name or "onnx"


# ------------------------------------------------------------------------------------ loading
def _load(source, onnx):
    """(ModelProto, label, directory external data is read from) from a path, bytes or a
    ModelProto (external data relative to the working directory)."""
    if isinstance(source, onnx.ModelProto):
        return source, "<ONNX model>", ""
    if isinstance(source, (bytes, bytearray)):
        data, label, directory = bytes(source), "<ONNX bytes>", ""
    else:
        data, label = read_bytes(source), file_label(source)
        directory = os.path.dirname(os.path.abspath(os.fspath(source)))
    if not data:
        raise FileFormatError(label, "the file is empty")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:   # protobuf's DecodeError and its C++ twin
        raise FileFormatError(label, "not an ONNX model (the protobuf does not parse: {})".format(
            e)) from None
    if not model.graph.node and not model.graph.output:
        raise FileFormatError(label, "not an ONNX model (no graph)")
    return model, label, directory


def _tensor_array(onnx, tensor, label, what, directory=""):
    """A TensorProto's values (external data read from ``directory``); a byte count that does
    not match its dims is a FileFormatError naming the tensor (numpy's reshape error would name
    neither)."""
    dims = tuple(int(d) for d in tensor.dims)
    if any(d < 0 for d in dims):
        raise FileFormatError(label, "{} '{}' has negative dims {}".format(what, tensor.name, dims))
    check_shape(dims, "{} '{}'".format(what, tensor.name), label)
    count = math.prod(dims)
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, TypeError, ValueError):
        raise FileFormatError(label, "{} '{}' has unknown data type {}".format(
            what, tensor.name, tensor.data_type)) from None
    packed = {getattr(onnx.TensorProto, n, None) for n in ("STRING", "INT4", "UINT4")}
    if tensor.data_location == onnx.TensorProto.EXTERNAL and tensor.data_type not in packed:
        return read_external(tensor, directory, label, dtype, dims)
    if tensor.HasField("raw_data") and tensor.data_type not in packed:
        expected = count * dtype.itemsize
        if len(tensor.raw_data) != expected:
            raise FileFormatError(label, "{} '{}' has dims {} ({} {} values, {} bytes) but {} bytes "
                                  "of data".format(what, tensor.name, dims, count, dtype,
                                                   expected, len(tensor.raw_data)))
    try:
        return onnx.numpy_helper.to_array(tensor)
    except (ValueError, TypeError, KeyError) as e:
        raise FileFormatError(label, "{} '{}' (dims {}) cannot be read: {}".format(
            what, tensor.name, dims, e)) from None


def _opset(model, label):
    versions = {o.domain: o.version for o in model.opset_import}
    version = versions.get("", versions.get("ai.onnx"))
    if version is None:
        raise FileFormatError(label, "the model imports no default-domain ONNX opset")
    opsets = import_opsets()
    if version not in opsets:
        raise FileFormatError(label, "ONNX opset {} is not supported (nnabla_jit imports opsets {} "
                              "to {})".format(version, opsets[0], opsets[-1]))
    return version


def _check(model, label):
    """Every name a node reads is a graph input, an initializer or an earlier node's output.
    (onnx.checker is stricter than the runtimes, e.g. about output shapes, so it is not used.)"""
    graph = model.graph
    known = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    for k, node in enumerate(graph.node):
        for name in node.input:
            if name and name not in known:
                raise FileFormatError(label, "invalid ONNX model: node {} ({}) reads '{}', which no "
                                      "input, initializer or earlier node defines".format(
                                          k, node.op_type, name))
        known.update(node.output)
    for vi in graph.output:
        if vi.name not in known:
            raise FileFormatError(label, "invalid ONNX model: output '{}' is never computed".format(vi.name))


def _unsupported(model):
    ops = set()
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            ops.add("{}.{}".format(node.domain, node.op_type))
        elif node.op_type not in importable_ops():
            ops.add(node.op_type)
    return sorted(ops)


def _input_shape(value_info, batch_size, label):
    dims = []
    for d in value_info.type.tensor_type.shape.dim:
        dims.append(d.dim_value if d.HasField("dim_value") else (batch_size or 1))
    return check_shape(dims, "input '{}'".format(value_info.name), label)


# ------------------------------------------------------------------------------------ converting
def _too_large(elements):
    return Unsupported("folding it would make a constant of {} elements; at most {} are folded "
                       "(nnabla_jit.serialization.onnx.importer.MAX_FOLDED_ELEMENTS)".format(
                           elements, MAX_FOLDED_ELEMENTS))


def _fold(c, node):
    """Evaluate a node of constants with the reference implementation, within
    MAX_FOLDED_ELEMENTS: checked on the output shapes shape inference predicts from the inputs'
    values before anything is computed, and on the results."""
    feeds = {i: c.consts[i] for i in node.inputs if i}
    predicted = [n for n in predicted_output_sizes(c.onnx, node.proto, feeds, c.opset) if n is not None]
    if predicted and max(predicted) > MAX_FOLDED_ELEMENTS:
        raise _too_large(max(predicted))
    try:
        results = [np.asarray(r) for r in evaluate_node(c.onnx, node.proto, feeds, c.opset)]
    except MemoryError:
        raise Unsupported("folding it needs more memory than there is") from None
    largest = max((r.size for r in results), default=0)
    if largest > MAX_FOLDED_ELEMENTS:
        raise _too_large(largest)
    return results


def _output_types(c, node):
    if node.op_type == "Cast":
        return [_tracked_type(node.attr("to"))] * len(node.outputs)
    if node.op_type == "CastLike":
        return [c.elem(node.inputs[1])] * len(node.outputs)
    if node.op_type == "Dropout":
        return [c.elem(node.inputs[0]), BOOL]
    if node.op_type in OUTPUT_TYPE:
        return [OUTPUT_TYPE[node.op_type]] * len(node.outputs)
    k = TYPE_FROM_INPUT.get(node.op_type, 0)
    source = node.input(k) or next((i for i in node.inputs if i), None)
    return [c.elem(source) if source else FLOAT] * len(node.outputs)


def _convert(c, node):
    present = [i for i in node.inputs if i]
    if node.op_type == "Constant":
        tensor = next(iter(node.attrs.values()))
        values = [_tensor_array(c.onnx, tensor, "node '{}'".format(node.name), "Constant value")
                  if hasattr(tensor, "dims") else np.asarray(tensor)]
    elif present and node.op_type not in RANDOM_OPS and all(c.is_const(i) for i in present):
        values = _fold(c, node)
    elif node.op_type in _CONSTANT_ONLY:
        for name in present:   # names the graph input to pin when there is one
            c.const(name, "input")
        raise Unsupported("its inputs must be constants (shapes are static in nnabla_jit)")
    else:
        values = IMPORTERS[node.op_type](c, node)
        values = list(values) if isinstance(values, (list, tuple)) else [values]
    types = _output_types(c, node)
    # Only computed values carry the graph inputs they come from (a Shape of an input is known).
    sources = set().union(*(c.sources.get(i, ()) for i in present if not c.is_const(i)))
    for k, (name, value) in enumerate(zip(node.outputs, values)):
        if not name:
            continue
        elem = types[k]
        c.sources[name] = sources if isinstance(value, Variable) else set()
        if not isinstance(value, Variable):
            value = np.asarray(value)
            elem = elem_type_of(value.dtype)
        c.set(name, value, elem)


def import_onnx(source, batch_size=None, constants=None, progress=False):
    """Build the graph of an ONNX model in the current parameter scope.

    Args:
        source: a path to an ``.onnx`` file, its bytes, or an ``onnx.ModelProto``.
        batch_size (int): the size of symbolic input dimensions (default 1).
        constants (dict): graph input name -> array, for graph inputs whose values nnabla_jit
            needs when building the graph (axes, shapes, scales, bounds ...); they become
            constants and are not inputs of the network. The import raises
            :class:`OnnxConstantRequired` naming such an input when it lacks a value.
        progress (bool): show a tqdm bar over the nodes converted.

    Returns:
        OnnxNetwork: ``inputs`` / ``outputs`` (name -> Variable) ready to run, and the
        ``parameters`` registered for the model's initializers.
    """
    onnx = require_onnx("ONNX import")
    model, label, directory = _load(source, onnx)
    opset = _opset(model, label)
    _check(model, label)
    missing = _unsupported(model)
    if missing:
        raise OnnxImportError("{}: no nnabla_jit mapping for the ONNX op(s): {}".format(
            label, ", ".join(missing)))
    graph = model.graph
    c = ImportContext(opset, onnx)
    for t in graph.initializer:
        array = _tensor_array(onnx, t, label, "initializer", directory)
        c.set(t.name, array, elem_type_of(array.dtype))
    constants = dict(constants or {})
    graph_inputs = {vi.name: vi for vi in graph.input}
    unknown = sorted(set(constants) - set(graph_inputs))
    if unknown:
        raise OnnxImportError("{}: constants= names {}, which {} no graph input (inputs: {})".format(
            label, ", ".join(unknown), "is" if len(unknown) == 1 else "are", ", ".join(graph_inputs)))
    for name, value in constants.items():
        array = np.asarray(value)
        c.set(name, array, _tracked_type(graph_inputs[name].type.tensor_type.elem_type))
    inputs = OrderedDict()
    for vi in graph.input:
        if vi.name in c.consts:
            continue
        c.sources[vi.name] = {vi.name}
        v = Variable(_input_shape(vi, batch_size, label))
        v.name = vi.name
        c.set(vi.name, v, _tracked_type(vi.type.tensor_type.elem_type))
        inputs[vi.name] = v
    for proto in tqdm(graph.node, desc="ONNX import", unit="node", disable=not progress):
        node = OnnxNode(proto, onnx)
        try:
            _convert(c, node)
        except ConstantNeeded as e:
            raise OnnxConstantRequired("{}: cannot import {} node '{}': {}".format(
                label, node.op_type, node.name or node.outputs[0], e), e.input_name) from None
        except (Unsupported, ValueError, TypeError) as e:
            raise OnnxImportError("{}: cannot import {} node '{}': {}".format(
                label, node.op_type, node.name or node.outputs[0], e)) from e
    outputs = OrderedDict()
    for vi in graph.output:
        value = c.var(vi.name)
        if value.parent is None:   # an input, or computed from constants only
            value = F.identity(value)
        value.name = vi.name
        outputs[vi.name] = value
    return OnnxNetwork(model, opset, inputs, outputs, c.parameters)


def nnp_from_onnx(source, batch_size=None, constants=None, progress=False):
    """An ONNX model as ``NnpContents``: one network (named after the ONNX graph), an executor
    'runtime' with its inputs and outputs, and the parameters; ready for ``nnp.write``."""
    from ..graph_export import network_to_proto
    from ..nnp import NnpContents
    from ..parameters import entries_of
    with parameter_scope("", OrderedDict()):
        net = import_onnx(source, batch_size, constants, progress)
        name = net.name
        proto = network_to_proto(name, net.outputs, names=net.inputs, parameters=net.parameters,
                                 variable_batch_size=False)
        contents = NnpContents()
        contents.proto.network.add().CopyFrom(proto)
        executor = contents.proto.executor.add(name="runtime", network_name=name)
        for k in net.inputs:
            executor.data_variable.add(variable_name=k, data_name=k)
        for k in net.outputs:
            executor.output_variable.add(variable_name=k, data_name=k)
        for k in net.parameters:
            executor.parameter_variable.add(variable_name=k)
        contents.parameters = entries_of(net.parameters)
    return contents
