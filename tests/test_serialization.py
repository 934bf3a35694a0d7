"""Protobuf schema, parameter files and solver-state files (serialization/).

Fixtures in tests/fixtures were written by nnabla 1.39 (see make_fixtures.py).
"""
import io
import os
import re
import zipfile

import h5py
import numpy as np
import pytest
from google.protobuf import descriptor_pb2, text_format

import nnabla_jit as nn
from nnabla_jit.parameter import get_parameter_or_create
from nnabla_jit.serialization import FileFormatError, parameters as params_io, solver_states
from nnabla_jit.serialization.files import atomic_path, write_bytes
from nnabla_jit.serialization.proto import build_file_descriptor, nnabla_pb2

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def fixture(name):
    return os.path.join(FIXTURES, name)


def _fields(fdp, package_prefix):
    """message -> {field: (number, label, type, type name, oneof)}, map entries included."""
    out = {}

    def walk(msg, prefix):
        fields = {}
        for f in msg.field:
            oneof = msg.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
            fields[f.name] = (f.number, f.label, f.type, f.type_name.replace(package_prefix, "."), oneof)
        out[prefix + msg.name] = (fields, msg.options.map_entry)
        for nested in msg.nested_type:
            walk(nested, prefix + msg.name + ".")
    for m in fdp.message_type:
        walk(m, "")
    return out


# ------------------------------------------------------------------------------------ schema
def test_schema_matches_nnabla_descriptor():
    ref = descriptor_pb2.FileDescriptorProto()
    with open(fixture("nnabla_proto_descriptor.pb"), "rb") as f:
        ref.ParseFromString(f.read())
    ours = build_file_descriptor()
    assert ours.syntax == ref.syntax == "proto3"
    expected, got = _fields(ref, "."), _fields(ours, ".nnabla.")
    assert set(got) == set(expected)
    for name in expected:
        assert got[name] == expected[name], name


def test_text_and_binary_round_trip_of_every_field_kind():
    p = nnabla_pb2.NNablaProtoBuf()
    net = p.network.add(name="n", batch_size=3)
    f = net.function.add(name="c", type="Convolution", input=["x", "w"], output=["y"])
    f.convolution_param.pad.dim.extend([1, 1])
    f.convolution_param.group = 2
    f.convolution_param.channel_last = True
    p.network[0].function.add(type="MulScalar").mul_scalar_param.val = 0.1
    state = p.optimizer.add(name="o").solver.states["fc/W"]
    state.t = 7
    state.state_parameter["m"].data.extend([1.5, -2.0])
    p.optimizer[0].solver.adam_param.alpha = 0.01
    text = text_format.MessageToString(p)
    assert "convolution_param {" in text and "val: 0.1" in text and 'key: "fc/W"' in text
    back = nnabla_pb2.NNablaProtoBuf()
    text_format.Merge(text, back)
    assert back == p
    again = nnabla_pb2.NNablaProtoBuf.FromString(p.SerializeToString())
    assert again == p
    assert again.optimizer[0].solver.WhichOneof("parameter") == "adam_param"


def test_parses_nnabla_written_nntxt():
    with zipfile.ZipFile(fixture("cnn.nnp")) as z:
        text = z.read("network.nntxt").decode()
    p = nnabla_pb2.NNablaProtoBuf()
    text_format.Merge(text, p)
    types = [f.type for f in p.network[0].function]
    assert types[:3] == ["Convolution", "BatchNormalization", "ReLU"]
    conv = p.network[0].function[0].convolution_param
    assert list(conv.pad.dim) == [1, 1] and conv.group == 1
    assert p.network[0].variable[0].shape.dim[0] == -1


# ------------------------------------------------------------------------------------ parameters
def _make_params():
    rng = np.random.RandomState(0)
    with nn.parameter_scope("fc1"):
        w = get_parameter_or_create("affine/W", (3, 4))
        w.d = rng.randn(3, 4).astype(np.float32)
        b = get_parameter_or_create("affine/b", (4,), need_grad=False)
        b.d = rng.randn(4).astype(np.float32)
    with nn.parameter_scope("bn"):
        m = get_parameter_or_create("mean", (1, 2, 1, 1), need_grad=False)
        m.d = rng.randn(1, 2, 1, 1).astype(np.float32)
    return {k: (v.d.copy(), v.need_grad) for k, v in nn.get_parameters(grad_only=False).items()}


def _current():
    return {k: (v.d.copy(), v.need_grad) for k, v in nn.get_parameters(grad_only=False).items()}


def _assert_same(a, b):
    assert list(a) == list(b)
    for k in a:
        np.testing.assert_array_equal(a[k][0], b[k][0])
        assert a[k][1] == b[k][1], k


@pytest.mark.parametrize("ext", [".h5", ".protobuf"])
def test_parameters_round_trip(tmp_path, ext):
    saved = _make_params()
    path = str(tmp_path / ("p" + ext))
    nn.save_parameters(path)
    nn.clear_parameters()
    nn.load_parameters(path)
    _assert_same(_current(), saved)


def test_h5_layout_is_nnablas(tmp_path):
    _make_params()
    path = str(tmp_path / "p.h5")
    nn.save_parameters(path)
    with h5py.File(path, "r") as f:
        assert isinstance(f["fc1"], h5py.Group) and isinstance(f["fc1/affine"], h5py.Group)
        ds = f["fc1/affine/b"]
        assert ds.dtype == np.float32 and ds.shape == (4,)
        assert bool(ds.attrs["need_grad"]) is False and int(ds.attrs["index"]) == 1
        assert int(f["bn/mean"].attrs["index"]) == 2


@pytest.mark.parametrize("name", ["mlp_params.h5", "mlp_params.protobuf"])
def test_loads_nnabla_parameter_files(name):
    nn.load_parameters(fixture(name))
    params = nn.get_parameters(grad_only=False)
    assert list(params) == ["fc1/affine/W", "fc1/affine/b", "fc2/affine/W", "fc2/affine/b",
                            "fc3/affine/W", "fc3/affine/b"]
    assert params["fc1/affine/W"].shape == (5, 8) and params["fc3/affine/b"].need_grad
    with h5py.File(fixture("mlp_params.h5"), "r") as f:
        np.testing.assert_array_equal(params["fc2/affine/W"].d, f["fc2/affine/W"][()])


def test_h5_and_protobuf_fixtures_agree():
    nn.load_parameters(fixture("mlp_params.h5"))
    a = _current()
    nn.clear_parameters()
    nn.load_parameters(fixture("mlp_params.protobuf"))
    _assert_same(_current(), a)


def test_load_into_scope_overwrites_in_place():
    nn.load_parameters(fixture("mlp_params.h5"))
    w = nn.get_parameters()["fc1/affine/W"]
    w.d = 0
    nn.load_parameters(fixture("mlp_params.h5"))
    assert nn.get_parameters()["fc1/affine/W"] is w        # same parameter, new values
    assert np.abs(w.d).sum() > 0


def test_load_with_needs_proto_returns_parameters():
    proto = nn.load_parameters(fixture("mlp_params.h5"), needs_proto=True)
    assert [p.variable_name for p in proto.parameter][:2] == ["fc1/affine/W", "fc1/affine/b"]
    assert list(proto.parameter[0].shape.dim) == [5, 8]


def test_file_objects_need_extension():
    _make_params()
    buf = io.BytesIO()
    nn.save_parameters(buf, extension=".protobuf")
    saved = _current()
    nn.clear_parameters()
    nn.load_parameters(buf, extension=".protobuf")
    _assert_same(_current(), saved)
    with pytest.raises(ValueError, match="extension"):
        nn.save_parameters(io.BytesIO())


# ------------------------------------------------------------------------------------ bad files
def _bad_files(tmp_path):
    good = open(fixture("mlp_params.h5"), "rb").read()
    files = {
        "truncated.h5": good[:len(good) // 2],
        "garbage.h5": b"not an hdf5 file at all" * 10,
        "garbage.protobuf": b"\xff\xff\xff\xff\x0f\x01",
        "garbage.nntxt": "network { name: ",
        "garbage.nnp": b"PK\x03\x04 broken zip",
        "empty.nnp": b"",
    }
    out = {}
    for name, data in files.items():
        p = tmp_path / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        out[name] = str(p)
    # An HDF5 file that is not a parameter file (no need_grad attributes).
    with h5py.File(str(tmp_path / "other.h5"), "w") as f:
        f["a/b"] = np.zeros(3)
    out["other.h5"] = str(tmp_path / "other.h5")
    return out


def test_bad_parameter_files_raise_clear_errors(tmp_path):
    for name, path in _bad_files(tmp_path).items():
        with pytest.raises(FileFormatError, match=re.escape(path)) as e:
            nn.load_parameters(path)
        assert path in str(e.value), name
    with pytest.raises(FileNotFoundError, match="missing.h5"):
        nn.load_parameters(str(tmp_path / "missing.h5"))
    with pytest.raises(ValueError, match="unsupported extension"):
        nn.load_parameters(str(tmp_path / "x.txt"))


@pytest.mark.parametrize("name", ["mlp.nnp", "cnn.nnp", "mlp_params.h5", "mlp_params.protobuf",
                                  "mlp.nntxt"])
def test_damaged_files_raise_file_format_errors(name):
    """Cut or flip bytes all over a file: loading either fails with a FileFormatError naming
    the file, or (a flip inside numbers, a cut between two protobuf records, a protobuf or text
    file cut to nothing: an empty message, as in nnabla) loads fully."""
    data = open(fixture(name), "rb").read()
    ext = os.path.splitext(name)[1]
    step = max(1, len(data) // 40)
    for cut in range(0, len(data), step):
        flipped = bytearray(data)
        flipped[cut] ^= 0xFF
        for damaged, must_fail in ((data[:cut], ext in (".nnp", ".h5")),
                                   (bytes(flipped), False)):
            nn.clear_parameters()
            buf = io.BytesIO(damaged)
            buf.name = "damaged" + ext
            try:
                nn.load_parameters(buf, extension=ext)
            except FileFormatError as e:
                assert "damaged" + ext in str(e)
                assert not nn.get_parameters(grad_only=False)     # nothing half-loaded
            else:
                assert not must_fail, "cut at {} of {} loaded".format(cut, name)


def test_load_is_all_or_nothing():
    saved = _make_params()
    # fc1/affine/W exists with shape (3, 4); a file with another shape must change nothing.
    proto = nnabla_pb2.NNablaProtoBuf()
    params_io.add_entries_to_proto(proto, [
        params_io.ParameterEntry("new/param", np.ones((2,), np.float32), True),
        params_io.ParameterEntry("fc1/affine/W", np.ones((5, 5), np.float32), True)])
    buf = io.BytesIO(proto.SerializeToString())
    with pytest.raises(FileFormatError, match="fc1/affine/W.*shape"):
        nn.load_parameters(buf, extension=".protobuf")
    _assert_same(_current(), saved)


def test_protobuf_parameter_with_wrong_data_count():
    proto = nnabla_pb2.NNablaProtoBuf()
    p = proto.parameter.add(variable_name="w")
    p.shape.dim.extend([2, 3])
    p.data.extend([1.0, 2.0])
    with pytest.raises(FileFormatError, match="shape .2, 3. but 2 values"):
        nn.load_parameters(io.BytesIO(proto.SerializeToString()), extension=".protobuf")
    assert not nn.get_parameters(grad_only=False)


# ------------------------------------------------------------------------------------ atomic
def test_failed_write_keeps_the_old_file(tmp_path):
    path = str(tmp_path / "p.h5")
    _make_params()
    nn.save_parameters(path)
    before = open(path, "rb").read()
    with pytest.raises(RuntimeError, match="crash mid-save"):
        with atomic_path(path) as tmp:
            open(tmp, "wb").write(b"partial")
            raise RuntimeError("crash mid-save")
    assert open(path, "rb").read() == before
    assert os.listdir(str(tmp_path)) == ["p.h5"]
    write_bytes(path, b"new")
    assert open(path, "rb").read() == b"new" and os.listdir(str(tmp_path)) == ["p.h5"]


# ------------------------------------------------------------------------------------ solver states
def _expected_states():
    arrays = np.load(fixture("adam_states.npz"))
    names = sorted({k.rsplit("/", 1)[0] for k in arrays.files})
    return arrays, names


@pytest.mark.parametrize("name", ["adam_states.h5", "adam_states.protobuf"])
def test_reads_nnabla_solver_states(name):
    arrays, names = _expected_states()
    states = solver_states.load_states(fixture(name))
    assert sorted(states) == names
    for pname, state in states.items():
        assert state.t == int(arrays[pname + "/t"]) == 3
        assert sorted(state.pstate) == ["mean", "var"]
        for sname, value in state.pstate.items():
            np.testing.assert_allclose(value, arrays[pname + "/" + sname], rtol=1e-6)


@pytest.mark.parametrize("ext", [".h5", ".protobuf"])
def test_solver_states_round_trip(tmp_path, ext):
    rng = np.random.RandomState(0)
    states = {"fc/W": solver_states.SolverStateData(5, {"m": rng.randn(2, 3).astype(np.float32),
                                                        "v": rng.rand(2, 3).astype(np.float32)}),
              "fc/b": (5, {"m": np.zeros(3, np.float32), "v": np.ones(3, np.float32)})}
    path = str(tmp_path / ("s" + ext))
    solver_states.save_states(path, states)
    back = solver_states.load_states(path)
    assert list(back) == ["fc/W", "fc/b"]
    for k, (t, pstate) in states.items():
        assert back[k].t == t and list(back[k].pstate) == ["m", "v"]
        for s in pstate:
            np.testing.assert_array_equal(back[k].pstate[s], pstate[s])
    if ext == ".h5":
        with h5py.File(path, "r") as f:
            assert f["fc/W/t"].dtype == np.int64 and int(f["fc/W"].attrs["index"]) == 0
            assert int(f["fc/b"].attrs["index"]) == 1 and int(f["fc/W/v"].attrs["index"]) == 1


def test_bad_solver_state_files(tmp_path):
    p = tmp_path / "s.h5"
    p.write_bytes(b"nonsense")
    with pytest.raises(FileFormatError, match="s.h5"):
        solver_states.load_states(str(p))
    with pytest.raises(FileFormatError, match="no 't' dataset"):
        solver_states.load_states(fixture("mlp_params.h5"))
