"""``trace``: what a training step ran, as a Chrome trace a browser's trace viewer opens.

    from nnabla_jit.utils.profiler import trace
    with trace("step.json") as t:
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
    print(t.summary())          # the top ops by time, the executor's overhead, compile time

``step.json`` opens in https://ui.perfetto.dev or chrome://tracing. It holds complete events
(``"ph": "X"``, ``ts``/``dur`` in microseconds from the start of the block) on one track per
thread, nested as the calls were:

* ``forward`` / ``backward``: one executor call; inside it one slice per kernel run: an op
  (``Affine (fc1/affine)``, ``Convolution backward (conv1/conv)``: the scope of its parameters)
  with its type, phase, input and output
  shapes and types in ``args``, or a fused elementwise region (``fused: MulScalar+Tanh``, what
  actually ran: one generated loop) naming the ops it holds. The gaps between kernel slices are
  the executor's own Python (plan lookups, buffer frees, calls).
* ``Adam.update`` with a slice per parameter; ``Adam.zero_grad``, ``.weight_decay``, ...
* ``compile <kernel>``: numba compiling a kernel (numba's ``numba:compile`` event), nested in
  the op that first called it, inside ``numba <kernel>``: the span numba held its compiler lock,
  which on a warm cache is the kernel's load from the on-disk cache (a process's first call of
  each kernel) and on a cold one the compile and the save.
* ``copy host_to_device`` / ``copy device_to_host``: copies on the CUDA path.
* ``deferred compile`` async spans: a parallel kernel a background process was asked to compile
  (``nnabla_jit/deferred_compile.py``), from the request to its answer; meanwhile the serial twin
  runs.

Kernels on a GPU are asynchronous: an op's slice is its launch unless ``synchronize=True``,
which waits for the device after each device op (and so times its kernels). Recording costs
about a microsecond per kernel run; while no trace records, the executor does nothing extra.
"""
import json
import os
import sys
import threading
import time

from .. import numba_internals, tracing
from ..cuda_ops import device as cuda_device
from ..serialization.files import atomic_path
from .inspection import parameter_names, parameter_scope_of

__all__ = ["trace", "summary", "load_events"]

_clock = time.perf_counter_ns
_ident = threading.get_ident


def _describe(v):
    """``float32[64,1,28,28]`` for a Variable (None for an output nobody holds)."""
    if v is None:
        return None
    return "{}[{}]".format(v._body.data.dtype, ",".join(str(n) for n in v._body.shape))


class _CompileListener(numba_internals.Listener):
    """numba's events as slices on the thread they happen on: ``numba:compile`` (a kernel
    compiled), and the outermost ``numba:compiler_lock`` spans, in which numba also loads
    kernels from its on-disk cache (the first call of each kernel in a process)."""

    KINDS = (numba_internals.COMPILE_EVENT, numba_internals.COMPILER_LOCK_EVENT)

    def __init__(self, events):
        self.events = events
        self.open = threading.local()

    def _stack(self):
        stack = getattr(self.open, "stack", None)
        if stack is None:
            stack = self.open.stack = []
        return stack

    def on_start(self, ev):
        stack = self._stack()
        compiling = ev.kind == numba_internals.COMPILE_EVENT
        if compiling or not any(k == ev.kind for k, _, _ in stack):
            stack.append((ev.kind, _clock(), None if compiling else _locking_kernel()))
        else:
            stack.append((None, None, None))   # the lock taken again inside its span

    def on_end(self, ev):
        stack = self._stack()
        if not stack:   # started before the trace
            return
        kind, start, kernel = stack.pop()
        if kind is None:
            return
        if kind == numba_internals.COMPILE_EVENT:
            disp = numba_internals.event_dispatcher(ev)
            name = _kernel_name(disp)
            args = {"kernel": name, "module": getattr(getattr(disp, "py_func", None), "__module__", ""),
                    "signature": "({})".format(", ".join(
                        str(a) for a in numba_internals.event_argument_types(ev)))}
            self.events.append((start, _clock() - start, _ident(), "compile " + name, "compile", args))
        else:
            args = {"what": "numba held its compiler lock: loading the kernel from the on-disk "
                            "cache on its first call, or compiling it (the compile slice inside) "
                            "and saving it there"}
            if kernel:
                args["kernel"] = kernel
            self.events.append((start, _clock() - start, _ident(), "numba " + (kernel or "(lock)"),
                                "numba", args))


def _kernel_name(disp):
    py_func = getattr(disp, "py_func", None)
    return py_func.__qualname__ if py_func is not None else type(disp).__name__


def _locking_kernel(depth=8):
    """The kernel whose dispatcher takes numba's compiler lock, found among the callers'
    frames (numba's lock event names none); None if none is."""
    frame = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return None
        candidate = frame.f_locals.get("self") if "self" in frame.f_code.co_varnames else None
        if candidate is not None and hasattr(candidate, "py_func"):
            return _kernel_name(candidate)
        candidate = frame.f_locals.get("disp")
        if candidate is not None and hasattr(candidate, "py_func"):
            return _kernel_name(candidate)
        frame = frame.f_back
    return None


class trace:
    """Record every kernel run inside the ``with`` block; write a Chrome trace to ``path``
    (atomically, when the block ends; None: keep it in memory, see :meth:`save`)."""

    def __init__(self, path=None, synchronize=False):
        self.path = None if path is None else os.fspath(path)
        self.synchronize = bool(synchronize)
        # (start ns, duration ns, thread id, name, category, args) per slice; a kernel run's
        # name and category are None and its args (runner, node, phase), named when written
        self.events = []
        self.async_events = []    # (phase "b"/"e", time ns, id, name, args)
        self.start = self.end = None
        self._timed = {}          # id(runner) -> (runner, its recording wrapper)
        self._requests = {}       # id(deferred request) -> (request, async id)
        self._names = {}
        self._listener = _CompileListener(self.events)

    # ------------------------------------------------------------------ the block
    def __enter__(self):
        if tracing.recorder is not None:
            raise RuntimeError("trace: another trace is recording; nest nothing inside a "
                               "trace block, or end the first one")
        folder = os.path.dirname(os.path.abspath(self.path)) if self.path is not None else None
        if folder is not None and not os.path.isdir(folder):   # say so before the step runs
            raise FileNotFoundError("trace: path {!r}: directory {} does not exist".format(
                self.path, folder))
        self._names = parameter_names()
        self._thread_names = {}
        self._owner = _ident()
        self.start = _clock()
        for kind in self._listener.KINDS:
            numba_internals.register_listener(kind, self._listener)
        tracing.recorder = self
        return self

    def __exit__(self, *exc):
        tracing.recorder = None
        for kind in self._listener.KINDS:
            numba_internals.unregister_listener(kind, self._listener)
        self.end = _clock()
        self._thread_names.update({t.ident: t.name for t in threading.enumerate()})
        if self.path is not None:
            self.save(self.path)
        return False

    # ------------------------------------------------------------------ the executor's side
    def call(self, name, cat, args, run, *a):
        start = _clock()
        try:
            return run(*a)
        finally:
            self.events.append((start, _clock() - start, _ident(), name, cat, args))

    def timed(self, nodes, runs, phase):
        out = []
        for node, run in zip(nodes, runs):
            known = self._timed.get(id(run))
            if known is None or known[0] is not run:
                known = self._timed[id(run)] = (run, self._wrap(run, node, phase))
            out.append(known[1])
        return out

    def run_node(self, node, phase, run, arg):
        start = _clock()
        try:
            return run(arg)
        finally:
            self.events.append((start, _clock() - start, _ident(), None, None, (run, node, phase)))

    def copy(self, direction, nbytes, run, *a):
        return self.call("copy " + direction, "copy", {"bytes": int(nbytes)}, run, *a)

    def deferred(self, request, state):
        known = self._requests.get(id(request))
        if known is None or known[0] is not request:
            known = self._requests[id(request)] = (request, len(self._requests) + 1)
        args = {"module": request.module, "signature": str(request.sig), "state": state}
        if request.message:
            args["message"] = request.message
        self.async_events.append(("b" if state == "requested" else "e", _clock(), known[1],
                                  request.qualname, args))

    def _wrap(self, run, node, phase):
        what, events = (run, node, phase), self.events   # named when the trace is written
        sync = None
        if self.synchronize and node.ctx.device != "cpu" and cuda_device.cuda is not None:
            sync = cuda_device.cuda.synchronize

        def timed():
            start = _clock()
            try:
                run()
                if sync is not None:
                    sync()
            finally:
                events.append((start, _clock() - start, _ident(), None, None, what))
        return timed

    def _describe_run(self, run, node, phase):
        """The slice name and args of a runner: a fused region's ops, or one op."""
        region = getattr(run, "nodes", None)
        if region is not None:
            ops = [n.op.name for n in (region if phase == "forward" else reversed(region))]
            name = "fused: " + "+".join(ops) + (" backward" if phase == "backward" else "")
            members = {id(n) for n in region}
            outside = {id(v): v for n in region for v in n.inputs
                       if v._parent is None or id(v._parent) not in members}
            family = type(region[0].op).__module__.rsplit(".", 1)[-1]   # BN+ReLU: normalization
            return name, {"kind": "fused", "phase": phase, "ops": ops, "family": family,
                          "device": node.ctx.device,
                          "inputs": [_describe(v) for v in outside.values()],
                          "shape": _describe(region[0]._outputs[0]())}
        op = node.op
        scope = parameter_scope_of(node, self._names)
        name = op.name + (" backward" if phase == "backward" else "")
        args = {"kind": "op", "phase": phase, "op": op.name,
                "family": type(op).__module__.rsplit(".", 1)[-1], "device": node.ctx.device,
                "inputs": [_describe(v) for v in node.inputs],
                "outputs": [_describe(r()) for r in node._outputs]}
        if scope:
            name += " ({})".format(scope)
            args["scope"] = scope
        return name, args

    # ------------------------------------------------------------------ the result
    def chrome_trace(self):
        """The trace as a dict (``{"traceEvents": [...], ...}``)."""
        if self.start is None:
            raise RuntimeError("trace: nothing recorded yet; use it as `with trace(path):`")
        end = self.end if self.end is not None else _clock()
        pid = os.getpid()
        tids = {}
        for ident in [self._owner] + [e[2] for e in self.events]:
            tids.setdefault(ident, len(tids) + 1)

        def us(ns):
            return round((ns - self.start) / 1000.0, 3)

        out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                "args": {"name": "nnabla_jit (pid {})".format(pid)}}]
        for ident, tid in tids.items():
            label = self._thread_names.get(ident) or "thread {}".format(tid)
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                        "args": {"name": label}})
        slices = sorted(self.events, key=lambda e: (e[0], -e[1]))
        described = {}
        for start, dur, ident, name, cat, args in slices:
            if name is None:   # a kernel run: (runner, node, phase)
                key = (id(args[0]), id(args[1]), args[2])
                known = described.get(key)
                if known is None:
                    known = described[key] = self._describe_run(*args)
                name, args = known
                cat = args["kind"]
            elif callable(args):
                args = args()
            # the end rounded as the start is: a child ends within its parent in the file too
            event = {"ph": "X", "name": name, "cat": cat, "ts": us(start),
                     "dur": round(us(start + dur) - us(start), 3), "pid": pid, "tid": tids[ident]}
            if args:
                event["args"] = args
            out.append(event)
        opened = set()
        for ph, at, ident, name, args in self.async_events:
            opened.symmetric_difference_update({ident})
            out.append({"ph": ph, "name": name, "cat": "deferred compile", "id": ident,
                        "ts": us(at), "pid": pid, "tid": 1, "args": args})
        for ph, at, ident, name, args in self.async_events:   # still compiling at the end
            if ph == "b" and ident in opened:
                out.append({"ph": "e", "name": name, "cat": "deferred compile", "id": ident,
                            "ts": us(end), "pid": pid, "tid": 1,
                            "args": {"state": "still compiling when the trace ended"}})
        return {"traceEvents": out, "displayTimeUnit": "ms",
                "otherData": {"producer": "nnabla_jit.utils.profiler.trace",
                              "traced_us": round((end - self.start) / 1000.0, 3)}}

    def save(self, path):
        """Write the trace to ``path`` as JSON, atomically (a temporary file, then a rename)."""
        text = json.dumps(self.chrome_trace())
        with atomic_path(path) as tmp:
            with open(tmp, "w") as f:
                f.write(text)
        return os.fspath(path)

    def summary(self, top=12):
        """A table: where the traced time went (see :func:`summary`)."""
        return summary(self.chrome_trace(), top)


def _document(source):
    if isinstance(source, trace):
        return source.chrome_trace()
    if isinstance(source, dict):
        return source
    with open(os.fspath(source)) as f:
        return json.load(f)


def load_events(source):
    """The ``traceEvents`` of a trace file, a :class:`trace`, or a trace dict."""
    return _document(source)["traceEvents"]


def self_times(events):
    """Each complete event with the time none of its children took: [(event, self us)]."""
    out = []
    by_thread = {}
    for e in events:
        if e.get("ph") == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    for slices in by_thread.values():
        slices.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []   # [event, self time]
        for e in slices:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                out.append(tuple(stack.pop()))
            if stack:
                stack[-1][1] -= e["dur"]
            stack.append([e, e["dur"]])
        out += [tuple(item) for item in reversed(stack)]
    return out


def category(event):
    """The kind of time an event stands for: ``executor`` (a forward/backward call's own
    Python), ``solver``, ``compile``, ``numba cache/lock``, ``copy``, ``fused elementwise`` or
    the op's family
    (``convolution``, ``affine``, ``normalization``, ``pooling``, ``elementwise``, ...)."""
    cat = event.get("cat")
    if cat == "step":
        return "executor"
    if cat in ("op", "fused"):
        family = event.get("args", {}).get("family", "op")
        return "fused elementwise" if cat == "fused" and family == "elementwise" else family
    if cat == "numba":
        return "numba cache/lock"
    return cat


def summary(source, top=12):
    """Where the traced time went, as a printable table: the top ops and regions by their own
    time (children such as compiles excluded), then each category's share."""
    doc = _document(source)
    rows, cats, total, first_thread = {}, {}, 0.0, 0.0
    for e, own in self_times(doc["traceEvents"]):
        total += own
        first_thread += own if e["tid"] == 1 else 0.0
        kind = category(e)
        cats[kind] = cats.get(kind, 0.0) + own
        if e.get("cat") in ("op", "fused"):
            args = e.get("args", {})
            key = (args.get("op") or e["name"], args.get("phase", ""))
            if e.get("cat") == "fused":
                key = (e["name"].replace(" backward", ""), args.get("phase", ""))
            calls, t = rows.get(key, (0, 0.0))
            rows[key] = (calls + 1, t + own)
    if total <= 0:
        return "trace: no slices recorded"
    lines = ["{:<44} {:>8} {:>6} {:>10} {:>6}".format("op / region", "phase", "calls", "ms", "%")]
    for (name, phase), (calls, t) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:top]:
        label = name if len(name) <= 44 else name[:41] + "..."
        lines.append("{:<44} {:>8} {:>6} {:>10.3f} {:>5.1f}%".format(label, phase, calls, t / 1e3,
                                                                     100 * t / total))
    lines.append("")
    lines.append("total {:.3f} ms in slices: ".format(total / 1e3) + ", ".join(
        "{} {:.1f}%".format(kind, 100 * t / total)
        for kind, t in sorted(cats.items(), key=lambda kv: -kv[1])))
    block = doc.get("otherData", {}).get("traced_us")
    if block:
        lines.append("the block took {:.3f} ms, {:.3f} ms of it outside the recorded calls".format(
            block / 1e3, max(0.0, block - first_thread) / 1e3))
    return "\n".join(lines)
