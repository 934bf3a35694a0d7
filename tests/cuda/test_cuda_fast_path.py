"""The CUDA path's speed-ups (``NNABLA_JIT_CUDA_FAST``): each computes what the plain path does.

The simulator runs tiny shapes, so the thresholds are lowered here to take the fast branches."""
import numpy as np
import pytest

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


@pytest.fixture
def split_small(monkeypatch):
    """Sums split over blocks from 4 reduced elements on, 16 per partial block (the block
    size stays: the kernels are compiled with it; the simulator runs each thread)."""
    from nnabla_jit.cuda_ops import reduction
    monkeypatch.setattr(reduction, "SPLIT", True)
    monkeypatch.setattr(reduction, "SPLIT_MIN_REDUCED", 4)
    monkeypatch.setattr(reduction, "SPLIT_PER_BLOCK", 16)
    return reduction


@pytest.mark.parametrize("build, shape, dtype", [
    (lambda x: F.sum(x), (4, 3, 8), np.float32),                 # 6 parts
    (lambda x: F.mean(x, axis=(0, 2)), (4, 3, 8), np.float64),    # 3 outputs, 2 parts each
    (lambda x: F.sum(x, axis=(1, 2), keepdims=True) * 2.0, (2, 4, 8), np.float32)],
    ids=["sum of all", "mean over axes apart", "sum over the last axes"])
def test_split_sums_equal_the_cpu(split_small, build, shape, dtype):
    assert split_small._split_parts(split_small.SUM, 1, 32) == 2
    assert_same_on_cuda(build, rng.randn(*shape).astype(dtype), rtol=1e-5)


def test_split_sum_is_taken_and_accumulates(split_small):
    from nnabla_jit.cuda_ops import device
    device.load()
    reduction = split_small
    assert reduction._split_parts(reduction.SUM, 2, 40) == 2
    assert reduction._split_parts(reduction.MAX, 2, 40) == 1
    assert reduction._split_parts(reduction.SUM, 2, 3) == 1
    x = rng.randn(2, 40).astype(np.float32)
    y = np.array([1.5, -2.0], np.float32)
    dx, dy = device.upload(x), device.upload(y)
    reduction.reduce(dx, dy, (1,), scale=0.5, accum=True)
    np.testing.assert_allclose(device.copy_down(dy), y + 0.5 * x.sum(axis=1), rtol=1e-6)
    reduction.reduce(dx, dy, (1,))
    np.testing.assert_allclose(device.copy_down(dy), x.sum(axis=1), rtol=1e-6)


def test_fast_switches_read_the_environment(monkeypatch):
    from nnabla_jit.cuda_ops import device
    monkeypatch.delenv("NNABLA_JIT_CUDA_SPLIT_REDUCE", raising=False)
    monkeypatch.delenv("NNABLA_JIT_CUDA_FAST", raising=False)
    assert device.switch("SPLIT_REDUCE")
    monkeypatch.setenv("NNABLA_JIT_CUDA_FAST", "0")
    assert not device.switch("SPLIT_REDUCE")
    monkeypatch.setenv("NNABLA_JIT_CUDA_SPLIT_REDUCE", "1")
    assert device.switch("SPLIT_REDUCE")


class CountingDispatcher:
    """Stands for a numba-cuda dispatcher: ``[grid, block]`` builds a new configuration."""

    def __init__(self):
        self.built = []

    def __getitem__(self, config):
        self.built.append(config)
        return ("configured", config, len(self.built))


@pytest.mark.parametrize("cached", [True, False])
def test_launch_configurations_are_kept(monkeypatch, cached):
    from nnabla_jit.cuda_ops import device
    monkeypatch.setattr(device, "LAUNCH_CACHE", cached)
    monkeypatch.setattr(device, "RESOLVED_LAUNCH", False)
    monkeypatch.setattr(device, "_CONFIGURED", {})
    kern = CountingDispatcher()
    first = device.configured(kern, 2, 128)
    assert first == ("configured", (2, 128), 1)
    assert (device.configured(kern, 2, 128) is first) == cached
    assert device.configured(kern, 3, 128)[1] == (3, 128)
    assert len(kern.built) == (2 if cached else 3)
    monkeypatch.setattr(device, "CONFIGURED_MAX", 2)
    device.configured(kern, 1, 32)
    assert len(device._CONFIGURED) <= 2   # full: the table starts again
    # numba's simulator configures the kernel object itself, which is then never kept
    device.load()
    sim = device.fill_kernel
    if sim[1, 32] is sim:
        device.configured(sim, 1, 32)
        assert all(k[0] is not sim for k in device._CONFIGURED)


@pytest.mark.parametrize("cached", [True, False])
def test_launches_give_the_same_results(monkeypatch, cached):
    from nnabla_jit.cuda_ops import device
    device.load()
    monkeypatch.setattr(device, "LAUNCH_CACHE", cached)
    monkeypatch.setattr(device, "_CONFIGURED", {})
    a = device.upload(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = device.flat(a)
    assert b.shape == (6,) and device.flat(b).shape == (6,)
    assert (device.flat(b) is b) == cached
    device.fill(b, 2.0)
    device.fill(device.flat(a), 2.0)
    ones = device.upload(np.ones(6, np.float32))
    device.add_into(b, ones)
    np.testing.assert_array_equal(device.copy_down(a), np.full((2, 3), 3.0, np.float32))
    for _ in range(4):   # on a GPU: launched through the overload numba resolved before
        device.add_into(b, ones)
    np.testing.assert_array_equal(device.copy_down(a), np.full((2, 3), 7.0, np.float32))
    assert_same_on_cuda(lambda x: F.tanh(2 * x + 1) * F.sigmoid(x), rng.randn(2, 3))


class DeviceNDArray:
    """Stands for numba-cuda's device array class (ResolvedLaunch reads its dtype, shape and
    strides)."""

    def __init__(self, shape, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape)
        self.strides = tuple(np.empty(shape, dtype).strides)


class FakeOverload:
    def __init__(self, types):
        self.types = types
        self.launched = []

    def launch(self, args, griddim, blockdim, stream, sharedmem):
        self.launched.append((args, griddim, blockdim, stream, sharedmem))


class FakeNumbaDispatcher:
    """numba-cuda's dispatcher as ResolvedLaunch uses it: ``[grid, block]`` gives a
    configuration whose call resolves the overload (compiling it once) and launches it."""

    def __init__(self):
        self.compiled = self.overloads = {}
        self.resolved = 0

    def typeof_pyval(self, value):
        if isinstance(value, DeviceNDArray):
            contiguous = value.strides == DeviceNDArray(value.shape, value.dtype).strides
            return ("array", value.dtype, len(value.shape), "C" if contiguous else "A")
        if isinstance(value, tuple):
            return ("tuple",) + tuple(self.typeof_pyval(v) for v in value)
        return ("int64",) if type(value) is int else (type(value).__name__,)

    def __getitem__(self, config):
        dispatcher = self

        class Config:
            griddim, blockdim, stream, sharedmem = (config[0], 1, 1), (config[1], 1, 1), 0, 0

            def __call__(self, *args):
                dispatcher.resolved += 1
                types = tuple(dispatcher.typeof_pyval(a) for a in args)
                kernel = dispatcher.compiled.setdefault(types, FakeOverload(types))
                kernel.launched.append((args, self.griddim, self.blockdim, self.stream,
                                        self.sharedmem))
        return Config()


def test_resolved_launches_reuse_numba_overloads(monkeypatch):
    from nnabla_jit.cuda_ops import device
    monkeypatch.setattr(device, "LAUNCH_CACHE", True)
    monkeypatch.setattr(device, "RESOLVED_LAUNCH", True)
    monkeypatch.setattr(device, "_RESOLVED_OK", [True])
    monkeypatch.setattr(device, "_CONFIGURED", {})
    kern = FakeNumbaDispatcher()
    launch = device.configured(kern, 4, 128)
    assert isinstance(launch, device.ResolvedLaunch)
    a, b = DeviceNDArray((2, 3)), DeviceNDArray((6,))
    for _ in range(4):
        launch(a, b, 3, 0.5, (1, 2))
    # numba resolved the first two launches (the first teaches the array class), not the rest
    assert kern.resolved == 2
    (overload,) = kern.overloads.values()
    assert len(overload.launched) == 4
    assert overload.launched[-1] == ((a, b, 3, 0.5, (1, 2)), (4, 1, 1), (128, 1, 1), 0, 0)
    # another layout, dtype, scalar type or tuple length is resolved by numba again
    strided = DeviceNDArray((2, 3))
    strided.strides = (4, 8)
    wide = DeviceNDArray((2, 3), np.float64)
    for args in [(strided, b, 3, 0.5, (1, 2)), (wide, b, 3, 0.5, (1, 2)), (a, b, 3.0, 0.5, (1, 2)),
                 (a, b, 3, 0.5, (1, 2, 3)), (a, b, True, 0.5, (1, 2))]:
        before = kern.resolved
        launch(*args)
        assert kern.resolved == before + 1, args
        launch(*args)
        assert kern.resolved == before + 1, args   # then reused
    assert len(kern.overloads) == 6
    # arguments it cannot key (a host array, a huge int) always take numba's path
    before = kern.resolved
    launch(a, b, 1 << 63, 0.5, (1, 2))
    launch(a, np.zeros(6, np.float32), 3, 0.5, (1, 2))
    launch(a, np.zeros(6, np.float32), 3, 0.5, (1, 2))
    assert kern.resolved == before + 3


def test_resolved_launch_falls_back_on_another_numba(monkeypatch):
    """A dispatcher without what ResolvedLaunch reads: numba's own path, and no more wrapping."""
    from nnabla_jit.cuda_ops import device
    monkeypatch.setattr(device, "LAUNCH_CACHE", True)
    monkeypatch.setattr(device, "RESOLVED_LAUNCH", True)
    monkeypatch.setattr(device, "_RESOLVED_OK", [True])
    monkeypatch.setattr(device, "_CONFIGURED", {})
    kern = FakeNumbaDispatcher()
    kern.overloads = None   # no .get: _learn fails
    launch = device.configured(kern, 4, 128)
    a = DeviceNDArray((2,))
    for _ in range(3):
        launch(a, 1)
    assert kern.resolved == 3 and not device._RESOLVED_OK[0]
    assert not isinstance(device.configured(kern, 5, 128), device.ResolvedLaunch)


def _chain_step(ctx, x_value, accumulate=False):
    """The benchmark's elementwise chain, forward (clear_no_need_grad) and backward
    (clear_buffer), fused where the device fuses; returns (loss, x.g, the forward plan's
    runners)."""
    import nnabla_jit as nn
    with nn.context_scope(ctx):
        x = nn.Variable.from_numpy_array(x_value, need_grad=True)
        z = nn.Variable.from_numpy_array(x_value[::-1].copy(), need_grad=True)
        h = F.tanh(2 * x + 1) * F.sigmoid(x) - 0.5
        loss = F.sum((h * z) ** 2 + F.exp(h) / 3.0)
    x.grad.zero()
    z.grad.fill(0.25 if accumulate else 0.0)
    loss.forward(clear_no_need_grad=True)
    loss.backward(clear_buffer=True)
    plans = loss._cache[("forward", False, True)], loss._cache[("backward", True)]
    return float(loss.d), x.g.copy(), z.g.copy(), plans[0].runners + plans[1].runners


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fuse", [True, False])
def test_fused_regions_on_the_device_equal_the_cpu(monkeypatch, fuse_from_first_run, dtype, fuse):
    import nnabla_jit as nn
    from nnabla_jit import fusion
    from nnabla_jit.cuda_ops import fused
    from .compare import cuda_context
    monkeypatch.setattr(fused, "FUSION", fuse)
    x = rng.randn(3, 4).astype(dtype)
    for accumulate in (False, True):
        cpu = _chain_step(nn.Context(), x, accumulate)
        gpu = _chain_step(cuda_context(), x, accumulate)
        rtol = 1e-5   # float64 inputs are computed in float32 too (nnabla's 'float' type)
        np.testing.assert_allclose(gpu[0], cpu[0], rtol=rtol)
        np.testing.assert_allclose(gpu[1], cpu[1], rtol=rtol, atol=1e-6)
        np.testing.assert_allclose(gpu[2], cpu[2], rtol=rtol, atol=1e-6)
        assert any(isinstance(r, fusion.FusedForward) for r in gpu[3]) == fuse
        assert any(isinstance(r, fusion.FusedBackward) for r in gpu[3]) == fuse


def test_fused_kernels_round_like_the_stores():
    from nnabla_jit.cuda_ops import fused
    text = fused.kernel_source(["e0_v = e0[i]", "v0 = e0_v * p0_a", "o0[i] = v0"],
                               ["o0", "e0", "p0_a"], ["o0", "e0"], np.float32)
    assert "v0 = float32(e0_v * p0_a)" in text and "o0[i] = v0" in text
    assert "if i < o0.size:" in text


def test_resolved_launch_falls_back_when_a_kernel_launches_otherwise(monkeypatch):
    from nnabla_jit.cuda_ops import device
    monkeypatch.setattr(device, "LAUNCH_CACHE", True)
    monkeypatch.setattr(device, "RESOLVED_LAUNCH", True)
    monkeypatch.setattr(device, "_RESOLVED_OK", [True])
    monkeypatch.setattr(device, "_CONFIGURED", {})
    kern = FakeNumbaDispatcher()
    launch = device.configured(kern, 4, 128)
    a = DeviceNDArray((2,))
    launch(a, 1)
    launch(a, 1)
    (overload,) = kern.overloads.values()
    overload.launch = lambda args, griddim, blockdim: None   # another signature
    launch(a, 1)
    launch(a, 1)
    assert kern.resolved == 4 and not device._RESOLVED_OK[0]


@pytest.mark.parametrize("kept", [True, False])
def test_views_kept_on_their_array_alias_it_and_leave_the_pool_alone(monkeypatch, kept):
    """NNABLA_JIT_CUDA_VIEW_CACHE: a reshape or row of a device array is built once and kept on
    it; it writes through to the array, and the array still goes back to the pool."""
    from nnabla_jit.cuda_ops import device
    device.load()
    monkeypatch.setattr(device, "VIEW_CACHE", kept)
    a = device.upload(np.arange(6, dtype=np.float32).reshape(2, 3))
    flat = device.flat(a)
    assert flat.shape == (6,)
    assert (device.reshaped(a, 6) is flat) == kept
    assert (device.reshaped(a, (3, 2)) is device.reshaped(a, 3, 2)) == kept
    assert (device.reshaped(a, [3, 2]) is device.reshaped(a, 3, 2)) == kept
    assert (device.reshaped(a, np.array([3, 2])) is device.reshaped(a, np.int64(3), 2)) == kept
    assert device.reshaped(a, np.array([3, 2])).shape == (3, 2)
    assert (device.row(a, 1) is device.row(a, 1)) == kept
    device.fill(device.row(a, 1), 7.0)
    device.add_into(device.reshaped(a, 3, 2), device.upload(np.ones((3, 2), np.float32)))
    np.testing.assert_array_equal(device.copy_down(a), [[1, 2, 3], [8, 8, 8]])
    np.testing.assert_array_equal(device.copy_down(device.reshaped(a, 3, 2)),
                                  [[1, 2], [3, 8], [8, 8]])
    device.free_pool()
    device.release(a)
    assert any(pooled is a for pooled in device._POOL.get((6, np.dtype(np.float32)), []))
    device.free_pool()
    host = np.zeros((2, 3))   # NumPy arrays cannot keep views: a new one each time
    assert device.reshaped(host, 6) is not device.reshaped(host, 6)


def test_convolution_launch_geometry_is_kept_until_set_up_again():
    """A convolution node keeps its device launch geometry across steps; a new input shape
    (set up again) gives it a new one, and the results stay the CPU's."""
    import nnabla_jit as nn
    from .compare import cuda_context
    w = rng.randn(3, 2, 3, 3).astype(np.float32)
    with nn.context_scope(cuda_context()):
        x = nn.Variable.from_numpy_array(rng.randn(2, 2, 5, 5).astype(np.float32))
        y = F.convolution(x, nn.Variable.from_numpy_array(w), pad=(1, 1))
        y.forward()
        op = y.parent.op
        kept = op.device_conv_launch
        y.forward()
        assert op.device_conv_launch is kept
        x.reset_shape((1, 2, 4, 4), force=True)
        x.d = rng.randn(1, 2, 4, 4).astype(np.float32)
        y.forward()
        assert op.device_conv_launch is not kept and op.device_conv_launch.geo is op.geo
        got = y.d.copy()
    expected = F.convolution(nn.Variable.from_numpy_array(x.d), nn.Variable.from_numpy_array(w),
                             pad=(1, 1))
    expected.forward()
    np.testing.assert_allclose(got, expected.d, rtol=1e-5, atol=1e-5)
