"""The nnabla-examples runner's own parts (benchmarks/programs): the hook that both runs load
(monitor log, stop after N values, nnabla's draws replayed on nnabla_jit, seeding) and the
dataset makers. The programs themselves run in tests/test_programs.py (slow)."""
import gzip
import json
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "benchmarks", "programs")
sys.path.insert(0, PROGRAMS)

import program_data  # noqa: E402
import runner  # noqa: E402


def run_hooked(tmp_path, script, **env):
    """Run ``script`` on nnabla_jit (``import nnabla``) with the runner's hook loaded as it is
    in a program's run; return (exit status, output)."""
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(script))
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([runner._site_dir(str(tmp_path)), ROOT]),
             NNABLA_PROGRAMS_MODE="replay", NNABLA_PROGRAMS_OUT=str(tmp_path / "out"))
    e.update(env)
    p = subprocess.run([sys.executable, "-m", "nnabla_jit.as_nnabla", str(path)], cwd=str(tmp_path),
                       env=e, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def test_replay_gives_nnabla_draws_and_leaves_the_global_generator_alone(tmp_path):
    rand = np.array([0.25, 0.5, 0.75], np.float32)
    mask = np.array([[2, 0, 2, 2], [0, 0, 2, 0]], np.float32)   # p=0.5: 0 or 1/(1-p)
    np.savez(tmp_path / "draws.npz", d000000_Rand=rand, d000001_Dropout=mask)
    rc, out = run_hooked(tmp_path, """
        import numpy as np, nnabla as nn, nnabla.functions as F
        x = nn.Variable.from_numpy_array(np.arange(1, 9, dtype=np.float32).reshape(2, 4), need_grad=True)
        r = F.rand(shape=(3,))
        y = F.dropout(x, 0.5)
        before = nn.random.prng.get_state()[1].copy()
        r.forward(); y.forward()
        assert (nn.random.prng.get_state()[1] == before).all(), "prng moved"
        y.backward(np.ones((2, 4), np.float32))
        print("RAND", r.d.tolist()); print("Y", y.d.tolist()); print("DX", x.g.tolist())
    """, NNABLA_PROGRAMS_DRAWS=str(tmp_path / "draws.npz"))
    assert rc == 0, out
    lines = {l.split(" ", 1)[0]: json.loads(l.split(" ", 1)[1]) for l in out.splitlines()
             if l.split(" ", 1)[0] in ("RAND", "Y", "DX")}
    np.testing.assert_array_equal(lines["RAND"], rand)
    np.testing.assert_array_equal(lines["Y"], np.arange(1, 9).reshape(2, 4) * mask)
    np.testing.assert_array_equal(lines["DX"], mask)   # backward through nnabla's mask


def test_a_draw_beyond_the_recorded_ones_stops_with_one_clear_line(tmp_path):
    np.savez(tmp_path / "draws.npz", d000000_Randn=np.zeros((2,), np.float32))
    rc, out = run_hooked(tmp_path, """
        import nnabla.functions as F
        r = F.randn(shape=(2,))
        r.forward(); r.forward()
    """, NNABLA_PROGRAMS_DRAWS=str(tmp_path / "draws.npz"))
    assert rc != 0
    assert "Randn #2 but nnabla ran 1" in out


def test_monitor_values_are_logged_and_the_run_stops_after_n(tmp_path):
    rc, out = run_hooked(tmp_path, """
        import numpy as np
        from nnabla.monitor import Monitor, MonitorSeries
        m = MonitorSeries("Training loss", Monitor("mon"), interval=10)
        other = MonitorSeries("Test error", Monitor("mon"), interval=1)
        for i in range(10):
            other.add(i, 0.5)
            m.add(i, np.float32(i) / 4)
        print("NOT STOPPED")
    """, NNABLA_PROGRAMS_STOP="Training loss:3")
    assert rc == 0, out
    assert "NOT STOPPED" not in out
    with open(tmp_path / "out" / "series.jsonl") as f:
        rows = [json.loads(l) for l in f]
    assert [(r["series"], r["i"], r["v"]) for r in rows if r["series"] == "Training loss"] == \
        [("Training loss", 0, 0.0), ("Training loss", 1, 0.25), ("Training loss", 2, 0.5)]
    assert len([r for r in rows if r["series"] == "Test error"]) == 3


def test_seeds_removed_numpy_names_and_gpu_contexts(tmp_path):
    script = """
        import numpy as np, random
        from nnabla.ext_utils import get_extension_context
        import nnabla_ext.cuda
        nnabla_ext.cuda.clear_memory_cache()
        print("DRAWS", np.random.rand(), random.random(), np.random.RandomState().rand())
        print("NAMES", np.int is int, np.float is float, np.float_ is np.float64, np.NaN != np.NaN)
        print("CTX", get_extension_context("cudnn", device_id="0").backend)
    """
    rc1, out1 = run_hooked(tmp_path, script)
    rc2, out2 = run_hooked(tmp_path, script)
    assert rc1 == 0 and rc2 == 0, out1 + out2
    draws = [l for l in out1.splitlines() if l.startswith("DRAWS")]
    assert draws and draws == [l for l in out2.splitlines() if l.startswith("DRAWS")]
    assert "NAMES True True True True" in out1
    assert "CTX ['cpu:float']" in out1


def test_perturbation_moves_every_parameter_by_eps_when_the_first_function_runs(tmp_path):
    rc, out = run_hooked(tmp_path, """
        import numpy as np, nnabla as nn, nnabla.functions as F, nnabla.parametric_functions as PF
        x = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32))
        y = PF.affine(x, 4, name="fc")
        w0 = nn.get_parameters()["fc/affine/W"].d.copy()
        y.forward()
        w1 = nn.get_parameters()["fc/affine/W"].d.copy()
        y.forward()
        w2 = nn.get_parameters()["fc/affine/W"].d
        ratio = w1 / w0
        print("RATIO", float(ratio.min()), float(ratio.max()), bool((w2 == w1).all()))
    """, NNABLA_PROGRAMS_PERTURB="1e-3")
    assert rc == 0, out
    low, high, once = next(l for l in out.splitlines() if l.startswith("RATIO")).split()[1:]
    assert float(low) == pytest.approx(1 - 1e-3, rel=1e-6) and float(high) == pytest.approx(1 + 1e-3, rel=1e-6)
    assert once == "True"


# nnabla 1.39's batch statistics of the input below (F.batch_normalization with output_stat, on
# the oracle): its one-pass float32 sums lose the variance's third digit at mean/spread ~130
NNABLA_BN_STATS = {"mean": [39.98383712768555, 39.998069763183594, 39.968631744384766],
                   "var": [0.0953369140625, 0.10302734375, 0.07373046875]}


@pytest.mark.parametrize("emulate", [False, True])
def test_nnabla_stats_diagnosis_gives_nnabla_batch_statistics(tmp_path, emulate):
    rc, out = run_hooked(tmp_path, """
        import json, numpy as np, nnabla as nn, nnabla.functions as F
        x = (np.random.RandomState(0).randn(8, 3, 5, 5) * 0.3 + 40).astype(np.float32)
        p = [nn.Variable.from_numpy_array(np.full((1, 3, 1, 1), v, np.float32)) for v in (0, 1, 0, 1)]
        y, m, v = F.batch_normalization(nn.Variable.from_numpy_array(x), *p, batch_stat=True,
                                        output_stat=True)
        F.sink(y, m, v).forward()
        print("STATS", json.dumps({"mean": m.d.ravel().tolist(), "var": v.d.ravel().tolist()}))
    """, NNABLA_PROGRAMS_NNABLA_STATS="1" if emulate else "")
    assert rc == 0, out
    stats = json.loads(next(l for l in out.splitlines() if l.startswith("STATS")).split(" ", 1)[1])
    x = (np.random.RandomState(0).randn(8, 3, 5, 5) * 0.3 + 40).astype(np.float32).astype(np.float64)
    exact_var = x.var(axis=(0, 2, 3))
    if emulate:   # bit for bit nnabla's
        assert stats == NNABLA_BN_STATS
    else:         # nnabla_jit's own: accurate, where nnabla's are off by ~1%
        np.testing.assert_allclose(stats["var"], exact_var, rtol=1e-6)
        assert np.abs(np.array(NNABLA_BN_STATS["var"]) / exact_var - 1).max() > 1e-3


def test_mnist_files_are_gzip_idx(tmp_path):
    program_data.make("mnist", str(tmp_path), train=30, test=20)
    home = tmp_path / "home" / "nnabla_data"
    with gzip.open(home / "train-images-idx3-ubyte.gz") as f:
        magic, n, h, w = struct.unpack(">IIII", f.read(16))
        images = np.frombuffer(f.read(), np.uint8)
    assert (magic, n, h, w) == (0x803, 30, 28, 28) and images.size == 30 * 28 * 28
    with gzip.open(home / "t10k-labels-idx1-ubyte.gz") as f:
        magic, n = struct.unpack(">II", f.read(8))
        labels = np.frombuffer(f.read(), np.uint8)
    assert (magic, n) == (0x801, 20) and set(labels) == set(range(10))


def test_cifar10_is_the_pickled_tarball(tmp_path):
    program_data.make("cifar10", str(tmp_path), train=50, test=20)
    with tarfile.open(tmp_path / "home" / "nnabla_data" / "cifar-10-python.tar.gz", "r:gz") as tar:
        names = sorted(m.name for m in tar.getmembers())
        batch = pickle.load(tar.extractfile("cifar-10-batches-py/data_batch_1"), encoding="bytes")
    assert "cifar-10-batches-py/test_batch" in names and len([n for n in names if "data_batch" in n]) == 5
    assert batch[b"data"].shape == (10, 3072) and batch[b"data"].dtype == np.uint8
    assert len(batch[b"labels"]) == 10


def test_omniglot_and_modelnet_and_ptb_layouts(tmp_path):
    program_data.make("omniglot", str(tmp_path), background=5, evaluation=3)
    x, alphabets = np.load(tmp_path / "omniglot" / "data" / "train.npy", allow_pickle=True)
    assert x.shape == (5, 20, 28, 28) and x.dtype == np.uint8 and isinstance(alphabets, dict)
    program_data.make("modelnet40", str(tmp_path), classes=3, points=8)
    base = tmp_path / "data" / "modelnet40_normal_resampled"
    items = (base / "modelnet40_train.txt").read_text().split()
    assert len(items) == 6
    rows = np.loadtxt(base / "shape00" / (items[0] + ".txt"), delimiter=",")
    assert rows.shape == (8, 6)
    program_data.make("ptb", str(tmp_path), words=200, vocabulary=20)
    text = (tmp_path / "home" / "nnabla_data" / "ptb.train.txt").read_text()
    assert 150 <= len(text.split()) <= 250


def test_unknown_dataset_names_the_known_ones(tmp_path):
    with pytest.raises(KeyError, match="no dataset maker 'imagenet'.*mnist"):
        program_data.make("imagenet", str(tmp_path))


def test_a_difference_within_nnabla_own_spread_counts_as_round_off_only_if_the_first_values_agree():
    import catalog
    entry = catalog.Entry("x", "x.py", stop="loss:3")

    def run(*values):
        return {"rc": 0, "series": {"loss": [[i, v, float(i)] for i, v in enumerate(values)]}, "tail": ""}

    nnabla, perturbed = run(1.0, 2.0, 3.0), run(1.0, 2.1, 3.3)       # own spread 0.1
    row = runner.compare_runs(entry, nnabla, run(1.0 + 1e-6, 2.2, 3.6))   # 0.2 <= 3 * 0.1
    assert row["status"] == "differs"
    runner.judge_by_spread(entry, row, nnabla, perturbed, 1e-6)
    assert row["status"] == "ok, round-off amplified" and row["nnabla_spread"] == pytest.approx(0.1)
    row = runner.compare_runs(entry, nnabla, run(1.0 + 1e-3, 2.2, 3.6))   # first value off
    runner.judge_by_spread(entry, row, nnabla, perturbed, 1e-6)
    assert row["status"] == "differs"
    row = runner.compare_runs(entry, nnabla, run(1.0, 2.0, 4.5))         # 0.5 > 3 * 0.1
    runner.judge_by_spread(entry, row, nnabla, perturbed, 1e-6)
    assert row["status"] == "differs"


def test_a_difference_counts_as_nnabla_statistics_only_if_the_run_with_them_agrees():
    import catalog
    entry = catalog.Entry("x", "x.py", stop="loss:3")

    def row(stats_diff, stats_first, spread=0.01):
        r = {"status": "differs", "max_rel_diff": 0.2, "first_rel_diff": 1e-5, "nnabla_spread": spread,
             "nnabla_stats_diff": stats_diff, "nnabla_stats_first": stats_first}
        return runner.judge_by_nnabla_stats(entry, r)["status"]

    assert row(0.02, 0.0) == "ok with nnabla's statistics"      # within 3 x nnabla's own spread
    assert row(5e-5, 0.0, spread=None) == "ok with nnabla's statistics"   # within the tolerance
    assert row(0.05, 0.0) == "differs"                          # beyond 3 x spread
    assert row(0.02, 1e-3) == "differs"                         # first values off
    assert runner.judge_by_nnabla_stats(entry, {"status": "differs", "max_rel_diff": 0.2})["status"] == "differs"
