"""``profile``, ``compare_with_cpu`` and ``-m train`` (under mpirun) on the small training
configuration of test_cli."""
import csv
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

import nnabla_jit as nn
from nnabla_jit.utils.cli import main, profile

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def work(tmp_path, monkeypatch):
    shutil.copy(os.path.join(FIXTURES, "train_mlp.nnp"), str(tmp_path / "train_mlp.nnp"))
    shutil.copy(os.path.join(FIXTURES, "train_data.csv"), str(tmp_path / "train_data.csv"))
    monkeypatch.chdir(tmp_path)            # the dataset URI in the file is relative
    yield tmp_path
    nn.clear_parameters()


def _mpirun(n):
    """test_distributed's launcher command (it skips when MPI is missing)."""
    spec = importlib.util.spec_from_file_location(
        "test_distributed_launcher", os.path.join(os.path.dirname(__file__), "test_distributed.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.mpirun(n)


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


@pytest.mark.slow
def test_train_with_mpi_splits_the_data_and_rank_zero_writes(work):
    command = _mpirun(2) + [sys.executable, "-m", "nnabla_jit", "-m", "train", "-c", "train_mlp.nnp",
                           "-o", "out"]
    env = dict(os.environ, PYTHONPATH=REPO)
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=str(work), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("Using SlicedDataSource") >= 2          # each rank, its slice
    report = (work / "out" / "monitoring_report.yml").read_text()
    assert report.count("cost:") == 2 and report.startswith("0:\n")    # written once, by rank 0
    assert (work / "out" / "results.nnp").exists()


def test_mpi_flag_alone_trains_in_one_process_and_reports_progress(work, capsys, monkeypatch):
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"):
        monkeypatch.delenv(name, raising=False)
    from nnabla_jit.utils.cli import train
    reports = []
    real_progress = train.progress
    monkeypatch.setattr(train, "progress", lambda *a: (reports.append(a), real_progress(*a)))
    assert main(["-m", "train", "-c", "train_mlp.nnp", "-o", "out"]) == 0
    assert (work / "out" / "monitoring_report.yml").read_text().count("cost:") == 2
    states = [a[0] for a in reports]
    assert any(s and s.startswith("Training : cost=") for s in states)
    assert any(s and s.startswith('Evaluating "train_error" : error=') for s in states)
    assert states[-1] is None and (work / "out" / "progress.txt").read_text() == ""
