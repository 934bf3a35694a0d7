"""Where a step trace plugs in: ``recorder`` is the active trace recorder, or None.

The recorder itself (``nnabla_jit.utils.trace``, used as ``nnabla_jit.utils.profiler.trace``)
lives in the top layer; the modules it observes sit far below it and cannot import it. So they
read this one variable: the executor once per ``forward``/``backward`` call and per single-node
run, the solvers once per call, the CUDA device once per copy, the deferred compiler once per
request. While it is None nothing else is done: an untraced step runs the code it ran before,
fused regions included (a trace shows what ran; it does not unfuse, as function hooks do).

While a trace records, ``recorder`` is an object with these methods (the executor's view of it):

* ``call(name, cat, args, run, *a)``: ``run(*a)`` inside a slice (a whole forward, an update)
  described by the dict ``args`` (or None);
* ``timed(nodes, runs, phase)``: the runners ``runs`` (of ``nodes``: a node, a backward step or a
  fused region) wrapped so that each call records a slice naming what ran;
* ``run_node(node, phase, run, arg)``: ``run(arg)``, one node's forward or backward, in a slice;
* ``copy(direction, nbytes, run, *a)``: ``run(*a)``, a host<->device copy, in a slice;
* ``deferred(request, state)``: a background compile asked for (``"requested"``) or answered.
"""
__all__ = ["recorder"]

recorder = None
