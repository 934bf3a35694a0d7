"""``TimeProfiler`` and ``CpuTimerCallback``: function and scope timings (nnabla's
``nnabla.utils.inspection.profile``)."""
import csv
import io
import os
import time
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np

from ...ext_utils import import_extension_module
from ...serialization.files import write_bytes
from .base import FunctionHookCallbackBase

__all__ = ["TimeProfiler", "CpuTimerCallback", "FunctionHookCallbackBase", "import_extension_module"]


def _key_text(key):
    """How a profiled key is shown: a Function by its name, anything else as text."""
    return key.name if hasattr(key, "info") else str(key)


class CpuTimerCallback(FunctionHookCallbackBase):
    """Wall-clock timer for one scope of :class:`TimeProfiler`: ``pre_hook(key)`` starts the
    clock for ``key``, ``post_hook(key)`` stops it (after waiting for the device), and
    :meth:`calc_elapsed_time` stores each key's elapsed time as one sample."""

    def __init__(self, ext_name, device_id):
        self.results = OrderedDict()
        self.device_id = str(device_id)
        self.ext_module = import_extension_module(ext_name)
        self.key_to_times = OrderedDict()

    @staticmethod
    def timer():
        return time.perf_counter()

    @property
    def pre_hook(self):
        def callback(key):
            # Work queued on a device before the function is not the function's time.
            self.ext_module.synchronize(device_id=self.device_id)
            self.key_to_times.setdefault(key, [0.0, 0.0])[0] = self.timer()
        return callback

    @property
    def post_hook(self):
        def callback(key):
            if key not in self.key_to_times:
                raise ValueError("post_hook for {} without its pre_hook".format(_key_text(key)))
            self.ext_module.synchronize(device_id=self.device_id)
            self.key_to_times[key][1] = self.timer()
        return callback

    def calc_elapsed_time(self):
        for key, (start, end) in self.key_to_times.items():
            self.results.setdefault(key, []).append(end - start)

    def average(self, start_index=0):
        """``{key: {"time": mean in ms, "num": samples, "scale": "ms"}}`` over the samples from
        ``start_index`` on (time is NaN for a key with no such sample)."""
        out = OrderedDict()
        for key, times in self.results.items():
            kept = times[start_index:]
            out[key] = {"time": float(np.mean(kept)) * 1e3 if kept else float("nan"),
                        "num": len(kept), "scale": "ms"}
        return out


class TimeProfiler(FunctionHookCallbackBase):
    """Times every function run under a named scope, and each scope as a whole::

        tp = TimeProfiler(ext_name="cpu", device_id="0")
        for i in range(n):
            with tp.scope("forward"):
                y.forward(function_pre_hook=tp.pre_hook, function_post_hook=tp.post_hook)
            with tp.scope("backward"):
                y.backward(function_pre_hook=tp.pre_hook, function_post_hook=tp.post_hook)
            tp.calc_elapsed_time(["forward", "backward", "summary"])
        tp()                   # print the averages (first iteration left out)
        tp.to_csv("out_dir")   # profile_summary.csv and profile_detail.csv

    Times are host wall-clock after waiting for the device, for 'cpu', 'cuda' and 'cudnn'.
    """

    def __init__(self, ext_name, device_id):
        if ext_name not in ("cpu", "cuda", "cudnn"):
            raise NotImplementedError("TimeProfiler: no profiler for the extension '{}' (cpu, cuda or "
                                      "cudnn)".format(ext_name))
        self.profiler = CpuTimerCallback
        self.ext_name = ext_name
        self.device_id = device_id
        self._scope_name = ""
        self.profilers = OrderedDict()
        self.create_new_profiler("summary")

    def create_new_profiler(self, scope_name):
        self.profilers[scope_name] = self.profiler(ext_name=self.ext_name, device_id=self.device_id)

    @contextmanager
    def scope(self, scope_name):
        """Label what runs inside with ``scope_name``; the block's own time goes to 'summary'."""
        previous = self._scope_name
        if scope_name not in self.profilers:
            self.create_new_profiler(scope_name)
        self.call_pre_hook("summary", scope_name)
        self._scope_name = scope_name
        try:
            yield self
        finally:
            self._scope_name = previous
            self.call_post_hook("summary", scope_name)

    def _current(self):
        if self._scope_name not in self.profilers:
            raise ValueError("TimeProfiler: use the hooks inside `with tp.scope(name):`")
        return self.profilers[self._scope_name]

    @property
    def pre_hook(self):
        """A ``function_pre_hook`` timing functions in the current scope."""
        return self._current().pre_hook

    @property
    def post_hook(self):
        """A ``function_post_hook`` timing functions in the current scope."""
        return self._current().post_hook

    def call_pre_hook(self, scope_name, key):
        if scope_name not in self.profilers:
            self.create_new_profiler(scope_name)
        self.profilers[scope_name].pre_hook(key)

    def call_post_hook(self, scope_name, key):
        if scope_name not in self.profilers:
            raise ValueError("TimeProfiler: no profiler for the scope '{}'".format(scope_name))
        self.profilers[scope_name].post_hook(key)

    def calc_elapsed_time(self, names=None):
        """Store this iteration's times of the scopes ``names`` (a name or a list; default:
        all). Nothing is recorded for an iteration until this is called."""
        if isinstance(names, str):
            names = [names]
        for name in (self.profilers if names is None else names):
            if name not in self.profilers:
                raise ValueError("TimeProfiler: no scope '{}' (scopes: {})".format(
                    name, ", ".join(self.profilers)))
            self.profilers[name].calc_elapsed_time()

    def average(self, start_index=0):
        return OrderedDict((name, p.average(start_index)) for name, p in self.profilers.items())

    def get_all_results(self):
        return OrderedDict((name, p.results) for name, p in self.profilers.items() if p.results)

    def to_csv(self, out_dir="./", ignore_init=True):
        """Write ``profile_summary.csv`` (one row per scope) and ``profile_detail.csv`` (one row
        per function, times per scope) into ``out_dir``; ``ignore_init`` leaves out the first
        iteration."""
        os.makedirs(out_dir, exist_ok=True)
        averages = self.average(start_index=1 if ignore_init else 0)
        summary = io.StringIO()
        writer = csv.writer(summary, lineterminator="\n")
        writer.writerow(["scope", "time", "scale", "num"])
        for scope, res in averages["summary"].items():
            writer.writerow([scope, res["time"], res["scale"], res["num"]])
        write_bytes(os.path.join(out_dir, "profile_summary.csv"), summary.getvalue().encode("utf-8"))

        # One row per key (a function node), labelled name_k for the k-th key of that name.
        scopes = [s for s in averages if s != "summary"]
        rows, label_of, count = OrderedDict(), {}, {}
        for scope in scopes:
            for key, res in averages[scope].items():
                if key not in label_of:
                    text = _key_text(key)
                    label_of[key] = "{}_{}".format(text, count.get(text, 0))
                    count[text] = count.get(text, 0) + 1
                    rows[key] = {"scope": label_of[key], "original_key": text}
                for field in ("time", "scale", "num"):
                    rows[key]["{}_{}".format(field, scope)] = res[field]
        header = ["scope", "original_key"] + ["{}_{}".format(field, scope) for scope in scopes
                                              for field in ("time", "scale", "num")]
        detail = io.StringIO()
        writer = csv.DictWriter(detail, header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows.values())
        write_bytes(os.path.join(out_dir, "profile_detail.csv"), detail.getvalue().encode("utf-8"))

    def __call__(self, *args, **kwargs):
        """Print the average times per scope and function, the first iteration left out."""
        for name, results in self.average(start_index=1).items():
            if not results:
                continue
            print("### {} ###".format(name))
            for key, res in results.items():
                print("{}: {} [{}]".format(_key_text(key), res["time"], res["scale"]))
            print()
