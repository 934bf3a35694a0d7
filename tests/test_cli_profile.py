"""``profile`` and ``compare_with_cpu`` on the small training configuration of test_cli."""
import csv
import os
import shutil
import zipfile

import pytest

import nnabla_jit as nn
from nnabla_jit.utils.cli import main, profile

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.fixture
def work(tmp_path, monkeypatch):
    shutil.copy(os.path.join(FIXTURES, "train_mlp.nnp"), str(tmp_path / "train_mlp.nnp"))
    shutil.copy(os.path.join(FIXTURES, "train_data.csv"), str(tmp_path / "train_data.csv"))
    monkeypatch.chdir(tmp_path)            # the dataset URI in the file is relative
    yield tmp_path
    nn.clear_parameters()


def _table(path):
    with open(path) as f:
        return list(csv.reader(f))


def test_profile_times_every_step(work, capsys, monkeypatch):
    monkeypatch.setattr(profile, "MIN_SECONDS", 0.0)
    monkeypatch.setattr(profile, "MIN_COUNT", 2)
    assert main(["profile", "-c", "train_mlp.nnp", "-o", "out"]) == 0
    rows = _table(work / "out" / "profile.csv")
    assert rows[0] == ["time in ms", "optimizer 'optimizer' with network 'training'"]
    names = [r[0] for r in rows[1:]]
    for expected in ("load_dataset", "let_data (x to x)", "forward_function (Affine : Affine)",
                     "backward_function (Tanh : Tanh)", "forward_all", "backward_all",
                     "update (Adam)", "monitor_loss"):
        assert expected in names
    assert all(float(r[1]) >= 0 for r in rows[1:])


def test_compare_with_cpu_finds_where_two_configurations_differ(work, capsys):
    with zipfile.ZipFile(work / "train_mlp.nnp") as z:
        text = z.read("network.nntxt").decode()
    (work / "changed.nntxt").write_text(text.replace("val: 0.5", "val: 0.25"))
    with zipfile.ZipFile(work / "changed.nnp", "w") as z:
        z.writestr("network.nntxt", (work / "changed.nntxt").read_text())
    assert main(["compare_with_cpu", "-c", "train_mlp.nnp", "-c2", "changed.nnp", "-o", "out"]) == 0
    rows = {r[0]: float(r[1]) for r in _table(work / "out" / "compare_with_cpu.csv")[1:]}
    assert rows["forward_function (Affine, @training/Affine_out)"] == 0
    assert rows["forward_function (ReLU, @training/ReLU_out)"] == 0
    assert rows["forward_function (MulScalar, @training/MulScalar_out)"] > 0
    assert rows["backward_function (Affine, fc1/affine/W)"] > 0
    assert "update (Adam, fc3/affine/b)" in rows
