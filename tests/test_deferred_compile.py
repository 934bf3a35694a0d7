"""Deferred parallel kernels (nnabla_jit/deferred_compile.py): on an empty cache the serial twin
stands in while a background process compiles the parallel variant into the cache; the result
is picked up, later processes load it, and killing the worker loses nothing.

The scenarios run in fresh processes on a fresh cache directory: numba keeps compiled code in
the process, which would hide what a later run finds on disk.
"""
import inspect
import io
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.solvers as S
from nnabla_jit import deferred_compile, numba_internals
from nnabla_jit.ops import blas, reduction
import nnabla_jit.solver_kernels as K

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A generated module with a serial kernel and its parallel twin (deferred by load_generated).
SOURCE = '''
from numba import njit, prange


@njit(cache=True)
def double(x, out):
    for i in range(x.size):
        out[i] = 2 * x[i]


@njit(cache=True, parallel=True)
def double_parallel(x, out):
    for i in prange(x.size):
        out[i] = 2 * x[i]
'''
PRELUDE = '''
import numpy as np
from nnabla_jit import deferred_compile as dc
m = dc.load_generated("nnabla_jit_defertest_", {source!r})
x = np.arange(6.0)


def call(label):
    out = np.zeros(6)
    m.double_parallel(x, out)
    print(label, out.tolist() == (2 * x).tolist(), len(m.double.signatures),
          len(m.double_parallel.signatures), dc.pending(), dc._worker.started, flush=True)
'''.format(source=SOURCE)


def _run(cache, body, cold=False, **env):
    """Run PRELUDE + ``body`` in a fresh process on ``cache``. Unless ``cold``, the cache is
    not empty (a file of no kernel in numba's part), so the worker does not start on the
    manifest at import and answers these scenarios' requests at once."""
    if not cold and not os.path.isfile(str(cache)):
        os.makedirs(os.path.join(str(cache), "numba"), exist_ok=True)
        open(os.path.join(str(cache), "numba", "unrelated.nbi"), "w").close()
    full_env = dict(os.environ, NNABLA_JIT_CACHE_DIR=str(cache))
    full_env[deferred_compile.ENV_VAR] = "1"
    full_env.update(env)
    full_env.pop("NUMBA_CACHE_DIR", None)
    full_env["PYTHONPATH"] = REPO + os.pathsep + os.environ.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", PRELUDE + body], env=full_env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    # label -> (result right, serial signatures, parallel signatures, pending, workers started)
    return {line.split()[0]: tuple(line.split()[1:]) for line in done.stdout.splitlines()}


def test_serial_stands_in_then_the_background_result_is_used_and_kept(tmp_path):
    out = _run(tmp_path, 'call("first")\nassert dc.wait(300)\ncall("later")\n')
    # first call: the serial twin computed it, the parallel variant is being compiled elsewhere
    assert out["first"] == ("True", "1", "0", "1", "1")
    # once the worker has written it, the next call loads it (nothing compiled here)
    assert out["later"] == ("True", "1", "1", "0", "1")
    # a later process finds it in the cache: parallel from the first call, no worker, no serial
    out = _run(tmp_path, 'call("again")\n')
    assert out["again"] == ("True", "0", "1", "0", "0")


def test_a_killed_worker_loses_nothing(tmp_path):
    body = '''
call("first")
dc._worker.proc.kill()
import time
deadline = time.monotonic() + 300
while dc.pending() and time.monotonic() < deadline:   # marked lost when the pipe closes
    time.sleep(0.01)
call("after_kill")      # still right (serial); asks a new worker
assert dc.wait(300)
call("later")
'''
    out = _run(tmp_path, body)
    assert out["first"] == ("True", "1", "0", "1", "1")
    assert out["after_kill"] == ("True", "1", "0", "1", "2")
    assert out["later"] == ("True", "1", "1", "0", "2")


def test_a_run_that_exits_at_once_leaves_its_parallel_kernel_in_the_cache(tmp_path):
    # the process exits right after its first call, its worker still starting: the worker is
    # detached, not stopped, and compiles what the run asked for (before: lost at every exit,
    # so runs shorter than a compilation never got their parallel kernels)
    out = _run(tmp_path, 'call("first")\n')
    assert out["first"] == ("True", "1", "0", "1", "1")
    out = _run(tmp_path, 'print("waited", dc.wait_for_workers(300))\n')
    assert out["waited"] == ("True",)
    # the next run loads it: no serial stand-in compiled, no worker started
    out = _run(tmp_path, 'call("again")\n')
    assert out["again"] == ("True", "0", "1", "0", "0")


def test_a_warm_network_run_compiles_nothing_and_starts_no_worker(tmp_path):
    # A short training run on an empty cache (import, build, three steps, exit), then a second
    # run: every kernel the first used, its parallel variants included, is in the cache once
    # the first run's detached worker is done; the second compiles nothing and starts no worker.
    body = """
import numpy as np
import nnabla_jit as nn, nnabla_jit.functions as F, nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit import kernel_cache
x = nn.Variable.from_numpy_array(np.random.randn(64, 1024).astype(np.float32))
t = nn.Variable.from_numpy_array(np.random.randint(0, 10, (64, 1)))
loss = F.mean(F.softmax_cross_entropy(PF.affine(F.relu(PF.affine(x, 1024)), 10, name="out"), t))
solver = S.Momentum(0.01, 0.9)
solver.set_parameters(nn.get_parameters())
for _ in range(3):
    loss.forward(clear_no_need_grad=True)
    solver.zero_grad()
    loss.backward(clear_buffer=True)
    solver.update()
print("run", dc.pending() > 0, kernel_cache.compile_count() > 0, dc._worker.started)
"""
    first = _run(tmp_path / "cache", body, cold=True)
    assert first["run"][:2] == ("True", "True")   # parallel kernels were deferred: a real test
    waited = _run(tmp_path / "cache", 'print("waited", dc.wait_for_workers(600))\n', cold=True)
    assert waited["waited"] == ("True",)
    second = _run(tmp_path / "cache", body, cold=True)
    assert second["run"] == ("False", "False", "0")


def test_the_worker_finishes_the_requests_after_its_process_has_gone(monkeypatch):
    gone, order = threading.Event(), []

    def lines():
        yield json.dumps([deferred_compile._PREFETCH_ID, "m", "prefetch1", ""])
        yield json.dumps([deferred_compile._PREFETCH_ID, "m", "prefetch2", ""])
        yield json.dumps([5, "m", "request1", ""])
        yield json.dumps([6, "m", "request2", ""])
        gone.set()   # then the input ends: the process has exited

    def compile_stub(line):
        gone.wait(60)
        time.sleep(0.2)   # the reader has seen the end of the input
        order.append(line[2])
        return "{} ok".format(line[0])

    monkeypatch.setattr(deferred_compile, "_compile", compile_stub)
    replies = _ClosedPipe()
    deferred_compile._serve(lines(), replies)
    # the requests are done, the prefetches dropped (but the first, if it was already under way
    # when the input ended); replies to nobody are not an error
    assert order in (["prefetch1", "request1", "request2"], ["request1", "request2"])


def test_a_detached_worker_stops_at_its_deadline(monkeypatch):
    order = []
    monkeypatch.setattr(deferred_compile, "_compile", lambda line: order.append(line[2]) or "1 ok")
    deferred_compile._serve([json.dumps([1, "m", "request", ""])], _ClosedPipe(), detached_seconds=-1)
    assert order in ([], ["request"])   # at most what it had started before the input ended


def test_a_worker_compiles_only_what_no_other_has_written_and_one_at_a_time(monkeypatch, tmp_path):
    fcntl = pytest.importorskip("fcntl")
    monkeypatch.setattr(deferred_compile.kernel_cache, "numba_dir", lambda: str(tmp_path))
    compiled, cached = [], {}

    class Kernel:
        def compile(self, sig):
            compiled.append(sig)

    monkeypatch.setattr(deferred_compile, "_find", lambda module, name: Kernel())
    monkeypatch.setattr(deferred_compile, "_load_cached", lambda disp, sig: cached.get(sig))
    line = [3, "m", "k", "(int64, float32)"]
    sig = numba_internals.signature_from_text(line[3])
    cached[sig] = "entry"   # another worker wrote it: loaded, not compiled
    assert deferred_compile._compile(line) == "3 ok" and compiled == []
    del cached[sig]
    held = os.open(str(tmp_path / deferred_compile._COMPILE_LOCK), os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)   # another worker is compiling
    done = []
    thread = threading.Thread(target=lambda: done.append(deferred_compile._compile(line)))
    thread.start()
    thread.join(0.5)
    assert compiled == [] and thread.is_alive()   # waits for it
    os.close(held)
    thread.join(60)
    assert done == ["3 ok"] and compiled == [sig]


def test_workers_running_sees_a_worker_of_another_process(monkeypatch, tmp_path):
    fcntl = pytest.importorskip("fcntl")
    monkeypatch.setattr(deferred_compile.kernel_cache, "numba_dir", lambda: str(tmp_path))
    assert not deferred_compile.workers_running()
    held = os.open(str(tmp_path / deferred_compile._ALIVE_LOCK), os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_SH)
    try:
        assert deferred_compile.workers_running()
        assert not deferred_compile.wait_for_workers(0.1)
    finally:
        os.close(held)
    assert deferred_compile.wait_for_workers(1)


class _ClosedPipe:
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass


def test_not_deferred_when_switched_off(tmp_path):
    out = _run(tmp_path, 'call("first")\n', **{deferred_compile.ENV_VAR: "0"})
    assert out["first"] == ("True", "0", "1", "0", "0")


def test_not_deferred_without_a_disk_cache(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = _run(blocker, 'call("first")\n')   # the cache is unusable: in-memory, compiled here
    assert out["first"] == ("True", "0", "1", "0", "0")


def test_an_empty_cache_starts_the_worker_on_the_manifest_at_import(tmp_path):
    body = """
import time
from nnabla_jit import kernel_cache, numba_internals
import nnabla_jit.solver_kernels as K
print("started", dc._worker.started, dc.pending())
module, name, sig = dc._manifest()[0]   # the first kernel the worker compiles
assert (module, name) == ("nnabla_jit.solver_kernels", "adam_update")
sig = numba_internals.signature_from_text(sig)
deadline = time.monotonic() + 300
while dc._load_cached(K.adam_update.serial, sig) is None and time.monotonic() < deadline:
    time.sleep(0.05)
print("loaded", len(K.adam_update.serial.signatures), kernel_cache.compile_count())
"""
    out = _run(tmp_path / "cache", body, cold=True)
    assert out["started"] == ("1", "0")   # prefetches are not waited for
    # the foreground loaded the worker's compilation and compiled nothing itself
    assert out["loaded"] == ("1", "0")


def test_eager_block_compiles_in_process():
    with deferred_compile.eager():
        assert not deferred_compile.deferring()
    assert deferred_compile.deferring() == (os.environ.get(deferred_compile.ENV_VAR, "1") != "0")


def test_package_parallel_kernels_are_deferred_with_their_serial_twin():
    hook = numba_internals.compile_on_call_hook(K.adam_update.parallel)
    assert hook.fallback is K.adam_update.serial
    assert numba_internals.compile_on_call_hook(blas._gemm_blocks).fallback is blas._gemm_one_call
    assert numba_internals.compile_on_call_hook(reduction.sum_all).fallback is reduction._sum_in_one_block


@pytest.mark.parametrize("trans_a, trans_b, beta", [(False, False, 0.0), (True, False, 1.0),
                                                    (False, True, 0.0), (True, True, 1.0)])
def test_gemm_stand_in_computes_what_the_blocks_do(trans_a, trans_b, beta):
    rng = np.random.RandomState(0)
    a = rng.randn(*((5, 3) if trans_a else (3, 5))).astype(np.float32)
    b = rng.randn(*((4, 5) if trans_b else (5, 4))).astype(np.float32)
    out = rng.randn(3, 4).astype(np.float32)
    expected = (a.T if trans_a else a) @ (b.T if trans_b else b) + beta * out
    blas._gemm_one_call(a, b, out, trans_a, trans_b, beta, 2, 0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_sum_stand_in():
    x = np.arange(10, dtype=np.float32)
    assert reduction._sum_in_one_block(x, 4) == 45.0


def test_every_manifest_entry_names_a_serial_kernel_and_a_signature_of_it():
    # A renamed kernel or a changed signature makes the manifest stale (the worker would skip
    # the entry): re-record it with nnabla_jit.utils.kernel_warmup.write_manifest().
    entries = deferred_compile._manifest()
    assert len(entries) > 10
    for module, name, sig in entries:
        kernel = deferred_compile._find(module, name)
        assert numba_internals.is_dispatcher(kernel) and not numba_internals.is_parallel(kernel), \
            (module, name)
        args = numba_internals.signature_from_text(sig)   # numba's type names, no pickle
        assert len(args) == len(inspect.signature(kernel.py_func).parameters), (module, name)


@pytest.mark.parametrize("requests_first", [False, True])
def test_worker_serves_the_manifest_first_until_told_requests_first(monkeypatch, requests_first):
    all_read, finished, order = threading.Event(), threading.Event(), []

    def lines():
        if requests_first:   # what the first solver update sends (deferred_compile.step_done)
            yield json.dumps([deferred_compile._REQUESTS_FIRST, "", "", ""])
        yield json.dumps([deferred_compile._PREFETCH_ID, "m", "prefetch1", ""])
        yield json.dumps([deferred_compile._PREFETCH_ID, "m", "prefetch2", ""])
        yield json.dumps([7, "m", "request", ""])
        all_read.set()
        finished.wait(60)   # then stdin closes: the worker stops

    def compile_stub(line):
        all_read.wait(60)   # everything is queued before the worker picks its second line
        order.append(line[2])
        if len(order) == 3:
            finished.set()
        return "{} ok".format(line[0])

    monkeypatch.setattr(deferred_compile, "_compile", compile_stub)
    replies = io.StringIO()
    deferred_compile._serve(lines(), replies)
    if requests_first:   # ahead of the prefetches still queued (the first may be under way)
        assert order.index("request") < order.index("prefetch2")
    else:
        assert order == ["prefetch1", "prefetch2", "request"]
    assert "7 ok" in replies.getvalue().splitlines()


def test_a_solver_update_tells_the_worker_that_the_first_step_is_over(monkeypatch):
    told = []
    monkeypatch.setattr(deferred_compile._worker, "told_requests_first", False)
    monkeypatch.setattr(deferred_compile._worker, "requests_first", lambda: told.append(True))
    w = nn.Variable.from_numpy_array(np.ones(4, np.float32), need_grad=True)
    w.grad.fill(1.0)
    solver = S.Sgd(0.5)
    solver.set_parameters({"w": w})
    solver.update()
    assert told == [True]
    np.testing.assert_allclose(w.d, 0.5)


def test_steps_run_on_one_thread_fewer_while_the_worker_compiles(monkeypatch):
    import numba
    before = numba.get_num_threads()
    if before < 2:
        pytest.skip("one kernel thread: nothing to give the worker")
    busy = [True]
    monkeypatch.setattr(deferred_compile._worker, "busy", lambda: busy[0])
    x = nn.Variable.from_numpy_array(np.ones(3, np.float32), need_grad=True)
    y = nn.functions.sum(x * 2)
    try:
        y.forward()
        assert numba.get_num_threads() == before - 1
        y.backward()   # still busy: stays lowered, not lowered twice
        assert numba.get_num_threads() == before - 1
        busy[0] = False
        y.forward()
        assert numba.get_num_threads() == before
        np.testing.assert_allclose(x.g, 2.0)
        if before >= 3:   # a count the user set while lowered is left alone
            busy[0] = True
            y.forward()
            numba.set_num_threads(before - 2)
            busy[0] = False
            y.forward()
            assert numba.get_num_threads() == before - 2
    finally:
        numba.set_num_threads(before)
        deferred_compile._shared.lowered = None


def test_the_worker_is_busy_until_it_has_answered_every_prefetch(monkeypatch):
    worker = deferred_compile._Worker()
    sent = []
    monkeypatch.setattr(worker, "_start", lambda: setattr(worker, "proc", _FakeProc()) or True)
    monkeypatch.setattr(worker, "send", lambda *line: sent.append(line))
    worker.pid = os.getpid()
    assert not worker.busy()
    assert worker.prefetch([("m", "k1", "s"), ("m", "k2", "s")])
    assert worker.busy() and worker.prefetching == 2
    worker._read(_FakeProc(["0 ok\n"]))
    assert worker.busy()
    worker.proc = proc = _FakeProc(["0 ok\n"])
    worker._read(proc)
    assert not worker.busy()


class _FakeProc:
    def __init__(self, lines=()):
        self.stdout = list(lines)

    def poll(self):
        return None


def test_a_signature_without_a_text_form_is_not_sent_to_a_worker():
    # requests travel as numba's type names; one that has none (a literal type, here) is
    # compiled by the caller instead, and no worker starts for it
    from numba import types
    worker = deferred_compile._Worker()
    request = deferred_compile._Request(K.adam_update.parallel, (types.literal(3),))
    assert worker.request(request) is False
    assert worker.started == 0 and worker.proc is None
