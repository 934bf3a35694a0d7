"""ONNX's own backend node tests (``onnx.backend.test.case.node.collect_testcases()``, shipped
inside the ``onnx`` package) run through the importer: each case's model is imported, its
inputs fed, and every output compared with the expected one at the case's own rtol/atol.

A case is *claimed* when every node of its model is a default-domain op the importer converts
(``importable_ops()``) and every graph input and output is a tensor of a numeric or boolean
type (sequences, optionals and strings have no nnabla_jit form). The test asserts that at least
90% of the claimed cases pass; ``docs/onnx.md`` lists, by op, the cases that do not pass and
the ops that are not claimed, with the reasons.

Graph inputs that the importer needs as constants (axes, scales, repeats, k, bounds, shapes)
are handed over as ``import_onnx(model, constants={...})`` when the importer names them with
:class:`OnnxConstantRequired` - the way a user learns which inputs to pin.

Run as a script (``python tests/test_onnx_backend_nodes.py``) for the per-case table.
"""
import sys
import warnings
from collections import Counter, OrderedDict

import numpy as np
import pytest

import nnabla_jit as nn

onnx = pytest.importorskip("onnx")
nnabla_onnx = pytest.importorskip("nnabla_jit.serialization.onnx")

from nnabla_jit.serialization.onnx import OnnxConstantRequired  # noqa: E402

PASS_RATE = 0.90
# Element types nnabla_jit has no form for: strings, complex numbers, bfloat16 and the
# float8 / float4 / int4 / int2 formats (nnabla_jit computes in float32).
_UNREPRESENTED = {8: "string", 14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn",
                  18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4",
                  23: "float4e2m1", 24: "float8e8m0", 25: "uint2", 26: "int2"}


def _collect():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the case generators overflow casts on purpose
        return collect_testcases()


def _element_types(model):
    """The element types of the graph's tensors and of its Cast targets."""
    graph = model.graph
    types = [v.type.tensor_type.elem_type for v in list(graph.input) + list(graph.output)]
    types += [t.data_type for t in graph.initializer]
    for node in graph.node:
        types += [a.i for a in node.attribute if node.op_type == "Cast" and a.name == "to"]
    return types


def unclaimed_reason(case):
    """None when the importer claims ``case``, else why not."""
    graph = case.model.graph
    ops = importable_ops_of(case.model)
    missing = sorted(o for o in ops if o not in nnabla_onnx.importable_ops())
    if missing:
        return "op not converted: " + ", ".join(missing)
    if not all(v.type.WhichOneof("value") == "tensor_type" for v in list(graph.input) + list(graph.output)):
        return "sequence or optional values"
    exotic = sorted({_UNREPRESENTED[t] for t in _element_types(case.model) if t in _UNREPRESENTED})
    if exotic:
        return "element type " + ", ".join(exotic)
    opset = {o.domain: o.version for o in case.model.opset_import}.get("", 0)
    if opset not in nnabla_onnx.import_opsets():
        return "opset {} (before 7)".format(opset)
    return None


def _array(value):
    """A data set entry as a numpy array (exotic element types are stored as TensorProto)."""
    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def importable_ops_of(model):
    ops = set()
    for node in model.graph.node:
        ops.add(node.op_type if node.domain in ("", "ai.onnx") else "{}.{}".format(node.domain, node.op_type))
    return ops


def _import(model, feeds):
    """Import ``model``, pinning each graph input the importer asks to be a constant."""
    constants = {}
    while True:
        try:
            return nnabla_onnx.import_onnx(model, constants=constants)
        except OnnxConstantRequired as e:
            if e.input_name in constants or e.input_name not in feeds:
                raise
            constants[e.input_name] = feeds[e.input_name]


def run_case(case):
    """Run one claimed case; raises AssertionError (or the import error) when it fails."""
    graph = case.model.graph
    names = [vi.name for vi in graph.input if vi.name not in {t.name for t in graph.initializer}]
    for inputs, outputs in case.data_sets:
        feeds = OrderedDict(zip(names, [_array(v) for v in inputs]))
        nn.clear_parameters()
        with nn.parameter_scope("node_test"):
            net = _import(case.model, feeds)
        for name, v in net.inputs.items():
            array = np.asarray(feeds[name])
            assert tuple(v.shape) == array.shape, "input {}: {} vs {}".format(name, v.shape, array.shape)
            v.d = array.astype(np.float32)
        nn.forward_all(list(net.outputs.values()))
        got = [np.asarray(v.d) for v in net.outputs.values()]
        assert len(got) == len(outputs), "{} outputs, {} expected".format(len(got), len(outputs))
        for vi, g, want in zip(graph.output, got, outputs):
            want = _array(want)
            assert g.shape == want.shape, "output {}: shape {} vs {}".format(vi.name, g.shape, want.shape)
            if want.dtype.kind in "biu":
                g = np.round(g)
            np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64),
                                       rtol=case.rtol, atol=case.atol, err_msg=vi.name)


def run_all(cases=None):
    """{case name: (status, detail)}: status 'pass', 'fail' or 'unclaimed'."""
    results = OrderedDict()
    for case in cases if cases is not None else _collect():
        reason = unclaimed_reason(case)
        if reason is not None:
            results[case.name] = ("unclaimed", reason)
            continue
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                run_case(case)
            results[case.name] = ("pass", "")
        except Exception as e:   # any failure of a case is a result, reported by op
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            results[case.name] = ("fail", "{}: {}".format(type(e).__name__, first)[:300])
    return results


def test_backend_node_pass_rate():
    results = run_all()
    counts = Counter(status for status, _ in results.values())
    claimed = counts["pass"] + counts["fail"]
    assert claimed > 0
    rate = counts["pass"] / claimed
    failing = sorted(name for name, (status, _) in results.items() if status == "fail")
    assert rate >= PASS_RATE, "{}/{} claimed node tests pass ({:.1%}); failing: {}".format(
        counts["pass"], claimed, rate, ", ".join(failing))


def test_constant_required_names_the_input():
    """A shape-valued graph input without a value: the error names it; with one it imports."""
    from onnx import TensorProto, helper
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                            helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(OnnxConstantRequired, match="axes.* must be known when importing") as info:
        nnabla_onnx.import_onnx(model)
    assert info.value.input_name == "axes"
    assert "constants=" in str(info.value)
    net = nnabla_onnx.import_onnx(model, constants={"axes": np.array([1], np.int64)})
    assert list(net.inputs) == ["x"]
    net.inputs["x"].d = np.arange(6, dtype=np.float32).reshape(2, 3)
    net.outputs["y"].forward()
    np.testing.assert_allclose(net.outputs["y"].d, [3, 12])


def test_lowerings_train_and_export_back():
    """Ops imported as several nnabla_jit functions (LRN, HardSwish, GroupNormalization,
    Celu, Hardmax-free paths) get gradients and export back to a model onnxruntime runs alike."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.RandomState(3)
    x = rng.randn(2, 4, 5, 5).astype(np.float32)
    scale, bias = rng.randn(4).astype(np.float32), rng.randn(4).astype(np.float32)
    nodes = [helper.make_node("LRN", ["x"], ["a"], size=3, alpha=0.5),
             helper.make_node("HardSwish", ["a"], ["b"]),
             helper.make_node("GroupNormalization", ["b", "scale", "bias"], ["g"], num_groups=2),
             helper.make_node("Celu", ["g"], ["y"], alpha=0.7)]
    graph = helper.make_graph(nodes, "lowered", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(scale, "scale"),
                                           numpy_helper.from_array(bias, "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    nn.clear_parameters()
    net = nnabla_onnx.import_onnx(model)
    net.inputs["x"].d = x
    y = net.outputs["y"]
    y.forward()
    np.testing.assert_allclose(y.d, want, rtol=1e-4, atol=1e-5)
    for p in net.parameters.values():
        p.grad.zero()
    y.backward(clear_buffer=True)
    assert np.abs(net.parameters["scale"].g).sum() > 0 and np.abs(net.parameters["bias"].g).sum() > 0
    exported = nnabla_onnx.to_model({"y": y}, {"x": net.inputs["x"]}, 17)
    again = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(again[0], want, rtol=1e-4, atol=1e-5)


def test_dilated_and_ceil_pooling_match_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    x = np.random.RandomState(5).randn(1, 2, 9, 8).astype(np.float32)
    nodes = [helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 2], dilations=[2, 3], pads=[1, 0, 1, 1]),
             helper.make_node("AveragePool", ["x"], ["b"], kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1,
                              dilations=[2, 1]),
             helper.make_node("LpPool", ["x"], ["c"], kernel_shape=[2, 2], dilations=[2, 2], p=3)]
    graph = helper.make_graph(nodes, "pools", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "abc"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    nn.clear_parameters()
    net = nnabla_onnx.import_onnx(model)
    net.inputs["x"].d = x
    nn.forward_all(list(net.outputs.values()))
    for w, g in zip(want, net.outputs.values()):
        np.testing.assert_allclose(g.d, w, rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    nn_results = run_all([c for c in _collect() if len(sys.argv) < 2 or any(a in c.name for a in sys.argv[1:])])
    for name, (status, detail) in nn_results.items():
        print("{:8s} {} {}".format(status, name, detail))
    print(Counter(s for s, _ in nn_results.values()))
