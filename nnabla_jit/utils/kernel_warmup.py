"""Fill the kernel cache ahead of time (``nnabla_jit cache warm``).

Runs one float32 training step of the common networks (LeNet, the digits CNN of the examples
with its test-mode pass, an MLP, a small CNN with other activations and solvers), so that their
first step in a later process finds every kernel compiled in the cache. numba compiles a kernel
per argument type (float32 data; int32 or int64 labels; array ranks), and each op picks a serial
or a ``prange`` variant by size, so the warm-up runs these networks at their usual sizes, not at
toy ones. The networks run in ``jobs`` worker processes at once: compilation is CPU-bound, and
one process compiles on one core.
"""
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from .. import deferred_compile, graph, kernel_cache, numba_internals

__all__ = ["NETWORKS", "warm", "warm_one", "write_manifest"]


def _lenet(rng):
    x = nn.Variable.from_numpy_array(rng.randn(64, 1, 28, 28).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (64, 1)))      # int64, NumPy's default
    h = F.max_pooling(F.relu(PF.convolution(x, 16, (5, 5), name="conv1")), (2, 2))
    h = F.max_pooling(F.relu(PF.convolution(h, 32, (5, 5), name="conv2")), (2, 2))
    h = F.relu(PF.affine(h, 128, name="fc1"))
    return [(F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc2"), t)), S.Adam(1e-3), True)]


def _digits_cnn(x, test=False):
    h = PF.convolution(x, 16, (3, 3), pad=(1, 1), name="conv1")
    h = F.max_pooling(F.relu(PF.batch_normalization(h, batch_stat=not test, name="bn1")), (2, 2))
    h = PF.convolution(h, 32, (3, 3), pad=(1, 1), name="conv2")
    h = F.average_pooling(F.relu(PF.batch_normalization(h, batch_stat=not test, name="bn2")), (2, 2))
    h = F.relu(PF.affine(h, 64, name="fc1"))
    return PF.affine(h, 10, name="fc2")


def _digits(rng):
    x = nn.Variable.from_numpy_array(rng.rand(32, 1, 8, 8).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (32, 1)).astype(np.int32))
    loss = F.mean(F.softmax_cross_entropy(_digits_cnn(x), t))
    test = _digits_cnn(nn.Variable.from_numpy_array(rng.rand(128, 1, 8, 8).astype(np.float32)), test=True)
    return [(loss, S.Adam(2e-3), True), (test, None, True)]


def _mlp(rng):
    x = nn.Variable.from_numpy_array(rng.randn(128, 784).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (128, 1)))
    h = F.relu(PF.affine(x, 1024, name="fc1"))
    h = F.relu(PF.affine(h, 1024, name="fc2"))
    return [(F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc3"), t)), S.Momentum(0.01, 0.9), True)]


def _small(rng):
    x = nn.Variable.from_numpy_array(rng.rand(4, 3, 16, 16).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (4, 1)).astype(np.int32))
    h = F.max_pooling(F.tanh(PF.convolution(x, 8, (3, 3), pad=(1, 1), name="conv1")), (2, 2))
    h = F.sigmoid(PF.affine(h, 32, name="fc1"))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc2"), t))
    return [(loss, S.Sgd(0.01), False), (loss, S.Momentum(0.01, 0.9), True)]


NETWORKS = {"lenet": _lenet, "digits": _digits, "mlp": _mlp, "small": _small}


def warm_one(name, eager=True):
    """Run network ``name``'s steps (compiling or loading their kernels; ``eager``: parallel
    variants too, not deferred to a background worker); returns the seconds."""
    start = time.perf_counter()
    saved = nn.get_parameters(grad_only=False)
    try:
        with nn.parameter_scope("__nnabla_jit_warmup__/" + name), \
                (deferred_compile.eager() if eager else contextlib.nullcontext()):
            steps = NETWORKS[name](np.random.RandomState(0))
            for root, solver, fused in steps:
                if solver is not None:
                    solver.set_parameters(nn.get_parameters())
                # as often as a loop runs it before its plans fuse: the op-by-op kernels of the
                # first runs, then the fused ones
                for _ in range(graph.FUSE_FROM_RUN):
                    root.forward(clear_no_need_grad=fused, clear_buffer=fused and solver is None)
                    if solver is None:
                        continue
                    solver.zero_grad()
                    root.backward(clear_buffer=fused)
                    solver.weight_decay(1e-5)
                    solver.update()
    finally:
        nn.clear_parameters()
        for key, value in saved.items():
            nn.parameter.set_parameter(key, value)
    return time.perf_counter() - start


def warm(names=None, jobs=None, verbose=True):
    """Warm the networks ``names`` (default: all of :data:`NETWORKS`), ``jobs`` processes at
    once (default: the CPUs, at most one per network); returns the seconds."""
    start = time.perf_counter()
    names = list(names or NETWORKS)
    unknown = [n for n in names if n not in NETWORKS]
    if unknown:
        raise ValueError("cache warm: unknown network {} (choose from {})".format(
            ", ".join(unknown), ", ".join(NETWORKS)))
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(names)))
    if jobs == 1:
        for name in names:
            seconds = warm_one(name)
            if verbose:
                print("  {:8} {:.1f} s".format(name, seconds), flush=True)
        return time.perf_counter() - start
    # spawn, not fork: the parent already runs numba's threads
    context = multiprocessing.get_context("spawn")
    # the pool's processes compile everything themselves: no compile worker of their own at import
    previous = os.environ.get(deferred_compile.ENV_VAR)
    os.environ[deferred_compile.ENV_VAR] = "0"
    try:
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            futures = {pool.submit(warm_one, name): name for name in names}
            for future in concurrent.futures.as_completed(futures):
                seconds = future.result()
                if verbose:
                    print("  {:8} {:.1f} s".format(futures[future], seconds), flush=True)
    finally:
        if previous is None:
            del os.environ[deferred_compile.ENV_VAR]
        else:
            os.environ[deferred_compile.ENV_VAR] = previous
    return time.perf_counter() - start


# ------------------------------------------------------------------------------ the manifest
def _record(name):
    """Print, as JSON, the serial kernels network ``name``'s steps compile on an empty cache,
    in order (run in a fresh process on an empty cache by :func:`write_manifest`)."""
    # parallel kernels stay deferred for good and no worker runs: only what the foreground of
    # a first step compiles is recorded. The import started a worker on the (empty) cache with
    # the old manifest: stop it and drop whatever it wrote, or the kernels it compiled would be
    # loaded, not compiled, and missing from the new manifest
    deferred_compile.stop_worker()
    numba_dir = kernel_cache.numba_dir()
    for entry in os.listdir(numba_dir) if numba_dir and os.path.isdir(numba_dir) else ():
        path = os.path.join(numba_dir, entry)   # the directory itself stays (its mode is checked)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)
    deferred_compile._worker.request = lambda request: True
    deferred_compile._worker.prefetch = lambda entries: False
    found, depth = [], [0]

    class Recorder(numba_internals.Listener):
        def on_start(self, ev):
            depth[0] += 1
            disp = numba_internals.event_dispatcher(ev)
            if depth[0] > 1 or numba_internals.is_parallel(disp):
                return
            module, qualname = deferred_compile._manifest_name(disp)
            if (module.startswith("nnabla_jit.") or module == deferred_compile.ELEMENTWISE) \
                    and "." not in qualname:
                sig = numba_internals.signature_text(numba_internals.event_argument_types(ev))
                found.append([module, qualname, sig])

        def on_end(self, ev):
            depth[0] -= 1

    with numba_internals.install_listener(numba_internals.COMPILE_EVENT, Recorder()):
        warm_one(name, eager=False)
    print(json.dumps(found))


def write_manifest(path=None, names=None):
    """Record the serial kernels of the :data:`NETWORKS` (each on an empty cache, in a fresh
    process) into ``deferred_compile.MANIFEST``: each network's kernels in the reverse order of
    their first use, the first network's first. Returns the number of entries."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    entries, seen = [], set()
    for name in names or NETWORKS:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NNABLA_JIT_CACHE_DIR=cache, PYTHONPATH=package_root)
            env.pop("NUMBA_CACHE_DIR", None)
            env[deferred_compile.ENV_VAR] = "1"
            done = subprocess.run([sys.executable, "-c", "from nnabla_jit.utils.kernel_warmup import "
                                   "_record; _record({!r})".format(name)], env=env, check=True,
                                  capture_output=True, text=True)
        for entry in reversed(json.loads(done.stdout.splitlines()[-1])):
            if tuple(entry) not in seen:
                seen.add(tuple(entry))
                entries.append(entry)
    about = ("The serial kernels (module, name, signature in numba's type names) the first steps of "
             "nnabla_jit.utils.kernel_warmup's networks compile, in the order a background "
             "worker compiles them on an empty cache (deferred_compile.py). Generated by "
             "nnabla_jit.utils.kernel_warmup.write_manifest(); a stale entry is skipped.")
    text = json.dumps({"about": about, "kernels": entries}, indent=0) + "\n"
    path = path or deferred_compile.MANIFEST
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return len(entries)
