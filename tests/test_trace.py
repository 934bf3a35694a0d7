"""nnabla_jit.utils.profiler.trace: a step recorded as a Chrome trace (what the trace viewers of
Chrome and Perfetto read), an event per kernel that ran (fused regions as such), properly nested,
compile events on an empty kernel cache, and a summary table. Timings are never checked."""
import collections
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit import graph, tracing
from nnabla_jit.ext_utils import get_extension_context
from nnabla_jit.utils.profiler import trace
from nnabla_jit.utils.trace import summary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPS = 1e-6   # microseconds: the file's times have three decimals

pytestmark = pytest.mark.usefixtures("fuse_from_first_run")


def check_chrome_trace(doc):
    """Raise AssertionError unless ``doc`` is a Chrome trace in the JSON object format whose
    events carry the fields their phase needs; returns the events."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M", "b", "e", "i"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and e["args"]["name"], e
            continue
        assert isinstance(e["name"], str) and e["name"] and isinstance(e["cat"], str), e
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
        if e["ph"] in ("b", "e"):
            assert "id" in e, e
    return doc["traceEvents"]


def check_nested(events):
    """Raise AssertionError where two complete events on one thread overlap without one
    holding the other."""
    threads = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            threads[e["pid"], e["tid"]].append(e)
    for slices in threads.values():
        slices.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends = []
        for e in slices:
            while open_ends and e["ts"] >= open_ends[-1][0] - EPS:
                open_ends.pop()
            end = e["ts"] + e["dur"]
            assert not open_ends or end <= open_ends[-1][0] + EPS, \
                "{} overlaps {} without nesting".format(e["name"], open_ends[-1][1])
            open_ends.append((end, e["name"]))


def slices(events, *cats):
    return [e for e in events if e["ph"] == "X" and e["cat"] in cats]


def mlp(dtype=np.float32):
    """An MLP whose activation is an elementwise chain (tanh(h) * sigmoid(h)): a fused region
    under the clearing flags."""
    rng = np.random.RandomState(0)
    x = nn.Variable.from_numpy_array(rng.randn(4, 6).astype(dtype))
    t = nn.Variable.from_numpy_array(rng.randint(0, 3, (4, 1)))
    config = "double" if dtype == np.float64 else "float"
    with nn.context_scope(get_extension_context("cpu", type_config=config)):
        h = PF.affine(x, 5, name="fc1")
        h = F.tanh(h) * F.sigmoid(h)
        loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 3, name="fc2"), t))
    solver = S.Momentum(0.1)
    solver.set_parameters(nn.get_parameters())
    return loss, solver


def functions_of(loss):
    found = []
    loss.visit(found.append)
    return found


def ran(events, phase):
    """The ops that ran in ``phase``, a fused region's ops each counted."""
    names = []
    for e in slices(events, "op", "fused"):
        if e["args"]["phase"] == phase:
            names += e["args"]["ops"] if e["cat"] == "fused" else [e["args"]["op"]]
    return names


def test_the_checks_catch_what_they_check():
    bad = [{"ph": "X", "name": "a", "cat": "op", "ts": 0.0, "dur": 2.0, "pid": 1, "tid": 1},
           {"ph": "X", "name": "b", "cat": "op", "ts": 1.0, "dur": 2.0, "pid": 1, "tid": 1}]
    with pytest.raises(AssertionError, match="overlaps"):
        check_nested(bad)
    check_nested([bad[0], dict(bad[1], tid=2)])   # other threads may overlap
    with pytest.raises(AssertionError, match="'dur': -1.0"):
        check_chrome_trace({"traceEvents": [dict(bad[0], dur=-1.0)]})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_fused_step_has_an_event_per_kernel_naming_every_op(tmp_path, dtype):
    loss, solver = mlp(dtype)
    path = tmp_path / "step.json"
    with trace(path):
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
    events = check_chrome_trace(json.loads(path.read_text()))
    check_nested(events)
    ops = sorted(f.info.type_name for f in functions_of(loss))
    assert sorted(ran(events, "forward")) == ops
    assert sorted(ran(events, "backward")) == ops
    fused = slices(events, "fused")
    assert {tuple(e["args"]["ops"]) for e in fused} == {("Tanh", "Sigmoid", "Mul2")}
    assert {e["args"]["phase"] for e in fused} == {"forward", "backward"}
    affine = [e for e in slices(events, "op") if e["args"]["op"] == "Affine"
              and e["args"]["phase"] == "forward"]
    name = np.dtype(dtype).name
    assert [e["args"]["inputs"][0] for e in affine] == [name + "[4,6]", name + "[4,5]"]
    assert [e["args"]["scope"] for e in affine] == ["fc1/affine", "fc2/affine"]
    # the kernels sit inside their executor call; the solver's per-parameter slices in update
    calls = {e["name"]: e for e in slices(events, "step")}
    assert set(calls) == {"forward", "backward"}
    for e in slices(events, "op", "fused"):
        call = calls[e["args"]["phase"]]
        assert call["ts"] <= e["ts"] and e["ts"] + e["dur"] <= call["ts"] + call["dur"] + EPS
    solver_slices = {e["name"]: e for e in slices(events, "solver")}
    assert {"Momentum.update", "Momentum.zero_grad"} <= set(solver_slices)
    update = solver_slices["Momentum.update"]
    params = [e for e in slices(events, "solver") if e["name"] in nn.get_parameters()]
    assert sorted(e["name"] for e in params) == sorted(nn.get_parameters())
    assert all(update["ts"] <= e["ts"] <= update["ts"] + update["dur"] for e in params)
    assert params[0]["args"]["states"] == ["m"]


def test_an_unfused_step_has_an_event_per_op_in_order(monkeypatch):
    monkeypatch.setattr(graph, "FUSION", False)
    loss, _ = mlp()
    with trace() as t:
        loss.forward()
        loss.backward()
    events = check_chrome_trace(t.chrome_trace())
    check_nested(events)
    assert not slices(events, "fused")
    order = [f.info.type_name for f in functions_of(loss)]
    assert ran(events, "forward") == order
    assert ran(events, "backward") == order[::-1]
    assert all(e["args"]["device"] == "cpu" for e in slices(events, "op"))


def test_tracing_changes_no_result_and_leaves_no_recorder():
    loss, solver = mlp()
    params = nn.get_parameters()
    start = {k: v.d.copy() for k, v in params.items()}

    def steps(traced):
        for k, v in params.items():
            v.d = start[k]
        solver.set_parameters(params)   # fresh momentum
        losses = []
        for _ in range(2):
            if traced:
                with trace():
                    loss.forward(clear_no_need_grad=True)
                    solver.zero_grad()
                    loss.backward(clear_buffer=True)
                    solver.update()
            else:
                loss.forward(clear_no_need_grad=True)
                solver.zero_grad()
                loss.backward(clear_buffer=True)
                solver.update()
            losses.append(float(loss.d))
        return losses, {k: v.d.copy() for k, v in params.items()}

    plain_losses, plain = steps(False)
    traced_losses, traced = steps(True)
    assert plain_losses == traced_losses
    for k in plain:
        np.testing.assert_array_equal(plain[k], traced[k])
    assert tracing.recorder is None


def test_the_recorder_is_removed_when_the_block_raises(tmp_path):
    path = tmp_path / "t.json"
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        with trace(path):
            F.tanh(nn.Variable.from_numpy_array(np.ones(3, np.float32))).forward()
            1 / 0
    assert tracing.recorder is None
    check_chrome_trace(json.loads(path.read_text()))
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]   # no temporary left


def test_a_second_trace_inside_the_first_is_refused():
    with trace():
        with pytest.raises(RuntimeError, match="another trace is recording"):
            with trace():
                pass


def test_imperative_calls_are_recorded():
    nn.set_auto_forward(True)
    with trace() as t, nn.context_scope(get_extension_context("cpu", type_config="double")):
        y = F.sum(F.tanh(nn.Variable.from_numpy_array(np.ones((2, 3), np.float64))), axis=1)
    events = check_chrome_trace(t.chrome_trace())
    tanh, total = slices(events, "op")
    assert tanh["args"]["op"] == "Tanh" and tanh["args"]["outputs"] == ["float64[2,3]"]
    assert total["args"]["op"] == "Sum" and total["args"]["outputs"] == ["float64[2]"]
    assert y.d.shape == (2,)


def test_a_path_in_a_missing_directory_is_refused_before_the_step(tmp_path):
    with pytest.raises(FileNotFoundError, match="trace: path .*missing"):
        with trace(tmp_path / "missing" / "step.json"):
            raise AssertionError("the block ran")
    assert tracing.recorder is None


def test_deferred_compiles_are_async_spans_closed_at_the_end():
    class Request:
        module, qualname, sig, message = "m", "kernel_parallel", ("float32[::1]",), ""

    first, second = Request(), Request()
    with trace() as t:
        t.deferred(first, "requested")
        t.deferred(second, "requested")
        t.deferred(first, "ok")
    events = check_chrome_trace(t.chrome_trace())
    spans = [e for e in events if e["ph"] in ("b", "e")]
    assert [e["ph"] for e in spans] == ["b", "b", "e", "e"]
    assert spans[0]["id"] == spans[2]["id"] != spans[1]["id"] == spans[3]["id"]
    assert spans[3]["args"]["state"] == "still compiling when the trace ended"


def test_summary_ranks_ops_and_names_the_categories():
    loss, solver = mlp()
    with trace() as t:
        loss.forward(clear_no_need_grad=True)
        loss.backward(clear_buffer=True)
        solver.update()
    text = t.summary()
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["op", "/", "region"]
    ms = [float(line.split()[-2]) for line in lines[1:] if line.strip() and "%" in line.split()[-1]
          and not line.startswith("total")]
    assert ms == sorted(ms, reverse=True) and len(ms) > 3
    assert "fused: Tanh+Sigmoid+Mul2" in text
    assert "executor" in lines[-2] and "solver" in lines[-2]
    assert lines[-1].startswith("the block took")
    assert summary(t.chrome_trace()) == text


COMPILING = textwrap.dedent("""
    import json, sys
    import numpy as np
    import nnabla_jit as nn, nnabla_jit.functions as F
    from nnabla_jit.utils.profiler import trace
    x = nn.Variable.from_numpy_array(np.linspace(-1, 1, 8).astype(np.float32))
    y = F.tanh(x * 1.5 + 0.25)
    with trace(sys.argv[1]):
        y.forward(clear_no_need_grad=True)
""")


def test_an_empty_kernel_cache_shows_compiles_and_a_warm_one_loads(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(NNABLA_JIT_CACHE_DIR=str(tmp_path / "cache"), NNABLA_JIT_DEFER_PARALLEL="0",
               NNABLA_JIT_FUSE_FROM_RUN="1",   # the step is the graph's first run
               PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    script = tmp_path / "step.py"
    script.write_text(COMPILING)
    found = []
    for run in ("cold", "warm"):
        path = tmp_path / (run + ".json")
        done = subprocess.run([sys.executable, str(script), str(path)], cwd=str(tmp_path), env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        events = check_chrome_trace(json.loads(path.read_text()))
        check_nested(events)
        found.append(events)
    cold, warm = found
    compiles = slices(cold, "compile")
    assert compiles and all(e["name"] == "compile " + e["args"]["kernel"] for e in compiles)
    assert any(e["args"]["kernel"] == "fused" for e in compiles)   # the generated region
    # each compile inside the kernel that first called it
    kernels = slices(cold, "op", "fused")
    assert all(any(k["ts"] <= c["ts"] and c["ts"] + c["dur"] <= k["ts"] + k["dur"] + EPS
                   for k in kernels) for c in compiles)
    assert not slices(warm, "compile")
    assert any(e["args"].get("kernel") == "fused" for e in slices(warm, "numba"))


DEFERRING = textwrap.dedent('''
    import sys
    import numpy as np
    from nnabla_jit import deferred_compile as dc
    from nnabla_jit.utils.profiler import trace
    m = dc.load_generated("nnabla_jit_tracetest_", """
    from numba import njit, prange


    @njit(cache=True)
    def double(x, out):
        for i in range(x.size):
            out[i] = 2 * x[i]


    @njit(cache=True, parallel=True)
    def double_parallel(x, out):
        for i in prange(x.size):
            out[i] = 2 * x[i]
    """)
    x, out = np.arange(6.0), np.zeros(6)
    with trace(sys.argv[1]):
        m.double_parallel(x, out)   # the serial twin runs; the worker compiles this one
        assert dc.wait(300)
        m.double_parallel(x, out)   # loaded from the cache the worker wrote
''')


def test_a_deferred_compile_is_an_async_span_from_request_to_answer(tmp_path):
    numba_part = tmp_path / "cache" / "numba"
    numba_part.mkdir(parents=True)
    (numba_part / "unrelated.nbi").write_text("")   # not empty: no manifest prefetch at import
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(NNABLA_JIT_CACHE_DIR=str(tmp_path / "cache"), NNABLA_JIT_DEFER_PARALLEL="1",
               PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    path = tmp_path / "deferred.json"
    done = subprocess.run([sys.executable, "-c", DEFERRING, str(path)], cwd=str(tmp_path),
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    events = check_chrome_trace(json.loads(path.read_text()))
    check_nested(events)
    spans = [e for e in events if e["ph"] in ("b", "e")]
    # the worker answers the block kernel (the stand-in, parallel_blocks) first, then the parfor
    assert sorted({e["name"] for e in spans}) == ["double_block", "double_parallel"]
    begin, end = [e for e in spans if e["name"] == "double_parallel"]
    assert (begin["ph"], end["ph"]) == ("b", "e") and begin["id"] == end["id"]
    assert end["args"]["state"] == "ok" and end["ts"] >= begin["ts"]
    loads = [e for e in slices(events, "numba") if e["args"].get("kernel") == "double_parallel"]
    assert loads and loads[-1]["ts"] >= end["ts"]
