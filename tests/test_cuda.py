"""The CUDA path. Graphs under a CUDA context are tested in tests/cuda/, run here in a
subprocess under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1 must be set before numba is
imported, and this process runs the CPU path). The tests below need no simulator."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _simulated(marks, timeout=900):
    """Run tests/cuda's tests selected by ``marks`` under the simulator; all must pass."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marks,
         os.path.join("tests", "cuda")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0 and "passed" in summary and "skipped" not in summary, \
        result.stdout[-8000:] + result.stderr[-4000:]


def test_cuda_graphs_under_the_simulator():
    _simulated("not slow")


@pytest.mark.slow
def test_slow_cuda_graphs_under_the_simulator():
    """The digits CNN's training steps: 10 minutes or more in the simulator, which runs every
    GPU thread as Python."""
    _simulated("slow", timeout=2400)


def test_importing_does_not_import_numba_cuda():
    code = ("import sys, nnabla_jit, nnabla_jit.cuda_ops as c; "
            "print('numba.cuda' in sys.modules, len(c.CUDA_OPS) > 0)")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_registry_cuda_column_comes_from_the_launchers():
    from nnabla_jit.cuda_ops import CUDA_OPS, registry
    from nnabla_jit.utils.inspection import op_status
    status = {r["name"]: r["cuda"] for r in op_status()}
    assert CUDA_OPS == set(registry.FORWARD)
    for name in ("Affine", "BatchMatmul", "Convolution", "DepthwiseConvolution", "Tanh", "Add2",
                 "Sum", "Mean", "Max", "Min", "Softmax", "LogSoftmax", "SoftmaxCrossEntropy"):
        assert status[name], name
    assert status["MaxPooling"] and status["BatchNormalization"] and status["Transpose"]
    assert status["Unpooling"] and status["Deconvolution"] and not status["NonZero"]
    assert {n for n, has in status.items() if has} == set(CUDA_OPS)


def test_a_cuda_context_without_cuda_fails_clearly_when_run(monkeypatch):
    from nnabla_jit.cuda_ops import device
    if device.cuda is not None:
        pytest.skip("numba.cuda is already loaded in this process")
    from numba import cuda
    monkeypatch.setattr(cuda, "is_available", lambda: False)
    with nn.context_scope(nn.Context(["cuda:float", "cpu:float"])):
        y = F.tanh(nn.Variable.from_numpy_array(np.ones(3, np.float32)))
    with pytest.raises(ImportError, match="NUMBA_ENABLE_CUDASIM"):
        y.forward()


def test_every_op_without_cuda_kernels_is_named_in_docs_with_its_reason():
    """Issue 10's rule: an op keeps CPU-only kernels only where docs/cuda.md says why."""
    from nnabla_jit.cuda_ops import CUDA_OPS
    from nnabla_jit.ops.registry import REGISTRY
    with open(os.path.join(ROOT, "docs", "cuda.md")) as f:
        doc = f.read()
    host_only = [name for name in REGISTRY if name not in CUDA_OPS]
    assert [name for name in host_only if not re.search(r"\b%s\b" % name, doc)] == []


def test_a_kernel_the_cache_cannot_hold_compiles_without_it():
    """NNABLA_JIT_CUDA_CACHE: numba's cache failing to save or load (e.g. a kernel it cannot
    pickle) warns and carries on, as compiling without the cache does."""
    from nnabla_jit.cuda_ops import registry

    class Cache:
        def save_overload(self, sig, data):
            raise RuntimeError("Cannot pickle CUDACodeLibrary")

        def load_overload(self, sig, target_context):
            raise EOFError("truncated index")

    class Dispatcher:
        _cache = Cache()

        def py_func(self):
            pass

    dispatcher = Dispatcher()
    registry.guard_cache(dispatcher)
    with pytest.warns(RuntimeWarning, match="could not be saved"):
        dispatcher._cache.save_overload("sig", "kernel")
    with pytest.warns(RuntimeWarning, match="could not be loaded"):
        assert dispatcher._cache.load_overload("sig", "ctx") is None


def test_the_matmul_route_follows_the_environment(monkeypatch):
    from nnabla_jit.cuda_ops import blas
    monkeypatch.setattr(blas.config, "ENABLE_CUDASIM", False)
    monkeypatch.setattr(blas.importlib.util, "find_spec",
                        lambda name: object() if name == "cupy" else None)
    monkeypatch.delenv(blas.ENV_VAR, raising=False)
    assert blas._initial_backend() == "cublas"
    monkeypatch.setenv(blas.ENV_VAR, "numba")
    assert blas._initial_backend() == "numba"
    monkeypatch.setenv(blas.ENV_VAR, "mkl")
    with pytest.raises(ValueError, match="NNABLA_JIT_CUDA_BLAS"):
        blas._initial_backend()
    monkeypatch.setenv(blas.ENV_VAR, "cublas")
    monkeypatch.setattr(blas.importlib.util, "find_spec", lambda name: None)
    assert blas._initial_backend() == "numba"   # no CuPy: the tiled kernel
    with pytest.raises(ValueError, match="use_backend"):
        blas.use_backend("mkl")


def test_numpy_row_stack_alias_restored_for_numba_cuda(monkeypatch):
    """NumPy 2.5 removed np.row_stack, which numba-cuda 0.30 still overloads when its typing
    tables load: device.load gives the alias back (np.vstack) where it is missing, and leaves
    an existing one alone."""
    from nnabla_jit.cuda_ops import device
    if hasattr(np, "row_stack"):
        existing = np.row_stack
        assert device.restore_numpy_aliases_for_numba_cuda() == []
        assert np.row_stack is existing
        monkeypatch.delattr(np, "row_stack")
    assert not hasattr(np, "row_stack")
    assert device.restore_numpy_aliases_for_numba_cuda() == ["row_stack"]
    assert np.row_stack is np.vstack
