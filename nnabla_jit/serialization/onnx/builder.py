"""``GraphBuilder``: the ONNX graph an export writes, node by node, for one opset.

The converters of ``exporters/`` call ``g.op("Relu", [x])`` and get the output's name back.
The builder keeps the element type of every value (so that converters can insert the casts
ONNX needs), hands out unique names, and folds nodes whose inputs are all initializers into
new initializers (weight reshapes, gate reorderings, ...), evaluated with onnx's reference
implementation, so that the model holds the tensors the runtime uses rather than the recipe.
Helpers such as :meth:`squeeze`, :meth:`reduce`, :meth:`split`, :meth:`clip`, :meth:`pad`,
:meth:`slice`, :meth:`resize` or :meth:`topk` hide the signature changes between opsets 7 and
the newest (attributes or inputs, Upsample, TopK's largest-only form). A node the target opset
does not define, or whose input types it does not take, is :class:`Unsupported` naming the
opset that has it.
"""
from collections import OrderedDict

import numpy as np

from .dependencies import BOOL, DOUBLE, FLOAT, INT32, INT64, INT8, UINT8, require_onnx

__all__ = ["GraphBuilder", "Unsupported", "INT64_MIN", "OUTPUT_TYPE", "TYPE_FROM_INPUT", "RANDOM_OPS",
           "elem_type_of", "evaluate_node", "predicted_output_sizes"]

INT64_MIN = int(np.iinfo(np.int64).min)

_NUMPY_OF = {FLOAT: np.float32, DOUBLE: np.float64, INT64: np.int64, INT32: np.int32,
             BOOL: np.bool_, UINT8: np.uint8, INT8: np.int8}

# Nodes whose outputs change from run to run: never folded into constants.
RANDOM_OPS = {"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike",
           "Multinomial", "Bernoulli"}

_TYPE_NAME = {FLOAT: "float", DOUBLE: "double", INT64: "int64", INT32: "int32", BOOL: "bool", UINT8: "uint8",
              INT8: "int8"}

# Ops whose outputs have a fixed element type (others take their first input's).
OUTPUT_TYPE = dict([(t, BOOL) for t in ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual",
                                         "And", "Or", "Xor", "Not", "IsNaN", "IsInf")]
                    + [(t, INT64) for t in ("Shape", "Size", "ArgMax", "ArgMin", "NonZero")])

# Ops whose outputs take the type of another input than the first.
TYPE_FROM_INPUT = {"Where": 1, "OneHot": 2}

# Folding these keeps the data and changes only the shape.
_RESHAPES = {"Reshape", "Squeeze", "Unsqueeze", "Flatten"}

# Reductions whose axes became an input in opset 13 (ReduceSum) or 18 (the others).
_AXES_INPUT_SINCE = {"ReduceSum": 13}


class Unsupported(Exception):
    """A node whose arguments (or the target opset) the ONNX mapping cannot express."""


def elem_type_of(dtype):
    """The ONNX element type a numpy dtype is written as: float, int64 or bool."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return FLOAT
    if dtype.kind == "b":
        return BOOL
    if dtype.kind in "iu":
        return INT64
    raise TypeError("no ONNX type for numpy dtype {}".format(dtype))


def _as_stored(value, elem):
    """``value`` as the numpy array an initializer of type ``elem`` holds."""
    return np.array(value, dtype=_NUMPY_OF[elem], order="C")   # keeps 0-d arrays 0-d


def evaluate_node(onnx, node, feeds, opset):
    """The outputs of ``node`` (a NodeProto) on ``feeds`` (name -> array) by onnx's reference
    implementation, following the op's signature at ``opset``. (Given a bare NodeProto, the
    ReferenceEvaluator uses the newest signature whatever ``opsets`` says, so the node goes in
    a one-node model of that opset.)"""
    from onnx.reference import ReferenceEvaluator   # imports onnx's op library: only when folding
    helper = onnx.helper
    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype),
                                            None) for name, value in feeds.items()]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    graph = helper.make_graph([node], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, feeds)


# Inputs up to this many elements go to shape inference with their values (shape vectors,
# scales, pads, counts); larger ones with their shapes only.
_VALUE_INPUT_MAX = 1024


def predicted_output_sizes(onnx, node, feeds, opset):
    """The element counts of ``node``'s outputs on ``feeds`` as onnx's shape inference sees
    them from the inputs' values (Python ints), before anything is computed; None for an
    output whose shape it cannot tell."""
    helper = onnx.helper
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    try:
        inputs, initializers = [], []
        for name, value in feeds.items():
            value = np.asarray(value)
            inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
            if value.size <= _VALUE_INPUT_MAX:
                initializers.append(onnx.numpy_helper.from_array(value, name))
        graph = helper.make_graph([node], "predict", inputs, outputs, initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:   # noqa: BLE001 -- inference is a hint; the evaluation decides
        return [None] * len(outputs)
    sizes = []
    for value_info in inferred.graph.output:
        tensor = value_info.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        known = tensor.HasField("shape") and all(d is not None and d >= 0 for d in dims)
        sizes.append(int(np.prod([1] + dims, dtype=object)) if known else None)
    return sizes


def _defined(defs, op_type, opset):
    try:
        defs.get_schema(op_type, opset)
        return True
    except defs.SchemaError:
        return False


class GraphBuilder:
    """Nodes, initializers and value types of one ONNX graph under construction."""

    def __init__(self, opset):
        self.onnx = require_onnx("ONNX export")
        self.opset = int(opset)
        self.nodes = []
        self.initializers = OrderedDict()    # name -> numpy array
        self.dtypes = {}                     # value name -> ONNX element type
        self._taken = set()
        self._small = {}                     # (type, shape, bytes) -> name of a small constant
        self._reshaped_from = {}             # folded reshape -> the initializer it reshapes

    # --- names and constants -----------------------------------------------------------
    def unique(self, base):
        """A value name not used yet, ``base`` if possible."""
        base = base or "v"
        name, k = base, 0
        while name in self._taken:
            k += 1
            name = "{}_{}".format(base, k)
        self._taken.add(name)
        return name

    def reserve(self, name):
        """Keep ``name`` (a graph input or output) from being handed out; graph inputs are
        float."""
        self._taken.add(name)
        self.dtypes[name] = FLOAT

    def const(self, value, elem=None, name=None):
        """An initializer holding ``value`` (floats as float32, integers as int64 unless
        ``elem`` says otherwise); small ones are shared."""
        array = np.asarray(value)
        elem = elem or elem_type_of(array.dtype)
        array = _as_stored(array, elem)
        key = None
        if name is None and array.size <= 64:
            key = (elem, array.shape, array.tobytes())
            if key in self._small:
                return self._small[key]
        name = self.unique(name or "const")
        self.initializers[name] = array
        self.dtypes[name] = elem
        if key is not None:
            self._small[key] = name
        return name

    def ints(self, values):
        """A 1-D int64 constant (shapes, axes, pads)."""
        return self.const(np.asarray(list(values), np.int64).reshape(-1), INT64)

    def scalar(self, value, elem=FLOAT):
        return self.const(np.asarray(value), elem)

    def dtype(self, name):
        return self.dtypes.get(name, FLOAT)

    # --- nodes -------------------------------------------------------------------------
    def op(self, op_type, inputs, n_outputs=1, elem=None, **attrs):
        """Add a node; returns its output name (a list when ``n_outputs`` > 1).

        ``elem`` is the element type of the outputs (one, or one per output); by default
        that of the first input. None in ``inputs`` marks an omitted optional input.
        """
        names = ["" if i is None else i for i in inputs]
        present = [i for i in names if i]
        folded = bool(present) and op_type not in RANDOM_OPS and all(i in self.initializers for i in present)
        if not folded and self.opset < 11:
            older = self._older_form(op_type, names, attrs)
            if older is not None:
                return older
        # A folded tensor is named after the first tensor it is computed from.
        base = "{}_{}".format(present[0], op_type) if folded else op_type
        outs = [self.unique(base) for _ in range(n_outputs)]
        elems = elem if isinstance(elem, (list, tuple)) else [elem] * n_outputs
        source = names[TYPE_FROM_INPUT.get(op_type, 0)] if names else None
        for o, e in zip(outs, elems):
            self.dtypes[o] = e or OUTPUT_TYPE.get(op_type) or self.dtype(source)
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = self.onnx.helper.make_node(op_type, names, outs, **attrs)
        if folded:
            self._fold(node, outs)
            if op_type in _RESHAPES:
                self._reshaped_from[outs[0]] = present[0]
        else:
            self._check_schema(op_type, [self.dtype(i) if i else None for i in names])
            self.nodes.append(node)
        return outs[0] if n_outputs == 1 else outs

    def _older_form(self, op_type, names, attrs):
        """The node in a form an opset before 11 has, where it differs (None: as it is)."""
        if op_type == "ScatterElements" and self.opset >= 9 and attrs.get("reduction") in (None, "none"):
            return self.op("Scatter", names, axis=attrs.get("axis", 0))   # its name in opsets 9 and 10
        if self.opset < 8 and op_type in ("Max", "Min") and len(names) == 2 and self._is_scalar(names[1]):
            # Max-6 and Min-6 do not broadcast: a bound by a scalar is a Clip (attributes).
            bound = float(self.initializers[names[1]].reshape(()))
            return self.clip(names[0], low=bound) if op_type == "Max" else self.clip(names[0], high=bound)
        if op_type == "Equal" and FLOAT in (self.dtype(names[0]), self.dtype(names[1])):
            if self.opset < 9:
                raise Unsupported("ONNX Equal on floats needs opset 9 (as Less, Greater and IsNaN; Equal "
                                  "itself takes floats from 11)")
            return self._float_equal(*names)
        return None

    def _float_equal(self, a, b):
        """a == b on floats at opsets 9 and 10 (Equal takes them from 11): neither is less nor
        greater, and neither is NaN (which compares false both ways)."""
        a, b = self.as_float(a), self.as_float(b)
        ordered = self.op("Or", [self.op("Less", [a, b]), self.op("Greater", [a, b])])
        nan = self.op("Or", [self.op("IsNaN", [a]), self.op("IsNaN", [b])])
        return self.op("Not", [self.op("Or", [ordered, nan])])

    def _is_scalar(self, name):
        return name in self.initializers and self.initializers[name].size == 1

    def _check_schema(self, op_type, elems):
        """Refuse a node the target opset does not define, or whose input element types its
        signature at that opset does not take (e.g. Equal on floats before 11), naming the
        opset that has it. (Folded nodes are evaluated now and need neither.)"""
        defs = self.onnx.defs
        try:
            schema = defs.get_schema(op_type, self.opset)
        except defs.SchemaError:
            since = next((v for v in range(self.opset + 1, defs.onnx_opset_version() + 1)
                          if _defined(defs, op_type, v)), None)
            raise Unsupported("ONNX {} {}".format(op_type, "needs opset {}".format(since) if since else
                                                  "is not defined by the installed onnx")) from None
        allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
        for k, elem in enumerate(elems):
            if elem is None or not schema.inputs or elem not in _TYPE_NAME:
                continue
            if k >= len(schema.inputs) and schema.inputs[-1].option != schema.FormalParameterOption.Variadic:
                raise Unsupported("ONNX {} at opset {} takes at most {} inputs".format(
                    op_type, self.opset, len(schema.inputs)))
            formal = schema.inputs[min(k, len(schema.inputs) - 1)]
            types = allowed.get(formal.type_str)
            type_name = "tensor({})".format(_TYPE_NAME[elem])
            if types is not None and type_name not in types:
                newer = next((v for v in range(self.opset + 1, defs.onnx_opset_version() + 1)
                              if type_name in {t for c in defs.get_schema(op_type, v).type_constraints
                                               for t in c.allowed_type_strs}), None)
                raise Unsupported("ONNX {} at opset {} does not take {} (input {}){}".format(
                    op_type, self.opset, type_name, k, "; opset {} does".format(newer) if newer else ""))

    def _fold(self, node, outs):
        """Evaluate a node of constants now and keep its outputs as initializers."""
        feeds = {i: self.initializers[i] for i in node.input if i}
        results = evaluate_node(self.onnx, node, feeds, self.opset)
        for name, value in zip(outs, results):
            self.initializers[name] = _as_stored(value, self.dtypes[name])

    def adopt_source_names(self):
        """Give a reshaped initializer the name of the one it was made from when that one is
        no longer read (a parameter keeps its path in the model)."""
        used = {i for node in self.nodes for i in node.input}

        def root(name):
            while name in self._reshaped_from and name not in used:
                name = self._reshaped_from[name]
            return name
        roots = {}
        for name in self._reshaped_from:
            if name in used:
                source = root(self._reshaped_from[name])
                if source not in used:
                    roots.setdefault(source, []).append(name)
        for source, names in roots.items():
            if len(names) == 1:
                self._rename(names[0], source)

    def _rename(self, old, new):
        self.initializers[new] = self.initializers.pop(old)
        self.dtypes[new] = self.dtypes[old]
        for node in self.nodes:
            for k, name in enumerate(node.input):
                if name == old:
                    node.input[k] = new

    # --- casts ---------------------------------------------------------------------------
    def cast(self, x, elem):
        return x if self.dtype(x) == elem else self.op("Cast", [x], elem=elem, to=elem)

    def as_float(self, x):
        return self.cast(x, FLOAT)

    def as_int64(self, x):
        return self.cast(x, INT64)

    def as_bool(self, x):
        return self.cast(x, BOOL)

    # --- helpers over opset differences ------------------------------------------------
    def reshape(self, x, shape):
        if x in self.initializers and self.initializers[x].shape == tuple(shape):
            return x
        return self.op("Reshape", [x, self.ints(shape)])

    def transpose(self, x, perm):
        perm = [int(p) for p in perm]
        if perm == sorted(perm):
            return x
        return self.op("Transpose", [x], perm=perm)

    def squeeze(self, x, axes):
        if self.opset >= 13:
            return self.op("Squeeze", [x, self.ints(axes)])
        return self.op("Squeeze", [x], axes=list(axes))

    def unsqueeze(self, x, axes):
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.ints(axes)])
        return self.op("Unsqueeze", [x], axes=list(axes))

    def reduce(self, op_type, x, axes, keepdims):
        """``op_type`` (ReduceSum, ReduceMean, ...) over ``axes`` (None: all axes)."""
        keep = int(bool(keepdims))
        if axes is None:
            return self.op(op_type, [x], keepdims=keep)
        if self.opset >= _AXES_INPUT_SINCE.get(op_type, 18):
            return self.op(op_type, [x, self.ints(axes)], keepdims=keep)
        return self.op(op_type, [x], axes=list(axes), keepdims=keep)

    def split(self, x, axis, sizes):
        """Split along ``axis`` into parts of ``sizes``; returns the list of parts."""
        if len(sizes) == 1:
            return [self.op("Identity", [x])]
        if self.opset >= 13:
            return self.op("Split", [x, self.ints(sizes)], n_outputs=len(sizes), axis=axis)
        return self.op("Split", [x], n_outputs=len(sizes), axis=axis, split=list(sizes))

    def clip(self, x, low=None, high=None):
        if self.opset < 11:   # bounds as attributes
            return self.op("Clip", [x], min=None if low is None else float(low),
                           max=None if high is None else float(high))
        return self.op("Clip", [x, None if low is None else self.scalar(low),
                                None if high is None else self.scalar(high)])

    def slice(self, x, starts, ends, axes, steps=None):
        if self.opset < 10:   # Slice-1: attributes, no steps
            if steps is not None and any(int(s) != 1 for s in steps):
                raise Unsupported("a strided Slice needs opset 10")
            return self.op("Slice", [x], starts=[int(v) for v in starts], ends=[int(v) for v in ends],
                           axes=[int(a) for a in axes])
        inputs = [x, self.ints(starts), self.ints(ends), self.ints(axes)]
        if steps is not None:
            inputs.append(self.ints(steps))
        return self.op("Slice", inputs)

    def pad(self, x, pads, mode="constant", value=None):
        """``pads``: all begins, then all ends (ONNX order)."""
        if self.opset < 11:   # Pad-2: pads and value as attributes
            return self.op("Pad", [x], mode=mode, pads=[int(p) for p in pads],
                           value=float(value) if mode == "constant" and value else None)
        inputs = [x, self.ints(pads)]
        if mode == "constant" and value:
            inputs.append(self.scalar(value))
        return self.op("Pad", inputs, mode=mode)

    def softmax(self, x, axis, ndim, log=False):
        """Softmax along one axis; before opset 13 Softmax flattened the axes from ``axis``
        on, so the axis is moved last first."""
        op_type = "LogSoftmax" if log else "Softmax"
        if self.opset >= 13 or axis == ndim - 1:
            return self.op(op_type, [x], axis=axis)
        perm = list(range(ndim))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        y = self.op(op_type, [self.transpose(x, perm)], axis=ndim - 1)
        return self.transpose(y, perm)

    def resize(self, x, scales=None, sizes=None, roi=None, **attrs):
        """Resize by ``scales`` or to ``sizes``; opsets 11 and 12 need the unused inputs as
        empty tensors; before 11 only Upsample's (7-9) and Resize-10's forms exist: scales,
        nearest (rounding down) or linear, asymmetric coordinates."""
        if self.opset < 11:
            return self._old_resize(x, scales, sizes, roi, attrs)
        empty = self.const(np.zeros(0, np.float32)) if self.opset < 13 else None
        roi_input = self.const(np.asarray(roi, np.float32)) if roi else empty
        scale_input = self.const(np.asarray(scales, np.float32)) if scales else empty
        inputs = [x, roi_input, scale_input]
        if sizes:
            inputs.append(self.ints(sizes))
        return self.op("Resize", inputs, **attrs)

    def _old_resize(self, x, scales, sizes, roi, attrs):
        mode = attrs.get("mode", "nearest")
        plain = (not sizes and not roi and scales and mode in ("nearest", "linear")
                 and attrs.get("coordinate_transformation_mode", "half_pixel") == "asymmetric"
                 and attrs.get("nearest_mode", "floor") == "floor")
        if not plain:
            raise Unsupported("Resize by sizes, with a coordinate transformation other than asymmetric, "
                              "or a mode other than nearest (rounding down) / linear needs opset 11")
        scales = [float(s) for s in scales]
        if self.opset < 9:
            return self.op("Upsample", [x], mode=mode, scales=scales)
        op_type = "Upsample" if self.opset == 9 else "Resize"
        return self.op(op_type, [x, self.const(np.asarray(scales, np.float32))], mode=mode)

    def topk(self, x, k, axis, largest=True):
        """(values, int64 indices) of the ``k`` largest (or smallest) along ``axis``, sorted.
        Before opset 11 TopK takes only the largest (the smallest are those of -x), and
        before 10 ``k`` is an attribute."""
        if self.opset >= 11:
            return self.op("TopK", [x, self.ints([k])], n_outputs=2, elem=[None, INT64], axis=axis,
                           largest=int(bool(largest)), sorted=1)
        key = x if largest else self.op("Neg", [x])
        if self.opset == 10:
            values, index = self.op("TopK", [key, self.ints([k])], n_outputs=2, elem=[None, INT64], axis=axis)
        else:
            values, index = self.op("TopK", [key], n_outputs=2, elem=[None, INT64], axis=axis, k=int(k))
        return (values if largest else self.op("Neg", [values])), index

    def gather_elements(self, x, index, axis, x_shape, index_shape):
        """GatherElements (opset 11 on); before, a Gather from the flattened ``x`` at each
        element's flat position: the index times the axis' stride plus the constant offset of
        its other coordinates (indices are non-negative here)."""
        if self.opset >= 11:
            return self.op("GatherElements", [x, index], axis=axis)
        axis = axis % len(x_shape)
        strides = [int(np.prod(x_shape[d + 1:], dtype=np.int64)) for d in range(len(x_shape))]
        grid = np.indices(index_shape, dtype=np.int64)
        offsets = sum((grid[d] * strides[d] for d in range(len(x_shape)) if d != axis),
                      np.zeros(index_shape, np.int64))
        flat = self.op("Add", [self.op("Mul", [self.as_int64(index), self.const(np.int64(strides[axis]))]),
                               self.const(offsets)])
        return self.op("Gather", [self.reshape(x, [-1]), flat], axis=0)

    def where(self, condition, a, b):
        return self.op("Where", [self.as_bool(condition), a, b])
