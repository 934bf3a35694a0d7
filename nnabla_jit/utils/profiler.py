"""``GraphProfiler``: how long each function of a graph takes, forward and backward, and how
long the whole graph and a training step take; ``GraphProfilerCsvWriter`` writes the result in
nnabla's CSV layout. ``trace`` (from ``trace.py``) records what one step ran as a Chrome trace
instead: kernels as they ran, fused regions, compiles, copies.

Each function is timed on its own: its kernels run ``n_run`` times (after one warm-up run), or
fewer once ``max_measure_execution_time`` seconds have passed, waiting for the device after
each run. Times are strings with 8 significant digits in ``time_scale`` units ('m', 'u' or
'n' seconds), as nnabla reports them.
"""
import csv
import sys
import time
from collections import namedtuple

from .. import graph as _graph
from ..ext_utils import import_extension_module
from ..ops.registry import NoGradient
from .inspection import listed, parameter_names, parameter_scope_of
from .trace import trace

__all__ = ["GraphProfiler", "GraphProfilerCsvWriter", "ProfileStat", "convert_time_scale", "trace"]

ProfileStat = namedtuple("ProfileStat", ["parameter_scope", "inputs_shape", "args_info",
                                         "function_name", "mean_time", "n_run"])

_SCALES = {"m": 1e3, "u": 1e6, "n": 1e9}


def convert_time_scale(sec, format="m"):
    """Seconds in milli- ('m'), micro- ('u') or nano- ('n') seconds."""
    if format not in _SCALES:
        raise ValueError("time scale must be one of {}, got {!r}".format(sorted(_SCALES), format))
    return sec * _SCALES[format]


def _zero_variables(variables):
    """Zero the data and gradient of the non-leaf variables (leaves keep their values)."""
    for v in variables:
        if v is not None and v.parent is not None:
            v.data.zero()
            v.grad.zero()


class GraphProfiler:
    """Times the functions of the graph that computes ``graph`` (a Variable).

    ``run()`` measures each function's forward and backward, the whole graph's forward and
    backward, and, with a ``solver``, a training step (forward, zero_grad, backward, update);
    ``result`` (also ``get_result()``) holds ``forward`` / ``backward`` (a :class:`ProfileStat`
    per function, in forward order), ``forward_all``, ``backward_all``, ``training`` and their
    ``n_run_*`` counts. A function's backward runs with every accumulation flag set to
    ``backward_accum``.
    """

    def __init__(self, graph, device_id, ext_name, solver=None, n_run=100, max_measure_execution_time=1,
                 time_scale="m", backward_accum=False):
        if n_run < 1:
            raise ValueError("GraphProfiler: n_run must be at least 1, got {}".format(n_run))
        convert_time_scale(0.0, time_scale)   # reject an unknown scale now, not after the runs
        self.graph = graph
        self.solver = solver
        self.n_run = n_run
        self.device_id = str(device_id)
        self.ext_name = ext_name
        self.ext_module = import_extension_module(ext_name)
        self.max_measure_execution_time = max_measure_execution_time
        self.time_scale = time_scale
        self.backward_accum = backward_accum
        self.result = dict()
        self.name2val = parameter_names()

    def _measure_execution_time(self, execution, *execution_args):
        """(mean time as text in ``time_scale`` units, number of timed runs)."""
        execution(*execution_args)   # warm-up: compilation and first allocations
        self.ext_module.synchronize(device_id=self.device_id)
        total, count = 0.0, 0
        began = time.perf_counter()
        for _ in range(self.n_run):
            start = time.perf_counter()
            execution(*execution_args)
            self.ext_module.synchronize(device_id=self.device_id)
            stop = time.perf_counter()
            total += stop - start
            count += 1
            if stop - began > self.max_measure_execution_time:
                break
        mean = convert_time_scale(total / count, self.time_scale)
        return "{:.8}".format(mean), count

    def _backward_step(self, f):
        """A backward step of ``f`` alone: gradients for the inputs that need one, every
        accumulation flag ``backward_accum``; None when no input takes a gradient."""
        pd = [v.need_grad and i not in f.op.no_grad_inputs for i, v in enumerate(f.inputs)]
        if not any(pd) or not (f.op.python_level or f.op.has_backward()):
            return None
        step = _graph._BackwardStep()
        step.node = f
        step.propagate_down = pd
        step.accum = [self.backward_accum and want for want in pd]
        seen, step.alias = set(), []
        for want, v in zip(pd, f.inputs):
            step.alias.append(want and id(v._body) in seen)   # one buffer twice: add the parts
            seen.add(id(v._body))
        step.zero_outputs = [False] * len(f.outputs)
        step.needs_input = [True] * len(f.inputs)
        step.free_grads, step.free_data = [], []
        return step

    def _time_profiling(self, f, target_process):
        if target_process not in ("forward", "backward"):
            raise ValueError("target process must be 'forward' or 'backward', got {!r}".format(target_process))
        _zero_variables(f.inputs)
        _zero_variables(f.outputs)
        if target_process == "forward":
            mean_time, count = self._measure_execution_time(_graph.run_node_forward, f)
        else:
            step = self._backward_step(f)
            if step is None:   # nothing to differentiate here: no time, no runs
                mean_time, count = None, 0
            else:
                try:
                    mean_time, count = self._measure_execution_time(_graph.run_node_backward, step)
                except NoGradient:
                    mean_time, count = None, 0
        _zero_variables(f.inputs)
        _zero_variables(f.outputs)
        self.result[target_process].append(ProfileStat(
            parameter_scope=parameter_scope_of(f, self.name2val),
            inputs_shape=[v.shape for v in f.inputs],
            args_info=f.info.args.items(),
            function_name=f.name,
            mean_time=mean_time,
            n_run=count))

    def time_profiling_forward(self):
        self.result["forward"] = []
        self.graph.visit(lambda f: self._time_profiling(f, "forward"))

    def time_profiling_backward(self):
        self.result["backward"] = []
        self.graph.visit(lambda f: self._time_profiling(f, "backward"))

    def training_function(self):
        self.graph.forward(clear_no_need_grad=True)
        self.solver.zero_grad()
        self.graph.backward(clear_buffer=True)
        self.solver.update()

    def time_profiling_whole_graph(self):
        self.result["forward_all"], self.result["n_run_forward_all"] = \
            self._measure_execution_time(self.graph.forward)
        # A graph nothing in it is differentiated by has no backward to time (nnabla_jit's
        # backward() refuses it): no time, no runs.
        differentiable = _graph.has_grad_path(self.graph)
        self.result["backward_all"], self.result["n_run_backward_all"] = \
            self._measure_execution_time(self.graph.backward) if differentiable else (None, 0)
        if self.solver is not None:
            self.result["training"], self.result["n_run_training"] = \
                self._measure_execution_time(self.training_function) if differentiable else (None, 0)

    def run(self):
        """Measure everything: functions forward, functions backward, the whole graph."""
        self.time_profiling_forward()
        self.time_profiling_backward()
        self.time_profiling_whole_graph()

    def get_result(self):
        return self.result

    def print_result(self):
        print("time scale: {}".format(self.time_scale))
        print("-----------------forward--------------------")
        for stat in self.result["forward"]:
            print(stat)
        print()
        print("-----------------backward--------------------")
        for stat in self.result["backward"]:
            print(stat)
        print()
        print("all forward: {}, all backward: {}".format(self.result["forward_all"],
                                                         self.result["backward_all"]))


class GraphProfilerCsvWriter:
    """Writes a :class:`GraphProfiler`'s result to ``file`` (an open text file) as CSV: a
    header block (runs, device, extension, time scale, version), one row per function with
    its forward and backward times, then the whole-graph and training times."""

    def __init__(self, gb, file=sys.stdout):
        if "forward" not in gb.result:
            raise ValueError("GraphProfilerCsvWriter: call run() on the GraphProfiler first")
        self.file = file
        self.gb = gb
        self.fields = ["parameter_scope", "function_name", "inputs_shape", "args_info",
                       "forward", "backward", "forward_n_run", "backward_n_run"]
        self.write_header()

    def write_header(self):
        from .. import __version__
        writer = csv.writer(self.file)
        writer.writerow(["num. of run", self.gb.n_run])
        writer.writerow(["device id", self.gb.device_id])
        writer.writerow(["ext name", self.gb.ext_name])
        writer.writerow(["time scale", self.gb.time_scale])
        writer.writerow(["nnabla version", __version__])
        writer.writerow([])
        writer.writerow(self.fields)

    def check_same(self, f, b):
        """Whether a forward and a backward row describe the same function."""
        return all(f[field] == b[field] for field in ("parameter_scope", "function_name", "inputs_shape"))

    def write(self):
        """Write the rows and the totals."""
        writer = csv.writer(self.file)
        result = self.gb.result
        for f, b in zip(result["forward"], result["backward"]):
            f, b = f._asdict(), b._asdict()
            if not self.check_same(f, b):
                raise ValueError("GraphProfilerCsvWriter: forward row {} and backward row {} are "
                                 "different functions".format(f["function_name"], b["function_name"]))
            args_info = ", ".join("{}: {}".format(k, listed(v)) for k, v in f["args_info"])
            writer.writerow([f["parameter_scope"], f["function_name"], f["inputs_shape"], args_info,
                             f["mean_time"], b["mean_time"], f["n_run"], b["n_run"]])
        writer.writerow([])
        writer.writerow(["forward all", result["forward_all"]])
        writer.writerow(["forward_all_n_run", result["n_run_forward_all"]])
        writer.writerow([])
        writer.writerow(["backward all", result["backward_all"]])
        writer.writerow(["backward_all_n_run", result["n_run_backward_all"]])
        if "training" in result:
            writer.writerow([])
            writer.writerow(["training(forward + backward + update)", result["training"]])
            writer.writerow(["training_n_run", result["n_run_training"]])
