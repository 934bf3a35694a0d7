"""NNP files: nnabla_jit.utils.save / load / nnp_graph against files written by nnabla 1.39.

The fixtures (tests/fixtures, made by make_fixtures.py with nnabla) hold networks, their
parameters and recorded inputs/outputs.
"""
import io
import os
import zipfile

import numpy as np
import pytest
from google.protobuf import text_format

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.initializer as I
from nnabla_jit.ops.registry import REGISTRY
from nnabla_jit.parameter import get_parameter_or_create
from nnabla_jit.serialization import FileFormatError, nnp
from nnabla_jit.serialization.graph_export import network_to_proto
from nnabla_jit.serialization.proto import nnabla_pb2
from nnabla_jit.utils.load import load
from nnabla_jit.utils.nnp_graph import NnpLoader
from nnabla_jit.utils.save import save

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def fixture(name):
    return os.path.join(FIXTURES, name)


def network_types(path):
    contents = nnp.read(path)
    return {f.type for n in contents.proto.network for f in n.function}


def require_ops(path):
    missing = sorted(t for t in network_types(path) if t not in REGISTRY)
    if missing:
        pytest.skip("ops not implemented yet: {}".format(", ".join(missing)))


def run(net, io_arrays, names):
    for k, v in net.inputs.items():
        v.d = io_arrays[k][:v.shape[0]]
    F.sink(*[net.variables[n] for n in names]).forward()
    return {n: net.variables[n].d.copy() for n in names}


# ------------------------------------------------------------------------------------ nnabla -> us
@pytest.mark.parametrize("files, io_name, outputs", [
    ("mlp.nnp", "mlp_io.npz", ["y", "loss"]),
    ("mlp_protobuf_params.nnp", "mlp_io.npz", ["y", "loss"]),
    ("cnn.nnp", "cnn_io.npz", ["y"]),
    ("bn_variants.nnp", "bn_variants_io.npz", ["y"]),
])
def test_nnabla_files_give_nnablas_outputs(files, io_name, outputs):
    require_ops(fixture(files))
    loader = NnpLoader(fixture(files))
    net = loader.get_network(loader.get_network_names()[0])
    expected = np.load(fixture(io_name))
    got = run(net, expected, outputs)
    for n in outputs:
        np.testing.assert_allclose(got[n], expected[n], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("files, io_name", [("mlp.nnp", "mlp_io.npz"), ("cnn.nnp", "cnn_io.npz")])
def test_nnabla_files_at_another_batch_size(files, io_name):
    require_ops(fixture(files))
    loader = NnpLoader(fixture(files))
    net = loader.get_network(loader.get_network_names()[0], batch_size=1)
    assert all(v.shape[0] == 1 for v in net.inputs.values())
    expected = np.load(fixture(io_name))
    got = run(net, expected, ["y"])
    np.testing.assert_allclose(got["y"], expected["y"][:1], rtol=1e-5, atol=1e-6)


def test_network_without_batch_axis_keeps_its_shapes():
    """nnabla writes -1 only where a base_axis function tells the batch size."""
    loader = NnpLoader(fixture("bn_variants.nnp"))
    net = loader.get_network("bn", batch_size=1)
    assert net.inputs["x"].shape == (2, 3, 2, 2)


def test_nntxt_with_separate_parameters():
    info = load([fixture("mlp.nntxt"), fixture("mlp_params.h5")])
    ex = info.executors["runtime"]
    expected = np.load(fixture("mlp_io.npz"))
    for pv, data_name in ex.dataset_assign.items():
        pv.variable_instance.d = expected[data_name]
    ex.forward_target.forward(clear_buffer=True)
    for pv, (_, data_name) in ex.output_assign.items():
        np.testing.assert_allclose(pv.variable_instance.d, expected[data_name], rtol=1e-5, atol=1e-6)


def test_loader_publishes_parameters_to_current_scope():
    loader = NnpLoader(fixture("mlp.nnp"))
    assert not nn.get_parameters(grad_only=False)     # kept in the loader's scope until built
    loader.get_network("mlp")
    assert sorted(nn.get_parameters(grad_only=False)) == [
        "fc1/affine/W", "fc1/affine/b", "fc2/affine/W", "fc2/affine/b", "fc3/affine/W", "fc3/affine/b"]
    with pytest.raises(ValueError, match="no network 'nope'"):
        loader.get_network("nope")


# ------------------------------------------------------------------------------------ us == nnabla
@pytest.mark.parametrize("name", ["mlp.nnp", "cnn.nnp", "bn_variants.nnp"])
def test_saving_a_loaded_network_writes_nnablas_message(name):
    """The Network message we write for a graph is the one nnabla wrote for it."""
    require_ops(fixture(name))
    loader = NnpLoader(fixture(name))
    ref = loader.network_dict[loader.get_network_names()[0]]
    net = loader.get_network(ref.name)
    outputs = {k: net.variables[k] for k in ("y", "loss") if k in net.variables}
    ours = network_to_proto(ref.name, outputs, dict(net.inputs), ref.batch_size)
    assert text_format.MessageToString(ours) == text_format.MessageToString(ref)


# ------------------------------------------------------------------------------------ round trips
def affine(x, n, name, rng):
    with nn.parameter_scope(name):
        w = get_parameter_or_create("affine/W", (x.shape[1], n), I.NormalInitializer(0.5, rng))
        b = get_parameter_or_create("affine/b", (n,), I.NormalInitializer(0.5, rng))
    return F.affine(x, w, b)


def small_graph(batch=3):
    rng = np.random.RandomState(0)
    x = nn.Variable((batch, 4))
    h = F.relu(affine(x, 5, "l1", rng))
    h = F.concatenate(F.tanh(h), F.sigmoid(h) * 2.0, axis=1)
    h = F.transpose(F.reshape(h, (batch, 2, 5)), (0, 2, 1))
    y = F.softmax(affine(F.reshape(h, (batch, 10)), 3, "l2", rng))
    z = F.mean(y, axis=1, keepdims=True) + F.max(h, axis=(1, 2), keepdims=False).reshape((batch, 1))
    x.d = rng.randn(*x.shape)
    F.sink(y, z).forward()
    return x, y, z


def contents_of(x, y, z, batch=3):
    return {"networks": [{"name": "net", "batch_size": batch, "outputs": {"y": y, "z": z},
                          "names": {"x": x}}],
            "executors": [{"name": "runtime", "network": "net", "data": ["x"], "output": ["y", "z"]}]}


@pytest.mark.parametrize("filename, kwargs", [
    ("m.nnp", {}),
    ("m.nnp", {"parameter_format": ".protobuf"}),
    ("m.nntxt", {"include_params": True}),
    ("m.protobuf", {"include_params": True}),
])
def test_save_load_round_trip(tmp_path, filename, kwargs):
    x, y, z = small_graph()
    xd, yd, zd = x.d.copy(), y.d.copy(), z.d.copy()
    path = str(tmp_path / filename)
    save(path, contents_of(x, y, z), **kwargs)
    nn.clear_parameters()
    loader = NnpLoader(path)
    net = loader.get_network("net")
    assert list(net.inputs) == ["x"] and list(net.outputs) == ["z"]    # y feeds z
    got = run(net, {"x": xd}, ["y", "z"])
    np.testing.assert_allclose(got["y"], yd, rtol=1e-6)
    np.testing.assert_allclose(got["z"], zd, rtol=1e-6)
    # Any batch size: the batch dimension was written as -1.
    nn.clear_parameters()
    net1 = NnpLoader(path).get_network("net", batch_size=1)
    np.testing.assert_allclose(run(net1, {"x": xd}, ["y"])["y"], yd[:1], rtol=1e-6)


def test_written_nnp_layout_and_schema(tmp_path):
    x, y, z = small_graph()
    path = str(tmp_path / "m.nnp")
    save(path, contents_of(x, y, z))
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == ["nnp_version.txt", "network.nntxt", "parameter.h5"]
        assert zf.read("nnp_version.txt") == b"0.1\n"
        proto = nnabla_pb2.NNablaProtoBuf()
        text_format.Merge(zf.read("network.nntxt").decode(), proto)   # strict: schema fields only
    net = proto.network[0]
    assert net.batch_size == 3
    assert net.variable[0].name == "x" and list(net.variable[0].shape.dim) == [-1, 4]
    reshape = [f for f in net.function if f.type == "Reshape"][0]
    assert list(reshape.reshape_param.shape.dim) == [-1, 2, 5]
    concat = [f for f in net.function if f.type == "Concatenate"][0]
    assert concat.concatenate_param.axis == 1 and len(concat.input) == 2
    assert [v.type for v in net.variable][-4:] == ["Parameter"] * 4
    assert [e.name for e in proto.executor] == ["runtime"]
    assert [p.variable_name for p in proto.executor[0].parameter_variable] == [
        "l1/affine/W", "l1/affine/b", "l2/affine/W", "l2/affine/b"]


def test_variable_batch_size_off(tmp_path):
    x, y, z = small_graph()
    path = str(tmp_path / "m.nntxt")
    save(path, contents_of(x, y, z), variable_batch_size=False)
    proto = nnp.read(path).proto
    assert list(proto.network[0].variable[0].shape.dim) == [3, 4]


def test_file_object_and_default_extension():
    x, y, z = small_graph()
    buf = io.BytesIO()
    save(buf, contents_of(x, y, z))                       # extension defaults to .nnp
    assert zipfile.ZipFile(buf).namelist()[0] == "nnp_version.txt"
    buf.seek(0)
    loader = NnpLoader(buf, extension=".nnp")
    assert loader.get_network_names() == ["net"]
    # read twice, at any position, as nnabla's zipfile does
    assert NnpLoader(buf, extension=".nnp").get_network_names() == ["net"]
    buf.seek(0, io.SEEK_END)
    assert NnpLoader(buf, extension=".nnp").get_network_names() == ["net"]


# ------------------------------------------------------------------------------------ load()
def test_load_training_configuration():
    info = load([fixture("train_mlp.nnp")], prepare_data_iterator=False)
    assert list(info.networks) == ["training", "runtime"]
    assert info.training_config.max_epoch == 2 and info.training_config.iter_per_epoch == 3
    assert info.training_config.monitor_interval == 10
    assert info.global_config.default_context.backend == ["cpu:float"]
    opt = info.optimizers["optimizer"]
    assert opt.solver.name == "Adam" and opt.solver.info["alpha"] == pytest.approx(0.01)
    assert [v.name for v in opt.loss_variables] == ["loss"]
    assert {pv.name: d for pv, d in opt.dataset_assign.items()} == {"x": "x", "t": "t"}
    assert list(opt.parameters) == sorted(opt.parameters) and len(opt.parameters) == 6
    assert opt.scheduler.get_learning_rate(10) == pytest.approx(0.01)
    assert list(opt.data_iterators) == ["train"]
    mon = info.monitors["train_error"]
    assert [v.name for v in mon.monitor_variables] == ["loss"]
    ds = info.datasets["train"]
    assert (ds.uri, ds.batch_size, ds.shuffle, ds.normalize) == ("train_data.csv", 4, False, False)
    ex = info.executors["runtime"]
    assert [pv.name for pv in ex.output_assign] == ["y"] and ex.num_evaluations == 1


@pytest.mark.parametrize("entry, what", [("optimizer", "optimizer 'optimizer'"),
                                         ("monitor", "monitor 'train_error'"),
                                         ("executor", "executor 'runtime'")])
def test_load_names_the_entry_whose_network_is_missing(tmp_path, entry, what):
    with zipfile.ZipFile(fixture("train_mlp.nnp")) as z:
        members = {name: z.read(name) for name in z.namelist()}
    proto = text_format.Parse(members["network.nntxt"].decode("utf-8"), nnabla_pb2.NNablaProtoBuf())
    getattr(proto, entry)[0].network_name = "nowhere"
    members["network.nntxt"] = text_format.MessageToString(proto).encode("utf-8")
    path = str(tmp_path / "broken.nnp")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    with pytest.raises(ValueError, match="load: {} uses network 'nowhere', which the file does "
                                         "not define".format(what)):
        load([path], prepare_data_iterator=False)


def test_save_training_configuration_round_trip(tmp_path):
    import nnabla_jit.solvers as S
    info = load([fixture("train_mlp.nnp")], prepare_data_iterator=False)
    training = info.networks["training"]
    loss = training.variables["loss"].variable_instance
    x, t = (training.variables[n].variable_instance for n in ("x", "t"))
    solver = S.Momentum(lr=0.05, momentum=0.8)
    solver.set_parameters(nn.get_parameters())
    x.d = np.random.RandomState(0).randn(*x.shape)
    t.d = np.random.RandomState(1).rand(*t.shape)
    loss.forward()
    solver.zero_grad()
    loss.backward()
    solver.update()
    saved_states = {k: (s.t, {n: v.d.copy() for n, v in s.pstate.items()})
                    for k, s in solver.get_states().items()}
    contents = {
        "global_config": {"default_context": nn.get_current_context()},
        "training_config": {"max_epoch": 4, "iter_per_epoch": 2, "save_best": False},
        "networks": [{"name": "training", "batch_size": 4, "outputs": {"loss": loss},
                      "names": {"x": x, "t": t}}],
        "optimizers": [{"name": "opt", "solver": solver, "network": "training", "dataset": "d",
                        "weight_decay": 1e-4, "lr_decay": 0.5, "lr_decay_interval": 2,
                        "update_interval": 1, "data_variables": {"x": "x", "t": "t"}}],
        "datasets": [{"name": "d", "uri": "data.csv", "variables": {"x": x, "t": t},
                      "shuffle": True, "batch_size": 4, "no_image_normalization": True}],
        "monitors": [{"name": "err", "network": "training", "dataset": "d"}],
    }
    path = str(tmp_path / "train.nnp")
    save(path, contents, include_solver_state=True)
    with zipfile.ZipFile(path) as zf:
        assert "opt_Momentum_optimizer.h5.optimizer" in zf.namelist()
    nn.clear_parameters()
    back = load([path], prepare_data_iterator=False)
    opt = back.optimizers["opt"]
    assert opt.solver.name == "Momentum"
    assert opt.solver.info["lr"] == pytest.approx(0.05) and opt.solver.info["momentum"] == pytest.approx(0.8)
    assert opt.weight_decay == pytest.approx(1e-4)
    assert opt.scheduler.get_learning_rate(4) == pytest.approx(0.05 * 0.25)
    assert back.training_config.max_epoch == 4 and not back.training_config.save_best
    assert back.datasets["d"].shuffle and back.monitors["err"].network.name == "training"
    restored = opt.solver.get_states()
    assert sorted(restored) == sorted(saved_states)
    for k, (t_, pstate) in saved_states.items():
        assert restored[k].t == t_ == 1
        for n, value in pstate.items():
            np.testing.assert_array_equal(restored[k].pstate[n].d, value)


# ------------------------------------------------------------------------------------ errors
def _nntxt(tmp_path, text):
    p = tmp_path / "bad.nntxt"
    p.write_text(text)
    return str(p)


def test_unknown_and_unimplemented_functions(tmp_path):
    base = ('network {{ name: "n" batch_size: 1 variable {{ name: "x" type: "Buffer" shape {{ dim: 1 }} }} '
            'variable {{ name: "y" type: "Buffer" shape {{ dim: 1 }} }} '
            'function {{ name: "f" type: "{}" input: "x" output: "y" }} }}')
    with pytest.raises(ValueError, match="unknown type 'NoSuchOp'"):
        NnpLoader(_nntxt(tmp_path, base.format("NoSuchOp"))).get_network("n")
    with pytest.raises(ValueError, match="does not declare"):
        NnpLoader(_nntxt(tmp_path, base.format("ReLU").replace('input: "x"', 'input: "q"'))).get_network("n")


def test_bad_model_files(tmp_path):
    p = tmp_path / "bad.nnp"
    with zipfile.ZipFile(str(p), "w") as zf:
        zf.writestr("readme.txt", "nothing here")
    with pytest.raises(FileFormatError, match="no network or parameter file"):
        NnpLoader(str(p))
    p.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(FileFormatError, match="bad.nnp"):
        load([str(p)])
    with pytest.raises(FileFormatError, match="bad.nntxt"):
        load([_nntxt(tmp_path, "network { name: ")])
    with pytest.raises(FileNotFoundError, match="missing.nnp: no such file"):
        NnpLoader(str(tmp_path / "missing.nnp"))


def test_saving_needs_known_networks_and_datasets():
    x, y, z = small_graph()
    c = contents_of(x, y, z)
    c["executors"][0]["network"] = "other"
    with pytest.raises(ValueError, match="network 'other'"):
        save(io.BytesIO(), c)
    c = contents_of(x, y, z)
    c["executors"][0]["output"] = ["nope"]
    with pytest.raises(ValueError, match="output variable 'nope' is not in network"):
        save(io.BytesIO(), c)
    c = contents_of(x, y, z)
    c["executors"][0]["data"] = ["absent"]
    with pytest.raises(ValueError, match="data variable 'absent' is not in network"):
        save(io.BytesIO(), c)


def test_loaded_parameters_keep_need_grad():
    loader = NnpLoader(fixture("bn_variants.nnp"))
    loader.get_network("bn")
    params = nn.get_parameters(grad_only=False)
    assert not params["bn_a/bn/mean"].need_grad and not params["bn_a/bn/var"].need_grad
    assert params["bn_a/bn/gamma"].need_grad


@pytest.mark.parametrize("name", ["checkpoint_h5.nnp", "checkpoint_protobuf.nnp"])
def test_load_restores_nnablas_solver_checkpoint(name):
    info = load([fixture(name)], prepare_data_iterator=False)
    solver = info.optimizers["opt"].solver
    expected = np.load(fixture("checkpoint_states.npz"))
    states = solver.get_states()
    assert sorted(states) == sorted({k.rsplit("/", 1)[0] for k in expected.files})
    for pname, state in states.items():
        assert state.t == int(expected[pname + "/t"]) == 2
        for sname, value in state.pstate.items():
            np.testing.assert_allclose(value.d, expected[pname + "/" + sname], rtol=1e-6)
