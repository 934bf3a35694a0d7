"""``convert`` to nnabla-c-runtime's NNB and ``nnb_template``: the bytes nnabla 1.39 writes for
the same files and options (fixtures in tests/fixtures/nnb, see its README), and convert's and
dump's import options."""
import os
import struct

import pytest

from nnabla_jit.utils.cli import main
from nnabla_jit.utils.converter.nnabla import NnpImporter
from nnabla_jit.utils.converter.nnablart import NnbExporter
from nnabla_jit.utils.converter.settings_file import dump_settings, load_settings

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
NNB = os.path.join(FIXTURES, "nnb")


def run_cli(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("model, options, expected", [
    ("mlp.nnp", [], "mlp.nnb"),
    ("cnn.nnp", [], "cnn.nnb"),
    ("mlp.nnp", ["-b", "2"], "mlp_b2.nnb"),
    ("cnn.nnp", ["--api", "20"], "cnn_api20.nnb"),
    ("mlp.nnp", ["-s", os.path.join(NNB, "mlp_quant.yaml")], "mlp_quant.nnb"),
    ("mlp.nnp", ["-d", "nnb_3", "-s", os.path.join(NNB, "mlp_quant.yaml")], "mlp_quant_nnb3.nnb"),
])
def test_convert_to_nnb_writes_nnablas_bytes(tmp_path, capsys, model, options, expected):
    out = str(tmp_path / "out.nnb")
    status, _, err = run_cli(capsys, "convert", *options, os.path.join(FIXTURES, model), out)
    assert status == 0, err
    with open(out, "rb") as f, open(os.path.join(NNB, expected), "rb") as g:
        assert f.read() == g.read()


@pytest.mark.parametrize("model", ["gru", "gru_deep", "lstm", "rnn"])
def test_recurrent_networks_to_nnb_as_nnabla_writes_them(tmp_path, capsys, model):
    """GRU is unrolled into basic functions (gru_deep: two layers, both directions, one time
    step, then a second GRU without bias); LSTM and RNN are written as they are."""
    out = str(tmp_path / "out.nnb")
    status, _, err = run_cli(capsys, "convert", os.path.join(FIXTURES, "csrc", model + ".nnp"), out)
    assert status == 0, err
    with open(out, "rb") as f, open(os.path.join(FIXTURES, "csrc", model + ".nnb"), "rb") as g:
        assert f.read() == g.read()


def test_gru_that_cannot_be_unrolled_is_a_clear_error():
    def gru():
        return NnpImporter(os.path.join(FIXTURES, "csrc", "gru.nnp"), expand_network=True).execute()
    nnp = gru()
    del nnp.parameters["gru/gru/weight_l0"]
    with pytest.raises(ValueError, match="GRU '@gru/GRU': parameter 'gru/gru/weight_l0' has no value"):
        NnbExporter(nnp, 1)
    nnp = gru()
    x = next(v for v in nnp.protobuf.network[0].variable if v.name == "x")
    x.shape.dim[0] = -1
    with pytest.raises(ValueError, match=r"input 'x' has shape \(-1, 1, 3\); unrolling needs"):
        NnbExporter(nnp, 1)


def test_nnb_template_writes_nnablas_settings_file(tmp_path, capsys):
    out = str(tmp_path / "settings.yaml")
    status, _, err = run_cli(capsys, "nnb_template", os.path.join(FIXTURES, "mlp.nnp"), out)
    assert status == 0, err
    assert open(out).read() == open(os.path.join(NNB, "mlp_settings.yaml")).read()
    status, _, err = run_cli(capsys, "nnb_template", "-T", "FIXED8_4", os.path.join(FIXTURES, "mlp.nnp"),
                             str(tmp_path / "fixed8.yaml"))
    assert status == 0, err
    settings = load_settings(open(tmp_path / "fixed8.yaml").read())
    assert set(settings["variables"].values()) == {"FIXED8_4"}


def test_settings_file_reads_what_it_writes():
    text = open(os.path.join(NNB, "mlp_quant.yaml")).read()
    settings = load_settings(text)
    assert settings["variables"]["fc1/affine/b"] == "FIXED8_5"
    assert settings["functions"]["@mlp/ReLU"]["implement"] == 1
    assert dump_settings(settings) == text
    assert dump_settings({"variables": {"y": "a: b", "on": "1", "it's": "x"}}) == \
        "variables:\n  y: '1'\n".replace("  y: '1'\n", "  y: 'a: b'\n  'on': '1'\n  it's: x\n")


def test_convert_nnb_errors_are_one_clear_line(tmp_path, capsys):
    mlp = os.path.join(FIXTURES, "mlp.nnp")
    status, _, err = run_cli(capsys, "convert", "-T", "FIXED16", mlp, str(tmp_path / "a.nnb"))
    assert status == 1 and "fixed-point buffers need a position" in err
    status, _, err = run_cli(capsys, "convert", "-I", "TFLITE", mlp, str(tmp_path / "a.nnb"))
    assert status == 1 and "TensorFlow and TFLite conversion is not provided" in err
    status, _, err = run_cli(capsys, "convert", mlp, str(tmp_path / "model.pb"))
    assert status == 1 and "not provided" in err
    status, out, err = run_cli(capsys, "convert", "--api", "3", os.path.join(FIXTURES, "cnn.nnp"),
                               str(tmp_path / "b.nnb"))
    assert status == 0 and "Convolution.channel_last is omitted for lower API Level:3" in out
    with open(tmp_path / "b.nnb", "rb") as f:
        assert struct.unpack("II", f.read(8)) == (2, 3)


def _same_files(folder, expected_folder):
    names = sorted(os.listdir(expected_folder))
    assert sorted(n for n in os.listdir(folder) if n.endswith(".nnb") and n != "m.nnb") == names
    for name in names:
        with open(os.path.join(folder, name), "rb") as f, \
                open(os.path.join(expected_folder, name), "rb") as g:
            assert f.read() == g.read(), name


def test_convert_split_writes_nnablas_parts(tmp_path, capsys):
    mlp = os.path.join(FIXTURES, "mlp.nnp")
    status, out, err = run_cli(capsys, "convert", "-E", "0", "-S", "0-3,5-", mlp, str(tmp_path / "m.nnb"))
    assert status == 0, err
    _same_files(str(tmp_path), os.path.join(NNB, "split_S"))
    summary = out[out.index(str(tmp_path / "m_0_3.nnb")):]
    assert "  - name: '@mlp/ReLU_out'\n    shape: (-1, 6)\n" in summary
    status, _, err = run_cli(capsys, "convert", "-S", "0-3", mlp, str(tmp_path / "x.nnb"))
    assert status == 1 and "-S/--split needs -E" in err
    status, _, err = run_cli(capsys, "convert", "-E", "0", "-S", "3-1", mlp, str(tmp_path / "x.nnb"))
    assert status == 1 and "must lie in 0 to 9" in err


def test_convert_config_splits_around_functions_the_target_lacks(tmp_path, capsys):
    config = tmp_path / "functions.txt"
    config.write_text("Affine\nTanh, FLOAT32\nReLU\n; no MulScalar, AddScalar\nSigmoid\n"
                      "SquaredError\nMean\n")
    out = tmp_path / "parts"
    out.mkdir()
    status, _, err = run_cli(capsys, "convert", "-c", str(config), os.path.join(FIXTURES, "mlp.nnp"),
                             str(out / "m.nnb"))
    assert status == 0, err
    _same_files(str(out), os.path.join(NNB, "split_config"))
    status, _, err = run_cli(capsys, "convert", "-c", str(config), os.path.join(FIXTURES, "mlp.nnp"),
                             str(tmp_path / "m.nnp"))
    assert status == 0, err
    assert sorted(os.listdir(tmp_path)) == ["functions.txt", "m_0_3.nnp", "m_6_9.nnp", "parts"]


def test_dump_executor_index_and_expansion_options(capsys):
    mlp = os.path.join(FIXTURES, "mlp.nnp")
    status, out, err = run_cli(capsys, "dump", "-E", "0", mlp)
    assert status == 0, err
    assert "Executor [0]" in out
    status, _, err = run_cli(capsys, "dump", "-E", "5", mlp)
    assert status == 1 and "executor" in err
    status, out2, err = run_cli(capsys, "dump", "--nnp-no-expand-network", "--nnp-exclude-preprocess", mlp)
    assert status == 0, err


# ------------------------------------------------------------------------ function_info
def test_function_info_api_levels(capsys):
    status, out, _ = run_cli(capsys, "function_info", "--api", "-1")
    assert status == 0 and out == "API_LEVEL: 45\n"
    status, out, _ = run_cli(capsys, "function_info", "--api", "1")
    lines = out.splitlines()
    assert lines[0] == "API_LEVEL: 1" and "Affine_i" in lines and "Convolution_iiIiIiIi" in lines
    assert "Trilu_iB" not in lines       # added at level 45


def test_function_info_config_narrows_the_set(tmp_path, capsys):
    config = tmp_path / "target.txt"
    config.write_text("Affine, FLOAT32\nReLU\n; a comment\nTanh, FIXED16, FIXED8\nConvolution\n")
    mlp = os.path.join(FIXTURES, "mlp.nnp")
    status, out, _ = run_cli(capsys, "function_info", "-c", str(config), mlp)
    assert status == 0 and out.splitlines() == ["Affine", "Tanh", "ReLU"]
    status, out, err = run_cli(capsys, "function_info", "-f", "NNB", "-c", str(config), mlp)
    assert "Convolution" in err.splitlines()
    out_yaml = tmp_path / "set.yaml"
    status, _, _ = run_cli(capsys, "function_info", "-c", str(config), mlp, "-o", str(out_yaml))
    text = out_yaml.read_text()
    assert "  Tanh:\n    func_type: FIXED16,FIXED8\n" in text and "  ReLU:\n    func_type: ALL\n" in text


def test_function_info_query(capsys):
    status, out, _ = run_cli(capsys, "function_info", "-f", "NNB", "-q", "Affine")
    assert status == 0 and "uniq_name: Affine_i" in out and "id: 0" in out
    status, _, err = run_cli(capsys, "function_info", "-q", "NoSuchFunction")
    assert status == 1 and "NoSuchFunction" in err


def test_function_info_onnx_targets(capsys):
    pytest.importorskip("onnx")
    status, out, err = run_cli(capsys, "function_info", "-f", "ONNX", "-t", os.path.join(FIXTURES, "mlp.nnp"))
    assert status == 0, err
    ops = out.splitlines()[1:]
    assert "Gemm@13" in ops and "Tanh@13" in ops and all("@" in op for op in ops)


def test_convert_to_onnx_with_an_ir_version(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")
    out = str(tmp_path / "m.onnx")
    status, _, err = run_cli(capsys, "convert", "--ir_version", "7",
                             os.path.join(FIXTURES, "mlp.nnp"), out)
    assert status == 0, err
    assert onnx.load(out).ir_version == 7
    status, _, err = run_cli(capsys, "convert", "-f", "--ir_version", "99", os.path.join(FIXTURES, "mlp.nnp"), out)
    assert status == 1 and "--ir_version 99" in err
