"""``NanInfTracer``: the first function producing NaN or Inf (nnabla's
``nnabla.utils.inspection.value_trace``)."""
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np

from .base import FunctionHookCallbackBase, _outputs, listed

__all__ = ["NanInfTracer", "FunctionHookCallbackBase"]


def _ordinal(n):
    suffix = "th" if 10 <= n % 100 < 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return "{}{}".format(n, suffix)


class NanInfTracer(FunctionHookCallbackBase):
    """Finds the first function whose outputs (forward) or input gradients (backward) hold
    NaN or Inf.

    ``forward_post_hook`` and ``backward_post_hook`` record, after each function, how many
    NaN / Inf values it produced; :meth:`check` (run on leaving :meth:`trace`) raises a
    ValueError naming the first function, in execution order, that produced any::

        nit = NanInfTracer(trace_nan=True, trace_inf=True, need_details=True)
        with nit.trace():
            y.forward(function_post_hook=nit.forward_post_hook)
            y.backward(function_post_hook=nit.backward_post_hook)
    """

    def __init__(self, trace_nan=True, trace_inf=True, need_details=True):
        self.trace_nan = trace_nan
        self.trace_inf = trace_inf
        self.need_details = need_details
        self.key_to_stat_fwd = OrderedDict()
        self.key_to_stat_bwd = OrderedDict()

    @property
    def pre_hook(self):
        return None   # nothing to do before a function runs

    @property
    def post_hook(self):
        raise NotImplementedError("NanInfTracer has no post_hook: use forward_post_hook for forward() "
                                  "and backward_post_hook for backward()")

    def _record(self, key_to_stat, f, arrays):
        stat = key_to_stat.setdefault(f, {})
        stat["rank"] = f.rank
        stat["nan"] = [int(np.isnan(a).sum()) for a in arrays] if self.trace_nan else []
        stat["inf"] = [int(np.isinf(a).sum()) for a in arrays] if self.trace_inf else []

    @property
    def forward_post_hook(self):
        """A ``function_post_hook`` for forward(): counts NaN / Inf in each function's outputs."""
        if not (self.trace_nan or self.trace_inf):
            return None
        return lambda f: self._record(self.key_to_stat_fwd, f, [o.d for o in _outputs(f)])

    @property
    def backward_post_hook(self):
        """A ``function_post_hook`` for backward(): counts NaN / Inf in the gradients each
        function wrote into its inputs."""
        if not (self.trace_nan or self.trace_inf):
            return None
        return lambda f: self._record(self.key_to_stat_bwd, f,
                                      [v.g if v.need_grad else np.zeros(0) for v in f.inputs])

    @contextmanager
    def trace(self):
        """``with nit.trace():`` runs :meth:`check` when the block ends."""
        yield self
        self.check()

    def _check_impl(self, key_to_stat, exec_name):
        what = "output" if exec_name == "forward" else "input gradient"
        history = []
        for f, stat in key_to_stat.items():
            history.append(f)
            for kind in ("nan", "inf"):
                for k, count in enumerate(stat[kind]):
                    if count:
                        raise ValueError(self._report(f, stat, history, exec_name, what, kind, k, count))

    def _report(self, f, stat, history, exec_name, what, kind, index, count):
        lines = ["The {} {} of the function '{}' (rank: {}) has {} {} value(s).".format(
            _ordinal(index + 1), what, f.name, stat["rank"], count, "NaN" if kind == "nan" else "Inf")]
        if self.need_details:
            lines += ["Function details:",
                      "    function type: {}".format(f.info.type_name),
                      "    shapes of inputs: {}".format([v.shape for v in f.inputs]),
                      "    shapes of outputs: {}".format([v.shape for v in _outputs(f)]),
                      "    function args: {}".format({k: listed(v) for k, v in f.info.args.items()})]
        lines.append("Functions run during {} propagation, up to the error:".format(exec_name))
        lines += ["    {}".format(g.name) for g in history[:-1]]
        lines.append("    {} <-- ERROR".format(f.name))
        return "\n".join(lines)

    def check(self):
        """Raise a ValueError naming the first function (forward first, then backward) that
        produced NaN or Inf in the last traced run; return None if none did."""
        self._check_impl(self.key_to_stat_fwd, "forward")
        self._check_impl(self.key_to_stat_bwd, "backward")
