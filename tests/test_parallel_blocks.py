"""Block stand-ins (nnabla_jit/parallel_blocks.py): a deferred parallel kernel runs as its serial
twin on blocks of its prange loop, one per thread, once the block kernel -- a serial compile --
is in the cache; which kernels may, and that the blocks compute what the serial twin does."""
import io
import json
import os
import threading

import numba
import numpy as np
import pytest
from numba import njit, prange

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit import deferred_compile, parallel_blocks
from nnabla_jit.ext_utils import get_extension_context
from nnabla_jit.ops import convolution, convolution_kernels, convolution_tiled, kernels, pooling
from nnabla_jit.ops.kernels import ParallelKernel

from .test_deferred_compile import _run


# ------------------------------------------------------------------------------ which kernels
def scale_rows(x, out, s):
    n, m = x.shape
    for i in prange(n):
        for j in range(m):
            out[i, j] = s * x[i, j]


def scale_or_copy(x, out, s, copy):
    total = 1
    for d in range(x.ndim):
        total *= x.shape[d]
    xs, outs = x.reshape(total), out.reshape(total)
    if copy:
        for i in prange(total):
            outs[i] = xs[i]
    else:
        for i in prange(total):
            outs[i] = s * xs[i]


def reduction(x, out):
    s = 0.0
    for i in prange(x.size):
        s += x[i]
        out[i] = s


def two_loops(x, out):
    for i in prange(x.size):
        out[i] = x[i]
    for i in prange(x.size):
        out[i] += out[x.size - 1 - i]


def zeroes_first(x, out):
    out[:] = 0.0
    for i in prange(x.size):
        out[i] += x[i]


def in_a_loop(x, out):
    for r in range(3):
        for i in prange(x.size):
            out[i] += x[i]


def returns(x):
    for i in prange(x.size):
        x[i] = 1.0
    return x.size


def calls_first(x, out):
    out.fill(0.0)
    for i in prange(x.size):
        out[i] += x[i]


@pytest.mark.parametrize("func", [scale_rows, scale_or_copy])
def test_independent_blocks_are_recognised(func):
    assert parallel_blocks.blockable(func) is None


@pytest.mark.parametrize("func, why", [
    (reduction, "reduction"), (two_loops, "2 parallel loops in a row"),
    (zeroes_first, "a write to out[:]"), (in_a_loop, "prange inside a For"),
    (returns, "returns a value"), (calls_first, "a Expr statement")])
def test_kernels_whose_blocks_depend_on_each_other_are_refused(func, why):
    assert why in parallel_blocks.blockable(func)


def test_most_package_parallel_kernels_have_blocks():
    # the conv, pooling, normalization, solver and elementwise-style kernels all do; the few
    # left (reductions returning a value, Lamb's two loops) keep the serial stand-in
    found = {}
    for module in (convolution, convolution_kernels, convolution_tiled, pooling):
        for name, value in vars(module).items():
            if isinstance(value, ParallelKernel):
                found[name] = parallel_blocks.blockable(value.py_func)
    assert found["im2col"] is None and found["col2im"] is None and found["pool_forward"] is None
    assert found["max_pool_planes"] is None
    assert all(found[name] is None for name in ("tiled_image_to_map", "tiled_map_to_image", "tiled_filter_grad",
                                                "implicit_convolution", "implicit_filter_grad"))
    assert sum(why is None for why in found.values()) >= len(found) - 1


# ------------------------------------------------------------------------------ same results
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_blocks_compute_what_the_serial_kernel_does(dtype, threads):
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip("fewer numba threads")
    serial = njit(scale_or_copy)
    block = parallel_blocks.blocks_of(serial)
    x = np.random.RandomState(0).randn(7, 5).astype(dtype)
    expected = np.zeros_like(x)
    serial(x, expected, 3.0, False)
    out = np.zeros_like(x)
    sig = tuple(numba.typeof(a) for a in (x, out, 3.0, False))
    block.compile(parallel_blocks.block_signature(sig))
    entry = block.overloads[parallel_blocks.block_signature(sig)].entry_point
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        parallel_blocks.runner(entry)(x, out, 3.0, False)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(out, expected)   # the same arithmetic, element by element
    assert out.dtype == dtype


def test_an_error_in_a_block_reaches_the_caller():
    def entry(x, b, blocks):
        if b == blocks - 1:
            raise ValueError("block {}".format(b))
    before = numba.get_num_threads()
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one numba thread")
    numba.set_num_threads(2)
    try:
        with pytest.raises(ValueError, match="block 1"):
            parallel_blocks.runner(entry)(None)
        parallel_blocks.runner(lambda x, b, blocks: None)(None)   # the pool still works
    finally:
        numba.set_num_threads(before)


@pytest.fixture
def block_stand_ins(monkeypatch):
    """Every parallel variant with blocks runs as its block stand-in (compiled now), whether or
    not an earlier test of this process has compiled the parallel variant itself."""
    used = []
    serial_or_parallel = ParallelKernel.for_size

    def for_size(self, n):
        chosen = serial_or_parallel(self, n)
        block = parallel_blocks.blocks_of(self.parallel) if chosen is self.parallel else None
        if block is None:
            return chosen

        def stand_in(*args):
            sig = parallel_blocks.block_signature(tuple(self.parallel.typeof_pyval(a) for a in args))
            block.compile(sig)
            used.append(block.py_func.__name__)
            return parallel_blocks.runner(block.overloads[sig].entry_point)(*args)
        return stand_in

    monkeypatch.setattr(ParallelKernel, "for_size", for_size)
    return used


def _conv_net(dtype):
    rng = np.random.RandomState(1)
    x = nn.Variable.from_numpy_array(rng.randn(4, 3, 10, 10).astype(dtype), need_grad=True)
    with nn.parameter_scope("blocks_test"):
        h = PF.convolution(x, 5, (3, 3), pad=(1, 1), rng=np.random.RandomState(2))
        h = F.max_pooling(F.relu(h), (2, 2))
        y = F.sum(PF.affine(h, 3, rng=np.random.RandomState(3)) ** 2)
    return x, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_network_on_block_stand_ins_matches_its_serial_kernels(dtype, block_stand_ins):
    results = []
    for threshold in (None, 0):   # serial kernels, then every op's parallel variant
        nn.clear_parameters()
        config = "float" if dtype == np.float32 else "double"   # the compute type, not only x's
        with kernels.parallel_threshold(threshold), \
                nn.context_scope(get_extension_context("cpu", type_config=config)):
            x, y = _conv_net(dtype)
            y.forward()
            x.grad.zero()
            y.backward()
        assert y.d.dtype == dtype
        results.append((y.d.copy(), x.g.copy()))
    nn.clear_parameters()
    # float32 stride-1 convolutions run implicitly on register tiles where the CPU has AVX-512
    tiled = dtype == np.float32 and convolution_tiled.enabled()
    conv_blocks = {"implicit_convolution_block"} if tiled else {"im2col_block", "col2im_block"}
    assert conv_blocks | {"max_pool_planes_block"} <= set(block_stand_ins)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=rtol)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=rtol, atol=rtol)


# ------------------------------------------------------------------------------ in a run
STAND_IN = '''
import time
from nnabla_jit import parallel_blocks
hook = m.double_parallel._compile_for_args
call("first")                      # serial twin; the block kernel and the parallel variant asked
import numba
sig = (numba.typeof(x), numba.typeof(x))
order = []
deadline = time.monotonic() + 300
while len(order) < 2 and time.monotonic() < deadline:
    for name, request in (("block", hook.block_requests.get(sig)), ("parallel", hook.requests.get(sig))):
        if name not in order and request is not None and request.state != "pending":
            order.append(name)
    time.sleep(0.002)
print("order", *order)
print("stand_in", hook.stand_in(sig).__name__, os.getpriority(os.PRIO_PROCESS, dc._worker.proc.pid))
call("later")
'''


def test_the_worker_compiles_the_block_kernel_first_and_it_stands_in(tmp_path):
    out = _run(tmp_path, "import os\n" + STAND_IN)
    # the first call asked for both; the block kernel (a serial compile) was answered first
    assert out["first"][0] == "True" and out["first"][3] == "2"
    assert out["order"] == ("block", "parallel")
    # from then on the stand-in runs the serial twin in blocks on every thread (not the serial
    # twin alone), and the worker compiles at the lowest priority: the run has the cores
    assert out["stand_in"] == ("run_blocks", "19")
    assert out["later"] == ("True", "1", "1", "0", "1")
    names = [n for _, _, files in os.walk(tmp_path) for n in files if n.endswith(".nbi")]
    assert any("double_block" in n for n in names) and any("double_parallel" in n for n in names)


def test_steps_keep_every_thread_while_the_worker_compiles_only_requests(monkeypatch):
    before = numba.get_num_threads()
    if before < 2:
        pytest.skip("one kernel thread")
    worker = deferred_compile._worker
    monkeypatch.setattr(worker, "proc", _Alive())
    monkeypatch.setattr(worker, "pid", os.getpid())
    monkeypatch.setattr(worker, "waiting", {1: object()})   # a request pending, at nice 19
    monkeypatch.setattr(worker, "prefetching", 0)
    assert worker.busy() and not worker.competes()
    deferred_compile.share_cores()
    assert numba.get_num_threads() == before
    monkeypatch.setattr(worker, "prefetching", 3)   # the manifest, during a first step
    monkeypatch.setattr(worker, "told_requests_first", False)
    assert worker.competes()
    monkeypatch.setattr(worker, "told_requests_first", True)
    assert not worker.competes()


class _Alive:
    def poll(self):
        return None


def test_the_pool_runs_one_call_at_a_time_and_others_whole():
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one numba thread")
    inside, release, seen = threading.Event(), threading.Event(), []

    def slow(b, blocks):
        seen.append(("slow", b, blocks))
        if b == 0:
            inside.set()
            release.wait(30)

    before = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        thread = threading.Thread(target=parallel_blocks.runner(slow))
        thread.start()
        assert inside.wait(30)
        numba.set_num_threads(2)   # numba's count is per thread: this one's too
        parallel_blocks.runner(lambda b, blocks: seen.append(("other", b, blocks)))()
        release.set()
        thread.join(30)
    finally:
        numba.set_num_threads(before)
    assert ("other", 0, 1) in seen   # ran whole while the pool was busy
    assert sorted(s for s in seen if s[0] == "slow") == [("slow", 0, 2), ("slow", 1, 2)]


def test_the_worker_serves_block_kernels_first_and_only_a_worker_lowers_its_priority(monkeypatch):
    order = []
    monkeypatch.setattr(deferred_compile, "_compile", lambda line: order.append(line[2]) or "1 ok")
    nice = os.nice(0)
    lines = [json.dumps([1, "m", "a_parallel", ""]), json.dumps([2, "m", "b_parallel", ""]),
             json.dumps([3, "m", "b_block", ""])]
    ready = threading.Event()

    def all_lines():   # all queued before the worker picks the first (then the input ends)
        yield from lines
        ready.set()

    monkeypatch.setattr(deferred_compile, "_next_request", _after(ready, deferred_compile._next_request))
    deferred_compile._serve(all_lines(), io.StringIO())
    assert order == ["b_block", "a_parallel", "b_parallel"]
    assert os.nice(0) == nice   # this process asked nothing of a worker: not reniced


def _after(event, func):
    def wait_then(*args):
        event.wait(30)
        return func(*args)
    return wait_then
