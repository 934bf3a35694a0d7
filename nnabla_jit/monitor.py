"""Training monitors (nnabla's ``nnabla.monitor``): series of values, elapsed times and images,
written to files under one folder in nnabla's formats and printed as nnabla prints them.

    monitor = Monitor("tmp.monitor")
    monitor_loss = MonitorSeries("Training loss", monitor, interval=100)
    monitor_time = MonitorTimeElapsed("Training time", monitor, interval=100)
    for i in range(max_iter):
        ...
        monitor_loss.add(i, loss.d.copy())
        monitor_time.add(i)

Files (spaces in a monitor's name become '-'):

* ``<name>.series.txt``: one line ``<index> <mean of the values added since the last line>``
  (the value with ``%g``) every ``interval`` indices;
* ``<name>.timer.txt``: ``<index> <seconds since the last line> <indices since the last line>
  <seconds since the monitor was made>``;
* ``<name>/<index:06d>-<k:03d>.png`` (MonitorImage), ``<name>/<index:06d>.png``
  (MonitorImageTile).

A monitor empties its text file when it is made and appends one whole line at a time. With
``verbose`` each flushed value is also printed through the 'nnabla' logger, e.g.
``2024-01-01 12:00:00,000 [nnabla][INFO]: iter=99 {Training loss}=0.25``.

``plot_series`` / ``plot_time_elapsed`` draw such files on the current matplotlib axes (as in
nnabla); ``save_series_plot`` / ``save_timer_plot`` write several of them into one PNG file.
"""
import logging
import os
import tempfile
import time

import numpy as np

from .logger import logger

__all__ = ["Monitor", "MonitorSeries", "MonitorTimeElapsed", "MonitorImage", "MonitorImageTile",
           "tile_images", "plot_series", "plot_time_elapsed", "read_series", "read_timer",
           "save_series_plot", "save_timer_plot"]


def _report(message):
    """Print a verbose monitor's line as ``<time> [nnabla][INFO]: <message>``. nnabla_jit's
    logger shows only warnings by default (its INFO lines are library chatter), but a monitor
    made with ``verbose=True`` was asked to print: the record goes to the logger's handlers
    whatever the logger's level."""
    if not logger.disabled:
        logger.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, message, None, None))


def _file_name(name):
    return str(name).replace(" ", "-")


class Monitor(object):
    """The folder the monitors write into (created if missing)."""

    def __init__(self, save_path):
        self._save_path = save_path
        os.makedirs(save_path, exist_ok=True)

    @property
    def save_path(self):
        return self._save_path


class _TextMonitor(object):
    """A monitor writing lines to ``<save_path>/<name><suffix>`` (emptied on creation)."""

    def __init__(self, name, monitor, interval, verbose, suffix):
        if int(interval) < 1:
            raise ValueError("{}: interval must be at least 1, got {}".format(type(self).__name__, interval))
        self.name = name
        self.interval = int(interval)
        self.verbose = verbose
        self.sp = None
        if monitor is not None:
            self.sp = os.path.join(monitor.save_path, _file_name(name)) + suffix
            open(self.sp, "w").close()
        self.flush_at = -1

    def _due(self, index):
        """Whether ``index`` is ``interval`` or more past the last flushed one."""
        return index - self.flush_at >= self.interval

    def _write(self, line):
        if self.sp is not None:
            with open(self.sp, "a") as f:
                f.write(line + "\n")


class MonitorSeries(_TextMonitor):
    """Logs a series of values: ``add(index, value)`` keeps the value, and once ``index`` is
    ``interval`` past the last flushed index, the mean of the values kept is printed (with
    ``verbose``) and written to ``<name>.series.txt``.

    Args:
        name (str): name of the monitor (its file name, with '-' for spaces).
        monitor (Monitor or None): where the file goes; None writes no file.
        interval (int): indices between two flushes.
        verbose (bool): print each flushed value.
    """

    def __init__(self, name, monitor=None, interval=1, verbose=True):
        super(MonitorSeries, self).__init__(name, monitor, interval, verbose, ".series.txt")
        self.buf = []

    def add(self, index, value):
        """Add ``value`` (a number or an array, averaged) at ``index``."""
        self.buf.append(value)
        if not self._due(index):
            return
        value = np.mean(self.buf)
        if self.verbose:
            _report("iter={} {{{}}}={}".format(index, self.name, value))
        self._write("{} {:g}".format(index, value))
        self.flush_at = index
        self.buf = []


class MonitorTimeElapsed(_TextMonitor):
    """Logs elapsed time: once ``index`` passed to ``add`` is ``interval`` past the last
    flushed one, the seconds since that flush (and since the monitor was made) are printed and
    written to ``<name>.timer.txt``.

    Args:
        name (str): name of the monitor (its file name, with '-' for spaces).
        monitor (Monitor or None): where the file goes; None writes no file.
        interval (int): indices between two flushes.
        verbose (bool): print each flushed time.
    """

    def __init__(self, name, monitor=None, interval=100, verbose=True):
        super(MonitorTimeElapsed, self).__init__(name, monitor, interval, verbose, ".timer.txt")
        self.start = time.time()
        self.lap = self.start

    def add(self, index):
        """Record the time at ``index``."""
        if not self._due(index):
            return
        now = time.time()
        elapsed, total = now - self.lap, now - self.start
        iterations = index - self.flush_at
        self.lap = now
        if self.verbose:
            _report("iter={} {{{}}}={}[sec/{}iter] {}[sec]".format(
                index, self.name, elapsed, iterations, total))
        self._write("{} {} {} {}".format(index, elapsed, iterations, total))
        self.flush_at = index


def _min_max_normalize(x):
    """Map the batch to [0, 1] by its minimum and maximum (a constant batch maps to 0)."""
    low, high = x.min(), x.max()
    if high == low:
        return np.zeros_like(x, dtype=np.float64)
    return (x - low) / (high - low)


class MonitorImage(object):
    """Saves images: ``add(index, var)`` with a ``(N, ..., C, H, W)`` batch writes its first
    ``num_images`` images to ``<name>/<index:06d>-<k:03d>.png`` at index 0 and whenever
    ``index + 1`` is a multiple of ``interval``. Only the first 3 channels are kept; 2 channels
    get a third (blue) one of ones.

    Args:
        name (str): name of the monitor (its folder, with '-' for spaces).
        monitor (Monitor): where the folder goes.
        interval (int): save when ``(index + 1) % interval == 0`` (and at index 0).
        verbose (bool): print where the images went.
        num_images (int): images saved each time.
        normalize_method (callable): maps an NCHW float batch to [0, 1]; the default uses the
            batch's minimum and maximum.
    """

    def __init__(self, name, monitor, interval=1000, verbose=True, num_images=16,
                 normalize_method=None):
        if int(interval) < 1:
            raise ValueError("{}: interval must be at least 1, got {}".format(type(self).__name__, interval))
        self.name = name
        self.interval = int(interval)
        self.verbose = verbose
        self.normalize_method = _min_max_normalize if normalize_method is None else normalize_method
        self.num_images = num_images
        self.save_dir = os.path.join(monitor.save_path, _file_name(name))
        os.makedirs(self.save_dir, exist_ok=True)

    def _due(self, index):
        return index == 0 or (index + 1) % self.interval == 0

    def _images(self, var):
        """The first ``num_images`` images of ``var`` as a normalized (N, C<=3, H, W) array."""
        from .ndarray import NdArray
        from .variable import Variable
        if isinstance(var, Variable):
            data = var.d.copy()
        elif isinstance(var, NdArray):
            data = var.data.copy()
        elif isinstance(var, np.ndarray):
            data = var.copy()
        else:
            raise TypeError("{}.add: var must be a Variable, an NdArray or a numpy array, got {}"
                            .format(type(self).__name__, type(var).__name__))
        if data.ndim < 3:
            raise ValueError("{}.add: images come as (N, ..., C, H, W) or (C, H, W), got shape {}"
                             .format(type(self).__name__, data.shape))
        channels = data.shape[-3]
        data = data.reshape((-1,) + data.shape[-3:])[:self.num_images]
        data = self.normalize_method(data)
        if channels > 3:
            data = data[:, :3]
        elif channels == 2:
            data = np.concatenate([data, np.ones((data.shape[0], 1) + data.shape[2:])], axis=1)
        return data

    def add(self, index, var):
        """Save the images of ``var`` if ``index`` is due."""
        from .utils.image_utils import imsave
        if not self._due(index):
            return
        data = self._images(var)
        pattern = os.path.join(self.save_dir, "{:06d}".format(index) + "-{}")
        for k in range(data.shape[0]):
            image = data[k].transpose(1, 2, 0)
            imsave(pattern.format("{:03d}.png".format(k)), image[:, :, 0] if image.shape[2] == 1 else image)
        if self.verbose:
            _report("iter={} {{{}}} are written to {}.".format(index, self.name, pattern.format("*.png")))


class MonitorImageTile(MonitorImage):
    """Like :class:`MonitorImage`, but the ``num_images`` images are tiled into one
    ``<name>/<index:06d>.png`` (see :func:`tile_images`)."""

    def add(self, index, var):
        """Save the tiled images of ``var`` if ``index`` is due."""
        from .utils.image_utils import imsave
        if not self._due(index):
            return
        path = os.path.join(self.save_dir, "{:06d}.png".format(index))
        imsave(path, tile_images(self._images(var)))
        if self.verbose:
            _report("iter={} {{{}}} is written to {}.".format(index, self.name, path))


def tile_images(data, padsize=1, padval=0):
    """Tile a (B, C, H, W) batch into one (n (H + padsize), n (W + padsize), C) image, n the
    smallest integer with n * n >= B, row by row; each tile is padded on its bottom and right
    with ``padval`` and missing tiles are all ``padval``. One channel gives a 2-D image."""
    data = np.asarray(data)
    if data.ndim != 4:
        raise ValueError("tile_images: data must be (B, C, H, W), got shape {}".format(data.shape))
    count, channels, height, width = data.shape
    n = int(np.ceil(np.sqrt(count)))
    cell_h, cell_w = height + padsize, width + padsize
    dtype = data.dtype   # uint8 images stay uint8 (padval is cast), as in nnabla
    tiled = np.full((n * cell_h, n * cell_w, channels), padval, dtype=dtype)
    for k in range(count):
        top, left = (k // n) * cell_h, (k % n) * cell_w
        tiled[top:top + height, left:left + width] = data[k].transpose(1, 2, 0)
    return tiled[:, :, 0] if channels == 1 else tiled


# ----------------------------------------------------------------------------- monitor files
def _read_columns(path, columns, kind):
    """The lines of a monitor file as a float array with ``columns`` columns; a line that is
    not ``columns`` numbers raises an error naming the file and the line."""
    rows = []
    try:
        f = open(path)
    except FileNotFoundError:
        raise FileNotFoundError("{}: no such {} file".format(path, kind)) from None
    with f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            try:
                if len(fields) != columns:
                    raise ValueError
                rows.append([float(x) for x in fields])
            except ValueError:
                raise ValueError("{}, line {}: expected {} numbers in a {} line, got {!r}"
                                 .format(path, number, columns, kind, line.rstrip("\n"))) from None
    return np.array(rows, np.float64).reshape(-1, columns)


def read_series(path):
    """(indices, values) of a ``*.series.txt`` file."""
    data = _read_columns(path, 2, "series")
    return data[:, 0].astype(np.int64), data[:, 1]


def read_timer(path):
    """(indices, seconds per flush, indices per flush, total seconds) of a ``*.timer.txt``
    file."""
    data = _read_columns(path, 4, "timer")
    return data[:, 0].astype(np.int64), data[:, 1], data[:, 2].astype(np.int64), data[:, 3]


_TIME_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _time_scale(unit, what):
    if unit not in _TIME_UNITS:
        raise ValueError("{}: unit must be one of 's', 'm', 'h', 'd', got {!r}".format(what, unit))
    return _TIME_UNITS[unit]


def plot_series(filename, plot_kwargs=None):
    """Plot a ``*.series.txt`` file on the current matplotlib axes (``plot_kwargs`` go to
    ``plt.plot``)."""
    import matplotlib.pyplot as plt
    index, values = read_series(filename)
    plt.plot(index, values, **(plot_kwargs or {}))


def plot_time_elapsed(filename, elapsed=False, unit="s", plot_kwargs=None):
    """Plot a ``*.timer.txt`` file on the current matplotlib axes: the time between flushes,
    or with ``elapsed`` the total time, in ``unit`` ('s', 'm', 'h' or 'd')."""
    import matplotlib.pyplot as plt
    scale = _time_scale(unit, "plot_time_elapsed")
    index, lap, _, total = read_timer(filename)
    plt.plot(index, (total if elapsed else lap) / scale, **(plot_kwargs or {}))


def _save_plot(curves, output_png, title, xlabel, ylabel, xlim, ylim):
    """Draw ``curves`` (label, x, y) into a PNG file, written atomically."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plotting monitor files needs matplotlib: pip install matplotlib") from None
    figure = Figure()
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for label, x, y in curves:
        axes.plot(x, y, label=label)
    axes.legend(loc="best")
    axes.set_title(title or "")
    axes.set_xlabel(xlabel or "")
    axes.set_ylabel(ylabel or "")
    if xlim is not None:
        axes.set_xlim(*xlim)
    if ylim is not None:
        axes.set_ylim(*ylim)
    directory = os.path.dirname(os.path.abspath(output_png))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".png", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            figure.savefig(f, format="png")
        os.replace(tmp, output_png)
    except BaseException:
        os.unlink(tmp)
        raise


def _labels(files, labels):
    labels = list(labels or [])
    return [labels[k] if k < len(labels) else path for k, path in enumerate(files)]


def save_series_plot(files, output_png, labels=None, title=None, xlabel=None, ylabel=None,
                     xlim=None, ylim=None):
    """Plot ``*.series.txt`` files (one curve each, labelled by ``labels`` or the file name)
    into the PNG file ``output_png``. ``xlim`` / ``ylim`` are (low, high) pairs, either of
    which may be None."""
    files = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    curves = [(label,) + read_series(path) for label, path in zip(_labels(files, labels), files)]
    _save_plot(curves, output_png, title, xlabel, ylabel, xlim, ylim)


def save_timer_plot(files, output_png, elapsed=False, unit="s", labels=None, title=None,
                    xlabel=None, ylabel=None, xlim=None, ylim=None):
    """Plot ``*.timer.txt`` files into the PNG file ``output_png``: seconds per index (the
    time between flushes over the indices between them), or with ``elapsed`` the total time,
    in ``unit`` ('s', 'm', 'h' or 'd'). The y label defaults to what is plotted."""
    scale = _time_scale(unit, "save_timer_plot")
    files = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    curves = []
    for label, path in zip(_labels(files, labels), files):
        index, lap, iterations, total = read_timer(path)
        y = total if elapsed else lap / np.maximum(iterations, 1)
        curves.append((label, index, y / scale))
    if ylabel is None:
        unit_name = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[unit]
        ylabel = ("Total elapsed time [{}]" if elapsed else "Elapsed time [{}/iter]").format(unit_name)
    _save_plot(curves, output_png, title, xlabel, ylabel, xlim, ylim)
