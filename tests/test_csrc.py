"""``convert -O CSRC``: the C source for nnabla-c-runtime, byte for byte as nnabla 1.39 writes it
for the same files and options (fixtures in tests/fixtures/csrc, made by its script)."""
import os

import pytest

from nnabla_jit.utils.cli import main
from nnabla_jit.utils.converter.nnabla import NnpImporter
from nnabla_jit.utils.converter.nnablart import CsrcExporter

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
CSRC = os.path.join(FIXTURES, "csrc")


def expected_files(folder, base=None):
    """{name: bytes} nnabla wrote; ``base`` gives the files ``folder`` keeps only where they differ."""
    files = {}
    for source in ([base] if base else []) + [folder]:
        for name in os.listdir(os.path.join(CSRC, source)):
            with open(os.path.join(CSRC, source, name), "rb") as f:
                files[name] = f.read()
    return files


def written_files(folder):
    files = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            files[name] = f.read()
    return files


@pytest.mark.parametrize("model, options, expected, base", [
    ("mlp.nnp", [], "mlp", None),                                   # two inputs, two outputs
    ("csrc/noparam.nnp", ["-b", "2", "-T", "FIXED16"], "noparam_b2", "noparam"),  # -T: float only
    ("csrc/cnn_small.nnp", [], "cnn_small", None),                  # conv, BN, pooling, affine
    ("csrc/noparam.nnp", [], "noparam", None),                      # choices, bools, generator
    ("csrc/gru.nnp", [], "gru", None),                              # GRU stays one function
])
def test_convert_to_csrc_writes_nnablas_files(tmp_path, capsys, model, options, expected, base):
    out = str(tmp_path / "src")
    status = main(["convert", "-O", "CSRC", *options, os.path.join(FIXTURES, model), out])
    assert status == 0, capsys.readouterr().err
    written, wanted = written_files(out), expected_files(expected, base)
    assert sorted(written) == sorted(wanted)
    for name in wanted:
        assert written[name] == wanted[name], name


def test_csrc_exporter_files_and_output_errors(tmp_path, capsys):
    nnp = NnpImporter(os.path.join(CSRC, "noparam.nnp"), expand_network=True).execute()
    files = CsrcExporter(nnp, 1).files()
    assert sorted(files) == ["GNUmakefile", "noparam_example.c", "noparam_inference.c",
                             "noparam_inference.h"]
    nnp.protobuf.network[0].function[0].type = "Unheard"
    with pytest.raises(ValueError, match="Unheard is no nnabla function"):
        CsrcExporter(nnp, 1)
    (tmp_path / "taken").write_text("")
    status = main(["convert", "-O", "CSRC", os.path.join(FIXTURES, "mlp.nnp"), str(tmp_path / "taken")])
    assert status == 1 and "is a file; the C source is written into a folder" in capsys.readouterr().err
    status = main(["convert", os.path.join(FIXTURES, "mlp.nnp"), str(tmp_path / "no_extension")])
    assert status == 1 and "give -O" in capsys.readouterr().err
