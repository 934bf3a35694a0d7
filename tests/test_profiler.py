"""nnabla_jit.utils.profiler: GraphProfiler's result structure and GraphProfilerCsvWriter's
layout (nnabla's). Times are only checked to be positive numbers."""
import csv
import io

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.utils.profiler import (GraphProfiler, GraphProfilerCsvWriter, ProfileStat,
                                       convert_time_scale)


def training_graph():
    x = nn.Variable.from_numpy_array(np.random.randn(4, 3, 6, 6).astype(np.float32))
    t = nn.Variable.from_numpy_array(np.array([[0], [1], [2], [1]]))
    with nn.parameter_scope("net"):
        h = F.relu(PF.convolution(x, 4, (3, 3), name="conv"))
        y = PF.affine(h, 3, name="fc")
    return F.mean(F.softmax_cross_entropy(y, t))


def test_profiles_every_function():
    loss = training_graph()
    solver = S.Momentum()
    solver.set_parameters(nn.get_parameters())
    params_before = {k: v.d.copy() for k, v in nn.get_parameters().items()}
    gp = GraphProfiler(loss, device_id=0, ext_name="cpu", solver=solver, n_run=3, time_scale="u")
    gp.run()
    result = gp.get_result()
    functions = []
    loss.visit(functions.append)
    for process in ("forward", "backward"):
        stats = result[process]
        assert [s.function_name for s in stats] == [f.name for f in functions]
        assert [s.parameter_scope for s in stats] == ["net/conv/conv", None, "net/fc/affine", None, None]
        assert stats[0].inputs_shape == [(4, 3, 6, 6), (4, 3, 3, 3), (4,)]
        assert dict(stats[0].args_info)["pad"] == (0, 0)
    for s in result["forward"] + result["backward"]:
        assert isinstance(s, ProfileStat) and 1 <= s.n_run <= 3 and float(s.mean_time) > 0
    for key in ("forward_all", "backward_all", "training"):
        assert float(result[key]) > 0 and 1 <= result["n_run_" + key] <= 3
    # The training step ran the solver.
    assert any(not np.array_equal(v.d, params_before[k]) for k, v in nn.get_parameters().items())


def test_backward_rows_of_functions_without_gradients():
    x = nn.Variable.from_numpy_array(np.ones((2, 3), dtype=np.float32))   # need_grad False
    y = F.tanh(F.sin(x))
    gp = GraphProfiler(y, device_id="0", ext_name="cpu", n_run=2)
    gp.run()
    assert [(s.function_name, s.mean_time, s.n_run) for s in gp.result["backward"]] == \
        [("Sin", None, 0), ("Tanh", None, 0)]
    assert all(float(s.mean_time) > 0 for s in gp.result["forward"])
    assert (gp.result["backward_all"], gp.result["n_run_backward_all"]) == (None, 0)


def test_time_limit_cuts_the_runs_short():
    loss = training_graph()
    gp = GraphProfiler(loss, device_id=0, ext_name="cpu", n_run=1000, max_measure_execution_time=0)
    gp.run()
    assert all(s.n_run == 1 for s in gp.result["forward"] + gp.result["backward"])
    assert gp.result["n_run_forward_all"] == 1 and "training" not in gp.result


def test_csv_layout():
    loss = training_graph()
    solver = S.Sgd()
    solver.set_parameters(nn.get_parameters())
    gp = GraphProfiler(loss, device_id=0, ext_name="cpu", solver=solver, n_run=2)
    gp.run()
    buffer = io.StringIO()
    GraphProfilerCsvWriter(gp, file=buffer).write()
    rows = list(csv.reader(io.StringIO(buffer.getvalue())))
    assert rows[:7] == [["num. of run", "2"], ["device id", "0"], ["ext name", "cpu"], ["time scale", "m"],
                        ["nnabla version", nn.__version__], [],
                        ["parameter_scope", "function_name", "inputs_shape", "args_info", "forward",
                         "backward", "forward_n_run", "backward_n_run"]]
    body = rows[7:12]
    assert [r[:3] for r in body] == [
        ["net/conv/conv", "Convolution", "[(4, 3, 6, 6), (4, 3, 3, 3), (4,)]"],
        ["", "ReLU", "[(4, 4, 4, 4)]"],
        ["net/fc/affine", "Affine", "[(4, 4, 4, 4), (64, 3), (3,)]"],
        ["", "SoftmaxCrossEntropy", "[(4, 3), (4, 1)]"],
        ["", "Mean", "[(4, 1)]"]]
    assert body[0][3] == ("base_axis: 1, pad: [0, 0], stride: [1, 1], dilation: [1, 1], group: 1, "
                          "channel_last: False")
    for r in body:
        assert float(r[4]) > 0 and float(r[5]) > 0 and r[6] == "2" and r[7] == "2"
    assert [r[0] if r else "" for r in rows[12:]] == ["", "forward all", "forward_all_n_run", "", "backward all",
                                         "backward_all_n_run", "", "training(forward + backward + update)",
                                         "training_n_run"]


def test_bad_arguments():
    loss = training_graph()
    with pytest.raises(ValueError, match="n_run"):
        GraphProfiler(loss, device_id=0, ext_name="cpu", n_run=0)
    with pytest.raises(ValueError, match="time scale"):
        GraphProfiler(loss, device_id=0, ext_name="cpu", time_scale="s")
    with pytest.raises(ValueError, match="run"):
        GraphProfilerCsvWriter(GraphProfiler(loss, device_id=0, ext_name="cpu"), file=io.StringIO())
    assert convert_time_scale(2.0, "u") == 2e6
