"""ONNX export at scale: initializers beyond protobuf's 2 GB go to an external data file
(tested with a lowered threshold; one slow test writes more than 2 GB), the CLI shows tqdm
progress, and a representative network passes ``check_model(full_check=True)`` and runs in
onnxruntime at every export opset."""
import os
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit.serialization.files import FileFormatError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
nnabla_onnx = pytest.importorskip("nnabla_jit.serialization.onnx")
export_module = sys.modules["nnabla_jit.serialization.onnx.export"]   # the package's export() hides it

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def run_ort(source, feeds):
    model = source if isinstance(source, str) else source.SerializeToString()
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, {k: np.asarray(v, np.float32) for k, v in feeds.items()})


def _mlp():
    nn.clear_parameters()
    x = nn.Variable((2, 40))
    h = F.relu(PF.affine(x, 30, name="fc1"))      # 40 x 30 floats: 4800 bytes
    y = PF.affine(h, 3, name="fc2")                # 30 x 3: 360 bytes, stays in the model
    x.d = np.random.RandomState(0).randn(*x.shape)
    y.forward()
    return OrderedDict(x=x), OrderedDict(y=y)


def _external(model):
    return {t.name for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}


def test_initializers_beyond_the_threshold_go_to_external_data(tmp_path):
    inputs, outputs = _mlp()
    path = str(tmp_path / "mlp.onnx")
    model = nnabla_onnx.export(path, outputs, inputs, external_data_threshold=4000)
    assert _external(model) == {"fc1/affine/W"}
    assert sorted(os.listdir(str(tmp_path))) == ["mlp.onnx", "mlp.onnx.data"]
    stored = onnx.load(path, load_external_data=False)
    location = {e.key: e.value for t in stored.graph.initializer for e in t.external_data}["location"]
    assert location == "mlp.onnx.data"
    onnx.checker.check_model(path, full_check=True)
    want = outputs["y"].d.copy()
    np.testing.assert_allclose(run_ort(path, {"x": inputs["x"].d})[0], want, rtol=1e-5, atol=1e-6)
    loaded = onnx.load(path)   # onnx's own reader finds the data
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(loaded.graph.initializer[0]),
                                  nn.get_parameters()["fc1/affine/W"].d)
    with nn.parameter_scope("imported"):
        net = nnabla_onnx.import_onnx(path)
    net.inputs["x"].d = inputs["x"].d
    net.outputs["y"].forward()
    np.testing.assert_allclose(net.outputs["y"].d, want, rtol=1e-5, atol=1e-6)
    # under the threshold everything stays in the one file
    model = nnabla_onnx.export(str(tmp_path / "small.onnx"), outputs, inputs)
    assert not _external(model) and not os.path.exists(str(tmp_path / "small.onnx.data"))


def test_a_model_beyond_protobufs_limit_needs_a_path(monkeypatch):
    inputs, outputs = _mlp()
    monkeypatch.setattr(export_module, "PROTOBUF_LIMIT", 1000)
    with pytest.raises(ValueError, match="external data file"):
        nnabla_onnx.to_model(outputs, inputs)


def test_a_failed_check_leaves_no_files(tmp_path, monkeypatch):
    inputs, outputs = _mlp()

    def refuse(model, full_check=False):
        raise onnx.checker.ValidationError("refused")
    monkeypatch.setattr(onnx.checker, "check_model", refuse)
    with pytest.raises(onnx.checker.ValidationError, match="refused"):
        nnabla_onnx.export(str(tmp_path / "m.onnx"), outputs, inputs, external_data_threshold=0)
    assert os.listdir(str(tmp_path)) == []


def test_bad_external_data_is_a_file_format_error(tmp_path):
    inputs, outputs = _mlp()
    path = str(tmp_path / "mlp.onnx")
    nnabla_onnx.export(path, outputs, inputs, external_data_threshold=0)
    data = open(path + ".data", "rb").read()
    with open(path + ".data", "wb") as f:
        f.write(data[:100])
    with pytest.raises(FileFormatError, match="fc1/affine/W.*ends before"):
        nnabla_onnx.import_onnx(path)
    os.unlink(path + ".data")
    with pytest.raises(FileFormatError, match="cannot read its external data"):
        nnabla_onnx.import_onnx(path)
    model = onnx.load(path, load_external_data=False)
    for t in model.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../elsewhere.data"
    with pytest.raises(FileFormatError, match="not a path inside the model's directory"):
        nnabla_onnx.import_onnx(model)


def test_cli_convert_shows_progress(tmp_path):
    out = str(tmp_path / "mlp.onnx")
    result = subprocess.run([sys.executable, "-m", "nnabla_jit", "convert", os.path.join(FIXTURES, "mlp.nnp"), out],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "ONNX export" in result.stderr and "function/s" in result.stderr
    back = str(tmp_path / "back.nnp")
    result = subprocess.run([sys.executable, "-m", "nnabla_jit", "convert", out, back], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert "ONNX import" in result.stderr and os.path.exists(back)


def representative(x):
    """Convolutions (grouped, depthwise), BN, pooling, concatenation, ReLU6, a residual, a
    reshape, an affine layer, softmax and a reduction: what an exported classifier holds."""
    h = F.relu(PF.batch_normalization(PF.convolution(x, 8, (3, 3), pad=(1, 1), name="c1"), batch_stat=False,
                                      name="bn1"))
    h = F.max_pooling(h, (2, 2))
    branch = F.relu6(PF.depthwise_convolution(h, (3, 3), pad=(1, 1), name="dw"))
    h = F.concatenate(PF.convolution(h, 4, (1, 1), group=2, name="g"), branch, axis=1)
    h = F.add2(h, F.average_pooling(F.pad(h, (1, 1, 1, 1)), (3, 3), (1, 1)))
    h = F.reshape(F.global_average_pooling(h), (x.shape[0], 12))
    y = F.softmax(PF.affine(h, 5, name="fc"))
    return y, F.mean(y, axis=1, keepdims=True)


def test_representative_network_passes_the_full_check_at_every_opset(tmp_path):
    nn.clear_parameters()
    x = nn.Variable((2, 3, 8, 8))
    y, m = representative(x)
    rng = np.random.RandomState(1)
    for p in nn.get_parameters(grad_only=False).values():
        p.d = rng.uniform(0.5, 1.5, p.shape)
    x.d = rng.randn(*x.shape)
    nn.forward_all([y, m])
    opsets = list(nnabla_onnx.export_opsets())
    assert opsets[-1] == onnx.defs.onnx_opset_version()
    for opset in opsets:
        path = str(tmp_path / "net{}.onnx".format(opset))
        nnabla_onnx.export(path, OrderedDict(y=y, m=m), OrderedDict(x=x), opset)
        onnx.checker.check_model(path, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(onnx.load(path), strict_mode=True)
        shapes = {o.name: [d.dim_value for d in o.type.tensor_type.shape.dim] for o in inferred.graph.output}
        assert shapes == {"y": [2, 5], "m": [2, 1]}
        got = run_ort(path, {"x": x.d})
        np.testing.assert_allclose(got[0], y.d, rtol=1e-4, atol=1e-6, err_msg="opset {}".format(opset))
        np.testing.assert_allclose(got[1], m.d, rtol=1e-4, atol=1e-6, err_msg="opset {}".format(opset))


@pytest.mark.slow
def test_more_than_2gb_of_parameters(tmp_path):
    """A weight of 2.1 GB: written to external data by default, read back by onnxruntime (its
    graph optimizations and weight prepacking off: they run out of memory on a 2 GB Gemm)."""
    nn.clear_parameters()
    n = 2 ** 29 + 2 ** 22
    x = nn.Variable((1, n))
    y = PF.affine(x, 1, name="big", w_init=nn.initializer.ConstantInitializer(1.0), with_bias=False)
    nn.get_parameters()["big/affine/W"].d[-1] = 7.0   # beyond the first 2 GB of the data file
    path = str(tmp_path / "big.onnx")
    nnabla_onnx.export(path, OrderedDict(y=y), OrderedDict(x=x))
    assert os.path.getsize(path + ".data") >= n * 4 > 2 ** 31
    assert os.path.getsize(path) < 2 ** 20
    onnx.checker.check_model(path, full_check=True)
    nn.clear_parameters()
    feeds = np.zeros((1, n), np.float32)
    feeds[0, 0], feeds[0, -1] = 2.0, 3.0
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.disable_prepacking", "1")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": feeds})[0], [[2.0 + 3.0 * 7.0]])
