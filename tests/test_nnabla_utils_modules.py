"""nnabla's utility modules added for drop-in use: dlpack, audio_utils, image_utils backends,
download, function_profile, signature_utils, nvml, lms, progress, communicator_util,
get_file_handle, create_cache, load/save_function, parametric_function_class, contrib, rnn."""
import contextlib
import datetime
import inspect
import io
import os
import zipfile

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.utils import audio_utils, image_utils


def test_dlpack_shares_memory_both_ways():
    from nnabla_jit.utils.dlpack import from_dlpack, to_dlpack
    a = nn.NdArray.from_numpy_array(np.ones((2, 3), np.float32))
    view = np.from_dlpack(a)              # NdArray is a DLPack producer
    view += 1
    assert np.all(a.data == 2)
    b = from_dlpack(to_dlpack(a))          # through a bare capsule
    b.data[0, 0] = 7
    assert a.data[0, 0] == 7
    source = np.arange(4.0)
    c = from_dlpack(source)
    source[1] = 9
    c.data[2] = 5
    assert list(c.data) == [0, 9, 5, 3] and list(source) == [0, 9, 5, 3]
    into = nn.NdArray((1,))
    assert from_dlpack(np.zeros((2, 2), np.float64), arr=into) is into and into.shape == (2, 2)
    d = to_dlpack(nn.NdArray.from_numpy_array(np.ones(3, np.float32)), dtype=np.float64)
    assert from_dlpack(d).dtype == np.float64


def test_audio_round_trip_resize_and_backends(tmp_path):
    rng = np.random.RandomState(0)
    samples = rng.randint(-3000, 3000, (800, 2)).astype(np.int16)
    path = str(tmp_path / "a.wav")
    audio_utils.ausave(path, samples)
    assert np.array_equal(audio_utils.auread(path), samples)
    with open(path, "rb") as f:
        from_stream = audio_utils.auread(io.BytesIO(f.read()), channel_first=True)
    assert from_stream.shape == (2, 800)
    assert audio_utils.auresize(samples, (400, 1)).shape == (400, 1)
    assert audio_utils.get_backend() in audio_utils.get_available_backends()
    with pytest.raises(ValueError, match="not available"):
        audio_utils.set_backend("not_installed_module")
    with pytest.raises(ValueError, match="only support save as .wav"):
        audio_utils.ausave(str(tmp_path / "a.mp3"), samples)
    scaled = audio_utils.minmax_auto_scale(rng.rand(10, 2), np.int16)
    assert scaled.dtype == np.int16 and scaled.min() == -32768 and scaled.max() == 32767


def test_image_utils_backend_manager_and_rescaling():
    assert image_utils.get_available_backends() == ["PilBackend"]
    image_utils.set_backend("PilBackend")
    assert image_utils.get_backend() == "PilBackend"
    image_utils.set_backend("Cv2Backend")      # not available: the choice becomes automatic
    assert image_utils.get_backend() in ("", "PilBackend")
    img = np.array([[0.0, 0.5], [1.0, 0.25]])
    assert image_utils.minmax_auto_scale(img, False).tolist() == [[0, 127], [255, 63]]
    assert image_utils.minmax_auto_scale(img, True).dtype == np.uint16
    resized = image_utils.backend_manager.module.imresize(np.zeros((4, 6, 3), np.uint8), (3, 2))
    assert resized.shape == (2, 3, 3)


def test_imread_repeats_grey_and_pil_backend_is_8_bit(tmp_path):
    path = str(tmp_path / "i.png")
    rgb = np.random.RandomState(0).randint(0, 255, (6, 5, 3)).astype(np.uint8)
    image_utils.imsave(path, rgb)
    grey4 = image_utils.imread(path, grayscale=True, num_channels=4)
    assert grey4.shape == (6, 5, 4) and np.all(grey4 == grey4[:, :, :1])
    deep = str(tmp_path / "d.png")
    image_utils.imsave(deep, rgb[:, :, 0].astype(np.uint16) * 257, as_uint16=True)   # default: 16 bit
    assert image_utils.imread(deep, as_uint16=True).dtype == np.uint16
    image_utils.set_backend("PilBackend")
    try:
        with pytest.raises(ValueError, match="8-bit"):
            image_utils.imsave(deep, rgb.astype(np.uint16), as_uint16=True)
        with pytest.raises(ValueError, match="8-bit"):
            image_utils.imsave(path, rgb, as_uint16=True)
        assert image_utils.imread(path).dtype == np.uint8
    finally:
        image_utils.set_backend("default")      # back to automatic


def test_imsave_writes_through_a_temporary_file_with_the_mode_open_gives(tmp_path):
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    path = tmp_path / "i.png"
    image_utils.imsave(str(path), np.zeros((2, 3), np.uint8))
    assert os.stat(path).st_mode & 0o777 == os.stat(plain).st_mode & 0o777
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.png", "plain"]    # no temporary left
    with pytest.raises(FileNotFoundError, match="does not exist"):
        image_utils.imsave(str(tmp_path / "missing" / "i.png"), np.zeros((2, 3), np.uint8))


def test_download_from_a_local_url_and_resource_reader(tmp_path):
    from nnabla_jit.utils.data_source_loader import ResourceFileReader, download, get_file_extension
    src = tmp_path / "data.bin"
    src.write_bytes(b"RIFF....payload")
    out = tmp_path / "copy.bin"
    with download(src.as_uri(), output_file=str(out)) as f:
        assert f.read() == b"RIFF....payload"
    src.write_bytes(b"changed")
    assert download(src.as_uri(), output_file=str(out), open_file=False) is None
    assert out.read_bytes() == b"RIFF....payload"          # kept: allow_overwrite=False
    download(src.as_uri(), output_file=str(out), open_file=False, allow_overwrite=True)
    assert out.read_bytes() == b"changed"
    assert get_file_extension(io.BytesIO(b"RIFFxxxxWAVE")) == ".wav"
    reader = ResourceFileReader(io.BytesIO(b"\x89PNG\r\n\x1a\nrest"))
    assert reader.ext == ".png"
    with pytest.raises(ValueError, match="only accept"):
        ResourceFileReader(io.StringIO("text"))


def test_function_profile_collects_and_honours_the_condition(capsys):
    from nnabla_jit.utils import function_profile

    def work(a, b=None):
        return sum(range(1000))
    profiled = function_profile.profile(work)
    for _ in range(3):
        profiled(1)
    assert profiled.profiler.ncalls == 3
    profiled.profiler.print_stats()
    assert "Function Profiling" in capsys.readouterr().out and profiled.profiler.ncalls == 0
    only_with_b = function_profile.profile(condition=lambda a, b=None: b is not None)(work)
    only_with_b(1)
    only_with_b(1, b=2)
    assert only_with_b.profiler.ncalls == 1
    only_with_b.profiler.reset_stats()       # nothing left to print at exit


def test_signature_utils():
    from nnabla_jit.utils.signature_utils import SignatureEx

    def f(x, y=1, *args, k=2, **kw) -> int:
        pass
    sig = SignatureEx.from_callable(f)
    assert sig.format_argument_signature() == "x, y=1, *args, k=2, **kw"
    assert sig.format_caller_argument_signature() == "x, y, *args, k=k, **kw"
    assert sig.format_return_annotation() == " -> int"
    added = sig.drop_arg("y").add_arg("z", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    assert list(added.parameters) == ["x", "z", "args", "k", "kw"]
    with pytest.raises(KeyError, match="'nope' not found"):
        sig.drop_arg("nope", raise_if_not_found=True)


def test_nvml_reports_a_missing_library_or_works():
    from nnabla_jit.utils import nvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        assert e.value == nvml.NVML_ERROR_LIBRARY_NOT_FOUND and "Not Found" in str(e)
        return
    try:
        count = nvml.nvmlDeviceGetCount()
        assert count >= 1
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        assert nvml.nvmlDeviceGetName(handle)
        assert nvml.nvmlDeviceGetMemoryInfo(handle).total > 0
    finally:
        nvml.nvmlShutdown()


def test_lms_scheduler_checks_arguments_and_scopes():
    from nnabla_jit.ext_utils import get_extension_context
    from nnabla_jit.lms import SwapInOutScheduler
    ctx = get_extension_context("cpu")
    s = SwapInOutScheduler(ctx, ctx, size=1 << 20)
    with s:
        x = nn.Variable.from_numpy_array(np.ones(3))
        y = F.relu(x)
        y.forward(function_pre_hook=s.function_pre_hook, function_post_hook=s.function_post_hook)
    assert y.d.tolist() == [1, 1, 1]
    with pytest.raises(RuntimeError, match=r"end_scheduling\(\) without start_scheduling"):
        s.end_scheduling()
    with pytest.raises(TypeError, match="h_ctx must be a Context, got str"):
        SwapInOutScheduler("cpu", ctx, 10)


def test_progress_file_and_callback(tmp_path):
    from nnabla_jit.utils import progress
    seen = []
    state = tmp_path / "state.txt"
    progress.configure_progress(str(state), lambda s, p: seen.append((s, p)))
    try:
        assert state.read_text() == ""                  # configure_progress clears it
        progress.progress("Training", 0.5)              # within a second: not rewritten
        assert state.read_text() == ""
        progress.last_state_datetime = datetime.datetime(2000, 1, 1)
        progress.progress("Training", 0.5)
        assert state.read_text() == "Training (50.00%)"
        assert seen[-1] == ("Training", 0.5)
    finally:
        progress.state_file_name, progress.state_callback = "", None


def test_communicator_util_single_process(monkeypatch):
    from nnabla_jit.utils import communicator_util
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE", raising=False)
    assert communicator_util.create_communicator() is None
    assert communicator_util.current_communicator() is None
    assert communicator_util.single_or_rankzero()


def test_get_file_handle_opens_by_format(tmp_path):
    from nnabla_jit.utils.get_file_handle import get_buf_type, get_file_handle_load, get_file_handle_save
    path = str(tmp_path / "m.nnp")
    with get_file_handle_save(path, ".nnp") as z:
        z.writestr("nnp_version.txt", "0.1")
    with get_file_handle_load(None, path, ".nnp") as z:
        assert isinstance(z, zipfile.ZipFile)
        with get_file_handle_load(z, "nnp_version.txt", ".txt") as member:
            assert member.read() == b"0.1"
    text = io.StringIO()
    with get_file_handle_save(text, ".nntxt") as f:
        f.write("network {}")
    assert text.read() == "network {}"          # rewound
    with pytest.raises(ValueError, match="ext == .bin is not support"):
        with get_file_handle_save(str(tmp_path / "x.bin"), ".bin"):
            pass
    assert get_buf_type("optimizer_x_state_0.h5") == "h5"


@pytest.mark.parametrize("fmt", [".npy", ".h5"])
def test_create_cache_matches_the_csv(tmp_path, fmt):
    from nnabla_jit.config import nnabla_config
    from nnabla_jit.utils.create_cache import CreateCache
    from nnabla_jit.utils.data_source_implements import CacheDataSource, CsvDataSource
    csv_path = tmp_path / "d.csv"
    csv_path.write_text("x__0,x__1,y\n" + "".join("{},{},{}\n".format(i, i * 2, i % 3) for i in range(7)))
    previous = nnabla_config.get("DATA_ITERATOR", "cache_file_format")
    nnabla_config.set("DATA_ITERATOR", "cache_file_format", fmt)
    try:
        CreateCache(str(csv_path)).create(str(tmp_path / "cache"))
    finally:
        nnabla_config.set("DATA_ITERATOR", "cache_file_format", previous)
    assert os.path.exists(tmp_path / "cache" / "cache_index.csv")
    with contextlib.closing(CacheDataSource(str(tmp_path / "cache"))) as cache, \
            contextlib.closing(CsvDataSource(str(csv_path))) as csv_source:
        assert cache.size == csv_source.size == 7
        for _ in range(7):
            a, b = cache.next(), csv_source.next()
            for u, v in zip(a, b):
                np.testing.assert_allclose(u, v)


def test_save_and_load_function_messages():
    from nnabla_jit.utils import nnabla_pb2
    from nnabla_jit.utils.save_function import _create_function_nntxt
    f = _create_function_nntxt(nnabla_pb2.Function(), "fc", {
        "type": "Affine", "inputs": ["x", "w"], "outputs": ["y"], "args": {"base_axis": 2}})
    assert f.type == "Affine" and f.affine_param.base_axis == 2 and list(f.input) == ["x", "w"]


def test_parametric_function_classes_hold_their_parameters(tmp_path):
    from nnabla_jit.experimental.parametric_function_class.affine import Affine
    from nnabla_jit.experimental.parametric_function_class.batch_normalization import BatchNorm2d
    from nnabla_jit.experimental.parametric_function_class.convolution import Conv2d
    from nnabla_jit.experimental.parametric_function_class.deconvolution import Deconv2d
    from nnabla_jit.experimental.parametric_function_class.embed import Embed
    from nnabla_jit.experimental.parametric_function_class.module import Module

    class Net(Module):
        def __init__(self):
            self.conv = Conv2d(3, 4, (3, 3), pad=(1, 1))
            self.bn = BatchNorm2d(4)
            self.deconv = Deconv2d(4, 2, (3, 3), pad=(1, 1))
            self.fc = Affine(2 * 5 * 5, 3)

        def __call__(self, x, test=False):
            return self.fc(self.deconv(self.bn(self.conv(x), test)))
    nn.clear_parameters()
    net = Net()
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(2, 3, 5, 5))
    y = net(x)
    y.forward()
    assert y.shape == (2, 3) and nn.get_parameters() == {}
    assert set(net.get_parameters()) == {"conv/W", "conv/b", "bn/beta", "bn/gamma", "deconv/W",
                                         "deconv/b", "fc/W", "fc/b"}
    assert "bn/mean" in net.get_parameters(grad_only=False)
    path = str(tmp_path / "net.h5")
    net.save_parameters(path)
    other = Net()
    other.load_parameters(path)
    assert np.array_equal(other.fc.W.d, net.fc.W.d)
    e = Embed(10, 4)
    assert e(nn.Variable.from_numpy_array(np.array([1, 2]))).shape == (2, 4)


def test_contrib_extension_context():
    from nnabla_jit.contrib.context import extension_context
    assert extension_context("cpu") == nn.get_current_context().__class__(["cpu:float"], "CpuCachedArray", "")


def test_random_seed_functions():
    from nnabla_jit import random
    random.set_parameter_seed(5)
    assert random.pseed == 5 and random.prng.rand() == np.random.RandomState(5).rand()
    random.seed(313)
    assert random.pseed == 313


def test_rnn_reference_composition_matches_f_rnn():
    from nnabla_jit.utils.rnn import _create_fixed_length_rnn
    T, B, I, H, L, D = 3, 2, 4, 5, 2, 2
    r = np.random.RandomState(0)
    v = nn.Variable.from_numpy_array
    xs, h0 = v(r.randn(T, B, I)), v(r.randn(L, D, B, H))
    w0, w, b = v(r.randn(D, H, I + H)), v(r.randn(L - 1, D, H, D * H + H)), v(r.randn(L, D, H))
    ys, hn = _create_fixed_length_rnn(xs, h0, w0, w, b, L, "tanh", D, True)
    ys2, hn2 = F.rnn(xs, h0, w0, w, b, num_layers=L, bidirectional=True)
    for a, c in ((ys, ys2), (hn, hn2)):
        a.forward()
        c.forward()
        np.testing.assert_allclose(a.d, c.d, rtol=1e-5, atol=1e-5)


def test_normalization_helpers():
    from nnabla_jit.normalization_functions import _force_list, _get_axes_excluding
    assert _force_list(1) == [1] and _force_list((1, 2)) == (1, 2)
    assert _get_axes_excluding(4, -1) == [0, 1, 2] and _get_axes_excluding(3, [0, 2]) == [1]


@pytest.mark.parametrize("with_bias", [False, True])
def test_optimize_turns_converted_dense_layers_into_affine(tmp_path, with_bias):
    from nnabla_jit.core import graph_def
    from nnabla_jit.parameter import get_parameter_or_create
    from nnabla_jit.utils.cli import main
    nn.clear_parameters()
    rng = np.random.RandomState(0)
    x = nn.Variable((4, 32))
    w = get_parameter_or_create("dense/W", (32, 3))
    w.d = rng.randn(32, 3)
    y = F.reshape(F.batch_matmul(F.reshape(x, (1, 4, 32)), F.reshape(w, (1, 32, 3))), (4, 3))
    if with_bias:
        b = get_parameter_or_create("dense/b", (3,))
        b.d = rng.randn(3)
        y = y + F.reshape(b, (1, 3))
    y = F.relu(y)
    src, dst = str(tmp_path / "m.nnp"), str(tmp_path / "m-opt.nnp")
    graph_def.create_graph_from_variable("net", y).save(src)
    assert main(["optimize", src, dst]) == 0
    g = graph_def.load(dst)
    types = [f.type for f in g.default_graph().forward_sequence()]
    assert types == ["Affine", "ReLU"]
    xv = nn.Variable.from_numpy_array(rng.randn(4, 32).astype(np.float32))
    expected = graph_def.load(src)(xv)
    actual = g(xv)
    expected.forward()
    actual.forward()
    np.testing.assert_allclose(actual.d, expected.d, rtol=1e-5, atol=1e-5)
    nn.clear_parameters()


def test_loaded_reshape_infers_minus_one_from_its_input(tmp_path):
    """A Reshape to (-1, ...) saved with a fixed batch, loaded at another batch size: the
    input keeps the file's batch, so the -1 must be inferred, not replaced by the batch size."""
    from nnabla_jit.utils.nnp_graph import NnpLoader
    from nnabla_jit.utils.save import save
    nn.clear_parameters()
    x = nn.Variable((10, 2, 4, 4))
    y = F.reshape(F.relu(x), (-1, 32))
    path = str(tmp_path / "r.nnp")
    save(path, {"networks": [{"name": "net", "batch_size": 10, "outputs": {"y": y}, "names": {"x": x}}],
                "executors": [{"name": "e", "network": "net", "data": ["x"], "output": ["y"]}]},
         variable_batch_size=False)
    net = NnpLoader(path).get_network("net", batch_size=4)
    out = net.outputs["y"]
    net.inputs["x"].d = np.arange(320, dtype=np.float32).reshape(10, 2, 4, 4) - 160
    out.forward()
    assert out.shape == (10, 32)
    np.testing.assert_array_equal(out.d, np.maximum(net.inputs["x"].d, 0).reshape(10, 32))


def test_loaded_reshape_with_a_variable_batch_and_another_minus_one(tmp_path):
    from nnabla_jit.utils.nnp_graph import NnpLoader
    from nnabla_jit.utils.save import save
    nn.clear_parameters()
    x = nn.Variable((10, 32))
    y = F.reshape(F.affine(x, nn.Variable.from_numpy_array(np.eye(32, dtype=np.float32))), (10, 16, -1))
    path = str(tmp_path / "r2.nnp")
    save(path, {"networks": [{"name": "net", "batch_size": 10, "outputs": {"y": y}, "names": {"x": x}}],
                "executors": [{"name": "e", "network": "net", "data": ["x"], "output": ["y"]}]})
    net = NnpLoader(path).get_network("net", batch_size=4)
    assert net.inputs["x"].shape == (4, 32) and net.outputs["y"].shape == (4, 16, 2)


def test_optimize_keeps_the_files_executor(tmp_path):
    """graph_def keeps a loaded file's executors and writes them back with their network, so
    an optimized .nnp still runs through ``utils.load`` (as nnabla's does)."""
    from nnabla_jit.serialization import nnp
    from nnabla_jit.utils.cli import main
    from nnabla_jit.utils.load import load
    from nnabla_jit.utils.save import save
    nn.clear_parameters()
    rng = np.random.RandomState(5)
    x = nn.Variable((2, 8))
    w = nn.parameter.get_parameter_or_create("dense/W", (8, 3))
    w.d = rng.randn(8, 3)
    y = F.reshape(F.batch_matmul(F.reshape(x, (1, 2, 8)), F.reshape(w, (1, 8, 3))), (2, 3))
    src, dst = str(tmp_path / "m.nnp"), str(tmp_path / "m-opt.nnp")
    save(src, {"networks": [{"name": "net", "batch_size": 2, "outputs": {"y": y},
                             "names": {"x": x}}],
               "executors": [{"name": "runtime", "network": "net", "data": ["x"],
                              "output": ["y"]}]})
    assert main(["optimize", src, dst]) == 0
    written = nnp.read([dst]).proto
    assert [e.name for e in written.executor] == ["runtime"]
    assert [f.type for f in written.network[0].function] == ["Affine"]
    nn.clear_parameters()
    runs = {}
    for name in (src, dst):
        ex = load([name], batch_size=2).executors["runtime"]
        for pv in ex.dataset_assign:
            pv.variable_instance.d = np.arange(16, dtype=np.float32).reshape(2, 8)
        ex.forward_target.forward()
        runs[name] = [pv.variable_instance.d.copy() for pv in ex.output_assign]
    np.testing.assert_allclose(runs[dst][0], runs[src][0], rtol=1e-5, atol=1e-5)
    nn.clear_parameters()


def test_intensity_rescales_of_audio_and_image_map_ranges_alike():
    from nnabla_jit.utils.audio_utils import common as audio_common
    from nnabla_jit.utils.image_utils.backend_events import common as image_common
    values = np.array([[0, 64], [128, 255]], np.uint8)
    for rescale in (audio_common.rescale_intensity, image_common.rescale_pixel_intensity):
        np.testing.assert_allclose(rescale(values, 0, 255, 0, 1, np.float32), values / 255.0, rtol=1e-6)
        assert rescale(values, 0, 255, 0, 0).dtype == np.uint8      # constant output range
        with pytest.raises(ValueError, match="supports only numpy.ndarray"):
            rescale([1, 2])
    for normalize in (audio_common.normalize_intensity, image_common.normalize_pixel_intensity):
        assert normalize(np.array([2.0, 4.0]), 2.0, 2.0).tolist() == [1.0, 2.0]   # constant range
        assert normalize(np.array([2.0, 4.0]), 2.0, 6.0).tolist() == [0.0, 0.5]
    # audio computes in float64, so a low above the samples gives negatives, not uint8 wrap-around
    assert audio_common.rescale_intensity(values[:1], 100, 200, 0, 100, np.float64)[0, 0] == -100
