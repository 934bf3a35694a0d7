"""The convolution's direct products (cuda_ops/convolution.py, one group): GEMMs batch outermost
that write the map and the image themselves, a pointwise (1x1, no stride, no padding)
convolution with no col at all. Each product against the CPU's ConvGeometry on the same
arrays, float32 and float64, both layouts, every init mode; which kernels run; group > 1 and
DIRECT_CONV=0 through the rows; and whole graphs (forward and backward, accumulated
gradients, bias) against the CPU, through every matmul route this machine has."""
import types

import numpy as np
import pytest

import nnabla_jit.functions as F
from nnabla_jit.cuda_ops import blas, cublas, device
from nnabla_jit.cuda_ops import convolution as cuda_conv
from nnabla_jit.ops import convolution as cpu_conv

from .compare import assert_same_on_cuda

ROUTES = ["numba"] + (["cublas"] if cublas.unavailable_reason() is None else [])

# (name, image shape, filter shape, pad, stride, dilation, group, channel_last)
GEOMETRIES = [
    ("pointwise", (2, 3, 3, 4), (5, 3, 1, 1), (0, 0), (1, 1), (1, 1), 1, False),
    ("pointwise channel-last", (2, 3, 4, 3), (5, 1, 1, 3), (0, 0), (1, 1), (1, 1), 1, True),
    ("pointwise 1-d, dilation", (3, 2, 5), (3, 2, 1), (0,), (1,), (2,), 1, False),
    ("1x1 stride 2", (2, 3, 5, 4), (4, 3, 1, 1), (0, 0), (2, 2), (1, 1), 1, False),
    ("1x1 stride 2 channel-last", (2, 5, 4, 3), (4, 1, 1, 3), (0, 0), (2, 1), (1, 1), 1, True),
    ("1x1 pad 1", (1, 2, 3, 3), (3, 2, 1, 1), (1, 1), (1, 1), (1, 1), 1, False),
    ("3x3 pad and stride", (1, 2, 4, 4), (3, 2, 3, 3), (1, 1), (2, 1), (1, 1), 1, False),
    ("3x3 channel-last", (2, 4, 5, 2), (3, 3, 2, 2), (1, 0), (1, 2), (1, 1), 1, True),
    ("3-d", (1, 2, 3, 3, 4), (2, 2, 2, 1, 2), (1, 0, 0), (1, 2, 1), (1, 1, 1), 1, False),
    ("pointwise 3-d channel-last", (2, 2, 2, 3, 2), (3, 1, 1, 1, 2), (0, 0, 0), (1, 1, 1),
     (1, 1, 1), 1, True),
]
IDS = [g[0] for g in GEOMETRIES]
INITS = {"zero": cpu_conv.INIT_ZERO, "add": cpu_conv.INIT_ADD, "bias": cpu_conv.INIT_BIAS}


@pytest.fixture(autouse=True)
def loaded(needs_cuda, monkeypatch):
    """The simulator's maps are tiny: the batched products from one position on."""
    monkeypatch.setattr(cuda_conv, "DIRECT_MIN_POSITIONS", 1)
    device.load()


@pytest.fixture(params=ROUTES)
def route(request):
    previous = blas.use_backend(request.param)
    yield request.param
    blas.use_backend(previous)


def geometry(img_shape, w_shape, pad, stride, dilation, group, channel_last):
    fails = types.SimpleNamespace(fail=lambda *a: pytest.fail(str(a)))
    return cpu_conv.ConvGeometry(fails, img_shape, w_shape, pad, stride, dilation, group,
                                 channel_last, 1)


def launched_kernels(monkeypatch):
    """The kernels launched from now on, in order."""
    launched = []
    configured = device.configured
    monkeypatch.setattr(device, "configured",
                        lambda kern, grid, block: launched.append(kern) or
                        configured(kern, grid, block))
    return launched


def arrays(geo, dtype, seed):
    rng = np.random.RandomState(seed)
    u = (lambda *shape: rng.uniform(-1, 1, shape).astype(dtype))
    w_shape = (geo.M, *geo.kernel, geo.C // geo.group) if geo.channel_last else \
        (geo.M, geo.C // geo.group, *geo.kernel)
    return (u(*geo.img_shape), u(*w_shape), u(*geo.map_shape), u(geo.M), u(geo.C))


def tolerance(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)


def product_cases():
    """Every geometry, init mode and dtype; in the quick run the 1x1 ones in float32 and the
    pointwise ones accumulating in float64, the rest in the slow run (seconds each in the
    simulator)."""
    for geometry_case in GEOMETRIES:
        for init in INITS:
            for dtype in (np.float32, np.float64):
                quick = geometry_case[0].startswith(("pointwise", "1x1 stride")) and (
                    dtype == np.float32 or (init == "add" and "stride" not in geometry_case[0]))
                yield pytest.param(*geometry_case, init, dtype,
                                   marks=() if quick else pytest.mark.slow,
                                   id="{}-{}-{}".format(geometry_case[0], init,
                                                        np.dtype(dtype).name))


@pytest.mark.parametrize("name, img_shape, w_shape, pad, stride, dilation, group, channel_last, "
                         "init, dtype", list(product_cases()))
def test_direct_products_are_the_cpus(route, name, img_shape, w_shape, pad, stride, dilation,
                                      group, channel_last, init, dtype):
    """image -> map (forward), map -> image (data gradient, a deconvolution's forward), onto
    zero, the contents or the bias, and the filter gradient, plain and accumulated."""
    geo = geometry(img_shape, w_shape, pad, stride, dilation, group, channel_last)
    img, w, mp, map_bias, img_bias = arrays(geo, dtype, 0)
    launch = cuda_conv.ConvLaunch(types.SimpleNamespace(geo=geo))
    assert launch.direct()
    mode = INITS[init]

    expected = mp.copy()
    geo.image_to_map(img, w, expected, map_bias if init == "bias" else None, mode)
    out = device.upload(mp)
    launch.image_to_map(device.upload(img), device.upload(w), out,
                        device.upload(map_bias) if init == "bias" else None, mode)
    np.testing.assert_allclose(out.copy_to_host(), expected, **tolerance(dtype))

    expected = img.copy()
    geo.map_to_image(mp, w, expected, img_bias if init == "bias" else None, mode)
    out = device.upload(img)
    launch.map_to_image(device.upload(mp), device.upload(w), out,
                        device.upload(img_bias) if init == "bias" else None, mode)
    np.testing.assert_allclose(out.copy_to_host(), expected, **tolerance(dtype))

    accumulate = init == "add"
    expected = w.copy()
    geo.filter_grad(img, mp, expected, accumulate)
    out = device.upload(w)
    launch.filter_grad(device.upload(img), device.upload(mp), out, accumulate)
    np.testing.assert_allclose(out.copy_to_host(), expected, **tolerance(dtype))


POINTWISE = [g for g in GEOMETRIES if g[0].startswith("pointwise")]


@pytest.mark.parametrize("name, img_shape, w_shape, pad, stride, dilation, group, channel_last",
                         POINTWISE, ids=[g[0] for g in POINTWISE])
def test_a_pointwise_convolution_runs_no_col_and_no_rows(monkeypatch, name, img_shape, w_shape,
                                                         pad, stride, dilation, group,
                                                         channel_last):
    """Forward and data gradient are GEMMs alone (the bias one kernel laying it out); the filter
    gradient copies the map and image to rows channel-first, nothing channel-last."""
    geo = geometry(img_shape, w_shape, pad, stride, dilation, group, channel_last)
    assert geo.col_is_image
    img, w, mp, map_bias, _ = (device.upload(a) for a in arrays(geo, np.float32, 1))
    launch = cuda_conv.ConvLaunch(types.SimpleNamespace(geo=geo))
    launched = launched_kernels(monkeypatch)
    launch.image_to_map(img, w, mp)
    launch.map_to_image(mp, w, img)
    launch.image_to_map(img, w, mp, map_bias, cpu_conv.INIT_BIAS)
    launch.filter_grad(img, mp, device.zeros(w.shape, w.dtype), False)
    moves = [k for k in launched if k is not blas.matmul_kernel and k is not device.fill_kernel]
    rows = [] if channel_last else [cuda_conv.map_to_rows_kernel] * 2
    assert moves == [cuda_conv.channel_fill_kernel] + rows


def test_strided_and_general_convolutions_write_the_map_without_rows(monkeypatch):
    """im2col (batch outermost) then the GEMM: no rows_to_map forward, no map_to_rows backward
    for the data gradient, col2im reading the batch-outermost col."""
    geo = geometry((2, 3, 5, 4), (4, 3, 1, 1), (0, 0), (2, 2), (1, 1), 1, False)
    img, w, mp, _, _ = (device.upload(a) for a in arrays(geo, np.float32, 2))
    launch = cuda_conv.ConvLaunch(types.SimpleNamespace(geo=geo))
    launched = launched_kernels(monkeypatch)
    launch.image_to_map(img, w, mp)
    launch.map_to_image(mp, w, img)
    moves = [k for k in launched if k is not blas.matmul_kernel]
    assert moves == [cuda_conv.im2col_kernel, cuda_conv.col2im_kernel]


@pytest.mark.parametrize("group, switch", [(2, True), (1, False)], ids=["group 2", "DIRECT_CONV=0"])
def test_groups_and_the_switch_take_the_rows(monkeypatch, group, switch):
    monkeypatch.setattr(cuda_conv, "DIRECT_CONV", switch)
    geo = geometry((2, 4, 3, 3), (4, 4 // group, 1, 1), (0, 0), (1, 1), (1, 1), group, False)
    img, w, mp, map_bias, _ = arrays(geo, np.float32, 3)
    launch = cuda_conv.ConvLaunch(types.SimpleNamespace(geo=geo))
    assert not launch.direct()
    launched = launched_kernels(monkeypatch)
    out = device.upload(mp)
    launch.image_to_map(device.upload(img), device.upload(w), out, device.upload(map_bias),
                        cpu_conv.INIT_BIAS)
    expected = mp.copy()
    geo.image_to_map(img, w, expected, map_bias, cpu_conv.INIT_BIAS)
    np.testing.assert_allclose(out.copy_to_host(), expected, rtol=1e-5, atol=1e-6)
    assert [k for k in launched if k is not blas.matmul_kernel] == [
        cuda_conv.im2col_kernel, cuda_conv.rows_to_map_kernel]


@pytest.mark.parametrize("channel_last", [False, True])
def test_maps_of_few_positions_take_the_rows_but_no_im2col_when_pointwise(monkeypatch,
                                                                         channel_last):
    """Under DIRECT_MIN_POSITIONS the rows path runs, a pointwise col made by the plain copy;
    channel-last a pointwise convolution is one GEMM over the batch whatever its size."""
    monkeypatch.setattr(cuda_conv, "DIRECT_MIN_POSITIONS", 13)
    shape, w_shape = ((2, 3, 4, 3), (5, 1, 1, 3)) if channel_last else ((2, 3, 3, 4), (5, 3, 1, 1))
    geo = geometry(shape, w_shape, (0, 0), (1, 1), (1, 1), 1, channel_last)
    img, w, mp, _, _ = arrays(geo, np.float32, 4)
    launch = cuda_conv.ConvLaunch(types.SimpleNamespace(geo=geo))
    assert launch.direct() == channel_last
    launched = launched_kernels(monkeypatch)
    out = device.upload(mp)
    launch.image_to_map(device.upload(img), device.upload(w), out)
    expected = mp.copy()
    geo.image_to_map(img, w, expected)
    np.testing.assert_allclose(out.copy_to_host(), expected, rtol=1e-5, atol=1e-6)
    moves = [k for k in launched if k is not blas.matmul_kernel]
    assert moves == ([] if channel_last else
                     [cuda_conv.map_to_rows_kernel, cuda_conv.rows_to_map_kernel])
    monkeypatch.setattr(cuda_conv, "DIRECT_MIN_POSITIONS", 12)
    assert launch.direct()


def signed(*shape):
    return np.random.RandomState(sum(shape)).uniform(-1, 1, shape).astype(np.float32)


GRAPHS = [
    ("pointwise, bias", lambda x, w, b: F.convolution(x, w, b),
     [signed(2, 3, 3, 3), signed(4, 3, 1, 1), signed(4)]),
    ("pointwise channel-last, bias",
     lambda x, w, b: F.convolution(x, w, b, channel_last=True),
     [signed(2, 3, 3, 3), signed(4, 1, 1, 3), signed(4)]),
    ("pointwise, gradients accumulate",
     lambda x, w: F.convolution(x, w) * 2.0 + F.convolution(x, w),
     [signed(2, 2, 3, 3), signed(3, 2, 1, 1)]),
    ("pointwise channel-last, gradients accumulate",
     lambda x, w, b: F.convolution(x, w, b, channel_last=True) * 2.0 +
     F.convolution(x, w, b, channel_last=True),
     [signed(1, 3, 2, 2), signed(3, 1, 1, 2), signed(3)]),
    ("1x1 stride 2, bias", lambda x, w, b: F.convolution(x, w, b, stride=(2, 2)),
     [signed(2, 3, 5, 5), signed(4, 3, 1, 1), signed(4)]),
    ("1x1 group 2", lambda x, w: F.convolution(x, w, group=2),
     [signed(2, 4, 3, 3), signed(4, 2, 1, 1)]),
    ("pointwise deconvolution, bias", lambda x, w, b: F.deconvolution(x, w, b),
     [signed(2, 4, 3, 3), signed(4, 3, 1, 1), signed(3)]),
    ("pointwise deconvolution channel-last",
     lambda x, w: F.deconvolution(x, w, channel_last=True),
     [signed(2, 3, 3, 4), signed(4, 1, 1, 2)]),
]


@pytest.mark.parametrize("name, build, values", GRAPHS, ids=[g[0] for g in GRAPHS])
def test_graphs_match_the_cpu(route, name, build, values):
    assert_same_on_cuda(build, *values, rtol=1e-4, atol=1e-5)


def test_without_the_input_gradient_the_bias_gradient_sums_the_map():
    """No rows are made (no filter gradient either): the bias gradient reduces dy itself."""
    assert_same_on_cuda(lambda x, w, b: F.convolution(x, w, b), signed(2, 2, 3, 3),
                        signed(3, 2, 1, 1), signed(3), no_grad=(0, 1), rtol=1e-4, atol=1e-5)
