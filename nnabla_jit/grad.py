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
from .ops.registry import GRAD_RULES
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
    rule = GRAD_RULES.get(f.info.type_name)
    if rule is None:
        raise ValueError("nn.grad: {} has no grad rule in the backward function registry; "
                         "register one with nnabla_jit.backward_functions.register('{}', fn)"
                         .format(f.info.type_name, f.info.type_name))
    return rule


def _expand_function(grads_of, f, bind_outputs=False):
    """Call f's grad rule on the summed gradients of its outputs; return input gradients.
    ``bind_outputs``: each output's grad shares the data of its summed gradient (retain_grad)."""
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
    if bind_outputs:
        _bind_grads(outputs, dys)
    rule = _grad_rule(f)
    # after set_active_input_mask (AddN, MulN) the function is one of its active inputs only,
    # and the others get no gradient, as in backward()
    mask = getattr(f.op, "active_input_mask", None)
    active = list(range(len(f.inputs))) if mask is None else [k for k, m in enumerate(mask) if m]
    ins = [f.inputs[k] for k in active]
    dxs = _as_list(rule(dys, ins, [v.shape for v in ins], outputs,
                        [tuple(s) for s in f.output_shapes], **f.info.args))
    if mask is not None:
        by_input = [None] * len(f.inputs)
        for k, dx in zip(active, dxs):
            by_input[k] = dx
        dxs = by_input
    for i, v in enumerate(f.inputs):
        if i < len(dxs) and dxs[i] is not None:
            grads_of.setdefault(v.parent, OrderedDict()).setdefault(v, []).append(dxs[i])
    return dxs


def _bind_grads(variables, gradients):
    """Make each variable's ``grad`` share the data of its gradient Variable (filled when the
    gradient graph runs forward)."""
    for v, g in zip(variables, gradients):
        if v is not None and g is not None and tuple(g.shape) == tuple(v.shape):
            v.grad = g.data


def _as_grad_value(what, k, value, shape):
    """A gradient given as a number, array, NdArray or Variable, as something F ops take."""
    if isinstance(value, Variable):
        if tuple(value.shape) != tuple(shape):
            raise ValueError("nn.grad: {}[{}] has shape {}, expected {}".format(what, k, value.shape, shape))
        return value
    if isinstance(value, (int, float, np.number)):
        value = np.full(shape, value, np.float32)
    elif isinstance(value, NdArray):
        value = value.data
    elif not isinstance(value, np.ndarray):
        raise ValueError("nn.grad: {}[{}] must be None, a number, an array, an NdArray or a "
                         "Variable, got {}".format(what, k, type(value).__name__))
    if tuple(value.shape) != tuple(shape):
        raise ValueError("nn.grad: {}[{}] has shape {}, expected {}".format(what, k, value.shape, shape))
    return Variable.from_numpy_array(value)


def _scaled(go, scale):
    """An output's gradient weight multiplied by chainer's ``loss_scale``."""
    if go is None:
        return float(scale)
    if isinstance(go, NdArray):
        return go.data * scale
    return go * float(scale)   # a number, an array or a Variable (a MulScalar node)


def grad(outputs, inputs, grad_outputs=None, persistent_outputs=[], bind_grad_output=False,
         grad_inputs=None, set_grad=False, retain_grad=False, loss_scale=None):
    """Gradients of the sum of ``outputs`` with respect to each of ``inputs``, as Variables.

    ``grad_outputs`` weights each output (None, a number, an array, an NdArray or a Variable);
    ``persistent_outputs`` (default all True) marks the outputs persistent; with
    ``bind_grad_output`` each input's ``grad`` shares the result's data. Inputs the outputs do
    not reach get a zero constant.

    chainer.grad's options too: ``grad_inputs`` (one per input, None or a value) is added to
    the input's gradient (a new Variable, not in place); ``set_grad`` binds each input's
    ``grad`` to its gradient (as ``bind_grad_output``); ``retain_grad`` does so for every
    variable the gradient passes through, intermediates and outputs included; ``loss_scale``
    multiplies the output gradients, so every returned gradient is scaled by it (divide before
    the update, as chainer's optimizers do).
    """
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    if grad_inputs is not None:
        grad_inputs = _as_list(grad_inputs)
        if len(grad_inputs) != len(inputs):
            raise ValueError("nn.grad: {} grad_inputs for {} inputs".format(len(grad_inputs), len(inputs)))
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
    if loss_scale is not None:
        if not isinstance(loss_scale, (int, float, np.number)) or not np.isfinite(loss_scale):
            raise ValueError("nn.grad: loss_scale must be a finite number, got {!r}".format(loss_scale))
        grad_outputs = [_scaled(go, loss_scale) for go in grad_outputs]
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
        dxs = _expand_function(grads_of, f, retain_grad)
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
    if grad_inputs is not None:
        for k, gi in enumerate(grad_inputs):
            if gi is not None:
                gi = _as_grad_value("grad_inputs", k, gi, inputs[k].shape)
                result[k] = gi if result[k] is None else result[k] + gi
    result = [r if r is not None else F.constant(0.0, inputs[k].shape) for k, r in enumerate(result)]
    if set_grad or retain_grad:
        _bind_grads(inputs, result)
    return result
