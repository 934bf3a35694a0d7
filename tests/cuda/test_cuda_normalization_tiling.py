"""The per-channel normalization kernels' tiling (cuda_ops/channel_tiles.py):
channel groups of small rows, slices of a channel summed by several blocks and combined by the
last one, sizes that fill no block exactly, against the CPU kernels (float32 and float64)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import cuda_context, run, written_on_device

rng = np.random.RandomState(1)

# (shape, the BN axis): what each exercises of the tiling, O rows of C channels of I elements
SHAPES = [
    ((3, 5, 7, 9), 1),       # I = 63: one channel per group, rows not a multiple of a warp
    ((6, 37, 3), 1),         # I = 3: 10 channels per group, the last group of 7
    ((4, 3, 2, 37), 3),      # channel last: I = 1, 32 channels per group, then 5
    ((2, 3, 17), 1),         # I = 17: just over half a warp, one channel per group
    ((1, 2, 12, 40), 1),     # I = 480, a single row: the slices split it
    ((6, 40), 1),            # after an Affine: I = 1, O = 6
]


@pytest.fixture
def many_slices(monkeypatch):
    """Blocks of 32 threads with 4 elements each: tiny inputs take several slices per channel
    group, so that partial sums are combined across blocks (launch sizes only: the kernels'
    shared arrays keep THREADS entries)."""
    from nnabla_jit.cuda_ops import channel_tiles
    monkeypatch.setattr(channel_tiles, "LAUNCH_THREADS", 32)
    monkeypatch.setattr(channel_tiles, "ELEMENTS_PER_THREAD", 4)
    return channel_tiles


def bn_arrays(shape, axis, dtype):
    stat = tuple(s if a == axis else 1 for a, s in enumerate(shape))
    x = rng.uniform(-1, 1, shape) * 3.0 + 2.0   # off zero: the shifted sums matter
    return [a.astype(dtype) for a in (x, rng.uniform(-1, 1, stat), rng.uniform(0.5, 1.5, stat),
                                      rng.uniform(-1, 1, stat), rng.uniform(0.5, 1.5, stat))]


def contexts(dtype):
    if dtype == np.float64:
        return nn.Context(["cpu:double"]), cuda_context(type_config="double"), 1e-10
    return nn.Context(), cuda_context(), 1e-5


def assert_same(build, arrays, dtype, no_grad=(3, 4)):
    cpu_ctx, gpu_ctx, tol = contexts(dtype)
    y_cpu, x_cpu = run(cpu_ctx, build, arrays, no_grad)
    y_gpu, x_gpu = run(gpu_ctx, build, arrays, no_grad)
    assert written_on_device(y_gpu.data)
    assert y_gpu.d.dtype == np.dtype(dtype)
    np.testing.assert_allclose(y_gpu.d, y_cpu.d, rtol=tol, atol=tol)
    for a, b in zip(x_gpu, x_cpu):
        if a.need_grad:
            np.testing.assert_allclose(a.g, b.g, rtol=tol, atol=tol)
    for a, b in zip(x_gpu[3:5], x_cpu[3:5]):   # the running statistics
        np.testing.assert_allclose(a.d, b.d, rtol=tol, atol=tol)


CASES = ([(shape, axis, np.float32) for shape, axis in SHAPES]
         + [(shape, axis, np.float64) for shape, axis in SHAPES[1:3]])


@pytest.mark.parametrize("shape, axis, dtype", CASES,
                         ids=["{}-{}".format(s, np.dtype(d)) for s, _, d in CASES])
def test_training_and_inference_over_many_slices(many_slices, shape, axis, dtype):
    arrays = bn_arrays(shape, axis, dtype)

    def build(x, b, g, m, v):
        y = F.batch_normalization(x, b, g, m, v, axes=[axis], decay_rate=0.7)
        return y + F.batch_normalization(x, b, g, m, v, axes=[axis], batch_stat=False) * 0.5

    assert_same(build, arrays, dtype)
    assert not np.any(many_slices.ARRIVALS[0].copy_to_host())   # ready for the next launch


def test_fused_with_z_and_relu_over_many_slices(many_slices):
    shape, axis = SHAPES[2]
    arrays = bn_arrays(shape, axis, np.float32) + [rng.uniform(-1, 1, shape).astype(np.float32)]
    for batch_stat in (True, False):
        assert_same(lambda x, b, g, m, v, z: F.fused_batch_normalization(
            x, b, g, m, v, z, axes=[axis], batch_stat=batch_stat), arrays, np.float32)


@pytest.mark.slow   # about 30 s in the simulator
def test_per_sample_statistics_over_many_slices(many_slices, shape=(2, 2, 100)):
    """Layer and instance normalization (channels of one row each) and weight normalization
    (its norms' sums) over the same kernels."""
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    gain = rng.uniform(0.5, 1.5, shape[1]).astype(np.float32)
    assert_same(lambda x, g: F.layer_normalization(x, None, None)
                + F.instance_normalization(x, None, None) * 2.0
                + F.weight_normalization(x, g, dim=1) * 0.5, [x, gain], np.float32, no_grad=())


def test_fused_launches_equal_the_two_launches_over_many_slices(monkeypatch, many_slices):
    """The sums of the fused kernels and of channel_sums_kernel are one code path with one
    order of additions: the outputs, gradients and running statistics agree to the last bit."""
    from nnabla_jit.cuda_ops import normalization
    arrays = bn_arrays((6, 37, 3), 1, np.float32)
    results = []
    for fused in (True, False):
        monkeypatch.setattr(normalization, "FUSED_STATISTICS", fused)
        monkeypatch.setattr(normalization, "FUSED_INFERENCE", fused)
        y, xs = run(cuda_context(), lambda x, b, g, m, v: F.batch_normalization(
            x, b, g, m, v) + F.batch_normalization(x, b, g, m, v, batch_stat=False), arrays,
            no_grad=(3, 4))
        results.append([y.d.copy()] + [x.d.copy() for x in xs[3:5]]
                       + [x.g.copy() for x in xs if x.need_grad])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_the_default_tiling_fills_a_large_gpu_with_whole_rows_per_thread():
    """Host side only: the launch sizes the kernels rely on (every thread of a channel group
    keeps its channel; enough blocks for a large GPU on a ResNet's layers)."""
    from nnabla_jit.cuda_ops import channel_tiles as tiles
    for O, C, I in [(128, 64, 1024), (128, 512, 16), (131072, 64, 1), (32, 2048, 49), (1, 1, 5),
                    (7, 3, 5), (1, 64, 131072), (6, 40, 1)]:
        (groups, slices), threads, (per_group, padded, row_step, position_step) = \
            tiles.tiling(O, C, I)
        assert groups * per_group >= C > (groups - 1) * per_group
        assert threads <= tiles.THREADS and threads & (threads - 1) == 0
        assert row_step * padded + position_step == slices * threads
        if per_group > 1:   # a thread's step is whole rows: its position, its channel, stay
            assert position_step == 0 and padded <= tiles.WARP and per_group * I <= padded
        else:
            assert padded == I
        if O * C * I >= tiles.BLOCKS_WANTED * tiles.THREADS * tiles.ELEMENTS_PER_THREAD:
            assert groups * slices >= tiles.BLOCKS_WANTED // 2
