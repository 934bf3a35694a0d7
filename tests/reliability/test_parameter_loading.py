"""Parameters are never lost or half-applied by a load (issue 9, item 2)."""
import io
import os
import zipfile

import h5py
import numpy as np
import pytest

import nnabla_jit as nn
from nnabla_jit.parameter import get_parameter, set_parameter
from nnabla_jit.serialization import nnp as nnp_io
from nnabla_jit.serialization.files import FileFormatError
from nnabla_jit.serialization.proto import nnabla_pb2
from nnabla_jit.utils.load import load
from nnabla_jit.utils.nnp_graph import NnpLoader

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")
MLP = os.path.join(FIXTURES, "mlp.nnp")


def rewrite_nnp(path, network=None, version=None, drop=(), extra=()):
    """A copy of mlp.nnp with its network text passed through ``network``, another
    nnp_version.txt, members dropped or added."""
    src = zipfile.ZipFile(MLP)
    with zipfile.ZipFile(path, "w") as out:
        for name in src.namelist():
            if name in drop:
                continue
            data = src.read(name)
            if name.endswith(".nntxt") and network is not None:
                data = network(data.decode()).encode()
            if name == "nnp_version.txt" and version is not None:
                data = version.encode()
            out.writestr(name, data)
        for name, data in extra:
            out.writestr(name, data)
    return str(path)


def param(name):
    return get_parameter(name)


def test_load_with_unknown_function_leaves_parameters_untouched(tmp_path):
    load(MLP)
    w = param("fc1/affine/W")
    w.d = 42.0
    bad = rewrite_nnp(tmp_path / "bad.nnp",
                      network=lambda t: t.replace('type: "Tanh"', 'type: "NoSuchFunction"'))
    with pytest.raises(ValueError, match="NoSuchFunction"):
        load(bad)
    assert param("fc1/affine/W") is w
    assert np.all(w.d == 42.0)


def test_load_failing_while_building_undoes_every_change(tmp_path):
    """A network that reads well but cannot be built (an affine whose weight has the wrong
    shape) restores the values, the set of parameters and the default context."""
    nn.clear_parameters()
    keep = nn.Variable.from_numpy_array(np.full((2,), 3.0, np.float32))
    set_parameter("fc1/affine/W", nn.Variable.from_numpy_array(np.full((5, 8), 7.0, np.float32)))
    set_parameter("other", keep)
    before_ctx = nn.get_current_context()
    bad = rewrite_nnp(tmp_path / "unbuildable.nnp",
                      network=lambda t: t.replace("base_axis: 1", "base_axis: 5", 1))
    with pytest.raises(ValueError, match="Affine: base_axis 5 is out of range"):
        load(bad)
    assert sorted(nn.get_parameters(grad_only=False)) == ["fc1/affine/W", "other"]
    assert np.all(param("fc1/affine/W").d == 7.0)
    assert param("other") is keep
    assert nn.get_current_context() == before_ctx


def test_a_name_in_the_file_never_replaces_a_scope_holding_parameters(tmp_path):
    set_parameter("a/b/c", nn.Variable.from_numpy_array(np.ones(3, np.float32)))
    path = str(tmp_path / "ab.h5")
    nn.save_parameters(path, {"a/b": nn.Variable.from_numpy_array(np.zeros(2, np.float32))})
    with pytest.raises(FileFormatError, match="'a/b' would replace the scope 'a/b'.*a/b/c"):
        nn.load_parameters(path)
    assert list(nn.get_parameters(grad_only=False)) == ["a/b/c"]
    # a longer name that merely starts with the same characters is another parameter
    set_parameter("a/bW", nn.Variable.from_numpy_array(np.ones(2, np.float32)))
    nn.save_parameters(path, {"a/b2": nn.Variable.from_numpy_array(np.zeros(2, np.float32))})
    nn.load_parameters(path)
    assert sorted(nn.get_parameters(grad_only=False)) == ["a/b/c", "a/b2", "a/bW"]


def test_get_network_refuses_a_network_whose_parameters_are_missing(tmp_path):
    path = rewrite_nnp(tmp_path / "noparams.nnp", drop=("parameter.h5",))
    loader = NnpLoader(path)
    with pytest.raises(ValueError, match=r"network 'mlp' needs parameters .*noparams\.nnp"
                                         r".*fc1/affine/W, fc1/affine/b"):
        loader.get_network("mlp", batch_size=2)
    assert not nn.get_parameters(grad_only=False)


@pytest.mark.parametrize("batch_size", [0, -1, -3])
def test_batch_size_must_be_positive(batch_size):
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got {}".format(
            batch_size)):
        NnpLoader(MLP).get_network("mlp", batch_size=batch_size)
    with pytest.raises(ValueError, match="load: batch_size must be a positive integer"):
        load(MLP, batch_size=batch_size)
    with pytest.raises(TypeError, match="batch_size must be a positive integer or None, got 2.5"):
        NnpLoader(MLP).get_network("mlp", batch_size=2.5)


def _h5(path, name, values):
    with h5py.File(path, "w") as f:
        f[name] = values
        f[name].attrs["need_grad"] = True
        f[name].attrs["index"] = 0


def test_loaded_values_take_the_type_of_the_existing_parameter(tmp_path):
    w = nn.Variable.from_numpy_array(np.ones(3, np.float32))
    set_parameter("w", w)
    _h5(tmp_path / "f64.h5", "w", np.arange(3.0))
    nn.load_parameters(str(tmp_path / "f64.h5"))
    assert param("w") is w and w.d.dtype == np.float32
    np.testing.assert_array_equal(w.d, [0, 1, 2])
    # floats into an integer parameter would be truncated: refused, the value kept
    n = nn.Variable.from_numpy_array(np.array([4, 5, 6], np.int32))
    set_parameter("w", n)
    _h5(tmp_path / "f32.h5", "w", np.array([1.5, 2.5, 3.5], np.float32))
    with pytest.raises(FileFormatError, match="'w' holds float32 values in the file but is int32"):
        nn.load_parameters(str(tmp_path / "f32.h5"))
    assert n.d.dtype == np.int32
    np.testing.assert_array_equal(n.d, [4, 5, 6])


def test_a_new_parameter_keeps_the_file_type(tmp_path):
    _h5(tmp_path / "f64.h5", "v", np.arange(3.0))
    nn.load_parameters(str(tmp_path / "f64.h5"))
    assert param("v").d.dtype == np.float64


def test_duplicate_names_in_a_protobuf_file_are_an_error(tmp_path):
    proto = nnabla_pb2.NNablaProtoBuf()
    for value in (0.0, 1.0):
        p = proto.parameter.add(variable_name="w", need_grad=True)
        p.shape.dim.extend([3])
        p.data.extend([value] * 3)
    path = tmp_path / "dup.protobuf"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(FileFormatError, match="dup.protobuf: parameter 'w' is given twice"):
        nn.load_parameters(str(path))
    assert not nn.get_parameters(grad_only=False)


def test_unknown_nnp_version_is_refused_naming_it(tmp_path):
    path = rewrite_nnp(tmp_path / "v9.nnp", version="9.9\n")
    with pytest.raises(FileFormatError, match=r"v9\.nnp: unsupported nnp_version '9\.9'"):
        NnpLoader(path)
    with pytest.raises(FileFormatError, match="unsupported nnp_version '9.9'"):
        nn.load_parameters(path)
    assert NnpLoader(rewrite_nnp(tmp_path / "v01.nnp", version="0.1\n")).get_network_names() == ["mlp"]


def test_an_empty_protobuf_parameter_file_loads_as_empty(tmp_path):
    path = str(tmp_path / "empty.protobuf")
    nn.save_parameters(path)           # an empty parameter set: a zero-byte file, as nnabla's
    assert os.path.getsize(path) == 0
    set_parameter("kept", nn.Variable.from_numpy_array(np.ones(2, np.float32)))
    nn.load_parameters(path)
    assert list(nn.get_parameters(grad_only=False)) == ["kept"]


def test_nnp_members_are_read_with_a_size_limit(tmp_path, monkeypatch):
    """A highly compressed member is refused before it is decompressed; members a loader does
    not use are never decompressed at all."""
    monkeypatch.setattr(nnp_io, "MIN_MEMBER_LIMIT", 1 << 20)
    zeros = b"\0" * (8 << 20)
    path = str(tmp_path / "bomb.nnp")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in zipfile.ZipFile(MLP).namelist():
            z.writestr(name, zipfile.ZipFile(MLP).read(name))
        z.writestr("junk.bin", zeros)
    assert os.path.getsize(path) < 200_000
    assert NnpLoader(path).get_network_names() == ["mlp"]     # junk.bin skipped
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as z:
        z.writestr("extra.h5", zeros)
    with pytest.raises(FileFormatError, match="member 'extra.h5' expands beyond .* zip bomb"):
        NnpLoader(path)
    with pytest.raises(FileFormatError, match="zip bomb"):
        nn.load_parameters(path)
    assert not nn.get_parameters(grad_only=False)


def test_nnp_read_from_a_file_object_is_member_by_member_too(tmp_path):
    data = io.BytesIO(open(MLP, "rb").read())
    contents = nnp_io.read([data], extension=".nnp")
    assert [e.name for e in contents.parameters][:1] == ["fc1/affine/W"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_a_permission_error_names_the_target_not_the_temporary_file(tmp_path):
    directory = tmp_path / "readonly"
    directory.mkdir()
    directory.chmod(0o500)
    target = str(directory / "params.h5")
    set_parameter("w", nn.Variable.from_numpy_array(np.ones(2, np.float32)))
    try:
        with pytest.raises(PermissionError, match="cannot write") as err:
            nn.save_parameters(target)
    finally:
        directory.chmod(0o700)
    assert "cannot write {}".format(target) in str(err.value)
    assert ".tmp" not in str(err.value)


def test_an_os_error_on_the_temporary_file_is_reported_for_the_target(tmp_path, monkeypatch):
    """The same, where the test runs as root: the temporary file cannot be created."""
    import tempfile

    def refuse(prefix, suffix, dir):
        raise PermissionError(13, "Permission denied", os.path.join(dir, prefix + "x" + suffix))
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    target = str(tmp_path / "params.h5")
    set_parameter("w", nn.Variable.from_numpy_array(np.ones(2, np.float32)))
    with pytest.raises(PermissionError, match="cannot write {}: Permission denied".format(target)):
        nn.save_parameters(target)
