"""ONNX import: every export case of ``test_onnx_export`` survives export -> import (same
outputs as nnabla_jit's), models written with onnx's helper API run like onnxruntime runs
them, parameters land in the current scope, ``.nnp`` conversion, the CLI, and bad files."""
import os
import subprocess
import sys

import numpy as np
import pytest

import nnabla_jit as nn
from nnabla_jit.graph import upstream_functions
from nnabla_jit.serialization import nnp as nnp_io
from nnabla_jit.serialization.files import FileFormatError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
nnabla_onnx = pytest.importorskip("nnabla_jit.serialization.onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from .test_onnx_export import CASES, build_case, compare  # noqa: E402

# Their ONNX form gathers at NonZero's data-dependent positions; nnabla_jit's graphs have
# static shapes past such a node, so they export but do not import.
DATA_DEPENDENT = {"BoolGather", "BoolScatter"}


# ------------------------------------------------------------------------------------ round trip
def _round_trip_ids():
    return [pytest.param(op, k, id="{}-{}".format(op, k)) for op in sorted(CASES)
            for k, case in enumerate(CASES[op]) if case.check is None and op not in DATA_DEPENDENT]


@pytest.mark.parametrize("op,index", _round_trip_ids())
def test_export_import_round_trip(op, index):
    case = CASES[op][index]
    for opset in (11, 17):
        if opset < case.min_opset:
            continue
        nn.clear_parameters()
        inputs, outs, want = build_case(case)
        model = nnabla_onnx.to_model(outs, inputs, opset)
        with nn.parameter_scope("imported"):
            net = nnabla_onnx.import_onnx(model)
        assert list(net.inputs) == list(inputs)
        for name, v in inputs.items():
            net.inputs[name].d = v.d
        nn.forward_all(list(net.outputs.values()))
        compare(case, [np.array(v.d) for v in net.outputs.values()], want)


# ------------------------------------------------------------------------------------ helper API
_rng = np.random.RandomState(77)


def randn(*shape):
    return _rng.randn(*shape).astype(np.float32)


def positive(*shape):
    return _rng.uniform(0.5, 2.0, shape).astype(np.float32)


def ints(values):
    return np.asarray(values, np.int64)


_ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
         np.dtype(np.bool_): TensorProto.BOOL}


class Model:
    """A model written with onnx.helper: ``nodes``; ``inputs`` name -> array fed (float32
    graph inputs); ``constants`` name -> array (initializers); ``outputs`` (names, or
    (name, element type)); ``opset``."""

    def __init__(self, nodes, inputs, outputs, constants=None, opset=17, rtol=1e-4, atol=1e-5):
        self.nodes = nodes if isinstance(nodes, list) else [nodes]
        self.inputs, self.constants = inputs, constants or {}
        self.outputs = [o if isinstance(o, tuple) else (o, TensorProto.FLOAT) for o in outputs]
        self.opset, self.rtol, self.atol = opset, rtol, atol

    def proto(self):
        graph = helper.make_graph(
            self.nodes, "helper_model",
            [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in self.inputs.items()],
            [helper.make_tensor_value_info(k, elem, None) for k, elem in self.outputs],
            initializer=[numpy_helper.from_array(v, k) for k, v in self.constants.items()])
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = helper.find_min_ir_version_for(opsets)
        return model


def node(op_type, inputs, outputs=("y",), **attrs):
    return helper.make_node(op_type, list(inputs), list(outputs), **attrs)


def run_both(m):
    """(onnxruntime's outputs, nnabla_jit's outputs of the imported model)."""
    model = m.proto()
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except ort.capi.onnxruntime_pybind11_state.NotImplemented as e:   # e.g. DeformConv before 1.24
        pytest.skip("onnxruntime {} cannot run this model: {}".format(ort.__version__, e))
    want = session.run(None, m.inputs)
    net = nnabla_onnx.import_onnx(model)
    for k, v in m.inputs.items():
        net.inputs[k].d = v
    nn.forward_all(list(net.outputs.values()))
    return want, [np.array(v.d) for v in net.outputs.values()]


def check(m):
    want, got = run_both(m)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert tuple(w.shape) == tuple(g.shape), (w.shape, g.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=m.rtol, atol=m.atol)


def _x(*shape):
    return {"x": randn(*shape)}


def _rnn_model(kind, direction, hidden=3, n_in=4, seq=5, batch=2, **attrs):
    gates = {"RNN": 1, "LSTM": 4, "GRU": 3}[kind]
    dirs = 2 if direction == "bidirectional" else 1
    constants = {"W": randn(dirs, gates * hidden, n_in) * 0.5, "R": randn(dirs, gates * hidden, hidden) * 0.5,
                 "B": randn(dirs, 2 * gates * hidden)}
    inputs = {"x": randn(seq, batch, n_in), "h0": randn(dirs, batch, hidden)}
    names = ["x", "W", "R", "B", "", "h0"]
    outputs = ["y", "y_h"]
    if kind == "LSTM":
        inputs["c0"] = randn(dirs, batch, hidden)
        names.append("c0")
        outputs.append("y_c")
    return Model(node(kind, names, outputs, hidden_size=hidden, direction=direction, **attrs),
                 inputs, outputs, constants)


HELPER_MODELS = {
    "Flatten": Model(node("Flatten", ["x"], axis=2), _x(2, 3, 4, 2), ["y"]),
    "Neg-Sqrt-Reciprocal": Model([node("Sqrt", ["x"], ["s"]), node("Reciprocal", ["s"], ["r"]),
                                  node("Neg", ["r"])], {"x": positive(2, 3)}, ["y"]),
    "Round-Sign": Model([node("Round", ["x"], ["r"]), node("Sign", ["r"])],
                        {"x": np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.7]], np.float32)}, ["r", "y"]),
    "Mod": Model([node("Cast", ["x"], ["xi"], to=TensorProto.INT64), node("Cast", ["d"], ["di"], to=TensorProto.INT64),
                  node("Mod", ["xi", "di"], ["m"]), node("Mod", ["x", "d"], ["f"], fmod=1)],
                 {"x": np.array([[-7, -2.5, 3, 7.5]], np.float32), "d": np.array([[2, 3, -2, -4]], np.float32)},
                 [("m", TensorProto.INT64), "f"]),
    "IsInf": Model(node("IsInf", ["x"], detect_negative=0), {"x": np.array([1, np.inf, -np.inf], np.float32)},
                   [("y", TensorProto.BOOL)]),
    "HardSigmoid": Model(node("HardSigmoid", ["x"], alpha=0.3, beta=0.4), _x(3, 4), ["y"]),
    "Gelu": Model([node("Gelu", ["x"], ["a"]), node("Gelu", ["x"], ["b"], approximate="tanh")], _x(3, 4),
                  ["a", "b"], opset=20),
    "PRelu": Model([node("PRelu", ["x", "s"], ["a"]), node("PRelu", ["x", "t"], ["b"])], _x(2, 3, 4),
                   ["a", "b"], {"s": randn(3, 1), "t": randn(4)}),
    "activations": Model([node("LeakyRelu", ["x"], ["a"], alpha=0.3), node("Elu", ["x"], ["b"], alpha=0.7),
                          node("Selu", ["x"], ["c"]), node("Softplus", ["x"], ["d"]),
                          node("Mish", ["x"], ["e"]), node("Softsign", ["x"], ["f"])], _x(3, 4),
                         ["a", "b", "c", "d", "e", "f"], opset=18),
    "Clip": Model([node("Clip", ["x", "lo"], ["a"]), node("Clip", ["x", "lo", "hi"], ["b"])], _x(3, 4),
                  ["a", "b"], {"lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)}),
    "Clip-7": Model(node("Clip", ["x"], min=-0.2, max=0.3), _x(3, 4), ["y"], opset=7),
    "Softmax-11": Model([node("Softmax", ["x"], ["a"], axis=1), node("LogSoftmax", ["x"], ["b"], axis=2)],
                        _x(2, 3, 4), ["a", "b"], opset=11),
    "Softmax-13": Model(node("Softmax", ["x"], axis=1), _x(2, 3, 4), ["y"], opset=13),
    "variadic": Model([node("Max", ["x", "z", "s"], ["a"]), node("Min", ["s", "x"], ["b"]),
                       node("Sum", ["x", "z", "x"], ["c"]), node("Mean", ["x", "z"], ["d"])],
                      {"x": randn(3, 4), "z": randn(3, 4)}, ["a", "b", "c", "d"], {"s": np.array([0.1], np.float32)}),
    "scalar-operands": Model([node("Div", ["x", "two"], ["a"]), node("Sub", ["two", "x"], ["b"]),
                              node("Pow", ["x", "two"], ["c"]), node("Pow", ["two", "x"], ["d"]),
                              node("Greater", ["two", "x"], ["e"]), node("Add", ["x", "v"], ["f"])],
                             _x(3, 4), ["a", "b", "c", "d", ("e", TensorProto.BOOL), "f"],
                             {"two": np.array(2.0, np.float32), "v": randn(4)}),
    "Where-Cast-logic": Model([node("Greater", ["x", "zero"], ["g"]), node("Where", ["g", "x", "half"], ["a"]),
                               node("Where", ["g", "half", "x"], ["b"]), node("Cast", ["x"], ["i"], to=TensorProto.INT64),
                               node("Cast", ["x"], ["t"], to=TensorProto.BOOL), node("Not", ["g"], ["n"]),
                               node("Xor", ["t", "n"], ["o"]), node("Equal", ["i", "one"], ["e"])],
                              {"x": np.array([[-1.7, 0.0, 0.4, 2.6], [1.0, -0.2, 3.0, -3.5]], np.float32)},
                              ["a", "b", ("i", TensorProto.INT64), ("o", TensorProto.BOOL), ("e", TensorProto.BOOL)],
                              {"zero": np.array(0.0, np.float32), "half": np.array(0.5, np.float32),
                               "one": ints(1)}),
    "reductions-11": Model([node("ReduceSum", ["x"], ["a"], axes=[1]), node("ReduceMean", ["x"], ["b"], keepdims=0),
                            node("ReduceMax", ["x"], ["c"], axes=[0, 2]), node("ReduceL2", ["x"], ["d"], axes=[2]),
                            node("ReduceLogSumExp", ["x"], ["e"], axes=[1]),
                            node("ReduceSumSquare", ["x"], ["f"], axes=[2], keepdims=0),
                            node("ReduceProd", ["x"], ["g"], axes=[1]), node("ReduceL1", ["x"], ["h"], axes=[1]),
                            node("ReduceMin", ["x"], ["k"], axes=[2])],
                           _x(2, 3, 4), list("abcdefghk"), opset=11),
    "reductions-18": Model([node("ReduceSum", ["x", "ax"], ["a"]), node("ReduceMean", ["x", "ax"], ["b"], keepdims=0),
                            node("ReduceSum", ["x"], ["c"], keepdims=0)],
                           _x(2, 3, 4), ["a", "b", "c"], {"ax": ints([-1])}, opset=18),
    "ArgMax-ArgMin-CumSum": Model([node("ArgMax", ["x"], ["a"], axis=1, keepdims=0), node("ArgMin", ["x"], ["b"], axis=-1),
                                   node("CumSum", ["x", "ax"], ["c"], exclusive=1, reverse=1)],
                                  {"x": np.arange(24, dtype=np.float32)[_rng.permutation(24)].reshape(2, 3, 4)},
                                  [("a", TensorProto.INT64), ("b", TensorProto.INT64), "c"], {"ax": ints(1)}),
    "Reshape-Squeeze-Unsqueeze-13": Model([node("Reshape", ["x", "s"], ["a"]), node("Unsqueeze", ["a", "u"], ["b"]),
                                           node("Squeeze", ["b", "u"], ["c"]), node("Squeeze", ["x"], ["d"]),
                                           node("Transpose", ["x"], ["e"])],
                                          _x(2, 1, 6), ["b", "c", "d", "e"], {"s": ints([0, 3, -1]), "u": ints([0, -1])},
                                          opset=13),
    "Squeeze-Unsqueeze-11": Model([node("Unsqueeze", ["x"], ["a"], axes=[0, 3]), node("Squeeze", ["a"], ["b"], axes=[0])],
                                  _x(2, 3), ["a", "b"], opset=11),
    "Expand-Tile-Concat": Model([node("Expand", ["x", "s"], ["a"]), node("Tile", ["x", "r"], ["b"]),
                                 node("Concat", ["x", "k"], ["c"], axis=-1)],
                                _x(3, 1), ["a", "b", "c"], {"s": ints([2, 3, 4]), "r": ints([2, 3]), "k": randn(3, 2)}),
    "Split": Model([node("Split", ["x", "sp"], ["a", "b"], axis=1), node("Split", ["x"], ["c", "d", "e"], axis=1,
                                                                          num_outputs=3)],
                   _x(2, 7), ["a", "b", "c", "d", "e"], {"sp": ints([3, 4])}, opset=18),
    "Split-11": Model(node("Split", ["x"], ["a", "b"], axis=0, split=[1, 2]), _x(3, 2), ["a", "b"], opset=11),
    "Slice": Model([node("Slice", ["x", "st", "en", "ax", "sp"], ["a"]), node("Slice", ["x", "st2", "en2"], ["b"])],
                   _x(4, 6), ["a", "b"],
                   {"st": ints([-1, 4]), "en": ints([-(2 ** 63), 0]), "ax": ints([0, 1]), "sp": ints([-2, -3]),
                    "st2": ints([1]), "en2": ints([100])}),
    "Slice-9": Model(node("Slice", ["x"], starts=[1, 0], ends=[3, -1], axes=[0, 1]), _x(4, 6), ["y"], opset=9),
    "Pad": Model([node("Pad", ["x", "p"], ["a"], mode="reflect"), node("Pad", ["x", "p"], ["b"], mode="edge"),
                  node("Pad", ["x", "p", "v"], ["c"])], _x(3, 4), ["a", "b", "c"],
                 {"p": ints([1, 2, 0, 1]), "v": np.array(1.5, np.float32)}),
    "Gather": Model([node("Gather", ["x", "i"], ["a"], axis=1), node("Gather", ["table", "j"], ["b"]),
                     node("Cast", ["x"], ["xi"], to=TensorProto.INT64), node("Gather", ["table", "xi"], ["c"])],
                    {"x": np.array([[0, 2, 1], [1, 1, 0]], np.float32)}, ["a", "b", "c"],
                    {"i": ints([[2, 0], [1, 1]]), "j": ints(1), "table": randn(3, 5)}),
    "GatherElements-GatherND": Model([node("GatherElements", ["x", "i"], ["a"], axis=1),
                                      node("GatherND", ["x", "j"], ["b"])],
                                     _x(3, 4), ["a", "b"], {"i": ints([[0, 3], [2, 2], [1, 0]]),
                                                            "j": ints([[0, 1], [2, 3], [1, 0]])}),
    "ScatterND-ScatterElements": Model([node("ScatterND", ["x", "i", "u"], ["a"]),
                                        node("ScatterElements", ["x", "j", "v"], ["b"], axis=1),
                                        node("ScatterElements", ["x", "j", "v"], ["c"], axis=1, reduction="add")],
                                       _x(3, 4), ["a", "b", "c"],
                                       {"i": ints([[2], [0]]), "u": randn(2, 4), "j": ints([[1], [3], [0]]),
                                        "v": randn(3, 1)}),
    "OneHot-TopK": Model([node("Cast", ["idx"], ["ii"], to=TensorProto.INT64),
                          node("OneHot", ["ii", "depth", "vals"], ["a"], axis=0),
                          node("TopK", ["x", "k"], ["b", "bi"]), node("TopK", ["x", "k"], ["c", "ci"], largest=0, axis=0)],
                         {"x": np.arange(12, dtype=np.float32)[_rng.permutation(12)].reshape(3, 4),
                          "idx": np.array([[0, 3], [2, 1]], np.float32)},
                         ["a", "b", ("bi", TensorProto.INT64), "c", ("ci", TensorProto.INT64)],
                         {"depth": ints(4), "vals": np.array([-1.0, 2.0], np.float32), "k": ints([2])}),
    "EyeLike-Trilu-Einsum-Det": Model([node("EyeLike", ["x"], ["a"], k=1), node("Trilu", ["x", "k"], ["b"], upper=0),
                                       node("Einsum", ["x", "x"], ["c"], equation="ij,kj->ik"),
                                       node("Det", ["m"], ["d"])],
                                      {"x": randn(3, 4), "m": randn(2, 2, 3, 3)}, ["a", "b", "c", "d"], {"k": ints(-1)}),
    "shape-arithmetic": Model([node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"]),
                               node("Unsqueeze", ["n", "zero1"], ["n1"]), node("Concat", ["n1", "minus1"], ["t"], axis=0),
                               node("Reshape", ["x", "t"], ["a"]), node("ConstantOfShape", ["t2"], ["z"],
                                                                        value=helper.make_tensor("v", TensorProto.FLOAT, [1], [3.0])),
                               node("Range", ["r0", "r1", "r2"], ["r"]), node("Add", ["a", "z"], ["b"]),
                               node("Mul", ["b", "r"], ["y"])],
                              _x(2, 3, 2), ["y"], {"zero": ints(0), "zero1": ints([0]), "minus1": ints([-1]),
                                                   "t2": ints([2, 6]), "r0": np.array(0.0, np.float32),
                                                   "r1": np.array(3.0, np.float32), "r2": np.array(0.5, np.float32)}),
    "Resize": Model([node("Resize", ["x", "", "", "sz"], ["a"], mode="linear"),
                     node("Resize", ["x", "", "sc"], ["b"], mode="nearest", nearest_mode="floor",
                          coordinate_transformation_mode="asymmetric")],
                    _x(1, 2, 3, 4), ["a", "b"], {"sz": ints([1, 2, 5, 7]), "sc": np.array([1, 1, 2, 1.5], np.float32)}),
    "Upsample-9": Model(node("Upsample", ["x", "sc"], mode="nearest"), _x(1, 2, 3, 4), ["y"],
                        {"sc": np.array([1, 1, 2, 3], np.float32)}, opset=9),
    "MatMul": Model([node("MatMul", ["v", "w"], ["a"]), node("MatMul", ["x", "z"], ["b"]),
                     node("MatMul", ["x", "w2"], ["c"])],
                    {"v": randn(4), "x": randn(2, 3, 4), "z": randn(2, 4, 5)}, ["a", "b", "c"],
                    {"w": randn(4, 3), "w2": randn(4, 6)}),
    "Gemm": Model([node("Gemm", ["a", "w", "c"], ["y1"], transB=1, alpha=0.5, beta=2.0),
                   node("Gemm", ["at", "w2", "c2"], ["y2"], transA=1),
                   node("Gemm", ["a", "b"], ["y3"], transB=1)],
                  {"a": randn(3, 4), "at": randn(4, 3), "b": randn(5, 4)}, ["y1", "y2", "y3"],
                  {"w": randn(5, 4), "c": randn(1, 5), "w2": randn(4, 2), "c2": randn(3, 2)}),
    "ConvTranspose": Model([node("ConvTranspose", ["x", "w", "b"], ["a"], strides=[2, 2], pads=[0, 1, 1, 0],
                                 output_padding=[1, 0]),
                            node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], output_shape=[6, 7],
                                 auto_pad="SAME_UPPER"),
                            node("ConvTranspose", ["x", "w"], ["d"], strides=[2, 3], auto_pad="SAME_LOWER")],
                           _x(2, 3, 3, 4), ["a", "c", "d"], {"w": randn(3, 2, 3, 3), "b": randn(2)}),
    "Conv": Model([node("Conv", ["x", "w"], ["a"], pads=[0, 1, 2, 1], strides=[1, 2]),
                   node("Conv", ["x", "w", "b"], ["c"], auto_pad="SAME_LOWER", strides=[2, 2]),
                   node("Conv", ["x", "g"], ["d"], group=3, dilations=[2, 1], auto_pad="VALID")],
                  _x(2, 3, 7, 6), ["a", "c", "d"], {"w": randn(4, 3, 3, 3), "b": randn(4), "g": randn(6, 1, 2, 3)}),
    "DeformConv": Model([node("DeformConv", ["x", "w", "off", "b", "m"], ["a"], pads=[1, 1, 1, 1], offset_group=2),
                         node("DeformConv", ["x", "w2", "off2"], ["d"], strides=[2, 1], group=2)],
                        {"x": randn(2, 4, 5, 5), "off": randn(2, 36, 5, 5) * 0.7,
                         "m": _rng.uniform(0, 1, (2, 18, 5, 5)).astype(np.float32), "off2": randn(2, 8, 2, 4) * 0.7},
                        ["a", "d"], {"w": randn(3, 4, 3, 3), "b": randn(3), "w2": randn(4, 2, 2, 2)}, opset=19),
    "pools": Model([node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], pads=[1, 0, 0, 1], strides=[2, 2]),
                    node("AveragePool", ["x"], ["b"], kernel_shape=[3, 3], pads=[1, 0, 0, 1], count_include_pad=1),
                    node("AveragePool", ["x"], ["c"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
                    node("MaxPool", ["x"], ["d"], kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1),
                    node("MaxPool", ["x"], ["e"], kernel_shape=[2, 3], auto_pad="SAME_LOWER"),
                    node("GlobalMaxPool", ["x"], ["f"]), node("GlobalAveragePool", ["x"], ["g"])],
                   _x(2, 3, 7, 6), list("abcdefg")),
    "normalizations": Model([node("InstanceNormalization", ["x", "s", "b"], ["a"], epsilon=1e-3),
                             node("LayerNormalization", ["x", "ls", "lb"], ["c"], axis=-1),
                             node("LayerNormalization", ["x", "ls2"], ["d"], axis=1),
                             node("BatchNormalization", ["x", "s", "b", "m", "v"], ["e"])],
                            _x(2, 3, 4), ["a", "c", "d", "e"],
                            {"s": positive(3), "b": randn(3), "ls": positive(4), "lb": randn(4), "ls2": positive(3, 4),
                             "m": randn(3), "v": positive(3)}),
    "Quantize-Dequantize": Model([node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
                                  node("DequantizeLinear", ["q", "s", "z"], ["a"], axis=1),
                                  node("QuantizeLinear", ["x", "t"], ["b"])],
                                 {"x": randn(2, 3, 2) * 30}, [("q", TensorProto.INT8), "a", ("b", TensorProto.UINT8)],
                                 {"s": positive(3), "z": np.array([-3, 0, 5], np.int8), "t": np.array(0.7, np.float32)}),
    "GridSample-AffineGrid": Model([node("AffineGrid", ["theta", "size"], ["grid"], align_corners=1),
                                    node("GridSample", ["x", "grid"], ["a"], align_corners=1),
                                    node("GridSample", ["x", "g2"], ["b"], mode="nearest", padding_mode="border")],
                                   {"x": randn(2, 3, 4, 5), "theta": randn(2, 2, 3) * 0.6,
                                    "g2": _rng.uniform(-1.2, 1.2, (2, 3, 6, 2)).astype(np.float32)},
                                   ["a", "b"], {"size": ints([2, 3, 3, 6])}, opset=20),
    "DFT": Model([node("DFT", ["x"], ["a"], axis=1), node("DFT", ["a"], ["b"], axis=2, inverse=1)],
                 {"x": randn(2, 5, 3, 1)}, ["a", "b"], opset=17),
    "NonMaxSuppression-RoiAlign": Model(
        [node("NonMaxSuppression", ["boxes", "scores", "k", "iou"], ["sel"]),
         node("RoiAlign", ["x", "rois", "idx"], ["r"], output_height=2, output_width=3, sampling_ratio=2,
              spatial_scale=0.5)],
        {"boxes": np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3]]], np.float32),
         "scores": np.array([[[0.9, 0.8, 0.3]]], np.float32), "x": randn(2, 3, 8, 8),
         "rois": np.array([[1, 1, 9, 11], [0.5, 2, 6, 7]], np.float32)},
        [("sel", TensorProto.INT64), "r"], {"k": ints([3]), "iou": np.array([0.5], np.float32), "idx": ints([0, 1])},
        opset=16),
    "LSTM": _rnn_model("LSTM", "bidirectional"),
    "GRU": _rnn_model("GRU", "forward", linear_before_reset=1),
    "RNN": _rnn_model("RNN", "bidirectional", activations=["Relu", "Relu"]),
    "Dropout-Identity": Model([node("Dropout", ["x"], ["a"]), node("Identity", ["a"], ["b"])], _x(3, 4), ["b"],
                              opset=12),
}


@pytest.mark.parametrize("name", sorted(HELPER_MODELS))
def test_helper_model_matches_onnxruntime(name):
    check(HELPER_MODELS[name])


def test_common_network_from_helper_api():
    """Conv, BatchNormalization, Relu, MaxPool, Transpose, Reshape, Concat, Gemm, Add, Softmax,
    as a model written by hand."""
    nodes = [node("Conv", ["x", "w", "b"], ["h1"], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["h1", "scale", "bias", "mean", "var"], ["h2"], epsilon=1e-3),
             node("Relu", ["h2"], ["h3"]), node("MaxPool", ["h3"], ["h4"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Transpose", ["h4"], ["h5"], perm=[0, 2, 3, 1]), node("Reshape", ["h5", "shape"], ["h6"]),
             node("Concat", ["h6", "extra"], ["h7"], axis=1), node("Gemm", ["h7", "fc_w", "fc_b"], ["h8"], transB=1),
             node("Add", ["h8", "offset"], ["h9"]), node("Softmax", ["h9"], ["y"], axis=-1)]
    constants = {"w": randn(4, 3, 3, 3), "b": randn(4), "scale": positive(4), "bias": randn(4), "mean": randn(4),
                 "var": positive(4), "shape": ints([2, -1]), "fc_w": randn(5, 40), "fc_b": randn(5),
                 "offset": randn(5)}
    for opset in (11, 13, 17):
        m = Model(nodes, {"x": randn(2, 3, 6, 6), "extra": randn(2, 4)}, ["y"], constants, opset=opset)
        check(m)
    with nn.parameter_scope("hand"):
        net = nnabla_onnx.import_onnx(m.proto())
    params = nn.get_parameters(grad_only=False)
    assert {"hand/w", "hand/b", "hand/fc_w", "hand/mean"} <= set(params)
    assert params["hand/w"].need_grad and not params["hand/mean"].need_grad
    types = [f.op.name for f in upstream_functions(list(net.outputs.values()))]
    assert types[:4] == ["Convolution", "BatchNormalization", "ReLU", "MaxPooling"] and "Affine" in types


def test_symbolic_batch_dimension():
    graph = helper.make_graph([node("Flatten", ["x"], ["f"]), node("MatMul", ["f", "w"], ["y"])], "dynamic",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
                              initializer=[numpy_helper.from_array(randn(6, 4), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    net = nnabla_onnx.import_onnx(model, batch_size=5)
    assert net.inputs["x"].shape == (5, 2, 3) and net.outputs["y"].shape == (5, 4)
    x = randn(5, 2, 3)
    net.inputs["x"].d = x
    net.outputs["y"].forward()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(net.outputs["y"].d, session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------ scope, .nnp, CLI
def _exported_mlp(path=None):
    import nnabla_jit.functions as F
    import nnabla_jit.parametric_functions as PF
    x = nn.Variable((4, 6))
    y = F.softmax(PF.affine(F.relu(PF.affine(x, 8, name="fc1")), 3, name="fc2"))
    x.d = randn(4, 6)
    y.forward()
    model = nnabla_onnx.to_model({"y": y}, {"x": x}) if path is None else nnabla_onnx.export(path, {"y": y}, {"x": x})
    return model, x.d.copy(), y.d.copy()


def test_parameters_keep_their_paths_under_the_scope():
    model, x, y = _exported_mlp()
    nn.clear_parameters()
    with nn.parameter_scope("imported"):
        net = nnabla_onnx.import_onnx(model)
    assert set(nn.get_parameters()) == {"imported/fc1/affine/W", "imported/fc1/affine/b",
                                        "imported/fc2/affine/W", "imported/fc2/affine/b"}
    assert set(net.parameters) == {"fc1/affine/W", "fc1/affine/b", "fc2/affine/W", "fc2/affine/b"}
    net.inputs["x"].d = x
    net.outputs["y"].forward()
    np.testing.assert_allclose(net.outputs["y"].d, y, rtol=1e-5, atol=1e-6)


def test_nnp_from_onnx(tmp_path):
    from nnabla_jit.utils.nnp_graph import NnpLoader
    path = str(tmp_path / "mlp.onnx")
    _, x, y = _exported_mlp(path)
    contents = nnabla_onnx.nnp_from_onnx(path)
    assert contents.proto.executor[0].data_variable[0].variable_name == "x"
    nnp_path = str(tmp_path / "mlp.nnp")
    nnp_io.write(nnp_path, contents.proto, contents.parameters)
    nn.clear_parameters()
    loader = NnpLoader(nnp_path)
    net = loader.get_network(loader.get_network_names()[0])
    net.inputs["x"].d = x
    net.outputs["y"].forward()
    np.testing.assert_allclose(net.outputs["y"].d, y, rtol=1e-5, atol=1e-6)


def test_cli_onnx_to_nnp_and_back(tmp_path):
    path = str(tmp_path / "mlp.onnx")
    _, x, y = _exported_mlp(path)
    nnp_path, again = str(tmp_path / "mlp.nnp"), str(tmp_path / "again.onnx")
    for args in ([path, nnp_path], ["--opset", "13", nnp_path, again]):
        result = subprocess.run([sys.executable, "-m", "nnabla_jit", "convert"] + args, capture_output=True,
                                text=True)
        assert result.returncode == 0, result.stderr
    session = ort.InferenceSession(again, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x})[0], y, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------ bad files
def _write(tmp_path, name, data):
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_corrupt_files_name_the_file(tmp_path):
    good = _exported_mlp()[0].SerializeToString()
    for name, data, problem in [("empty.onnx", b"", "empty"),
                                ("garbage.onnx", b"\xff\xfe not a protobuf" * 10, "not an ONNX model"),
                                ("truncated.onnx", good[:len(good) // 2], "")]:
        path = _write(tmp_path, name, data)
        with pytest.raises(FileFormatError, match=name + ".*" + problem):
            nnabla_onnx.import_onnx(path)
    with pytest.raises(FileNotFoundError, match="missing.onnx"):
        nnabla_onnx.import_onnx(str(tmp_path / "missing.onnx"))


@pytest.mark.parametrize("opset", [5, onnx.defs.onnx_opset_version() + 1])
def test_unsupported_opset_names_the_file(tmp_path, opset):
    model = Model(node("Relu", ["x"]), _x(2, 3), ["y"], opset=17).proto()
    model.opset_import[0].version = opset   # onnx's helper knows no IR version past its newest
    path = _write(tmp_path, "old.onnx", model.SerializeToString())
    with pytest.raises(FileFormatError, match="old.onnx.*opset {}.*7 to {}".format(
            opset, onnx.defs.onnx_opset_version())):
        nnabla_onnx.import_onnx(path)


@pytest.mark.parametrize("opset", [7, 21, onnx.defs.onnx_opset_version()])
def test_every_opset_from_7_to_the_newest_imports(opset):
    check(Model([node("Relu", ["x"], ["r"]), node("Unsqueeze", ["r"], ["y"], axes=[0]) if opset < 13
                 else node("Unsqueeze", ["r", "ax"], ["y"])], _x(2, 3), ["y"],
                {} if opset < 13 else {"ax": ints([0])}, opset=opset))


def test_invalid_graph_names_the_file(tmp_path):
    model = Model(node("Relu", ["nowhere"]), _x(2, 3), ["y"]).proto()
    path = _write(tmp_path, "broken.onnx", model.SerializeToString())
    with pytest.raises(FileFormatError, match="broken.onnx.*invalid ONNX model"):
        nnabla_onnx.import_onnx(path)


def test_unsupported_ops_are_reported_together():
    model = Model([node("BitwiseNot", ["x"], ["a"]), node("Scan", ["a"], ["b"]), node("Relu", ["b"])],
                  _x(1, 3, 4, 4), ["y"]).proto()
    with pytest.raises(nnabla_onnx.OnnxImportError, match="BitwiseNot, Scan"):
        nnabla_onnx.import_onnx(model)


def test_shape_inputs_must_be_constants():
    model = Model(node("Reshape", ["x", "s"]), {"x": randn(2, 3), "s": randn(2)}, ["y"]).proto()
    with pytest.raises(nnabla_onnx.OnnxConstantRequired, match="Reshape.*graph input 's'.*constants=") as info:
        nnabla_onnx.import_onnx(model)
    assert info.value.input_name == "s"


def test_cli_reports_bad_onnx(tmp_path):
    path = _write(tmp_path, "bad.onnx", b"garbage")
    result = subprocess.run([sys.executable, "-m", "nnabla_jit", "convert", path, str(tmp_path / "x.nnp")],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "bad.onnx" in result.stderr and "Traceback" not in result.stderr
    assert not os.path.exists(str(tmp_path / "x.nnp"))
