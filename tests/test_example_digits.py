"""The main job: examples/digits/train.py trains, reaches its stated accuracy, saves .h5."""
import importlib.util
import os

import nnabla_jit as nn

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "digits", "train.py")


def test_digits_example_trains_to_its_target(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("digits_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = str(tmp_path / "params.h5")
    assert module.main(["--out", out]) == 0
    printed = capsys.readouterr().out
    accuracy = float(printed.split("test accuracy:")[1].split()[0])
    assert accuracy >= 0.95
    nn.clear_parameters()
    nn.load_parameters(out)
    params = nn.get_parameters(grad_only=False)
    assert params["conv1/conv/W"].shape == (16, 1, 3, 3)
    assert params["bn1/bn/mean"].shape == (1, 16, 1, 1)
    assert params["fc2/affine/W"].shape == (64, 10)
