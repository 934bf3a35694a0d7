"""``plot_series`` / ``plot_timer``: plot nnabla monitor files with matplotlib.

``*.series.txt`` (MonitorSeries) has lines ``<iteration> <value>``; ``*.timer.txt``
(MonitorTimeElapsed) has ``<iteration> <elapsed> <iterations> <total elapsed>``. Without
``-o`` the plot is shown on screen.
"""
import os
import warnings
from argparse import RawTextHelpFormatter

import numpy as np

from . import CommandError

__all__ = ["add_plot_series_command", "add_plot_timer_command", "read_monitor_file"]

_UNITS = {"s": ("seconds", 1.0), "m": ("minutes", 60.0), "h": ("hours", 3600.0),
          "d": ("days", 86400.0)}


def read_monitor_file(path, column, min_columns):
    """(iterations, values) from column ``column`` of a monitor file."""
    if os.path.isdir(path):
        raise CommandError("{}: is a directory, not a monitor file".format(path))
    try:
        with warnings.catch_warnings():   # an empty file: the error below says so
            warnings.simplefilter("ignore", UserWarning)
            data = np.loadtxt(path, ndmin=2)
    except OSError:
        raise FileNotFoundError("{}: no such file".format(path)) from None
    except ValueError as e:
        raise CommandError("{}: not a monitor file ({})".format(path, e)) from None
    if data.size == 0:
        raise CommandError("{}: the file has no data".format(path))
    if data.shape[1] < min_columns:
        raise CommandError("{}: expected {} columns per line, found {}".format(
            path, min_columns, data.shape[1]))
    return data[:, 0].astype(np.int64), data[:, column]


def _plot(args, series):
    """``series``: list of (label, x, y)."""
    import matplotlib
    if args.outfile:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure()
    for label, x, y in series:
        plt.plot(x, y, label=label)
    plt.legend(loc="best")
    if args.title:
        plt.title(args.title)
    if args.xlabel:
        plt.xlabel(args.xlabel)
    if args.ylabel:
        plt.ylabel(args.ylabel)
    if args.xlim_min is not None:
        plt.xlim(left=args.xlim_min)
    if args.xlim_max is not None:
        plt.xlim(right=args.xlim_max)
    if args.ylim_min is not None:
        plt.ylim(bottom=args.ylim_min)
    if args.ylim_max is not None:
        plt.ylim(top=args.ylim_max)
    if args.outfile:
        fig.savefig(args.outfile)
        plt.close(fig)
    else:
        plt.show()
    return True


def _labels(args):
    labels = args.label or []
    return [labels[i] if i < len(labels) else path for i, path in enumerate(args.inputs)]


def plot_series_command(args):
    series = []
    for label, path in zip(_labels(args), args.inputs):
        x, y = read_monitor_file(path, 1, 2)
        series.append((label, x, y))
    return _plot(args, series)


def plot_timer_command(args):
    if args.time_unit not in _UNITS:
        raise CommandError("time unit must be one of s, m, h, d; got '{}'".format(args.time_unit))
    unit_name, scale = _UNITS[args.time_unit]
    if not args.ylabel:
        args.ylabel = ("Total elapsed time [{}]" if args.elapsed else "Elapsed time [{}/iter]").format(unit_name)
    series = []
    for label, path in zip(_labels(args), args.inputs):
        if args.elapsed:
            x, y = read_monitor_file(path, 3, 4)
        else:
            # Column 1 is the time since the previous line, which covers column 2 iterations
            # (nnabla plots column 1 as is; dividing makes it the per-iteration time it is
            # labelled as).
            x, y = read_monitor_file(path, 1, 4)
            _, iterations = read_monitor_file(path, 2, 4)
            y = y / np.maximum(iterations, 1)
        series.append((label, x, y / scale))
    return _plot(args, series)


def _add_plot_command(subparsers, name, help, description, func):
    sub = subparsers.add_parser(name, help=help, description=description,
                                formatter_class=RawTextHelpFormatter)
    sub.add_argument("inputs", nargs="+", metavar="infile", help="Path to input file.")
    sub.add_argument("-l", "--label", action="append", help="Label of each plot.")
    sub.add_argument("-o", "--outfile", default="", help="Path to output file (e.g. plot.png).")
    sub.add_argument("-x", "--xlabel", default="", help="X-axis label of plot.")
    sub.add_argument("-y", "--ylabel", default="", help="Y-axis label of plot.")
    sub.add_argument("-t", "--title", default="", help="Title of plot.")
    sub.add_argument("-T", "--ylim-max", type=float, default=None, help="Y-axis plot range max.")
    sub.add_argument("-B", "--ylim-min", type=float, default=None, help="Y-axis plot range min.")
    sub.add_argument("-R", "--xlim-max", type=float, default=None, help="X-axis plot range max.")
    sub.add_argument("-L", "--xlim-min", type=float, default=None, help="X-axis plot range min.")
    sub.set_defaults(func=func)
    return sub


def add_plot_series_command(subparsers):
    _add_plot_command(
        subparsers, "plot_series", "Plot *.series.txt files.",
        "Plot *.series.txt files produced by MonitorSeries.\n\nExample:\n\n"
        "    nnabla_jit plot_series -x Epochs -y 'Squared error loss' -T 10 -l 'config A' "
        "-l 'config B' -o loss.png a/Training-loss.series.txt b/Training-loss.series.txt",
        plot_series_command)


def add_plot_timer_command(subparsers):
    sub = _add_plot_command(
        subparsers, "plot_timer", "Plot *.timer.txt files.",
        "Plot *.timer.txt files produced by MonitorTimeElapsed.\n\nExample:\n\n"
        "    nnabla_jit plot_timer -x Epochs -l 'config A' -l 'config B' -o time.png "
        "a/Epoch-time.timer.txt b/Epoch-time.timer.txt",
        plot_timer_command)
    sub.add_argument("-e", "--elapsed", action="store_true",
                     help="Plot total elapsed time. By default, it plots elapsed time per iteration.")
    sub.add_argument("-u", "--time-unit", default="s", help="Time unit chosen from {s|m|h|d}.")
