"""Quantization-aware training (nnabla_jit.utils.qnn and graph_converters.quantize).

The recorders and scales are checked against values worked out by hand; whole QATScheduler
runs against nnabla 1.39's, stored in tests/fixtures/qnn_oracle.json by
tests/fixtures/make_qnn_fixtures.py (whose networks and configs ``run`` below repeats).
"""
import json
import os

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.experimental.graph_converters as GC
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.utils import nnp_graph, qnn

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "qnn_oracle.json")


@pytest.fixture(autouse=True)
def fresh_parameters():
    nn.clear_parameters()
    yield
    nn.clear_parameters()


def _var(values, need_grad=False):
    v = nn.Variable.from_numpy_array(np.asarray(values, np.float32))
    v.need_grad = need_grad
    return v


BATCHES = [np.array([[-1.0, 2.0], [0.5, -3.0]]), np.array([[4.0, -0.5], [1.0, 0.0]])]


@pytest.mark.parametrize("make, expected", [
    # (min, max) so far: (-3, 2) then (-3, 4)
    (lambda x, m, M: qnn.minmax_minmax_recorder(x, m, M), [(-3.0, 2.0), (-3.0, 4.0)]),
    # 0.9 * running + 0.1 * batch, from 0
    (lambda x, m, M: qnn.minmax_mva_recorder(x, m, M, decay=0.9), [(-0.3, 0.2), (-0.32, 0.58)]),
    (lambda x, m, M: qnn.abs_max_recorder(x, M), [(None, 3.0), (None, 4.0)]),
    (lambda x, m, M: qnn.max_max_recorder(x, M), [(None, 2.0), (None, 4.0)]),
    (lambda x, m, M: qnn.max_mva_recorder(x, M, decay=0.9), [(None, 0.2), (None, 0.58)]),
])
def test_recorders_pass_data_through_and_keep_ranges(make, expected):
    x = nn.Variable((2, 2))
    m, M = _var(np.zeros((1, 1))), _var(np.zeros((1, 1)))
    y = make(x, m, M)
    for batch, (lo, hi) in zip(BATCHES, expected):
        x.d = batch
        y.forward()
        np.testing.assert_array_equal(y.d, batch)
        if lo is not None:
            np.testing.assert_allclose(m.d, [[lo]], rtol=1e-6)
        np.testing.assert_allclose(M.d, [[hi]], rtol=1e-6)
    assert M.d.dtype == np.float32


def test_recorder_out_of_training_keeps_its_range():
    x, M = _var(BATCHES[0]), _var([[1.0]])
    y = qnn.abs_max_recorder(x, M, training=False)
    y.forward()
    np.testing.assert_array_equal(y.d, BATCHES[0])
    assert M.d[0, 0] == 1.0


def test_recorder_gradient_passes_straight_through():
    x, M = _var(BATCHES[0], need_grad=True), _var([[0.0]])
    loss = F.sum(qnn.max_mva_recorder(x, M) * 3.0)
    loss.forward()
    x.grad.zero()
    loss.backward()
    np.testing.assert_array_equal(x.g, np.full((2, 2), 3.0))
    loss.backward()   # accumulates into the leaf
    np.testing.assert_array_equal(x.g, np.full((2, 2), 6.0))


def test_recorder_rejects_a_range_of_another_shape():
    with pytest.raises(ValueError, match="MinMaxMinMaxRecorder.*M"):
        qnn.minmax_minmax_recorder(nn.Variable((2, 3)), _var(np.zeros((1, 1))), _var(np.zeros((1, 2))))
    with pytest.raises(ValueError, match="AbsMaxRecorder"):
        qnn.AbsMaxRecorder(None)(nn.Variable((2, 3)))


def test_callback_makes_range_parameters_in_the_current_scope():
    cb = qnn.MinMaxMvaRecorderCallback()
    assert cb.name() == "MinMaxMvaRecorder" and qnn.AbsMaxRecorderCallback().name() == "AbsMaxRecorder"
    x = _var(BATCHES[0])
    with nn.parameter_scope("ReLU-3"):
        y = cb(x, name="x0")
    assert y.parent.info.type_name == "MinMaxMvaRecorder"
    params = nn.get_parameters(grad_only=False)
    assert list(params) == ["ReLU-3/m-x0", "ReLU-3/M-x0"] and params["ReLU-3/M-x0"].shape == (1, 1)
    y.forward()
    np.testing.assert_allclose(params["ReLU-3/m-x0"].d, [[-0.03]], rtol=1e-6)   # 0.01 * -3


@pytest.mark.parametrize("callback, stats, narrow, rounding, scale", [
    # max recorders: 2 * M / 255 (or / 254 with narrow_range)
    (qnn.AbsMaxRecorderCallback, {"M": 2.55}, False, "NOTROUND", 0.02),
    (qnn.MaxMvaRecorderCallback, {"M": 2.54}, True, "NOTROUND", 0.02),
    # min-max recorders: (M - m) / 255; 0.02 -> 2 ** round(-5.64) = 2 ** -6, ceil 2 ** -5
    (qnn.MinMaxMinMaxRecorderCallback, {"m": -1.55, "M": 3.55}, False, "NOTROUND", 0.02),
    (qnn.MinMaxMvaRecorderCallback, {"m": -1.55, "M": 3.55}, False, "ROUND", 2.0 ** -6),
    (qnn.MaxMaxRecorderCallback, {"M": 2.55}, False, "CEIL", 2.0 ** -5),
    (qnn.MaxMaxRecorderCallback, {"M": 2.55}, False, "FLOOR", 2.0 ** -6),
    # an empty range never gives a zero scale
    (qnn.MinMaxMinMaxRecorderCallback, {"m": 0.0, "M": 0.0}, False, "NOTROUND", 1e-24 / 255),
])
def test_scale_and_zero_point_from_a_recorded_range(callback, stats, narrow, rounding, scale):
    x = nn.Variable((2, 3, 4, 4))
    with nn.parameter_scope("Convolution-1"):
        for name, value in stats.items():
            nn.parameter.get_parameter_or_create("{}-x0".format(name), (1, 1, 1, 1)).d = value
        s, zp = callback.get_scale_zeropoint(x, narrow_range=narrow, round_method=rounding, name="x0")
        assert s.shape == zp.shape == (1, 1, 1, 1) and s.d.dtype == np.float32
        np.testing.assert_allclose(s.d.ravel(), [scale], rtol=1e-6)
        assert zp.d.ravel().tolist() == [0]
        assert not s.need_grad and not zp.need_grad
        # an existing scale is returned as it is
        s.d = 7.0
        again, _ = callback.get_scale_zeropoint(x, name="x0")
        assert again.d.ravel().tolist() == [7.0]
    params = nn.get_parameters(grad_only=False)
    assert "Convolution-1/scale-x0" in params and "Convolution-1/zeropoint-x0" in params


def test_no_scale_without_a_recorded_range():
    with nn.parameter_scope("ReLU-2"):
        assert qnn.MaxMvaRecorderCallback.get_scale_zeropoint(nn.Variable((2, 3)), name="x0") == (None, None)
    with pytest.raises(ValueError, match="round_method"):
        qnn.pow2_scale(np.float32(0.1), "NEAREST")


def test_rank_recorder_leaves_training_only_functions_out():
    x = nn.Variable((2, 3))
    y = F.relu(F.dropout(F.tanh(x), 0.5))
    ranks = qnn.FunctionsRankRecorder()
    y.visit(ranks)
    assert sorted((f.info.type_name, r) for f, r in ranks.functions_ranks.items()) == [("ReLU", 1), ("Tanh", 0)]


def test_scheduler_checks_its_steps():
    cfg = qnn.QATConfig()
    with pytest.raises(ValueError, match="niter_to_training"):
        qnn.QATScheduler(cfg)   # niter_to_training is -1 by default
    cfg.niter_to_recording, cfg.niter_to_training = 5, 5
    with pytest.raises(ValueError, match="after niter_to_recording"):
        qnn.QATScheduler(cfg)
    assert qnn.QATTensorRTConfig.bn_folding and isinstance(qnn.qat_default_config, qnn.QATTensorRTConfig)


def test_training_conversion_implements_sim_qnn_only():
    cfg = qnn.QATConfig()
    cfg.precision_mode = qnn.PrecisionMode.QNN
    with pytest.raises(NotImplementedError, match="SIM_QNN"):
        GC.QuantizeRecordingToTrainingModifier({}, config=cfg)


def test_rewire_on_takes_the_new_graphs_need_grad():
    x = nn.Variable((2,), need_grad=True)
    a = x * 2.0
    a.need_grad = False
    a.rewire_on(x * 3.0)
    assert a.need_grad


# ------------------------------------------------------------------------ against nnabla 1.39
def tiny_net(x):
    h = PF.convolution(x, 3, (3, 3), pad=(1, 1), name="conv")
    h = PF.batch_normalization(h, name="bn")
    h = F.relu(h)
    return PF.affine(h, 4, name="fc")


def branchy_net(x):
    h = PF.convolution(x * 0.5, 3, (3, 3), pad=(1, 1), name="conv")
    h = F.relu(PF.batch_normalization(h, name="bn"))
    r = PF.convolution(h, 3, (3, 3), pad=(1, 1), with_bias=False, name="conv2")
    h = F.average_pooling(F.relu(h + r), (2, 2))
    return PF.affine(h, 4, name="fc")


def config(scenario):
    cfg = qnn.QATConfig()
    cfg.ext_name = "cpu"
    cfg.niter_to_recording = 1
    cfg.niter_to_training = 3
    if scenario != "default":
        cfg.skip_inputs_layers = []
        cfg.skip_outputs_layers = []
    if scenario == "branchy":
        cfg.recorder_position = cfg.RecorderPosition.BOTH
        cfg.recorder_activation = qnn.AbsMaxRecorderCallback
        cfg.recorder_weight = qnn.MaxMaxRecorderCallback
    if scenario == "folding":
        cfg.bn_folding = True
        cfg.bn_self_folding = True
        cfg.recorder_activation = qnn.MinMaxMvaRecorderCallback
        cfg.pow2 = cfg.RoundingMethod.CEIL
        cfg.narrow_range = True
        cfg.skip_bias = True
    return cfg


def run(scenario, cfg=None):
    x, t = nn.Variable((2, 2, 4, 4)), nn.Variable((2, 1))
    pred = (tiny_net if scenario == "default" else branchy_net)(x)
    loss = F.mean(F.softmax_cross_entropy(pred, t))
    init = np.random.RandomState(0)
    for name, p in sorted(nn.get_parameters(grad_only=False).items()):
        low = 0.5 if name.endswith("/var") else -0.5
        p.d = init.uniform(low, low + 1.0, p.shape)
    solver = S.Sgd(0.1)
    solver.set_parameters(nn.get_parameters())
    scheduler = qnn.QATScheduler(cfg or config(scenario), solver)
    scheduler(pred)
    data = np.random.RandomState(1)
    steps = []
    for _ in range(5):
        scheduler.step()
        types = []
        loss.visit(lambda f: types.append(f.info.type_name))
        x.d = data.randn(*x.shape).astype(np.float32)
        t.d = data.randint(0, 4, t.shape)
        loss.forward()
        solver.zero_grad()
        loss.backward()
        solver.update()
        steps.append({"state": scheduler.state.name, "lr": float(solver.learning_rate()),
                      "need_grad": bool(pred.need_grad), "functions": types, "loss": float(loss.d)})
    ranges = [[k, np.asarray(v.d, np.float64).ravel().tolist()]
              for k, v in nn.get_parameters(grad_only=False).items() if "-" in k.split("/")[0]]
    return {"steps": steps, "ranges": ranges, "pred": pred.d.tolist()}, scheduler, x, pred


@pytest.mark.parametrize("scenario", ["default", "branchy", "folding"])
def test_scheduler_matches_nnabla(scenario):
    ref = json.load(open(FIXTURE))[scenario]
    got, _, _, _ = run(scenario)
    for step, (g, r) in enumerate(zip(got["steps"], ref["steps"])):
        assert (g["state"], g["need_grad"], g["functions"]) == (r["state"], r["need_grad"], r["functions"]), step
        assert g["lr"] == pytest.approx(r["lr"], rel=1e-6)
        assert g["loss"] == pytest.approx(r["loss"], rel=1e-4, abs=1e-5), step
    assert [k for k, _ in got["ranges"]] == [k for k, _ in ref["ranges"]]
    for (name, g), (_, r) in zip(got["ranges"], ref["ranges"]):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-7, err_msg=name)
    np.testing.assert_allclose(got["pred"], ref["pred"], rtol=1e-4, atol=1e-5)


def test_scheduler_default_config_runs_without_a_gpu_and_saves(tmp_path):
    """QATConfig's ext_name is 'cudnn': with no GPU there is no cache to clear; no solver is
    needed. An evaluation network registered with training=False is saved with its quantization."""
    cfg = config("default")
    cfg.ext_name = "cudnn"
    x = nn.Variable((2, 2, 4, 4))
    pred = tiny_net(x)
    vx = nn.Variable((1, 2, 4, 4))
    vpred = tiny_net(vx)
    scheduler = qnn.QATScheduler(cfg)   # no solver: nothing to re-register or rescale
    scheduler(pred)
    scheduler(vpred, training=False)
    rng = np.random.RandomState(0)
    for _ in range(4):
        scheduler.step()
        x.d = rng.randn(*x.shape)
        pred.forward()
    assert scheduler.state == qnn.QNNState.TRAINING
    functions = _functions(vpred)
    types = [f.info.type_name for f in functions]
    assert types == ["Convolution", "BatchNormalization", "QuantizeLinear", "DequantizeLinear", "ReLU", "Affine"]
    # the evaluation network quantizes with the range the training network recorded
    vx.d = rng.randn(*vx.shape)
    vpred.forward()
    M = nn.get_parameters(grad_only=False)["ReLU-2/M-x0"].d.item()
    s = 2.0 ** np.round(np.log2(2 * M / 255))
    assert M > 0 and nn.get_parameters(grad_only=False)["ReLU-2/scale-x0"].d.item() == pytest.approx(s)
    bn = functions[2].inputs[0].d
    q = np.clip(np.round(bn / s), -128, 127) * s   # np.round rounds half to even, as round_mode says
    w, b = nn.get_parameters()["fc/affine/W"].d, nn.get_parameters()["fc/affine/b"].d
    np.testing.assert_allclose(vpred.d, np.maximum(q, 0).reshape(1, -1) @ w + b, rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "qnn.nnp")
    scheduler.save(path, vx)
    loaded = nnp_graph.NnpLoader(path).get_network("net", batch_size=1)
    assert [f.info.type_name for f in _functions(loaded.outputs["y0"])] == types
    with pytest.raises(NotImplementedError, match="deploy"):
        scheduler.save(path, vx, deploy=True)


def _functions(v):
    out = []
    v.visit(out.append)
    return out
