"""Function nodes of the graph, graph building, and user-defined ``PythonFunction``s.

``F.tanh(x)`` creates a :class:`Function` node that holds an op instance (``ops/``), its input
Variables and (weakly, as in nnabla) its outputs, and returns the output Variables. The executor
in ``graph.py`` runs nodes; this module only builds them.
"""
import weakref
from contextlib import contextmanager

import numpy as np

from . import graph
from .context import get_current_context
from .ndarray import NdArray
from .ops.registry import Op
from .variable import Variable

__all__ = ["Function", "FunctionInfo", "PythonFunction", "auto_forward", "set_auto_forward",
           "get_auto_forward", "no_grad"]

_state = {"auto_forward": False, "no_grad": False}


def get_auto_forward():
    return _state["auto_forward"]


def set_auto_forward(auto):
    """Run every function as soon as it is built (dynamic graph), or not."""
    _state["auto_forward"] = bool(auto)


@contextmanager
def auto_forward(auto=True):
    """``with nn.auto_forward():`` builds and runs the graph at once (dynamic mode)."""
    prev = _state["auto_forward"]
    _state["auto_forward"] = bool(auto)
    try:
        yield
    finally:
        _state["auto_forward"] = prev


@contextmanager
def no_grad(no_grad_=True):
    """``with nn.no_grad():`` builds variables with need_grad=False (inference graphs)."""
    prev = _state["no_grad"]
    _state["no_grad"] = bool(no_grad_)
    try:
        yield
    finally:
        _state["no_grad"] = prev


class FunctionInfo:
    __slots__ = ("type_name", "args")

    def __init__(self, type_name, args):
        self.type_name = type_name
        self.args = args

    def __repr__(self):
        return "FunctionInfo(type_name={!r}, args={!r})".format(self.type_name, self.args)


class Function:
    """A node of the graph: an op applied to input Variables, producing output Variables."""

    __slots__ = ("op", "inputs", "_outputs", "output_shapes", "setup_input_shapes", "rank", "ctx",
                 "compute_dtype", "storage_dtype", "_scratch", "__weakref__")

    def __init__(self, op, inputs, ctx):
        self.op = op
        self.inputs = list(inputs)
        self._outputs = []
        self.output_shapes = []   # kept here too: an output nobody holds still has a shape
        self.setup_input_shapes = [v.shape for v in self.inputs]   # forward re-sets up on a change
        self.rank = max((v._rank for v in inputs), default=0)
        self.ctx = ctx
        self.compute_dtype = ctx.compute_dtype
        self.storage_dtype = ctx.storage_dtype
        self._scratch = None   # buffers for outputs nobody holds any more

    # nnabla's Function API -------------------------------------------------------------
    @property
    def name(self):
        return self.op.name

    @property
    def info(self):
        return FunctionInfo(self.op.name, dict(self.op.args))

    @property
    def args(self):
        return dict(self.op.args)

    @property
    def outputs(self):
        return [r() for r in self._outputs]

    @property
    def need_grad(self):
        return any(v._need_grad for v in self.inputs)

    def grad_depends_input_data(self, i, j):
        return self.op.grad_depends_input_data(i, j)

    def grad_depends_output_data(self, i, o):
        return self.op.grad_depends_output_data(i, o)

    # nnabla also asks these for functions whose rule needs more than their kernels do.
    def auto_grad_depends_input_data(self, i, j):
        return False

    def auto_grad_depends_output_data(self, i, o):
        return False

    def _replace_output(self, old, new):
        for k, r in enumerate(self._outputs):
            if r() is not None and r() == old:
                self._outputs[k] = weakref.ref(new)

    def _clear_links(self):
        self.inputs = []
        self._outputs = []

    def __repr__(self):
        return "<Function {} at {}>".format(self.op.name, hex(id(self)))


def _as_variable(x, op_name, input_name):
    if isinstance(x, Variable):
        return x
    if isinstance(x, NdArray):
        return Variable._from_ndarray(x)
    if isinstance(x, (np.ndarray, np.generic, int, float)):
        raise TypeError("{}: input '{}' must be a Variable or NdArray, got a {} (wrap it with "
                        "nn.Variable.from_numpy_array)".format(op_name, input_name, type(x).__name__))
    raise TypeError("{}: input '{}' must be a Variable or NdArray, got {}".format(
        op_name, input_name, type(x).__name__))


def build(op, inputs, n_outputs=-1, outputs=None):
    """Create the node applying ``op`` to ``inputs`` and return its outputs.

    Inputs that are NdArrays make the call imperative: the node runs at once and NdArrays are
    returned. Under ``auto_forward`` the node also runs at once, but Variables are returned.
    """
    # Any NdArray input makes the call imperative (as in nnabla, parameters of a PF layer
    # called on an NdArray take part through their data).
    imperative = any(isinstance(x, NdArray) for x in inputs)
    if imperative:
        inputs = [x.data if isinstance(x, Variable) else x for x in inputs]
    names = op.input_names or ["x{}".format(i) for i in range(len(inputs))]
    variables = [_as_variable(x, op.name, n) for x, n in zip(inputs, names)]
    op.n_outputs = n_outputs   # ops whose output count is chosen by the caller (output_stat)
    out_shapes = op.setup(*[v.shape for v in variables])
    ctx = get_current_context()
    if op.data_dependent:
        out_shapes = graph.data_dependent_shapes(op, variables, ctx.compute_dtype) or out_shapes
    node = Function(op, variables, ctx)
    need_grad = (not _state["no_grad"]) and any(v._need_grad for v in variables)
    if outputs is not None:
        outs = list(outputs)
        if len(outs) != len(out_shapes):
            raise ValueError("{}: {} output variables given, {} expected".format(
                op.name, len(outs), len(out_shapes)))
        for v, shape in zip(outs, out_shapes):
            if v.shape != tuple(shape):
                v.reset_shape(shape, force=True)
    else:
        outs = [Variable(shape) for shape in out_shapes]
    for v in outs:
        v._parent = node
        v._rank = node.rank + 1
        v._need_grad = need_grad
    node._outputs = [weakref.ref(v) for v in outs]
    node.output_shapes = [v.shape for v in outs]
    for v in variables:
        v._add_reference(node)
    if imperative or _state["auto_forward"]:
        graph.run_node_forward(node)
    if imperative:
        result = [v._body.data for v in outs]
    else:
        result = outs
    if len(result) == 1 and not (op.spec is not None and op.spec.variadic_outputs):
        return result[0]
    return tuple(result)


# ------------------------------------------------------------------------ PythonFunction
class _PythonOp(Op):
    """Adapter that lets the executor run a user's PythonFunction like a registered op."""

    python_level = True

    def __init__(self, pyfunc):
        super().__init__()
        self.pyfunc = pyfunc
        self.name = pyfunc.name

    def setup(self, *shapes):
        raise AssertionError("PythonFunction setup runs through PythonFunction.__call__")

    def forward(self, inputs, outputs):
        self.pyfunc.forward_impl(inputs, outputs)

    def backward(self, inputs, outputs, propagate_down, accum):
        self.pyfunc.backward_impl(inputs, outputs, propagate_down, accum)

    def grad_depends_input_data(self, i, j):
        return self.pyfunc.grad_depends_input_data(i, j)

    def grad_depends_output_data(self, i, o):
        return self.pyfunc.grad_depends_output_data(i, o)


class PythonFunction:
    """Base class for user-defined functions written in Python, as in nnabla.

    Override ``setup_impl(inputs, outputs)`` (call ``outputs[k].reset_shape(shape, True)``),
    ``forward_impl(inputs, outputs)`` and ``backward_impl(inputs, outputs, propagate_down,
    accum)``; inputs and outputs are Variables. Call an instance on Variables to build a node.
    """

    def __init__(self, ctx=None):
        self.ctx = ctx if ctx is not None else get_current_context()
        self._node = None

    @property
    def name(self):
        return self.__class__.__name__

    @property
    def info(self):
        return FunctionInfo(self.name, self.args)

    @property
    def args(self):
        return {}

    def min_inputs(self):
        return 1

    def min_outputs(self):
        return 1

    def grad_depends_output_data(self, i, o):
        return True

    def grad_depends_input_data(self, i, j):
        return True

    def setup_impl(self, inputs, outputs):
        raise NotImplementedError

    def forward_impl(self, inputs, outputs):
        raise NotImplementedError

    def backward_impl(self, inputs, outputs, propagate_down, accum):
        raise NotImplementedError

    # The node this call created (nnabla exposes inputs/outputs on the function object).
    @property
    def inputs(self):
        return self._node.inputs if self._node else []

    @property
    def outputs(self):
        return self._node.outputs if self._node else []

    def __call__(self, *inputs, n_outputs=-1, auto_forward=False, outputs=None):
        op = _PythonOp(self)
        variables = [_as_variable(x, self.name, "x{}".format(i)) for i, x in enumerate(inputs)]
        node = Function(op, variables, self.ctx)
        n = self.min_outputs() if n_outputs < 0 else n_outputs
        outs = list(outputs) if outputs is not None else [Variable(()) for _ in range(n)]
        self.setup_impl(variables, outs)
        need_grad = (not _state["no_grad"]) and any(v._need_grad for v in variables)
        for v in outs:
            v._parent = node
            v._rank = node.rank + 1
            v._need_grad = need_grad
        node._outputs = [weakref.ref(v) for v in outs]
        node.output_shapes = [v.shape for v in outs]
        for v in variables:
            v._add_reference(node)
        self._node = node
        if auto_forward or _state["auto_forward"]:
            graph.run_node_forward(node)
        return outs[0] if len(outs) == 1 else tuple(outs)
