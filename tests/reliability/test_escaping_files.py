"""No file access outside what the user named (issue 22, item 1): ONNX external data, HDF5
external storage, and names taken from files that would become paths outside the output folder.
"""
import os
import re
import tarfile
import threading
import zipfile

import h5py
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.solvers as S
from nnabla_jit.parameter import set_parameter
from nnabla_jit.serialization.files import FileFormatError
from nnabla_jit.utils.cli import main
from nnabla_jit.utils.load import load
from nnabla_jit.utils.nnp_graph import NnpLoader

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")
SECRET = b"TOP SECRET KEY 0123456789abcdef!"
WEIGHTS = np.arange(6, dtype=np.float32)


# ------------------------------------------------------------------------------ ONNX external data
def _onnx_model(directory, location, offset=None, length=None):
    """model.onnx in ``directory``: y = x + w, w (2x3 float) in external data at ``location``."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    os.makedirs(str(directory), exist_ok=True)
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            w.external_data.add(key=key, value=value)
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(str(directory), "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def _import(path):
    from nnabla_jit.serialization.onnx import import_onnx
    return import_onnx(path)


def _outside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    WEIGHTS.tofile(str(outside / "w.bin"))
    return outside


def test_onnx_external_data_symlink_to_a_file_outside_is_refused(tmp_path):
    outside = _outside(tmp_path)
    path = _onnx_model(tmp_path / "model", "w.bin")
    os.symlink(str(outside / "w.bin"), str(tmp_path / "model" / "w.bin"))
    with pytest.raises(FileFormatError, match=r"model\.onnx: initializer 'w' has external data at "
                                              r"'w\.bin', which leads outside the model's folder"):
        _import(path)


def test_onnx_external_data_through_a_symlinked_directory_outside_is_refused(tmp_path):
    outside = _outside(tmp_path)
    path = _onnx_model(tmp_path / "model", "sub/w.bin")
    os.symlink(str(outside), str(tmp_path / "model" / "sub"))
    with pytest.raises(FileFormatError, match=r"'sub/w\.bin', which leads outside the model's folder"):
        _import(path)


def test_onnx_external_data_symlink_inside_the_folder_is_read(tmp_path):
    path = _onnx_model(tmp_path / "model", "w.bin")
    WEIGHTS.tofile(str(tmp_path / "model" / "real.bin"))
    os.symlink("real.bin", str(tmp_path / "model" / "w.bin"))
    np.testing.assert_array_equal(_import(path).parameters["w"].d.ravel(), WEIGHTS)


def test_onnx_external_data_fifo_is_refused_without_opening_it(tmp_path):
    path = _onnx_model(tmp_path / "model", "w.bin")
    fifo = str(tmp_path / "model" / "w.bin")
    os.mkfifo(fifo)
    raised = []

    def run():
        try:
            _import(path)
        except Exception as e:   # noqa: BLE001 -- looked at below
            raised.append(e)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    if thread.is_alive():   # blocked in open(): a writer lets it go, then the test fails
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail("the import opened the FIFO and waited for a writer")
    assert len(raised) == 1 and isinstance(raised[0], FileFormatError)
    assert re.search(r"model\.onnx: initializer 'w': external data .*w\.bin is a FIFO, not a "
                     r"regular file", str(raised[0])), raised[0]


def test_onnx_external_data_directory_is_refused(tmp_path):
    path = _onnx_model(tmp_path / "model", "w.bin")
    os.mkdir(str(tmp_path / "model" / "w.bin"))
    with pytest.raises(FileFormatError, match=r"initializer 'w': external data .*w\.bin is a "
                                              r"directory, not a regular file"):
        _import(path)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mknod needs root")
def test_onnx_external_data_device_is_refused(tmp_path):
    path = _onnx_model(tmp_path / "model", "w.bin")
    os.mknod(str(tmp_path / "model" / "w.bin"), 0o600 | 0o020000, os.makedev(1, 5))   # /dev/zero
    with pytest.raises(FileFormatError, match=r"w\.bin is a character device, not a regular file"):
        _import(path)


@pytest.mark.parametrize("offset, length, message", [
    ("abc", None, r"initializer 'w': external data offset 'abc' is not a non-negative integer"),
    ("-8", None, r"initializer 'w': external data offset '-8' is not a non-negative integer"),
    ("0", "xyz", r"initializer 'w': external data length 'xyz' is not a non-negative integer"),
    ("1000", None, r"initializer 'w': external data .*w\.bin \(24 bytes\) ends before offset 1000 "
                   r"\+ 24 bytes"),
    ("16", None, r"initializer 'w': external data .*w\.bin \(24 bytes\) ends before offset 16 "
                 r"\+ 24 bytes"),
    ("0", "8", r"initializer 'w' has dims \(2, 3\) \(24 bytes\) but its external data length is 8"),
])
def test_onnx_external_data_bad_offset_or_length_names_file_tensor_and_value(
        tmp_path, offset, length, message):
    path = _onnx_model(tmp_path / "model", "w.bin", offset, length)
    WEIGHTS.tofile(str(tmp_path / "model" / "w.bin"))
    with pytest.raises(FileFormatError, match=r"model\.onnx: " + message):
        _import(path)


# ------------------------------------------------------------------------------ HDF5 external storage
def _external_h5(path, secret_file):
    """A parameter file whose dataset 'w' is stored in ``secret_file`` (HDF5 external storage)."""
    with h5py.File(str(path), "w") as f:
        ds = f.create_dataset("w", shape=(16,), dtype="u1", external=[(str(secret_file), 0, 16)])
        ds.attrs["need_grad"] = True
        ds.attrs["index"] = 0
    return str(path)


def _secret(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(SECRET)
    return secret


def _nnp_with_parameter_file(path, h5_path):
    with zipfile.ZipFile(os.path.join(FIXTURES, "mlp.nnp")) as src, zipfile.ZipFile(str(path), "w") as z:
        for name in src.namelist():
            data = open(h5_path, "rb").read() if name == "parameter.h5" else src.read(name)
            z.writestr(name, data)
    return str(path)


def _untouched(call, path, match):
    keep = nn.Variable.from_numpy_array(np.full((2,), 5.0, np.float32))
    set_parameter("kept", keep)
    with pytest.raises(FileFormatError, match=match) as err:
        call(path)
    assert "TOP SECRET" not in str(err.value)
    assert list(nn.get_parameters(grad_only=False)) == ["kept"]


EXTERNAL = r"dataset 'w' keeps its data in another file \(HDF5 external storage: .*secret\.txt\); refused"


def test_hdf5_external_storage_is_refused(tmp_path):
    path = _external_h5(tmp_path / "ext.h5", _secret(tmp_path))
    _untouched(nn.load_parameters, path, r"ext\.h5: " + EXTERNAL)


@pytest.mark.parametrize("loader", [nn.load_parameters, load, NnpLoader])
def test_hdf5_external_storage_inside_an_nnp_is_refused(tmp_path, loader):
    h5 = _external_h5(tmp_path / "ext.h5", _secret(tmp_path))
    path = _nnp_with_parameter_file(tmp_path / "ext.nnp", h5)
    _untouched(loader, path, r"ext\.nnp:parameter\.h5: " + EXTERNAL)


def test_hdf5_virtual_dataset_is_refused(tmp_path):
    source = tmp_path / "source.h5"
    with h5py.File(str(source), "w") as f:
        f["data"] = np.arange(8, dtype=np.float32)
    layout = h5py.VirtualLayout(shape=(8,), dtype="f4")
    layout[:] = h5py.VirtualSource(str(source), "data", shape=(8,))
    path = str(tmp_path / "vds.h5")
    with h5py.File(path, "w") as f:
        ds = f.create_virtual_dataset("w", layout)
        ds.attrs["need_grad"] = True
        ds.attrs["index"] = 0
    _untouched(nn.load_parameters, path, r"vds\.h5: dataset 'w' is a virtual dataset \(its data "
                                         r"lies in other files\); refused")


def test_hdf5_external_storage_in_solver_states_is_refused(tmp_path):
    secret = _secret(tmp_path)
    path = str(tmp_path / "states.h5")
    with h5py.File(path, "w") as f:
        group = f.require_group("w")
        group.attrs["index"] = 0
        ds = group.create_dataset("m", shape=(4,), dtype="f4", external=[(str(secret), 0, 16)])
        ds.attrs["index"] = 0
        group["t"] = np.int64(1)
    solver = S.Adam()
    solver.set_parameters({"w": nn.Variable.from_numpy_array(np.zeros(4, np.float32))})
    with pytest.raises(FileFormatError, match=r"states\.h5: dataset 'w/m' keeps its data in "
                                              r"another file"):
        solver.load_states(path)


# ------------------------------------------------------------------------------ names from files
def _renamed_network(tmp_path, new_name, ext):
    """mlp.nnp / mlp.nntxt with its network (and executor's network_name) renamed."""
    if ext == ".nntxt":
        text = open(os.path.join(FIXTURES, "mlp.nntxt")).read().replace('"mlp"', '"{}"'.format(new_name))
        path = tmp_path / "renamed.nntxt"
        path.write_text(text)
        return str(path)
    path = str(tmp_path / "renamed.nnp")
    with zipfile.ZipFile(os.path.join(FIXTURES, "mlp.nnp")) as src, zipfile.ZipFile(path, "w") as z:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith(".nntxt"):
                data = data.replace(b'"mlp"', '"{}"'.format(new_name).encode())
            z.writestr(name, data)
    return path


def _files_under(root):
    return sorted(os.path.relpath(os.path.join(d, n), str(root)) for d, _, names in os.walk(str(root))
                  for n in names)


def _hostile_name(name, tmp_path):
    # an absolute name points into tmp_path, where a failing test can be seen writing
    return str(tmp_path / "evil") if name == "absolute" else name


@pytest.mark.parametrize("name", ["../../evil", "absolute", "..", "a/../../evil"])
def test_draw_graph_never_writes_outside_its_output_folder(tmp_path, capsys, name):
    name = _hostile_name(name, tmp_path)
    model = _renamed_network(tmp_path, name, ".nntxt")
    work = tmp_path / "a" / "b"
    out = work / "out"
    before = _files_under(tmp_path)
    status = main(["draw_graph", "-o", str(out), "-f", "svg", model])
    err = capsys.readouterr().err
    assert status == 1
    assert "network name '{}' in {} cannot be a file name".format(name, model) in err
    assert _files_under(tmp_path) == before


def test_draw_graph_names_with_spaces_still_work(tmp_path, capsys):
    model = _renamed_network(tmp_path, "my net", ".nntxt")
    assert main(["draw_graph", "-o", str(tmp_path / "out"), "-f", "svg", model]) == 0
    assert os.listdir(str(tmp_path / "out")) == ["my_net.svg"]


@pytest.mark.parametrize("name", ["../../evil", "absolute"])
def test_convert_to_csrc_never_writes_outside_its_output_folder(tmp_path, capsys, name):
    name = _hostile_name(name, tmp_path)
    model = _renamed_network(tmp_path, name, ".nnp")
    out = tmp_path / "a" / "b" / "out"
    before = _files_under(tmp_path)
    status = main(["convert", "-O", "CSRC", model, str(out)])
    err = capsys.readouterr().err
    assert status == 1
    assert "network name '{}' in {} cannot be a file name".format(name, model) in err
    assert _files_under(tmp_path) == before


# ------------------------------------------------------------------------------ create_tar / upload
def _dataset(tmp_path, cells):
    folder = tmp_path / "dataset"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "a.png").write_bytes(b"png inside")
    csv = folder / "data.csv"
    csv.write_text("x:image,y:label\n" + "".join("{},0\n".format(c) for c in ["images/a.png"] + cells))
    return str(csv)


def _outside_files(tmp_path):
    secret = tmp_path / "id_rsa"
    secret.write_bytes(SECRET)
    return secret


@pytest.mark.parametrize("how", ["absolute", "relative", "symlink"])
def test_create_tar_refuses_files_outside_the_csv_folder_and_lists_them(tmp_path, capsys, how):
    secret = _outside_files(tmp_path)
    if how == "absolute":
        cell = str(secret)
    elif how == "relative":
        cell = "../id_rsa"
    else:
        cell = "images/link.png"
    csv = _dataset(tmp_path, [cell])
    if how == "symlink":
        os.symlink(str(secret), str(tmp_path / "dataset" / "images" / "link.png"))
    tar = str(tmp_path / "out.tar")
    status = main(["create_tar", csv, tar])
    err = capsys.readouterr().err
    assert status == 1
    assert "data.csv names 1 file outside its folder {}".format(tmp_path / "dataset") in err
    assert str(secret) in err and "--allow-outside-files" in err
    assert not os.path.exists(tar)


def test_create_tar_packs_outside_files_with_the_flag(tmp_path, capsys):
    secret = _outside_files(tmp_path)
    csv = _dataset(tmp_path, [str(secret)])
    tar = str(tmp_path / "out.tar")
    assert main(["create_tar", "--allow-outside-files", csv, tar]) == 0
    with tarfile.open(tar) as t:
        names = t.getnames()
    assert "data/000000000001_id_rsa" in names and "data/000000000000_a.png" in names


def test_create_tar_inside_the_folder_needs_no_flag(tmp_path, capsys):
    csv = _dataset(tmp_path, [])
    tar = str(tmp_path / "out.tar")
    assert main(["create_tar", csv, tar]) == 0
    with tarfile.open(tar) as t:
        assert sorted(t.getnames()) == ["data/000000000000_a.png", "index.csv"]


def test_upload_refuses_files_outside_the_csv_folder_before_sending_anything(tmp_path, capsys):
    secret = _outside_files(tmp_path)
    csv = _dataset(tmp_path, [str(secret)])
    # an endpoint nobody answers on: reaching the network would fail with another message
    status = main(["upload", "-e", "http://127.0.0.1:9", "token", csv])
    err = capsys.readouterr().err
    assert status == 1
    assert "names 1 file outside its folder" in err and str(secret) in err
    assert "cannot reach" not in err
