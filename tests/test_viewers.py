"""nnabla_jit.experimental.viewers.SimpleGraph: drawings a person can open (SVG / PNG without
graphviz), labelled as nnabla labels them."""
import re

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit.experimental import viewers as V


@pytest.fixture
def no_graphviz(monkeypatch):
    """Draw with the built-in layout even where graphviz is installed."""
    monkeypatch.setattr(V, "_graphviz_renders", lambda: False)


def model():
    x = nn.Variable([4, 3, 8, 8])
    x.name = "image"
    h = PF.convolution(x, 2, (3, 3), pad=(1, 1), name="conv")
    h = F.relu(PF.batch_normalization(h, name="bn"))
    return PF.affine(h, 5, name="fc")


def svg_texts(path):
    with open(path) as f:
        text = f.read()
    assert text.startswith("<svg") and text.rstrip().endswith("</svg>")
    return re.findall(r">([^<>]+)</text>", text)


def test_svg_labels(tmp_path, no_graphviz):
    path = V.SimpleGraph(format="svg").save(model(), str(tmp_path / "net"))
    assert path == str(tmp_path / "net.svg")
    texts = svg_texts(path)
    # Functions with their parameter scope, parameters by their name within it.
    for label in ["Convolution", "conv/conv", "W", "b", "BatchNormalization", "bn/bn", "beta", "gamma", "mean",
                  "var", "ReLU", "Affine", "fc/affine", "image"]:
        assert label in texts
    assert texts.count("h") == 4   # unnamed variables: the outputs of the four functions
    assert not (tmp_path / "net.svg.tmp").exists() and len(list(tmp_path.iterdir())) == 1


def test_verbose_labels(tmp_path, no_graphviz):
    path = V.SimpleGraph(verbose=True).save(model(), str(tmp_path / "net"), format="svg")
    texts = svg_texts(path)
    assert "((4, 3, 8, 8), need_grad=False)" in texts
    assert '{"base_axis": 1, "pad": [1, 1], "stride": [1, 1], "dilation": [1, 1], "group": 1, ' \
           '"channel_last": false}' in texts


def test_png_and_view(tmp_path, no_graphviz, monkeypatch, capsys):
    path = V.SimpleGraph().save(model(), str(tmp_path / "net"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setattr(V.sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    shown = V.SimpleGraph(format="svg").view(model(), str(tmp_path / "shown"))
    assert shown == str(tmp_path / "shown.svg") and "Graph drawn into" in capsys.readouterr().out
    assert "Affine" in svg_texts(shown)


def test_parameters_given_explicitly(tmp_path, no_graphviz):
    y = model()
    params = {"layer1/W": nn.get_parameters()["conv/conv/W"]}
    path = V.SimpleGraph(format="svg").view(y, str(tmp_path / "net"), params=params)
    texts = svg_texts(path)
    assert "layer1" in texts and "W" in texts and "conv/conv" not in texts


def test_errors(tmp_path, no_graphviz, monkeypatch):
    with pytest.raises(ValueError, match="format 'pdf' needs graphviz"):
        V.SimpleGraph(format="pdf").save(model(), str(tmp_path / "net"))
    monkeypatch.setattr(V, "_graphviz_digraph_class", lambda: None)
    with pytest.raises(ImportError, match="pip install graphviz"):
        V.SimpleGraph().create_graphviz_digraph(model())


def test_graphviz_digraph():
    pytest.importorskip("graphviz")
    y = model()
    graph = V.SimpleGraph(format="svg", fname_color_map={"ReLU": "red"}).create_graphviz_digraph(y)
    assert graph.format == "svg"
    source = graph.source
    assert 'label=ReLU color=red' in source
    assert 'label="Affine\nfc/affine" color=lightgray' in source
    assert 'label=W color=black fillcolor=pink' in source
    # One node per variable (input, 7 parameters, 4 outputs: 13 in all) and an edge per
    # function input and output (4 + 6 + 2 + 4).
    assert source.count("->") == 16
    assert np.sum([line.strip().startswith('"variable-') and "->" not in line
                   for line in source.splitlines()]) == 13
