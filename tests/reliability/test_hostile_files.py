"""Hostile files for every loader: truncated, zero-byte, random bytes, a zip bomb, a wrong
version, a directory, a unicode path (issue 9, item 5).

A loader given a bad file raises an error of the documented kinds (``FileFormatError`` -- a
``ValueError`` --, ``FileNotFoundError`` or another ``OSError``) whose message names the file;
it never raises anything else and never changes the current parameters.
"""
import os
import re
import shutil
import zipfile

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.solvers as S
from nnabla_jit.parameter import set_parameter
from nnabla_jit.serialization import nnp as nnp_io, solver_states
from nnabla_jit.utils.data_iterator import data_iterator_csv_dataset
from nnabla_jit.utils.load import load
from nnabla_jit.utils.nnp_graph import NnpLoader

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")


def _load_states(path):
    """An Adam solver over the parameters of the states fixture loads ``path``."""
    shapes = {k: s.pstate["mean"].shape for k, s in
              solver_states.load_states(os.path.join(FIXTURES, "adam_states.h5")).items()}
    solver = S.Adam()
    solver.set_parameters({k: nn.Variable.from_numpy_array(np.zeros(shape, np.float32))
                           for k, shape in shapes.items()})
    solver.load_states(path)


def _onnx(path):
    from nnabla_jit.serialization.onnx import import_onnx
    import_onnx(path)


def _csv(path):
    with data_iterator_csv_dataset(path, 2, shuffle=False) as it:
        it.next()


# loader name -> (load function, a valid file of its kind in tests/fixtures or made here)
LOADERS = {
    "load_parameters.h5": (nn.load_parameters, "mlp_params.h5"),
    "load_parameters.protobuf": (nn.load_parameters, "mlp_params.protobuf"),
    "load_parameters.nntxt": (nn.load_parameters, "mlp.nntxt"),
    "load_parameters.nnp": (nn.load_parameters, "mlp.nnp"),
    "utils.load.nnp": (load, "mlp.nnp"),
    "utils.load.nntxt": (load, "mlp.nntxt"),
    "NnpLoader.nnp": (NnpLoader, "mlp.nnp"),
    "load_states.h5": (_load_states, "adam_states.h5"),
    "load_states.protobuf": (_load_states, "adam_states.protobuf"),
    "import_onnx": (_onnx, "model.onnx"),
    "csv_dataset": (_csv, "train_data.csv"),
}


def _make_onnx(path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], np.ones(6, np.float32).tobytes(),
                           raw=True)
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return onnx


def valid_file(loader, directory, name=None):
    """A copy of the loader's valid file in ``directory`` (under ``name`` if given)."""
    source = LOADERS[loader][1]
    target = os.path.join(str(directory), name or source)
    if source == "model.onnx":
        _make_onnx(target)
    else:
        shutil.copyfile(os.path.join(FIXTURES, source), target)
    return target


def expect_clear_failure(loader, path):
    """Load ``path``: a FileFormatError/ValueError or OSError naming the file, the parameters
    untouched."""
    keep = nn.Variable.from_numpy_array(np.full((2,), 5.0, np.float32))
    set_parameter("kept", keep)
    before = list(nn.get_parameters(grad_only=False))
    with pytest.raises((ValueError, OSError), match=re.escape(os.path.basename(path))) as err:
        LOADERS[loader][0](path)
    assert os.path.basename(path) in str(err.value), str(err.value)
    assert list(nn.get_parameters(grad_only=False)) == before
    assert np.all(keep.d == 5.0)


def _damage(path, kind):
    data = open(path, "rb").read()
    if kind == "truncated":
        data = data[:len(data) // 2]
    elif kind == "zero-byte":
        data = b""
    elif kind == "random":
        data = np.random.RandomState(7).bytes(max(len(data), 64))
    with open(path, "wb") as f:
        f.write(data)


# A zero-byte .protobuf or text file is an empty message (nnabla writes an empty parameter set
# so); for these loaders it loads as nothing rather than failing.
EMPTY_IS_VALID = {"load_parameters.protobuf", "load_parameters.nntxt"}


@pytest.mark.parametrize("kind", ["truncated", "zero-byte", "random"])
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_damaged_file(loader, kind, tmp_path):
    path = valid_file(loader, tmp_path)
    _damage(path, kind)
    if kind == "zero-byte" and loader in EMPTY_IS_VALID:
        LOADERS[loader][0](path)
        assert not nn.get_parameters(grad_only=False)
        return
    if kind == "zero-byte" and loader == "utils.load.nntxt":
        info = load(path)           # an empty message: no networks, no parameters
        assert not info.networks and not nn.get_parameters(grad_only=False)
        return
    expect_clear_failure(loader, path)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_directory_in_place_of_a_file(loader, tmp_path):
    path = os.path.join(str(tmp_path), LOADERS[loader][1])
    os.mkdir(path)
    expect_clear_failure(loader, path)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_missing_file(loader, tmp_path):
    path = os.path.join(str(tmp_path), "absent_" + LOADERS[loader][1])
    expect_clear_failure(loader, path)


UNICODE_NAME = "パラメータ_ü_ñ"


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_unicode_path(loader, tmp_path):
    directory = tmp_path / "データ"
    directory.mkdir()
    ext = os.path.splitext(LOADERS[loader][1])[1]
    path = valid_file(loader, directory, UNICODE_NAME + ext)
    if loader == "csv_dataset":
        # the cells of a CSV dataset here are numbers; the file itself sits at a unicode path
        _csv(path)
    else:
        LOADERS[loader][0](path)
    nn.clear_parameters()
    _damage(path, "random")
    expect_clear_failure(loader, path)


NNP_LOADERS = ["load_parameters.nnp", "utils.load.nnp", "NnpLoader.nnp"]


@pytest.mark.parametrize("loader", NNP_LOADERS)
def test_zip_bomb(loader, tmp_path, monkeypatch):
    """A member that expands far beyond its compressed size is refused before it is read (the
    limit is lowered so that the archive stays CI-sized)."""
    monkeypatch.setattr(nnp_io, "MIN_MEMBER_LIMIT", 1 << 20)
    path = str(tmp_path / "bomb.nnp")
    source = zipfile.ZipFile(os.path.join(FIXTURES, "mlp.nnp"))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in source.namelist():
            data = source.read(name)
            z.writestr(name, data + b"\0" * (16 << 20) if name == "parameter.h5" else data)
    assert os.path.getsize(path) < 100_000
    expect_clear_failure(loader, path)


@pytest.mark.parametrize("loader", NNP_LOADERS)
@pytest.mark.parametrize("version", ["9.9", "", "0.2-beta", "\xff\xfe"])
def test_wrong_nnp_version(loader, version, tmp_path):
    path = str(tmp_path / "version.nnp")
    source = zipfile.ZipFile(os.path.join(FIXTURES, "mlp.nnp"))
    with zipfile.ZipFile(path, "w") as z:
        for name in source.namelist():
            z.writestr(name, version.encode("latin-1") if name == "nnp_version.txt"
                       else source.read(name))
    expect_clear_failure(loader, path)
