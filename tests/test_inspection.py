"""nnabla_jit.utils.inspection's debugging tools: pprint, NanInfTracer, TimeProfiler; and the
Debugging tutorial of seed 004 run end to end."""
import csv
import os

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.utils.inspection import (CpuTimerCallback, FunctionHookCallbackBase, NanInfTracer,
                                         TimeProfiler, pprint)


def small_graph():
    x = nn.Variable.from_numpy_array(np.array([[1.0, -2.0, 3.0]], dtype=np.float32))
    y = F.relu(PF.affine(x, 2, name="fc"))
    return x, y


def test_pprint_prints_each_function(capsys):
    x, y = small_graph()
    pprint(y)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "fc/affine/Affine(Affine)",
        "\tDepth = 0",
        "\tArgs: ['base_axis=1']",
        "\tInputs: [(1, 3), (3, 2), (2,)]",
        "\tOutputs: [(1, 2)]",
        "\tBackward Inputs: [False, True, True]",
        "ReLU(ReLU)",
        "\tDepth = 1",
        "\tArgs: ['inplace=False']",
        "\tInputs: [(1, 2)]",
        "\tOutputs: [(1, 2)]",
        "\tBackward Inputs: [True]",
    ]


def test_pprint_summary_and_hidden(capsys):
    x, y = small_graph()
    nn.get_parameters()["fc/affine/W"].d = np.arange(6.0).reshape(3, 2)
    nn.get_parameters()["fc/affine/b"].d = 0
    printer = pprint(y, forward=True, backward=True, summary=True, hidden=True, printer=True)
    out = capsys.readouterr().out
    # The affine output is x @ W = [[8, 10]], which ReLU keeps.
    assert "\tOutput Data:\n\t\tMed:  [9.0]\n\t\tAve:  [9.0]\n\t\tStd:  [1.0]\n\t\tMin:  [8.0]\n\t\tMax:  [10.0]" in out
    # x takes no gradient; W's is x.T @ [[1, 1]], b's [1, 1].
    assert "\tInput Grads:\n\t\tMed:  [0.0, 1.0, 1.0]\n\t\tAve:  [0.0, 0.6666667, 1.0]\n" in out
    assert [f["name"] for f in printer.functions] == ["fc/affine/Affine(Affine)", "ReLU(ReLU)"]
    assert printer.functions[1]["outputs"][0] is y
    assert pprint(y) is None


def nan_graph():
    x = nn.Variable.from_numpy_array(np.array([4.0, 1.0, 9.0], dtype=np.float32), need_grad=True)
    h = F.pow_scalar(F.add_scalar(x, -2.0), 0.5)      # sqrt(-1): NaN in the second element
    return x, F.sum(F.tanh(h))


def test_nan_inf_tracer_names_the_first_function():
    x, y = nan_graph()
    nit = NanInfTracer(trace_nan=True, trace_inf=True, need_details=True)
    with pytest.raises(ValueError, match="function 'PowScalar' .* has 1 NaN value") as err:
        with nit.trace():
            y.forward(function_post_hook=nit.forward_post_hook)
    message = str(err.value)
    assert message.startswith("The 1st output of the function 'PowScalar' (rank: 1) has 1 NaN value(s).")
    assert "function type: PowScalar" in message and "shapes of inputs: [(3,)]" in message
    assert message.splitlines()[-2:] == ["    AddScalar", "    PowScalar <-- ERROR"]

    x.d = [4.0, 3.0, 9.0]
    with nit.trace():
        y.forward(function_post_hook=nit.forward_post_hook)
        y.backward(function_post_hook=nit.backward_post_hook)
    assert nit.check() is None

    x.d = [4.0, 2.0, 9.0]   # sqrt(0) is fine forward, its gradient is Inf
    y.forward(function_post_hook=nit.forward_post_hook)
    y.backward(function_post_hook=nit.backward_post_hook)
    with pytest.raises(ValueError, match="1st input gradient of the function 'PowScalar'.*1 Inf"):
        nit.check()


def test_nan_inf_tracer_options():
    x, y = nan_graph()
    no_nan = NanInfTracer(trace_nan=False, trace_inf=True, need_details=False)
    y.forward(function_post_hook=no_nan.forward_post_hook)
    assert no_nan.check() is None
    assert NanInfTracer(trace_nan=False, trace_inf=False).forward_post_hook is None
    brief = NanInfTracer(need_details=False)
    y.forward(function_post_hook=brief.forward_post_hook)
    with pytest.raises(ValueError, match="function 'PowScalar' .* has 1 NaN value") as err:
        brief.check()
    assert "Function details" not in str(err.value)
    assert brief.pre_hook is None
    with pytest.raises(NotImplementedError, match="forward_post_hook"):
        brief.post_hook
    with pytest.raises(NotImplementedError, match="FunctionHookCallbackBase has no pre_hook"):
        FunctionHookCallbackBase().pre_hook


def test_time_profiler(tmp_path, capsys):
    x, y = small_graph()
    tp = TimeProfiler("cpu", "0")
    for _ in range(3):
        with tp.scope("forward"):
            y.forward(function_pre_hook=tp.pre_hook, function_post_hook=tp.post_hook)
        with tp.scope("backward"):
            y.backward(function_pre_hook=tp.pre_hook, function_post_hook=tp.post_hook)
        tp.calc_elapsed_time(["forward", "backward", "summary"])
    averages = tp.average(start_index=1)
    assert list(averages["summary"]) == ["forward", "backward"]
    assert [f.name for f in averages["forward"]] == ["Affine", "ReLU"]
    assert [f.name for f in averages["backward"]] == ["ReLU", "Affine"]
    for scope in averages.values():
        for res in scope.values():
            assert res["num"] == 2 and res["scale"] == "ms" and res["time"] > 0
    tp()
    out = capsys.readouterr().out
    assert "### summary ###" in out and "\nAffine: " in out

    tp.to_csv(str(tmp_path))
    with open(tmp_path / "profile_summary.csv") as f:
        summary = list(csv.DictReader(f))
    assert [r["scope"] for r in summary] == ["forward", "backward"]
    assert all(float(r["time"]) > 0 and r["num"] == "2" for r in summary)
    with open(tmp_path / "profile_detail.csv") as f:
        detail = list(csv.DictReader(f))
    assert [(r["scope"], r["original_key"]) for r in detail] == [("Affine_0", "Affine"), ("ReLU_0", "ReLU")]
    assert all(float(r["time_forward"]) > 0 and float(r["time_backward"]) > 0 for r in detail)
    assert sorted(os.listdir(tmp_path)) == ["profile_detail.csv", "profile_summary.csv"]

    with pytest.raises(NotImplementedError, match="tpu"):
        TimeProfiler("tpu", "0")
    with pytest.raises(ValueError, match="scope"):
        tp.calc_elapsed_time("nowhere")
    with pytest.raises(ValueError, match="without its pre_hook"):
        CpuTimerCallback("cpu", "0").post_hook("key")


# ---------------------------------------------------------------------------- seed 004, Debugging
def block(x, maps, test=False, name="block"):
    h = x
    with nn.parameter_scope(name):
        with nn.parameter_scope("inblock1"):
            h = PF.convolution(h, maps, kernel=(3, 3), pad=(1, 1), with_bias=False)
            h = PF.batch_normalization(h, batch_stat=not test)
            h = F.relu(h)
        with nn.parameter_scope("inblock2"):
            h = PF.convolution(h, maps // 2, kernel=(3, 3), pad=(1, 1), with_bias=False)
            h = PF.batch_normalization(h, batch_stat=not test)
            h = F.relu(h)
        with nn.parameter_scope("inblock3"):
            h = PF.convolution(h, maps, kernel=(3, 3), pad=(1, 1), with_bias=False)
            h = PF.batch_normalization(h, batch_stat=not test)
        if h.shape[1] != x.shape[1]:
            with nn.parameter_scope("skip"):
                s = PF.convolution(x, maps, kernel=(3, 3), pad=(1, 1), with_bias=False)
                s = PF.batch_normalization(s, batch_stat=not test)
    return F.relu(h + s)


def network(x, maps=16, test=False):
    h = x
    h = PF.convolution(h, maps, kernel=(3, 3), pad=(1, 1), name="firstconv", with_bias=False)
    h = PF.batch_normalization(h, batch_stat=not test, name="firstbn")
    h = F.relu(h)
    for l in range(4):
        h = block(h, maps * 2 ** (l + 1), name="block{}".format(l))
        h = F.max_pooling(h, (2, 2))
    h = F.average_pooling(h, h.shape[2:])
    pred = PF.affine(h, 100, name="pred")
    return pred


def test_debugging_tutorial(tmp_path, capsys):
    """The tutorial's code, on a 16x16 input with 4 base maps instead of 128x128 and 16."""
    # Visit
    class PrintFunc(object):
        def __call__(self, nnabla_func):
            print("==========")
            print(nnabla_func.info.type_name)
            print(nnabla_func.inputs)
            print(nnabla_func.outputs)
            print(nnabla_func.info.args)

    nn.clear_parameters()
    x = nn.Variable.from_numpy_array(np.random.randn(*[2, 3, 16, 16]))
    pred = network(x, maps=4)
    pred.visit(PrintFunc())
    printed = capsys.readouterr().out
    # 3 at the start, 4 blocks of 13 (4 convolutions and normalizations, 3 ReLUs, Add2,
    # max pooling), average pooling and affine: 57 functions.
    assert printed.count("==========") == 57
    assert printed.split("==========\n")[1].startswith("Convolution\n[<Variable((2, 3, 16, 16), need_grad=False)")

    # PPrint
    nn.clear_parameters()
    pred = network(x, maps=4)
    pprint(pred, summary=True, forward=True, backward=True)
    printed = capsys.readouterr().out
    assert printed.startswith("firstconv/conv/Convolution(Convolution)\n\tDepth = 0\n")
    assert "block3/skip/bn/BatchNormalization(BatchNormalization)" in printed
    assert printed.count("\tOutput Grads:") == 57

    # Simple graph viewer (without graphviz: SVG or PNG files)
    import nnabla_jit.experimental.viewers as V
    nn.clear_parameters()
    x = nn.Variable([2, 3, 16, 16])
    pred = network(x, maps=4)
    graph = V.SimpleGraph(verbose=False)
    path = graph.save(pred, str(tmp_path / "graph"), format="svg")
    with open(path) as f:
        assert f.read().count("block2/inblock1/conv") == 1
    graph = V.SimpleGraph(verbose=True)
    path = graph.save(pred, str(tmp_path / "verbose"), format="svg")
    with open(path) as f:
        assert "((2, 3, 16, 16), need_grad=False)" in f.read()

    # Profiling utils
    from nnabla_jit.ext_utils import get_extension_context
    nn.clear_parameters()
    device = "cpu"
    ctx = get_extension_context(device)
    nn.set_default_context(ctx)
    x = nn.Variable.from_numpy_array(np.random.randn(*[2, 3, 16, 16]))
    t = nn.Variable([2, 1])
    pred = network(x, maps=4)
    loss = F.mean(F.softmax_cross_entropy(pred, t))
    solver = S.Momentum()
    solver.set_parameters(nn.get_parameters())
    from nnabla_jit.utils.profiler import GraphProfiler
    B = GraphProfiler(loss, solver=solver, device_id=0, ext_name=device, n_run=2)
    B.run()
    from nnabla_jit.utils.profiler import GraphProfilerCsvWriter
    with open(str(tmp_path / "profile.csv"), "w") as f:
        writer = GraphProfilerCsvWriter(B, file=f)
        writer.write()
    with open(str(tmp_path / "profile.csv")) as f:
        rows = list(csv.reader(f))
    header = rows.index(["parameter_scope", "function_name", "inputs_shape", "args_info", "forward",
                         "backward", "forward_n_run", "backward_n_run"])
    assert len(rows[header + 1:rows.index([], header)]) == 59   # the network's 57 and the loss's 2
    assert ["training_n_run", "2"] in rows

    # Value tracer: a clean run, then an injected NaN
    nn.clear_parameters()
    x = nn.Variable.from_numpy_array(np.random.randn(*[2, 3, 16, 16]))
    pred = network(x, maps=4)
    nit = NanInfTracer(trace_inf=True, trace_nan=True, need_details=True)
    with nit.trace():
        pred.forward(function_post_hook=nit.forward_post_hook)
        pred.backward(function_post_hook=nit.backward_post_hook)
    print(nit.check())
    assert capsys.readouterr().out == "None\n"
    x.d[1, 2, 3, 4] = np.nan
    with pytest.raises(ValueError, match="output of the function 'Convolution' \\(rank: 0\\)"):
        with nit.trace():
            pred.forward(function_post_hook=nit.forward_post_hook)
            pred.backward(function_post_hook=nit.backward_post_hook)

