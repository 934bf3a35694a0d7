"""The executor: order the graph, run forward and backward kernels, free buffers.

A forward or backward call first gets a *plan* for its root: the Function nodes in order plus,
for every step, what to free (``clear_buffer``), which inputs get gradients, and whether each
gradient overwrites or accumulates. Plans are cached on the root Variable and rebuilt only when
the graph changes (``graph_changed()``: rewiring, unlinking, ``need_grad`` edits, reshapes), so a
static graph pays for the Python walk once and each step costs the kernel calls and little else.
"""
import os
from contextlib import contextmanager

import numpy as np

from . import callback, deferred_compile, fusion, runners, tracing
from .ndarray import NdArray
from .ops.registry import NoGradient
from .random_replay import replayed_random_state, save_random_state

__all__ = ["forward", "backward", "forward_all", "upstream_functions", "graph_changed",
           "run_node_forward", "unfused"]

_version = [0]
FUSION = os.environ.get("NNABLA_JIT_FUSION", "1") != "0"   # set 0 to run every node on its own
# A fused region is a kernel generated for its graph, about a second to compile on an empty
# cache: it pays for a graph run again and again (a training or inference loop), not for one
# run once or twice (a notebook cell, a test). A cached plan runs op by op on the shared kernels
# for its first FUSE_FROM_RUN - 1 runs and fused from then on -- always the same run, so a
# program's results (fused sums may round differently) are the same every time it runs.
FUSE_FROM_RUN = max(1, int(os.environ.get("NNABLA_JIT_FUSE_FROM_RUN", "3")))
# nnabla's backward does nothing where there is nothing to differentiate and passes over metrics
# (TopNError, ...); NNABLA_JIT_STRICT_GRAD=1 makes both an error, to find a forgotten need_grad.
STRICT_GRAD = os.environ.get("NNABLA_JIT_STRICT_GRAD", "0") == "1"


_RECOMPUTE_FREE = "the executor (recompute=True: freed after its last use, computed again when needed)"


@contextmanager
def unfused():
    """Plans built inside run every node on its own and compile no fused kernel, however often
    they run (a numerical gradient runs one small graph hundreds of times)."""
    global FUSION
    before, FUSION = FUSION, False
    try:
        yield
    finally:
        FUSION = before


def graph_changed():
    """Invalidate every cached plan (called when links or need_grad flags change)."""
    _version[0] += 1


def upstream_functions(roots):
    """Function nodes the roots depend on, in an order where producers come first."""
    order, done = [], set()
    for root in roots:
        f = root._parent
        if f is None or id(f) in done:
            continue
        stack = [(f, iter(f.inputs))]
        active = {id(f)}
        while stack:
            node, it = stack[-1]
            for v in it:
                p = v._parent
                if p is not None and id(p) not in done and id(p) not in active:
                    active.add(id(p))
                    stack.append((p, iter(p.inputs)))
                    break
            else:
                stack.pop()
                done.add(id(node))
                order.append(node)
    return order


# ---------------------------------------------------------------------------- node kernels
def run_node_forward(node):
    """Run one node's forward kernel (imperative and auto-forward calls, the profiler; plans
    keep their runners). The runner is kept on the node (with the scratch buffers of outputs
    nobody holds) until the graph changes."""
    if tracing.recorder is not None:
        return tracing.recorder.run_node(node, "forward", _run_node_forward, node)
    _run_node_forward(node)


def _run_node_forward(node):
    cached = node._scratch
    if cached is not None and cached[0] == _version[0]:
        cached[1]()
        return
    run = runners.forward_runner(node)
    node._scratch = (_version[0], run)
    run()


# ---------------------------------------------------------------------------- plans
def _resetup(nodes):
    """nnabla's re-setup: a node whose inputs no longer have the shapes it was set up with
    (after ``reset_shape``, or a data-dependent op upstream that produced a new shape) is set
    up again and its outputs take the new shapes; ``nodes`` in order, so a change flows
    all the way downstream."""
    for node in nodes:
        shapes = [v._body.shape for v in node.inputs]
        if shapes == node.setup_input_shapes:
            continue
        op = node.op
        if op.python_level:   # a PythonFunction's setup resets its outputs itself
            op.pyfunc.setup_impl(node.inputs, node.outputs)
            out_shapes = [s if v is None else v.shape
                          for v, s in zip(node.outputs, node.output_shapes)]
        else:
            out_shapes = op.setup(*shapes)
            if op.data_dependent:
                out_shapes = runners.data_dependent_shapes(op, node.inputs, node.compute_dtype) or out_shapes
        node.setup_input_shapes = shapes
        node.output_shapes = [tuple(s) for s in out_shapes]
        for r, shape in zip(node._outputs, node.output_shapes):
            v = r()
            if v is not None and v._body.shape != shape:
                v.reset_shape(shape, force=True)


class _ForwardPlan:
    __slots__ = ("version", "nodes", "steps", "runners", "fused", "data_dependent", "recompute",
                 "save_random", "freed_by", "runs")

    def __init__(self, roots, clear_buffer, clear_no_need_grad, fuse=True):
        nodes = upstream_functions(roots)
        _resetup(nodes)
        self.version = _version[0]   # after the re-setup, which resets shapes
        self.nodes = nodes
        self.data_dependent = any(node.op.data_dependent for node in nodes)
        frees = [[] for _ in nodes]
        needed = set()
        # recompute=True: freed after its last forward use, computed again when backward needs it
        root_bodies = {id(r._body) for r in roots}
        last_use, inplaced = {}, set()
        for k, node in enumerate(nodes):
            for i, v in enumerate(node.inputs):
                last_use[id(v)] = (k, v)
                if node.op.inplace_data(i):   # nnabla shares these buffers and keeps them
                    inplaced.add(id(v))
                    inplaced.update(id(r()) for r in node._outputs if r() is not None)
        for k, v in last_use.values():
            if (v._recompute and v._parent is not None and not v._persistent
                    and id(v._body) not in root_bodies and id(v) not in inplaced
                    and not v._body.data.kept_for_user):
                frees[k].append(v)
        self.recompute = any(frees)
        # ops drawing random numbers whose outputs will be recomputed: save the generators first
        self.save_random = [any(r() is not None and r()._recompute for r in node._outputs)
                            and node.op.need_setup_recompute(0) for node in nodes]
        if clear_buffer or clear_no_need_grad:
            keep = {id(r._body) for r in roots}
            for r in roots:   # F.sink(a, b).forward() keeps a and b, as nnabla does
                if r._parent is not None and r._parent.op.name == "Sink":
                    keep.update(id(v._body) for v in r._parent.inputs)
            needed = _backward_data_needs(nodes) if not clear_buffer else set()
            last_use = {}
            for k, node in enumerate(nodes):
                for v in node.inputs:
                    last_use[id(v)] = (k, v)
            for k, v in last_use.values():
                # values a user's variable shares (h0.data = h.data) are not the graph's to free
                if (v._parent is not None and not v._persistent and id(v._body) not in keep
                        and id(v) not in needed and not v._recompute
                        and not v._body.data.kept_for_user):
                    frees[k].append(v)
        self.steps = list(zip(nodes, frees))
        self.freed_by = ("forward(clear_buffer=True)" if clear_buffer
                         else "forward(clear_no_need_grad=True)")
        self.runners = [runners.forward_runner(node) for node in nodes]
        # Elementwise runs compute in one pass; clearing flags let their intermediates stay in
        # registers (without them every value is stored, as nnabla keeps it).
        self.fused = fuse and FUSION and not self.recompute
        if self.fused:
            fusion.fuse_forward(self, roots, needed, clear_buffer,
                                keep_all=not (clear_buffer or clear_no_need_grad))


def _requires_grad(nodes):
    """ids of the Variables a gradient can flow into (need_grad and a path to a leaf that
    needs it)."""
    rg = set()
    for node in nodes:
        any_in = False
        for v in node.inputs:
            if v._need_grad and (v._parent is None or id(v) in rg):
                rg.add(id(v))
                any_in = True
        if any_in:
            for r in node._outputs:
                o = r()
                if o is not None and o._need_grad:
                    rg.add(id(o))
    return rg


def _backward_data_needs(nodes):
    """ids of the Variables whose data some backward kernel of ``nodes`` reads."""
    rg = _requires_grad(nodes)
    needed = set()
    for node in nodes:
        op = node.op
        pd = [id(v) in rg for v in node.inputs]
        if not any(pd):
            continue
        for j, v in enumerate(node.inputs):
            if any(pd[i] and op.grad_depends_input_data(i, j) for i in range(len(pd))):
                needed.add(id(v))
        for o, r in enumerate(node._outputs):
            v = r()
            if v is not None and any(pd[i] and op.grad_depends_output_data(i, o) for i in range(len(pd))):
                needed.add(id(v))
    return needed


def _refuse_grads(node, rg):
    """Raise, as nnabla does, when a gradient must flow into an input its function refuses
    (a cross entropy's label, a quantization scale) because that input needs one."""
    for i in node.op.refused_grad_inputs:
        if i < len(node.inputs) and id(node.inputs[i]) in rg:
            raise NoGradient("backward: {} gives no gradient to its input {} ({}), which has "
                             "need_grad=True (as in nnabla)".format(
                                 node.op.name, i, node.op.input_names[i] if i < len(node.op.input_names) else "?"))


class _BackwardStep:
    __slots__ = ("node", "propagate_down", "accum", "alias", "zero_outputs", "needs_input",
                 "free_grads", "free_data", "runner", "recompute")


class _BackwardPlan:
    __slots__ = ("version", "steps", "any_grad", "seed", "seed_memory", "runners", "fused",
                 "recompute", "seed_freed_first", "backward_reads", "runs")

    def __init__(self, root, clear_buffer, fuse=True):
        self.version = _version[0]
        nodes = upstream_functions([root])
        rg = _requires_grad(nodes)
        receives = {id(root)}     # Variables whose grad holds this pass's value
        written = set()           # grad buffers (bodies) already written in this pass
        steps = []
        for node in reversed(nodes):
            outs = [r() for r in node._outputs]
            if not any(o is not None and id(o) in receives for o in outs):
                continue
            if node.op.name in node.op.PASSES_NO_GRADIENT and not STRICT_GRAD:
                continue
            no_grad = node.op.no_grad_inputs
            pd = [id(v) in rg and i not in no_grad for i, v in enumerate(node.inputs)]
            _refuse_grads(node, rg)
            if not any(pd):
                continue
            s = _BackwardStep()
            s.node = node
            s.propagate_down = pd
            s.zero_outputs = [o is not None and id(o) not in receives for o in outs]
            s.accum, s.alias = [], []
            seen_here = set()
            for i, v in enumerate(node.inputs):
                b = id(v._body)
                s.alias.append(pd[i] and b in seen_here)
                if not pd[i]:
                    s.accum.append(False)
                    continue
                s.accum.append(v._parent is None or b in written)
                written.add(b)
                seen_here.add(b)
                receives.add(id(v))
            op = node.op
            s.needs_input = [any(pd[i] and op.grad_depends_input_data(i, j) for i in range(len(pd)))
                             for j in range(len(node.inputs))]
            s.free_grads, s.free_data = [], []
            # data this step reads that forward may have freed for recomputation
            s.recompute = [v for j, v in enumerate(node.inputs) if s.needs_input[j] and v._recompute]
            # and, as nnabla does, the outputs of a function whose backward reads any data
            # (unless this pass recomputed them already and freed them again as unneeded)
            reads_outputs = any(pd[i] and op.grad_depends_output_data(i, k)
                                for i in range(len(pd)) for k in range(len(outs)))
            if reads_outputs or any(s.needs_input):
                s.recompute += [o for o in outs if o is not None and o._recompute]
            steps.append(s)
        self.any_grad = bool(steps)
        self.recompute = any(s.recompute for s in steps)
        # what recomputation keeps: the data some backward step reads
        self.backward_reads = set()
        if self.recompute:
            for s in steps:
                op, pd = s.node.op, s.propagate_down
                self.backward_reads.update(id(v) for j, v in enumerate(s.node.inputs) if s.needs_input[j])
                for o, r in enumerate(s.node._outputs):
                    if r() is not None and any(pd[i] and op.grad_depends_output_data(i, o)
                                               for i in range(len(pd))):
                        self.backward_reads.add(id(r()))
        # clear_buffer frees the root's gradient (a grad given as a value) after the first
        # step, where root's own function consumed it, as nnabla does
        self.seed_freed_first = (clear_buffer and bool(steps) and steps[0].node is root._parent
                                 and not root._persistent)
        if clear_buffer:
            _plan_backward_frees(steps, root)
        self.steps = steps
        # The root's gradient for a pass lives here, so the stored one is left untouched.
        self.seed = NdArray(root.shape, root._parent.compute_dtype if root._parent else np.float32)
        self.seed_memory = runners.memory_of(root._parent)
        self.runners = [runners.backward_runner(s, root, self.seed) for s in steps]
        self.fused = fuse and FUSION and not self.recompute
        if self.fused:
            fusion.fuse_backward(self, root, keep_grads=not clear_buffer)


def _plan_backward_frees(steps, root):
    """After each step, drop output grads consumed there and data no later step reads."""
    last_read = {}
    for k, s in enumerate(steps):
        op = s.node.op
        pd = s.propagate_down
        for j, v in enumerate(s.node.inputs):
            if s.needs_input[j]:
                last_read[id(v)] = (k, v)
        for o, r in enumerate(s.node._outputs):
            v = r()
            if v is not None:
                if any(pd[i] and op.grad_depends_output_data(i, o) for i in range(len(pd))):
                    last_read[id(v)] = (k, v)
                else:
                    last_read.setdefault(id(v), (k, v))
    root_body = id(root._body)
    # nnabla never clears the inputs of a Sink (prohibit_clear_input_buffers): data nor grad
    sink_inputs = {id(v) for s in steps if s.node.op.name == "Sink" for v in s.node.inputs}
    for k, v in last_read.values():
        if (v._parent is not None and not v._persistent and id(v._body) != root_body
                and id(v) not in sink_inputs and not v._body.data.kept_for_user):
            steps[k].free_data.append(v)
    for s in steps:
        for r in s.node._outputs:
            v = r()
            if (v is not None and not v._persistent and id(v._body) != root_body
                    and id(v) not in sink_inputs):
                s.free_grads.append(v)


def _cached_plan(var, key, make, run=True):
    """The plan ``make(fuse)`` builds for ``var``, kept until a graph changes (its rebuilt plan
    keeps the count of runs); the run that reaches FUSE_FROM_RUN builds it again, fused.
    ``run=False``: a question about the plan, not a run of it."""
    cache = var._cache
    if cache is None:
        cache = var._cache = {}
    plan = cache.get(key)
    runs = (0 if plan is None else plan.runs) + run
    if (plan is None or plan.version != _version[0]
            or (run and runs == FUSE_FROM_RUN and FUSION)):   # unfused: nothing to rebuild for
        plan = cache[key] = make(runs >= FUSE_FROM_RUN)
    plan.runs = runs
    return plan


# ---------------------------------------------------------------------------- forward
def forward(roots, clear_buffer=False, clear_no_need_grad=False,
            function_pre_hook=None, function_post_hook=None):
    """Run every function the roots depend on, in order."""
    if tracing.recorder is not None:
        return tracing.recorder.call("forward", "step", None, _forward, roots, clear_buffer,
                                     clear_no_need_grad, function_pre_hook, function_post_hook,
                                     tracing.recorder)
    return _forward(roots, clear_buffer, clear_no_need_grad, function_pre_hook, function_post_hook)


def _forward(roots, clear_buffer, clear_no_need_grad, function_pre_hook, function_post_hook,
             trace=None):
    deferred_compile.share_cores()
    function_pre_hook, function_post_hook = callback.function_hooks(function_pre_hook, function_post_hook)
    key = ("forward", bool(clear_buffer), bool(clear_no_need_grad))
    if len(roots) == 1:
        plan = _cached_plan(roots[0], key, lambda fuse: _ForwardPlan(roots, clear_buffer,
                                                                     clear_no_need_grad, fuse))
    else:   # built for this call alone: op by op (FUSE_FROM_RUN)
        plan = _ForwardPlan(roots, clear_buffer, clear_no_need_grad, fuse=FUSE_FROM_RUN == 1)
    recording = callback.recorder_active()
    hooks = function_pre_hook is not None or function_post_hook is not None or recording
    if hooks and plan.fused:   # hooks see every function: run this call unfused
        plan = _ForwardPlan(roots, clear_buffer, clear_no_need_grad, fuse=False)
    runs = plan.runners
    if trace is not None:   # the same runners, each recording what it ran
        runs = trace.timed([node for node, _ in plan.steps], runs, "forward")
    if (not hooks and not (clear_buffer or clear_no_need_grad or plan.recompute)
            and not plan.data_dependent):
        for run in runs:
            run()
        return
    save_random = plan.save_random if plan.recompute else None
    for k, ((node, frees), run) in enumerate(zip(plan.steps, runs)):
        if function_pre_hook is not None:
            function_pre_hook(node)
        if save_random is not None and save_random[k]:
            save_random_state(node.op)
        run()
        if function_post_hook is not None:
            function_post_hook(node)
        for v in frees:
            v._body.data.free(_RECOMPUTE_FREE if v._recompute else plan.freed_by)
        if recording:
            callback.record_inputs(node)
        if plan.data_dependent and plan.version != _version[0] and node.op.data_dependent:
            # This op's output took a new shape: the rest of the pass is set up again and run
            # unfused from fresh runners (without the plan's frees); the next call re-plans.
            rest = plan.nodes[plan.nodes.index(node) + 1:]
            _resetup(rest)
            for later in rest:
                if function_pre_hook is not None:
                    function_pre_hook(later)
                run = runners.forward_runner(later)
                if trace is not None:
                    run = trace.timed([later], [run], "forward")[0]
                run()
                if function_post_hook is not None:
                    function_post_hook(later)
            return


def forward_all(variables, clear_buffer=False, clear_no_need_grad=False,
                function_pre_hook=None, function_post_hook=None):
    """Forward every function needed by any of ``variables`` (shared parts run once)."""
    forward(list(variables), clear_buffer, clear_no_need_grad, function_pre_hook, function_post_hook)


# ---------------------------------------------------------------------------- backward
def run_node_backward(step):
    """Run one backward step (the runner is kept on the step until the graph changes)."""
    if tracing.recorder is not None:
        return tracing.recorder.run_node(step.node, "backward", _run_node_backward, step)
    _run_node_backward(step)


def _run_node_backward(step):
    cached = getattr(step, "runner", None)
    if cached is not None and cached[0] == _version[0]:
        cached[1]()
        return
    run = runners.backward_runner(step)
    step.runner = (_version[0], run)
    run()


def recompute_data(var, backward_reads=None, recording=False, recomputed=None):
    """Compute again the data of ``var`` (freed by forward because of ``recompute=True``),
    and first that of any freed intermediate it depends on; random ops draw what they drew in
    forward. As nnabla, an intermediate recomputed only for this is freed again after its last
    use here unless ``backward_reads`` (ids of Variables) holds it."""
    # the nodes producing var and the freed intermediates upstream of it, producers first,
    # depth first in input order (nnabla's order: one input's chain, then the next's)
    if var._parent is None:
        return
    nodes, seen = [], {id(var._parent)}
    stack = [(var._parent, iter(var._parent.inputs))]
    while stack:
        node, it = stack[-1]
        for u in it:
            p = u._parent
            if p is not None and id(p) not in seen and not u._body.data.holds_values:
                seen.add(id(p))
                stack.append((p, iter(p.inputs)))
                break
        else:
            stack.pop()
            nodes.append(node)
    frees = [[] for _ in nodes]
    if backward_reads is not None:
        last_use = {}
        for k, node in enumerate(nodes):
            for u in node.inputs:
                if u._parent is not None and id(u._parent) in seen:
                    last_use[id(u)] = (k, u)
        for k, u in last_use.values():
            if (id(u) not in backward_reads and u is not var and not u._persistent
                    and not u._body.data.kept_for_user):
                frees[k].append(u)
    for node, free in zip(nodes, frees):
        with replayed_random_state(node.op):
            run_node_forward(node)
        if recomputed is not None:
            recomputed.update(id(r()) for r in node._outputs)
        for u in free:
            u._body.data.free(_RECOMPUTE_FREE)
        if recording:
            callback.record_inputs(node)


def has_grad_path(root):
    """Whether ``backward()`` from ``root`` would reach any variable with need_grad=True."""
    return _cached_plan(root, ("backward", False), lambda fuse: _BackwardPlan(root, False, fuse),
                        run=False).any_grad


def backward(root, grad=1, clear_buffer=False, communicator_callbacks=None,
             function_pre_hook=None, function_post_hook=None):
    """Back-propagate from ``root``: ``grad`` (scalar or array) seeds its gradient for this
    pass only; ``grad=None`` uses the gradient ``root`` already holds."""
    if tracing.recorder is not None:
        return tracing.recorder.call("backward", "step", None, _backward, root, grad, clear_buffer,
                                     communicator_callbacks, function_pre_hook,
                                     function_post_hook, tracing.recorder)
    return _backward(root, grad, clear_buffer, communicator_callbacks, function_pre_hook,
                     function_post_hook)


def _backward(root, grad, clear_buffer, communicator_callbacks, function_pre_hook,
              function_post_hook, trace=None):
    deferred_compile.share_cores()
    function_pre_hook, function_post_hook = callback.function_hooks(function_pre_hook, function_post_hook)
    plan = _cached_plan(root, ("backward", bool(clear_buffer)),
                        lambda fuse: _BackwardPlan(root, clear_buffer, fuse))
    if not plan.any_grad:
        op = root._parent.op if root._parent is not None else None
        if (op is not None and not op.has_backward() and any(v._need_grad for v in root._parent.inputs)
                and (op.name not in op.PASSES_NO_GRADIENT or STRICT_GRAD)):
            from .ops.registry import NoGradient
            raise NoGradient("backward: {} has no gradient (as in nnabla)".format(op.name))
        if op is not None and not STRICT_GRAD:
            return   # nothing needs a gradient: nnabla's backward does nothing
        if root._parent is None:
            raise ValueError("backward: {} has no parent function; there is nothing to "
                             "back-propagate through".format(root))
        raise ValueError("backward: no variable upstream of {} has need_grad=True, so no gradient "
                         "can be computed; set need_grad=True on the inputs or parameters to "
                         "differentiate".format(root))
    callbacks = communicator_callbacks
    if callbacks is not None and not isinstance(callbacks, (list, tuple)):
        callbacks = [callbacks]
    recording = callback.recorder_active()
    hooks = (function_pre_hook is not None or function_post_hook is not None or bool(callbacks)
             or recording)
    if hooks and plan.fused:   # hooks see every function: run this call unfused
        plan = _BackwardPlan(root, clear_buffer, fuse=False)
    body = root._body
    saved = body.grad
    seed = plan.seed
    # nnabla frees a gradient it made from a value, not the root's own or an NdArray given
    free_seed = plan.seed_freed_first and grad is not None and not isinstance(grad, NdArray)
    if grad is None:
        grad = saved.data
    elif isinstance(grad, NdArray):
        grad = grad.data
    if np.isscalar(grad):
        # in the root's memory: a device seed freed by the last clearing backward is filled
        # on the device again, not on the host (which would cost a copy up every step)
        plan.seed_memory.fill(seed, grad)
    else:
        grad = np.asarray(grad)
        if grad.shape != body.shape and grad.size != 1:
            raise ValueError("backward: grad of shape {} for a variable of shape {}"
                             .format(grad.shape, body.shape))
        seed.data[...] = grad
    body.grad = seed    # for steps that read the root's gradient through the variable
    runs = plan.runners
    if trace is not None:   # the same runners, each recording what it ran
        runs = trace.timed([s.node for s in plan.steps], runs, "backward")
    try:
        if not hooks and not clear_buffer and not plan.recompute:
            for run in runs:
                run()
            return
        recomputed = set()   # ids of the variables this pass recomputed
        for s, run in zip(plan.steps, runs):
            if plan.recompute:   # before the hook, which may read the data
                for v in s.recompute:
                    if not v._body.data.holds_values and (id(v) in plan.backward_reads
                                                          or id(v) not in recomputed):
                        recompute_data(v, plan.backward_reads, recording, recomputed)
            if function_pre_hook is not None:
                function_pre_hook(s.node)
            run()
            if recording:   # the inputs' flags before this step frees, as nnabla records them
                callback.record_inputs(s.node)
            if function_post_hook is not None:
                function_post_hook(s.node)
            if callbacks:
                for cb in callbacks:
                    cb.on_finish_function_backward(s.node)
            for v in s.free_grads:
                v._body.grad.clear()
            for v in s.free_data:
                v._body.data.free("backward(clear_buffer=True)")
            if free_seed:
                seed.clear()
                free_seed = False
            if recording:
                callback.record_outputs(s.node)
        if callbacks:
            for cb in callbacks:
                cb.on_finish_backward()
    finally:
        body.grad = saved
