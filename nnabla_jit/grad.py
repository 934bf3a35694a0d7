"""``nn.grad``: gradients as new graph nodes, so they can be differentiated again.

Walking the forward graph from the outputs in decreasing rank, each function's grad rule (the
``backward_functions`` registry, built from the op registry) is called with the gradients of
its outputs and returns Variables for the gradients of its inputs. Gradients reaching the same
variable are summed. The result is an ordinary graph: ``forward()`` computes it, ``nn.grad``
of it gives higher derivatives, ``backward()`` through it trains with gradient penalties.
"""
import heapq
import itertools
from collections import OrderedDict

import numpy as np

from .function import PythonFunction
from .ndarray import NdArray
from .variable import Variable

__all__ = ["grad"]


class GradEndFunction(PythonFunction):
    """The seed of a gradient graph: ones shaped like the output being differentiated."""

    def min_outputs(self):
        return 1

    def grad_depends_output_data(self, i, o):
        return False

    def grad_depends_input_data(self, i, j):
        return False

    def setup_impl(self, inputs, outputs):
        outputs[0].reset_shape(inputs[0].shape, True)

    def forward_impl(self, inputs, outputs):
        outputs[0].data.fill(1.0)

    def backward_impl(self, inputs, outputs, propagate_down, accum):
        if propagate_down[0] and not accum[0]:
            inputs[0].grad.fill(0.0)


def _as_list(x):
    if isinstance(x, list):
        return x
    if isinstance(x, (Variable, NdArray)) or not hasattr(x, "__iter__"):
        return [x]
    return list(x)


def _graph_variables_equal_to(inputs, outputs):
    """The variables of the graph equal to each requested input (``==`` compares buffers, so a
    parameter from ``nn.get_parameters()`` matches every unlinked copy PF layers put in the
    graph)."""
    wanted = {v._body for v in inputs}
    found = {}
    seen = set()
    stack = list(outputs)
    while stack:
        v = stack.pop()
        f = v.parent
        if f is None:
            continue
        for u in f.inputs:
            if id(u) in seen:
                continue
            seen.add(id(u))
            if u._body in wanted:
                found.setdefault(id(u._body), []).append(u)
            stack.append(u)
    return found


def _downstream(variables):
    """Variables reachable forward from ``variables`` (to know where gradients must flow)."""
    reached = set()
    stack = [v for v in variables if v is not None]
    while stack:
        v = stack.pop()
        for f in v.function_references:
            if isinstance(f.op.__dict__.get("pyfunc"), GradEndFunction):
                continue
            for o in f.outputs:
                if o is not None and id(o) not in reached:
                    reached.add(id(o))
                    stack.append(o)
    return reached


def _grad_rule(f):
    from .backward_functions import registry
    rule = registry.get(f.info.type_name)
    if rule is None:
        raise ValueError("nn.grad: {} has no grad rule in the backward function registry; "
                         "register one with nnabla_jit.backward_functions.register('{}', fn)"
                         .format(f.info.type_name, f.info.type_name))
    return rule


def _expand_function(grads_of, f):
    """Call f's grad rule on the summed gradients of its outputs; return input gradients."""
    from . import functions as F
    received = grads_of.pop(f)
    dys = []
    for o, shape in zip(f.outputs, f.output_shapes):
        parts = received.get(o, []) if o is not None else []
        if not parts:   # an output nobody uses (or holds): its gradient is zero
            dys.append(F.constant(0.0, tuple(shape)))
        elif len(parts) == 1:
            dys.append(parts[0])
        else:
            dys.append(F.add_n(*parts))
    outputs = f.outputs
    rule = _grad_rule(f)
    dxs = rule(dys, list(f.inputs), [v.shape for v in f.inputs], outputs,
               [tuple(s) for s in f.output_shapes], **f.info.args)
    dxs = _as_list(dxs)
    for i, v in enumerate(f.inputs):
        if i < len(dxs) and dxs[i] is not None:
            grads_of.setdefault(v.parent, OrderedDict()).setdefault(v, []).append(dxs[i])
    return dxs


def grad(outputs, inputs, grad_outputs=None, persistent_outputs=[], bind_grad_output=False):
    """Gradients of the sum of ``outputs`` with respect to each of ``inputs``, as Variables.

    ``grad_outputs`` weights each output (None, a number, an array, an NdArray or a Variable);
    ``persistent_outputs`` (default all True) marks the outputs persistent; with
    ``bind_grad_output`` each input's ``grad`` shares the result's data. Inputs the outputs do
    not reach get a zero constant.
    """
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    if not all(isinstance(o, Variable) for o in outputs):
        raise ValueError("nn.grad: every output must be a Variable")
    if not all(isinstance(i, Variable) for i in inputs):
        raise ValueError("nn.grad: every input must be a Variable")
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, (int, float, np.ndarray, NdArray, Variable)):
        grad_outputs = [grad_outputs] * len(outputs)
    else:
        grad_outputs = list(grad_outputs)
        if len(grad_outputs) != len(outputs):
            raise ValueError("nn.grad: {} grad_outputs for {} outputs".format(len(grad_outputs), len(outputs)))
    for k, (o, go) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(go, (type(None), int, float, np.ndarray, NdArray, Variable)):
            raise ValueError("nn.grad: grad_outputs[{}] must be None, a number, an array, an "
                             "NdArray or a Variable, got {}".format(k, type(go).__name__))
        if isinstance(go, (np.ndarray, NdArray, Variable)) and tuple(go.shape) != tuple(o.shape):
            raise ValueError("nn.grad: grad_outputs[{}] has shape {}, output {} has shape {}"
                             .format(k, go.shape, k, o.shape))
    if persistent_outputs and len(persistent_outputs) != len(outputs):
        raise ValueError("nn.grad: persistent_outputs must be empty or one flag per output")
    for o, p in zip(outputs, persistent_outputs or [True] * len(outputs)):
        o.persistent = p

    grads_of = OrderedDict()     # forward function -> {its output variable: [gradients]}
    # Functions whose output gradients are (being) gathered, highest rank first (ties: first
    # reached first): a heap of (-rank, insertion order, function), and the ids queued in it.
    # A parent's rank is below its consumers', so a function is expanded once, after every
    # consumer of its outputs.
    frontier, queued = [], set()
    order = itertools.count()
    for o, go in zip(outputs, grad_outputs):
        if o.parent is None:
            continue
        if go is None:
            weighted = o
        elif isinstance(go, Variable):
            weighted = o * go
        else:
            g = Variable(o.shape)
            if isinstance(go, NdArray):
                g.data = go
            else:
                g.d = go
            weighted = o * g
        f = weighted.parent
        if id(f) not in queued:
            queued.add(id(f))
            heapq.heappush(frontier, (-f.rank, next(order), f))
        seed = GradEndFunction()(weighted)
        seed.need_grad = False
        grads_of.setdefault(f, OrderedDict())[weighted] = [seed]

    on_graph = _graph_variables_equal_to(inputs, outputs)
    reachable = _downstream([u for us in on_graph.values() for u in us])
    slots = {}
    for k, v in enumerate(inputs):
        slots.setdefault(id(v._body), []).append(k)
    result = [None] * len(inputs)
    while frontier:
        f = heapq.heappop(frontier)[2]
        queued.discard(id(f))
        if not f.need_grad:
            grads_of.pop(f, None)
            continue
        dxs = _expand_function(grads_of, f)
        for v, dx in zip(f.inputs, dxs):
            if dx is None or not v.need_grad:
                continue
            for k in slots.get(id(v._body), ()):
                result[k] = dx if result[k] is None else result[k] + dx
                if bind_grad_output:
                    v.grad = result[k].data
            p = v.parent
            if p is not None and id(v) in reachable and id(p) not in queued:
                queued.add(id(p))
                heapq.heappush(frontier, (-p.rank, next(order), p))
    from . import functions as F
    return [r if r is not None else F.constant(0.0, inputs[k].shape) for k, r in enumerate(result)]
