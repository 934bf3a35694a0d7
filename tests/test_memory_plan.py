"""Buffer reuse across a step (issue 20, item 4c): the executor frees each intermediate after
its last reader (its clearing plan), and the size-class pool of ``ndarray.pooled_empty`` hands
that memory to later producers of any shape. Results must not depend on it, and memory a user
can still reach must never be handed out again."""
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit import ndarray
from nnabla_jit.ops.kernels import parallel_threshold

from .training import momentum_steps


@pytest.fixture
def size_classes(request, monkeypatch):
    """Run with the size-class pool on or off (the pools emptied first)."""
    monkeypatch.setattr(ndarray, "SIZE_CLASSES", request.param)
    ndarray.clear_memory_cache()
    yield request.param
    ndarray.clear_memory_cache()


def _train(dtype, conv, steps=3):
    """Losses and final parameters of a few clearing training steps (buffers over the
    size-class threshold, several shapes of the same size)."""
    nn.clear_parameters()
    rng = np.random.RandomState(1)
    if conv:
        x = nn.Variable.from_numpy_array(rng.randn(8, 3, 16, 16).astype(dtype))
        h = PF.convolution(x, 16, (3, 3), pad=(1, 1), with_bias=False, name="c0")
        h = F.relu(PF.batch_normalization(h, name="bn0"))
        h = F.max_pooling(h, (2, 2))
        h = F.relu(PF.convolution(h, 32, (3, 3), pad=(1, 1), name="c1"))
    else:
        x = nn.Variable.from_numpy_array(rng.randn(64, 300).astype(dtype))
        h = F.relu(PF.affine(x, 512, name="fc0"))
        h = F.tanh(PF.affine(h, 512, name="fc1"))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (x.shape[0], 1)))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="out"), t))
    init = np.random.RandomState(2)
    for p in nn.get_parameters().values():   # the same parameters every run, in the test's type
        p.d = (init.randn(*p.shape) * 0.1).astype(dtype)
    return momentum_steps(loss, 0.05, steps)


def _both(dtype, conv, parallel):
    results = []
    for on in (True, False):
        ndarray.SIZE_CLASSES = on
        ndarray.clear_memory_cache()
        if parallel:
            with parallel_threshold(0):
                results.append(_train(dtype, conv))
        else:
            results.append(_train(dtype, conv))
    return results


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("conv", [False, True])
def test_results_identical_with_and_without_size_classes(dtype, conv, monkeypatch):
    monkeypatch.setattr(ndarray, "SIZE_CLASSES", True)
    (losses_on, params_on), (losses_off, params_off) = _both(dtype, conv, parallel=False)
    assert losses_on == losses_off
    for k in params_on:
        assert params_on[k].dtype == dtype
        np.testing.assert_array_equal(params_on[k], params_off[k], err_msg=k)
    ndarray.clear_memory_cache()


def test_results_identical_parallel_kernels(monkeypatch):
    monkeypatch.setattr(ndarray, "SIZE_CLASSES", True)
    (losses_on, params_on), (losses_off, params_off) = _both(np.float32, False, parallel=True)
    assert losses_on == losses_off
    for k in params_on:
        np.testing.assert_array_equal(params_on[k], params_off[k], err_msg=k)
    ndarray.clear_memory_cache()


@pytest.mark.parametrize("size_classes", [True], indirect=True)
def test_freed_memory_serves_another_shape(size_classes):
    """A freed (512, 64) float32 buffer is taken by a later (64, 512) or (128, 128) float64
    producer: the memory a step gives back is reused whatever the shapes."""
    a = ndarray.NdArray((512, 64), np.float32)
    a.output_buffer(np.dtype(np.float32))
    base = weakref.ref(a.data.base)   # a strong reference would keep it from the pool
    a.clear()
    b = ndarray.NdArray((64, 512), np.float32)
    assert b.output_buffer(np.dtype(np.float32)).base is base()
    b.clear()
    c = ndarray.NdArray((128, 128), np.float64)
    out = c.output_buffer(np.dtype(np.float64))
    assert out.base is base() and out.shape == (128, 128) and out.dtype == np.float64


@pytest.mark.parametrize("size_classes", [True, False], indirect=True)
@pytest.mark.parametrize("hold", ["array", "view"])
def test_memory_the_user_holds_is_never_handed_out(size_classes, hold):
    """forward(clear_buffer=True) frees h, but the user still holds h.d (or a reshape of it):
    those values must stay as they were whatever later producers compute."""
    x = nn.Variable.from_numpy_array(np.arange(128 * 256, dtype=np.float32).reshape(128, 256))
    h = F.add_scalar(x, 1.0)
    y = F.mul_scalar(F.add_scalar(h, 2.0), 3.0)
    h.forward()
    held = h.d if hold == "array" else h.d.reshape(-1)
    expected = held.copy()
    y.forward(clear_buffer=True)
    z = F.mul_scalar(F.add_scalar(x, 5.0), -1.0)   # producers of the same size after the free
    z.forward(clear_buffer=True)
    np.testing.assert_array_equal(held, expected)
    np.testing.assert_array_equal(y.d, (x.d + 3.0) * 3.0)
    np.testing.assert_array_equal(z.d, -(x.d + 5.0))


@pytest.mark.parametrize("size_classes", [True], indirect=True)
def test_values_kept_without_clearing_stay_readable(size_classes):
    """Without clearing flags nothing is freed: every intermediate stays readable after a
    training step, while other graphs run and clear."""
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(128, 200).astype(np.float32),
                                     need_grad=True)
    h = F.tanh(x)
    loss = F.sum(F.mul_scalar(h, 2.0))
    loss.forward()
    loss.backward()
    h_values = np.tanh(x.d)
    other = F.sigmoid(F.add_scalar(x, 1.0))
    other.forward(clear_buffer=True)
    np.testing.assert_allclose(h.d, h_values, rtol=1e-6)
    np.testing.assert_allclose(x.g, 2 * (1 - h_values ** 2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size_classes", [True], indirect=True)
def test_memory_cache_map_and_clear_cover_size_classes(size_classes, capsys):
    from nnabla_jit import _init
    a = ndarray.NdArray((512, 64), np.float32)
    a.output_buffer(np.dtype(np.float32))
    a.clear()
    _init.print_memory_cache_map()
    assert "131072 bytes: 1" in capsys.readouterr().out
    _init.clear_memory_cache()
    _init.print_memory_cache_map()
    assert "bytes" not in capsys.readouterr().out


_FAULTS_PER_STEP = '''
import resource, sys
import numpy as np
import nnabla_jit as nn, nnabla_jit.functions as F, nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
rng = np.random.RandomState(0)
x = nn.Variable.from_numpy_array(rng.randn(32, 1, 28, 28).astype(np.float32))
t = nn.Variable.from_numpy_array(rng.randint(0, 10, (32, 1)))
h = F.max_pooling(F.relu(PF.convolution(x, 16, (5, 5), name="c1")), (2, 2))
h = F.max_pooling(F.relu(PF.convolution(h, 32, (5, 5), name="c2")), (2, 2))
loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc"), t))
solver = S.Adam(1e-3)
solver.set_parameters(nn.get_parameters())
def step():
    loss.forward(clear_no_need_grad=True)
    solver.zero_grad()
    loss.backward(clear_buffer=True)
    solver.update()
for _ in range(4):
    step()
faults = []
for _ in range(7):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    step()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(sorted(faults)[3])   # the median: a kernel loaded or a thread started in one step is not the step
'''


@pytest.mark.skipif(ndarray._LIBC is None, reason="malloc's thresholds are glibc's")
def test_a_repeated_step_touches_no_new_memory(tmp_path):
    """Once a training step has run, the next ones reuse its memory: no page faults for
    buffers of 128 KiB and more that glibc would otherwise unmap or trim at each free (the
    conv net below faulted ~600 pages a step before malloc's thresholds were raised)."""
    script = tmp_path / "faults.py"
    script.write_text(_FAULTS_PER_STEP)
    env = dict(os.environ, NNABLA_JIT_DEFER_PARALLEL="0")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True,
                         env=env)
    assert float(out.stdout.split()[-1]) < 30, out.stdout
