"""The sequence examples train to the loss they state (with fewer steps / shorter sequences)."""
import importlib.util
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_example(name):
    spec = importlib.util.spec_from_file_location(
        "example_{}_train".format(name), os.path.join(ROOT, "examples", name, "train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, argv, metric, stated_target", [
    ("lstm", ["--length", "10", "--steps", "400"], r"test MSE: ([0-9.]+)", 0.01),
    ("transformer", ["--steps", "150"], r"test cross-entropy: ([0-9.]+)", 0.1),
], ids=["lstm", "transformer"])
def test_example_reaches_its_target(name, argv, metric, stated_target, capsys):
    module = load_example(name)
    assert module.main(argv) == 0
    out = capsys.readouterr().out
    value = float(re.search(metric, out).group(1))
    assert float(re.search(r"target ([0-9.]+)", out).group(1)) == stated_target
    assert value <= stated_target
