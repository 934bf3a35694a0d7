"""The nnabla_jit command line (nnabla_cli's subcommands), run in-process through ``main``.

Reference outputs (tests/fixtures/train_mlp_forward.csv, train_mlp_result.nnp,
train_mlp_report.yml) were made by nnabla 1.39's nnabla_cli (see make_fixtures.py).
"""
import csv
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pytest

import nnabla_jit as nn
from nnabla_jit.serialization import nnp
from nnabla_jit.utils.cli import main

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def fixture(name):
    return os.path.join(FIXTURES, name)


def csv_iterator_available():
    from nnabla_jit.utils import data_iterator
    return hasattr(data_iterator, "data_iterator_csv_dataset")


needs_csv_iterator = pytest.mark.skipif(
    not csv_iterator_available(), reason="nnabla_jit.utils.data_iterator.data_iterator_csv_dataset "
                                         "is not written yet")


def run_cli(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# ------------------------------------------------------------------------------------ basics
def test_version_and_help(capsys):
    status, out, _ = run_cli(capsys, "version")
    assert status == 0 and out.startswith("Version:1.39.0")
    for command in ("train", "infer", "forward", "convert", "dump", "function_info",
                    "plot_series", "plot_timer", "draw_graph", "version"):
        with pytest.raises(SystemExit, match="0") as e:
            main([command, "--help"])
        assert e.value.code == 0
        assert "usage: nnabla_jit {}".format(command) in capsys.readouterr().out


def test_python_dash_m_entry_point():
    result = subprocess.run([sys.executable, "-m", "nnabla_jit", "version"], capture_output=True,
                            text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert result.returncode == 0 and "Version:" in result.stdout


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "usage: nnabla_jit" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ convert
@pytest.mark.parametrize("output, flags, members", [
    ("out.nnp", [], ["nnp_version.txt", "network.nntxt", "parameter.protobuf"]),
    ("out.nnp", ["--nnp-parameter-h5"], ["nnp_version.txt", "network.nntxt", "parameter.h5"]),
    ("out.nnp", ["--nnp-parameter-nntxt"], ["nnp_version.txt", "network.nntxt"]),
    ("out.nnp", ["--nnp-exclude-parameter"], ["nnp_version.txt", "network.nntxt"]),
    ("out.nntxt", [], None),
    ("out.protobuf", [], None),
])
def test_convert_nnp_formats(tmp_path, capsys, output, flags, members):
    out = str(tmp_path / output)
    status, _, err = run_cli(capsys, "convert", *flags, fixture("mlp.nnp"), out)
    assert status == 0, err
    if members is not None:
        assert zipfile.ZipFile(out).namelist() == members
    contents = nnp.read(out)
    assert [n.name for n in contents.proto.network] == ["mlp"]
    expected = {e.name: e.data for e in nnp.read(fixture("mlp.nnp")).parameters}
    got = {e.name: e.data for e in contents.parameters}
    if "--nnp-exclude-parameter" in flags:
        assert got == {}
    else:
        assert list(got) == list(expected)
        for k in got:
            np.testing.assert_array_equal(got[k], expected[k])


def test_convert_merges_inputs_and_sets_batch_size(tmp_path, capsys):
    out = str(tmp_path / "merged.nnp")
    status, _, err = run_cli(capsys, "convert", "-b", "2", fixture("mlp.nntxt"),
                             fixture("mlp_params.h5"), out)
    assert status == 0, err
    contents = nnp.read(out)
    assert contents.proto.network[0].batch_size == 2 and len(contents.parameters) == 6
    h5 = str(tmp_path / "params.h5")
    assert run_cli(capsys, "convert", out, h5)[0] == 0
    nn.load_parameters(h5)
    assert len(nn.get_parameters(grad_only=False)) == 6


def test_convert_errors(tmp_path, capsys):
    out = str(tmp_path / "o.nnp")
    shutil.copy(fixture("mlp.nnp"), out)
    status, _, err = run_cli(capsys, "convert", fixture("mlp.nnp"), out)
    assert status == 1 and "--force" in err
    assert run_cli(capsys, "convert", "-f", fixture("mlp.nnp"), out)[0] == 0
    status, _, err = run_cli(capsys, "convert", fixture("mlp.nnp"), str(tmp_path / "o.xyz"))
    assert status == 1 and "cannot tell the export format" in err
    status, _, err = run_cli(capsys, "convert", fixture("mlp.nnp"))
    assert status == 1 and "output file" in err
    bad = tmp_path / "bad.nnp"
    bad.write_bytes(b"garbage")
    status, _, err = run_cli(capsys, "convert", str(bad), str(tmp_path / "x.nnp"))
    assert status == 1 and "bad.nnp" in err and "zip" in err


def test_convert_to_onnx_goes_through_the_onnx_module(tmp_path, capsys):
    status, out, err = run_cli(capsys, "convert", fixture("mlp.nnp"), str(tmp_path / "m.onnx"))
    try:
        from nnabla_jit.serialization import onnx as onnx_io
    except ImportError:
        assert status == 1 and "ONNX support" in err
        return
    if hasattr(onnx_io, "export_nnp"):
        assert status == 0, err
        assert os.path.getsize(str(tmp_path / "m.onnx")) > 0
    else:
        assert status == 1 and "export_nnp" in err


# ------------------------------------------------------------------------------------ dump
def test_dump_summary(capsys):
    status, out, _ = run_cli(capsys, "dump", fixture("train_mlp.nnp"))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "  Optimizer[0]: optimizer"
    assert any("(Out)Loss" in l and "Name:loss" in l for l in lines)
    assert any(l.startswith("  Monitor  [0]: train_error") for l in lines)
    assert any("(Out)Output" in l and "Name:y" in l and "Shape:[-1, 3]" in l for l in lines)


def test_dump_functions_variables_and_verbose(capsys):
    status, out, _ = run_cli(capsys, "dump", "-F", "-V", fixture("mlp.nnp"))
    assert status == 0
    assert "Type: Affine               Name: @mlp/Affine" in out
    assert "Input1: Name: fc1/affine/W         Shape: [5, 8]" in out
    status, out, _ = run_cli(capsys, "dump", "-n", "fc2/affine/W", fixture("mlp.nnp"))
    assert "Variable Name: fc2/affine/W         Shape: [8, 6]" in out
    status, out, _ = run_cli(capsys, "dump", "-v", "--dump-limit", "1", fixture("mlp.nnp"))
    assert "NNP:network[0]:name: mlp" in out and "NNP has 1 network(s)." in out
    assert "NNP:network[0]:variable[1]" not in out      # limited to one item per list


# ------------------------------------------------------------------------------------ function_info
def test_function_info(tmp_path, capsys):
    from nnabla_jit.utils.inspection import op_status
    implemented = [r["name"] for r in op_status() if r["forward"] and r["category"] != "internal"]
    status, out, _ = run_cli(capsys, "function_info")
    assert status == 0 and out.split() == implemented
    status, out, err = run_cli(capsys, "function_info", "-f", "NNB", fixture("cnn.nnp"))
    assert status == 0
    assert out.splitlines()[0].startswith("nnabla-c-runtime currently support")
    assert {"Convolution", "MaxPooling", "Affine"} <= set(out.split())
    target = str(tmp_path / "f.txt")
    status, _, _ = run_cli(capsys, "function_info", "-o", target, fixture("mlp.nnp"))
    used = {"Affine", "Tanh", "ReLU", "MulScalar", "AddScalar", "Sigmoid", "SquaredError", "Mean"}
    assert set(open(target).read().split()) == used & set(implemented)
    status, _, err = run_cli(capsys, "function_info", "-f", "XYZ")
    assert status == 1 and "XYZ" in err


# ------------------------------------------------------------------------------------ plots
def test_plot_series_and_timer(tmp_path, capsys):
    series = tmp_path / "Training-loss.series.txt"
    series.write_text("0 1.5\n10 1.25\n20 0.75\n")
    timer = tmp_path / "Epoch-time.timer.txt"
    timer.write_text("10 0.5 10 0.5\n20 0.75 10 1.25\n")
    png = str(tmp_path / "s.png")
    assert run_cli(capsys, "plot_series", "-o", png, "-l", "A", "-x", "iter", "-T", "2",
                   str(series), str(series))[0] == 0
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    png2 = str(tmp_path / "t.png")
    for flags in ([], ["-e", "-u", "m"]):
        assert run_cli(capsys, "plot_timer", "-o", png2, *flags, str(timer))[0] == 0
        assert os.path.getsize(png2) > 1000
    bad = tmp_path / "bad.series.txt"
    bad.write_text("a b c\n")
    status, _, err = run_cli(capsys, "plot_series", "-o", png, str(bad))
    assert status == 1 and "bad.series.txt" in err
    status, _, err = run_cli(capsys, "plot_timer", "-o", png, str(series))
    assert status == 1 and "expected 4 columns" in err


def test_monitor_file_columns():
    from nnabla_jit.utils.cli.plot import read_monitor_file
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".timer.txt", delete=False) as f:
        f.write("10 0.5 10 0.5\n20 0.75 10 1.25\n")
    try:
        x, y = read_monitor_file(f.name, 3, 4)
        assert list(x) == [10, 20] and list(y) == [0.5, 1.25]
    finally:
        os.unlink(f.name)


# ------------------------------------------------------------------------------------ draw_graph
def test_draw_graph_svg_and_png(tmp_path, capsys, monkeypatch):
    from nnabla_jit.utils.cli import draw_graph
    monkeypatch.setattr(draw_graph, "_graphviz", lambda: None)   # the pure-Python drawing
    out = str(tmp_path / "draw")
    status, _, err = run_cli(capsys, "draw_graph", "-o", out, "-f", "svg", fixture("train_mlp.nnp"))
    assert status == 0, err
    assert sorted(os.listdir(out)) == ["runtime.svg", "training.svg"]
    root = ET.parse(os.path.join(out, "training.svg")).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    network = nnp.read(fixture("train_mlp.nnp")).proto.network[0]
    assert len(root.findall(ns + "rect")) == len(network.function) + 1        # + background
    assert len(root.findall(ns + "ellipse")) == len(network.variable)
    edges = sum(len(f.input) + len(f.output) for f in network.function)
    assert len(root.findall(ns + "path")) == edges
    texts = [t.text for t in root.iter(ns + "text")]
    assert "SquaredError" in texts and "(4, 5)" in texts
    status, _, _ = run_cli(capsys, "draw_graph", "-o", out, "-n", "runtime", fixture("train_mlp.nnp"))
    assert status == 0
    assert open(os.path.join(out, "runtime.png"), "rb").read(4) == b"\x89PNG"
    status, _, err = run_cli(capsys, "draw_graph", "-o", out, "-n", "nope", fixture("train_mlp.nnp"))
    assert status == 1 and "no network 'nope'" in err
    status, _, err = run_cli(capsys, "draw_graph", "-o", out, "-f", "pdf", fixture("mlp.nnp"))
    assert status == 1 and "graphviz" in err


def test_layout_keeps_layers_ordered():
    from nnabla_jit.utils.cli.graph_drawing import layout_network
    network = nnp.read(fixture("cnn.nnp")).proto.network[0]
    layout = layout_network(network)
    y = {n.key: n.y for n in layout.nodes}
    for a, b in layout.edges:
        assert y[a] < y[b], (a, b)            # every edge points down
    assert all(0 < n.x < layout.width and 0 < n.y < layout.height for n in layout.nodes)


# ------------------------------------------------------------------------------------ infer
def test_infer_binary_files(tmp_path, capsys):
    expected = np.load(fixture("mlp_io.npz"))
    x, t = str(tmp_path / "x.bin"), str(tmp_path / "t.bin")
    expected["x"].astype(np.float32).tofile(x)
    expected["t"].astype(np.float32).tofile(t)
    prefix = str(tmp_path / "out")
    status, _, err = run_cli(capsys, "infer", "-c", fixture("mlp.nnp"), "-b", "4", "-o", prefix, x, t)
    assert status == 0, err
    y = np.fromfile(prefix + "_0.bin", np.float32).reshape(4, 3)
    loss = np.fromfile(prefix + "_1.bin", np.float32)
    np.testing.assert_allclose(y, expected["y"], rtol=1e-5)
    np.testing.assert_allclose(loss, expected["loss"].reshape(1), rtol=1e-5)
    status, _, err = run_cli(capsys, "infer", "-c", fixture("mlp.nnp"), "-b", "4", x)
    assert status == 1 and "need 2 inputs" in err


# ------------------------------------------------------------------------------------ forward / train
@needs_csv_iterator
def test_forward_matches_nnabla_cli(tmp_path, capsys):
    data = str(tmp_path / "train_data.csv")
    shutil.copy(fixture("train_data.csv"), data)
    out = str(tmp_path / "out")
    status, _, err = run_cli(capsys, "forward", "-c", fixture("train_mlp.nnp"), "-d", data, "-o", out)
    assert status == 0, err
    got = list(csv.reader(open(os.path.join(out, "output_result.csv"))))
    want = list(csv.reader(open(fixture("train_mlp_forward.csv"))))
    assert got[0] == want[0]
    assert len(got) == len(want) == 13
    np.testing.assert_allclose(np.array(got[1:], float), np.array(want[1:], float), rtol=1e-5, atol=1e-6)


def _train(tmp_path, capsys, *extra):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    shutil.copy(fixture("train_mlp.nnp"), str(work / "train_mlp.nnp"))
    shutil.copy(fixture("train_data.csv"), str(work / "train_data.csv"))
    cwd = os.getcwd()
    os.chdir(str(work))              # the dataset URI in the file is relative
    try:
        return run_cli(capsys, "train", "-c", "train_mlp.nnp", "-o", "out", *extra), work / "out"
    finally:
        os.chdir(cwd)


def _report(path):
    report = {}
    epoch = None
    for line in open(path):
        if not line.startswith(" "):
            epoch = int(line.strip().rstrip(":"))
            report[epoch] = {}
        else:
            k, v = line.strip().split(": ")
            report[epoch][k] = float(v)
    return report


@needs_csv_iterator
def test_train_matches_nnabla_cli(tmp_path, capsys):
    (status, _, err), out = _train(tmp_path, capsys)
    assert status == 0, err
    got, want = _report(str(out / "monitoring_report.yml")), _report(fixture("train_mlp_report.yml"))
    assert list(got) == list(want) == [0, 1]
    for epoch in want:
        for k in want[epoch]:
            assert got[epoch][k] == pytest.approx(want[epoch][k], rel=1e-4), (epoch, k)
    ours = {e.name: e.data for e in nnp.read(str(out / "results.nnp")).parameters}
    theirs = {e.name: e.data for e in nnp.read(fixture("train_mlp_result.nnp")).parameters}
    assert list(ours) == list(theirs)
    for k in theirs:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-4, atol=1e-6)
    assert zipfile.ZipFile(str(out / "results.nnp")).namelist()[:2] == ["nnp_version.txt", "network.nntxt"]
    assert os.path.exists(str(out / "results_current_2.nnp"))


@needs_csv_iterator
def test_train_resume_continues_from_last_epoch(tmp_path, capsys):
    (status, _, err), out = _train(tmp_path, capsys)           # epochs 1-2
    assert status == 0, err
    longer = nnp.read(fixture("train_mlp.nnp")).proto
    longer.training_config.max_epoch = 4
    nnp.write(str(tmp_path / "work" / "train4.nntxt"), longer)
    cwd = os.getcwd()
    os.chdir(str(tmp_path / "work"))
    try:
        status, _, err = run_cli(capsys, "train", "-c", "train4.nntxt", "-o", "out", "--resume")
    finally:
        os.chdir(cwd)
    assert status == 0, err
    report = _report(str(out / "monitoring_report.yml"))
    assert list(report) == [0, 1, 2, 3]                         # epochs 3-4 appended
    assert sorted(f for f in os.listdir(str(out)) if f.startswith("results_current")) == [
        "results_current_4.nnp"]
    # The run resumed from epoch 2's parameters: its first cost continues the descent.
    assert report[2]["cost"] < report[0]["cost"]
