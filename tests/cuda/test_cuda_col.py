"""im2col and col2im on the device (cuda_ops/convolution.py) against the CPU's im2col
(ops/convolution.py), bit for bit: both layouts, groups, dilation, stride and padding, 1 to 4
spatial dims, the three init modes, and grids smaller than the rows and samples (the kernels
loop over the rest)."""
import types

import numpy as np
import pytest

from nnabla_jit.cuda_ops import convolution as cuda_conv, device
from nnabla_jit.ops import convolution as cpu_conv, convolution_kernels as col_rules

# (name, image shape, filter shape, pad, stride, dilation, group, channel_last)
GEOMETRIES = [
    ("1-d", (2, 3, 7), (2, 3, 3), (1,), (2,), (2,), 1, False),
    ("2-d stride and pad", (2, 3, 5, 6), (4, 3, 3, 2), (1, 0), (2, 1), (1, 1), 1, False),
    ("2-d groups and dilation", (1, 4, 5, 5), (4, 2, 2, 2), (1, 1), (1, 1), (2, 1), 2, False),
    ("2-d channel-last, groups", (2, 5, 4, 4), (4, 2, 2, 2), (1, 0), (2, 1), (1, 2), 2, True),
    ("3-d", (2, 2, 3, 4, 5), (2, 2, 2, 3, 2), (1, 0, 1), (1, 2, 1), (1, 1, 2), 1, False),
    ("3-d channel-last", (1, 3, 3, 4, 2), (3, 2, 2, 2, 2), (0, 1, 1), (2, 1, 2), (1, 1, 1), 1,
     True),
    ("4-d", (1, 2, 2, 3, 3, 3), (2, 2, 2, 1, 2, 2), (1, 0, 1, 0), (1, 1, 2, 1), (1, 1, 1, 1), 1,
     False),
]
IDS = [g[0] for g in GEOMETRIES]


def geometry(img_shape, w_shape, pad, stride, dilation, group, channel_last):
    fails = types.SimpleNamespace(fail=lambda *a: pytest.fail(str(a)))
    return cpu_conv.ConvGeometry(fails, img_shape, w_shape, pad, stride, dilation, group,
                                 channel_last, 1)


def cpu_col(geo, img):
    col = np.empty((geo.C * geo.K, geo.B * geo.O), img.dtype)
    col_rules.im2col.for_size(col.size)(img.reshape(geo.B, -1), col, geo.img_sp_a, geo.map_sp_a,
                                       geo.stride_a, geo.koff, geo.group, geo.channel_last, geo.taps)
    return col


def col2im_reference(geo, dcol, img, bias, init):
    """col2im as the device computes it: per image element the float64 sum, tap by tap, of the
    col entries that read it (found with the CPU's im2col of the element numbers), onto the
    element (INIT_ADD), zero or its channel's bias."""
    reads = cpu_col(geo, np.arange(1, img.size + 1, dtype=np.float64).reshape(img.shape))
    reads = reads.astype(np.int64)   # 1 + the element read, 0 in the padding
    taps = col_rules.col_entry.py_func(np.arange(geo.C * geo.K), geo.K, geo.C // geo.group,
                                      geo.channel_last)[1]
    sums = np.zeros(img.size + 1)
    for k in range(geo.K):
        np.add.at(sums, reads[taps == k], dcol[taps == k].astype(np.float64))
    sums = sums[1:].reshape(img.shape)
    if init == cpu_conv.INIT_ADD:
        return (img.astype(np.float64) + sums).astype(img.dtype)
    if init == cpu_conv.INIT_BIAS:
        channel_axis = img.ndim - 1 if geo.channel_last else 1
        shape = [1] * img.ndim
        shape[channel_axis] = geo.C
        return (sums + bias.astype(np.float64).reshape(shape)).astype(img.dtype)
    return sums.astype(img.dtype)


@pytest.fixture(autouse=True)
def loaded(needs_cuda):
    device.load()


def launch_of(geo):
    return cuda_conv.ConvLaunch(types.SimpleNamespace(geo=geo))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, img_shape, w_shape, pad, stride, dilation, group, channel_last",
                         GEOMETRIES, ids=IDS)
def test_im2col_is_the_cpus(name, img_shape, w_shape, pad, stride, dilation, group,
                            channel_last, dtype):
    geo = geometry(img_shape, w_shape, pad, stride, dilation, group, channel_last)
    img = np.random.RandomState(0).uniform(-1, 1, img_shape).astype(dtype)
    col = launch_of(geo).col(device.upload(img)).copy_to_host()
    np.testing.assert_array_equal(col.reshape(geo.C * geo.K, -1), cpu_col(geo, img))


@pytest.mark.parametrize("init", [cpu_conv.INIT_ZERO, cpu_conv.INIT_ADD, cpu_conv.INIT_BIAS])
@pytest.mark.parametrize("name, img_shape, w_shape, pad, stride, dilation, group, channel_last",
                         GEOMETRIES, ids=IDS)
def test_col2im_sums_the_col_entries_reading_each_element(name, img_shape, w_shape, pad, stride,
                                                          dilation, group, channel_last, init):
    geo = geometry(img_shape, w_shape, pad, stride, dilation, group, channel_last)
    rng = np.random.RandomState(1)
    dcol = rng.uniform(-1, 1, (geo.C * geo.K, geo.B * geo.O)).astype(np.float32)
    img = rng.uniform(-1, 1, img_shape).astype(np.float32)
    bias = rng.uniform(-1, 1, geo.C).astype(np.float32)
    out = device.upload(img)
    launch_of(geo).col_to_image(device.upload(dcol.ravel()), out, device.upload(bias), init)
    np.testing.assert_array_equal(out.copy_to_host(), col2im_reference(geo, dcol, img, bias, init))


@pytest.mark.parametrize("channel_last", [False, True])
@pytest.mark.parametrize("threads, spatial, samples_per_block", [(128, (9, 9), 1), (8, (1, 3), 2)],
                         ids=["one sample per block", "two samples per block"])
def test_grids_smaller_than_the_rows_and_samples_loop_over_them(monkeypatch, channel_last, threads,
                                                                spatial, samples_per_block):
    """One block along y and z: every thread loops over all rows (channels) and samples."""
    monkeypatch.setattr(cuda_conv, "GRID_YZ", 1)
    monkeypatch.setattr(device, "THREADS", threads)
    C, B = 2, 3
    shape = (B, *spatial, C) if channel_last else (B, C, *spatial)
    w_shape = (2, 2, 2, C) if channel_last else (2, C, 2, 2)
    geo = geometry(shape, w_shape, (1, 0), (1, 1), (1, 1), 1, channel_last)
    launched = []
    configured = device.configured
    monkeypatch.setattr(device, "configured",
                        lambda kern, grid, block: launched.append((grid, block)) or
                        configured(kern, grid, block))
    rng = np.random.RandomState(2)
    img = rng.uniform(-1, 1, shape).astype(np.float32)
    launch = launch_of(geo)
    col = launch.col(device.upload(img)).copy_to_host()
    np.testing.assert_array_equal(col.reshape(geo.C * geo.K, -1), cpu_col(geo, img))
    dcol = rng.uniform(-1, 1, col.size).astype(np.float32).reshape(geo.C * geo.K, -1)
    out = device.upload(img)
    launch.col_to_image(device.upload(dcol.ravel()), out, None, cpu_conv.INIT_ADD)
    np.testing.assert_array_equal(out.copy_to_host(),
                                  col2im_reference(geo, dcol, img, None, cpu_conv.INIT_ADD))
    assert [(grid[1:], block[2]) for grid, block in launched] == [((1, 1), samples_per_block)] * 2


@pytest.mark.parametrize("grid_yz, threads", [(65535, 128), (1, 8)], ids=["whole grid", "looping"])
@pytest.mark.parametrize("channel_last", [False, True])
def test_map_and_rows_are_transposes(monkeypatch, channel_last, grid_yz, threads):
    """rows[m, b * O + o] = map[b, m, o] (map_to_rows), and back onto the map's bias
    (rows_to_map), both layouts, with the grid covering everything or one block along y, z."""
    monkeypatch.setattr(cuda_conv, "GRID_YZ", grid_yz)
    monkeypatch.setattr(device, "THREADS", threads)
    C, B, M = 2, 3, 3
    shape = (B, 1, 3, C) if channel_last else (B, C, 1, 3)
    geo = geometry(shape, (M, 2, 2, C) if channel_last else (M, C, 2, 2), (1, 0), (1, 1),
                   (1, 1), 1, channel_last)
    rng = np.random.RandomState(3)
    mp = rng.uniform(-1, 1, geo.map_shape).astype(np.float32)
    by_channel = np.moveaxis(mp, -1, 1) if channel_last else mp   # (B, M, *map spatial)
    expected_rows = by_channel.reshape(B, M, geo.O).transpose(1, 0, 2).reshape(M, B * geo.O)
    launch = launch_of(geo)
    rows = launch.rows(device.upload(mp))
    np.testing.assert_array_equal(rows.copy_to_host(), expected_rows)
    bias = rng.uniform(-1, 1, M).astype(np.float32)
    out = device.upload(np.zeros_like(mp))
    cuda_conv.grid_launch(cuda_conv.rows_to_map_kernel, geo.O, M, B)(
        rows, device.flat(out), device.upload(bias), cpu_conv.INIT_BIAS, *launch.map_layout())
    channel_shape = [1] * mp.ndim
    channel_shape[-1 if channel_last else 1] = M
    np.testing.assert_array_equal(out.copy_to_host(), mp + bias.reshape(channel_shape))
