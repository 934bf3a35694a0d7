"""nnabla_jit.monitor: nnabla's file formats and printed lines (checked against nnabla 1.39),
image monitors, tile_images, and the plots of monitor files."""
import logging

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit as nn
from nnabla_jit import monitor as M
from nnabla_jit.logger import logger


@pytest.fixture
def printed():
    """The messages the monitors print through the 'nnabla' logger."""
    lines = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append((record.levelname, record.getMessage()))

    handler = Collect()
    logger.addHandler(handler)
    yield lines
    logger.removeHandler(handler)


def test_series_file_and_lines_match_nnabla(tmp_path, printed):
    monitor = M.Monitor(str(tmp_path / "mon"))
    series = M.MonitorSeries("Training loss", monitor, interval=3)
    for i in range(7):
        series.add(i, i * 0.5 + 1e-7)
    big = M.MonitorSeries("big", monitor)
    big.add(0, 123456789.123)
    big.add(1, np.float32(0.1))
    big.add(2, np.array([2.0, 4.0]))
    # Written by nnabla 1.39 for the same calls.
    assert (tmp_path / "mon" / "Training-loss.series.txt").read_text() == "2 0.5\n5 2\n"
    assert (tmp_path / "mon" / "big.series.txt").read_text() == "0 1.23457e+08\n1 0.1\n2 3\n"
    assert printed == [("INFO", "iter=2 {Training loss}=0.5000001"),
                       ("INFO", "iter=5 {Training loss}=2.0000001"),
                       ("INFO", "iter=0 {big}=123456789.123"),
                       ("INFO", "iter=1 {big}=0.10000000149011612"),
                       ("INFO", "iter=2 {big}=3.0")]


def test_a_new_monitor_empties_its_file_and_quiet_ones_print_nothing(tmp_path, printed):
    monitor = M.Monitor(str(tmp_path))
    (tmp_path / "loss.series.txt").write_text("old contents\n")
    series = M.MonitorSeries("loss", monitor, verbose=False)
    assert (tmp_path / "loss.series.txt").read_text() == ""
    series.add(0, 1.0)
    M.MonitorSeries("no file", None, verbose=False).add(0, 1.0)
    assert printed == [] and sorted(p.name for p in tmp_path.iterdir()) == ["loss.series.txt"]
    with pytest.raises(ValueError, match="interval must be at least 1"):
        M.MonitorSeries("x", monitor, interval=0)


def test_timer_file_and_lines(tmp_path, printed, monkeypatch):
    clock = iter([100.0, 101.5, 104.0, 104.25])

    class Clock:
        time = staticmethod(lambda: next(clock))
    monkeypatch.setattr(M, "time", Clock)
    timer = M.MonitorTimeElapsed("Epoch time", M.Monitor(str(tmp_path)), interval=2)
    for i in range(6):
        timer.add(i)
    assert (tmp_path / "Epoch-time.timer.txt").read_text() == \
        "1 1.5 2 1.5\n3 2.5 2 4.0\n5 0.25 2 4.25\n"
    assert printed[1] == ("INFO", "iter=3 {Epoch time}=2.5[sec/2iter] 4.0[sec]")


def test_image_monitor_files_and_pixels(tmp_path, printed):
    from PIL import Image
    x = np.random.RandomState(0).randn(3, 3, 4, 5)
    images = M.MonitorImage("noise img", M.Monitor(str(tmp_path)), interval=2, num_images=2)
    for i in range(4):
        images.add(i, nn.Variable.from_numpy_array(x))
    folder = tmp_path / "noise-img"
    assert sorted(p.name for p in folder.iterdir()) == [
        "000000-000.png", "000000-001.png", "000001-000.png", "000001-001.png",
        "000003-000.png", "000003-001.png"]
    normalized = (x[:2] - x[:2].min()) / (x[:2].max() - x[:2].min())
    pixels = np.asarray(Image.open(folder / "000003-001.png"))
    np.testing.assert_array_equal(pixels, (normalized[1].transpose(1, 2, 0) * 255).astype(np.uint8))
    assert printed[-1] == ("INFO", "iter=3 {{noise img}} are written to {}.".format(
        folder / "000003-*.png"))


@pytest.mark.parametrize("channels, shape", [(1, (4, 5)), (2, (4, 5, 3)), (3, (4, 5, 3)), (5, (4, 5, 3))])
def test_image_channels(tmp_path, channels, shape):
    from PIL import Image
    x = np.linspace(0, 1, 2 * channels * 20).reshape(2, channels, 4, 5)
    M.MonitorImage("im", M.Monitor(str(tmp_path)), verbose=False).add(0, nn.NdArray.from_numpy_array(x))
    pixels = np.asarray(Image.open(tmp_path / "im" / "000000-000.png"))
    assert pixels.shape == shape
    if channels == 2:   # a third channel of ones
        assert np.all(pixels[:, :, 2] == 255)


def test_image_tile_monitor(tmp_path, printed):
    from PIL import Image
    x = np.random.RandomState(0).randn(3, 3, 4, 5)
    tiles = M.MonitorImageTile("tile", M.Monitor(str(tmp_path)), interval=2, num_images=3)
    tiles.add(0, x)
    tiles.add(1, x[:, :1])
    tiles.add(2, x)   # not due
    assert np.asarray(Image.open(tmp_path / "tile" / "000000.png")).shape == (10, 12, 3)
    grey = np.asarray(Image.open(tmp_path / "tile" / "000001.png"))
    normalized = (x[:, :1] - x[:, :1].min()) / (x[:, :1].max() - x[:, :1].min())
    np.testing.assert_array_equal(grey, (M.tile_images(normalized) * 255).astype(np.uint8))
    assert [m for _, m in printed] == [
        "iter=0 {{tile}} is written to {}.".format(tmp_path / "tile" / "000000.png"),
        "iter=1 {{tile}} is written to {}.".format(tmp_path / "tile" / "000001.png")]
    with pytest.raises(ValueError, match="\\(N, ..., C, H, W\\)"):
        tiles.add(0, np.zeros((4, 4)))


@given(count=st.integers(1, 10), channels=st.sampled_from([1, 2, 3]), height=st.integers(1, 4),
       width=st.integers(1, 4), padsize=st.integers(0, 2))
def test_tile_images_layout(count, channels, height, width, padsize):
    data = np.random.RandomState(count).rand(count, channels, height, width)
    tiled = M.tile_images(data, padsize=padsize, padval=-1)
    n = int(np.ceil(np.sqrt(count)))
    assert tiled.shape[:2] == (n * (height + padsize), n * (width + padsize))
    cells = tiled.reshape(n, height + padsize, n, width + padsize, -1)
    for k in range(n * n):
        row, col = divmod(k, n)
        cell = cells[row, :, col]
        if k < count:
            np.testing.assert_array_equal(cell[:height, :width], data[k].transpose(1, 2, 0))
            assert np.all(cell[height:] == -1) and np.all(cell[:, width:] == -1)
        else:
            assert np.all(cell == -1)
    assert tiled.ndim == (2 if channels == 1 else 3)


def write_monitor_files(tmp_path):
    series = tmp_path / "loss.series.txt"
    series.write_text("0 2.5\n10 1.25\n20 0.5\n")
    timer = tmp_path / "time.timer.txt"
    timer.write_text("9 2.0 10 2.0\n19 3.0 10 5.0\n")
    return str(series), str(timer)


def test_reading_monitor_files(tmp_path):
    series, timer = write_monitor_files(tmp_path)
    index, values = M.read_series(series)
    assert index.tolist() == [0, 10, 20] and values.tolist() == [2.5, 1.25, 0.5]
    index, lap, iterations, total = M.read_timer(timer)
    assert index.tolist() == [9, 19] and lap.tolist() == [2.0, 3.0]
    assert iterations.tolist() == [10, 10] and total.tolist() == [2.0, 5.0]
    (tmp_path / "bad.series.txt").write_text("0 1.0\n\n5 oops\n")
    with pytest.raises(ValueError, match="bad.series.txt, line 3: expected 2 numbers"):
        M.read_series(str(tmp_path / "bad.series.txt"))
    with pytest.raises(FileNotFoundError, match="missing.timer.txt"):
        M.read_timer(str(tmp_path / "missing.timer.txt"))


def test_saving_plots_as_png(tmp_path):
    from PIL import Image
    series, timer = write_monitor_files(tmp_path)
    M.save_series_plot([series, series], str(tmp_path / "loss.png"), labels=["a"], title="loss",
                       ylim=(0, None))
    M.save_timer_plot(timer, str(tmp_path / "time.png"), elapsed=True, unit="m")
    for name in ("loss.png", "time.png"):
        with Image.open(tmp_path / name) as image:
            assert image.format == "PNG" and image.size[0] > 100
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    with pytest.raises(ValueError, match="unit must be one of"):
        M.save_timer_plot(timer, str(tmp_path / "x.png"), unit="w")


def test_plotting_on_the_current_axes(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    series, timer = write_monitor_files(tmp_path)
    plt.figure()
    M.plot_series(series, {"label": "loss"})
    M.plot_time_elapsed(timer, unit="m")
    M.plot_time_elapsed(timer, elapsed=True)
    lines = plt.gca().get_lines()
    plt.close()
    assert lines[0].get_label() == "loss" and lines[0].get_ydata().tolist() == [2.5, 1.25, 0.5]
    np.testing.assert_allclose(lines[1].get_ydata(), [2.0 / 60, 3.0 / 60])
    assert lines[2].get_ydata().tolist() == [2.0, 5.0]
