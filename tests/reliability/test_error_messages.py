"""Clear errors where a user can err: one line naming the argument and the value, never a deep
IndexError / OverflowError / numpy traceback (issue 9, item 4)."""
import subprocess
import sys

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit.serialization.files import FileFormatError
from nnabla_jit.utils.data_iterator import data_iterator_csv_dataset


def test_header_only_csv(tmp_path):
    path = tmp_path / "header.csv"
    path.write_text("x:image,y:label\n")
    with pytest.raises(ValueError, match=r"header\.csv: the dataset file has a header line but no "
                                         r"examples"):
        data_iterator_csv_dataset(str(path), 2, shuffle=False)


def test_non_utf8_csv_names_file_line_and_encoding(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("x,y\n1,2\ncaf\xe9,3\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.csv, line 3: byte 0xe9 at column 4 is not "
                                         r"UTF-8 \(encoding tried: utf-8-sig\)"):
        data_iterator_csv_dataset(str(path), 2, shuffle=False)


@pytest.mark.parametrize("axis", [4, 3, -4])
def test_split_axis_out_of_range(axis):
    with pytest.raises(ValueError, match="Split: axis {} is out of range for an input of 3 "
                                         "dimensions".format(axis)):
        F.split(nn.Variable((2, 3, 4)), axis=axis)


@pytest.mark.parametrize("call, message", [
    (lambda x: PF.convolution(x, 2, (0, 0)),
     r"PF.convolution: kernel must be a positive integer or a tuple of them, got \(0, 0\)"),
    (lambda x: PF.convolution(x, 0, (3, 3)),
     r"PF.convolution: outmaps must be a positive integer, got 0"),
    (lambda x: PF.convolution(x, 2, (3, 3), group=0),
     r"PF.convolution: group must be a positive integer, got 0"),
    (lambda x: PF.affine(x, -1), r"PF.affine: n_outmaps must be a positive integer or a tuple "
                                 r"of them, got -1"),
    (lambda x: PF.affine(x, (2, 0)), r"PF.affine: n_outmaps .* got \(2, 0\)"),
    (lambda x: PF.affine(x, 0.5), r"PF.affine: n_outmaps .* got 0.5"),   # truncates to 0
    (lambda x: PF.affine(x, 3, base_axis=4), r"PF.affine: base_axis 4 is out of range for an "
                                             r"input of shape \(2, 3, 4, 4\)"),
    (lambda x: PF.embed(x, 0, 3), r"PF.embed: n_inputs must be a positive integer, got 0"),
])
def test_parametric_sizes_are_checked_before_any_parameter_exists(call, message):
    with pytest.raises(ValueError, match=message):
        call(nn.Variable((2, 3, 4, 4)))
    assert not nn.get_parameters(grad_only=False)


def test_text_into_a_variable():
    x = nn.Variable((4, 3))
    with pytest.raises(TypeError, match=r"Variable.d: cannot store text values \(an array of "
                                        r"dtype <U1 and shape \(4, 3\)\); numbers expected"):
        x.d = [["a"] * 3] * 4
    with pytest.raises(TypeError, match="NdArray.data: cannot store Python object values"):
        x.data.data = [[None] * 3] * 4
    with pytest.raises(ValueError, match="Variable.d: the value is not an array of numbers"):
        x.d = [[1, 2, 3], [4]]


def test_onnx_initializer_whose_bytes_do_not_match_its_dims(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from nnabla_jit.serialization.onnx import import_onnx
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], b"\0" * 24, raw=True)
    w.raw_data = b"\0" * 20
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    path = tmp_path / "short.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                     .SerializeToString())
    with pytest.raises(FileFormatError, match=r"short\.onnx: initializer 'w' has dims \(2, 3\) "
                                              r"\(6 float32 values, 24 bytes\) but 20 bytes"):
        import_onnx(str(path))
    assert onnx is not None


@pytest.mark.parametrize("argv, message", [
    (["forward", "-c", "m.nnp", "-d", "d.csv", "-o", "out", "-b", "-3"],
     "argument -b/--batch_size: must be a positive integer, or -1 for the file's batch size, got -3"),
    (["convert", "--batch-size", "0", "a.nnp", "b.nnp"],
     "argument -b/--batch-size: must be a positive integer, or -1 for the file's batch size, got 0"),
    (["infer", "-c", "m.nnp", "-b", "two", "in.bin"],
     "argument -b/--batch_size: must be a positive integer or -1, got 'two'"),
])
def test_cli_batch_size(argv, message):
    run = subprocess.run([sys.executable, "-m", "nnabla_jit"] + argv, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr
