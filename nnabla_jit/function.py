"""Function nodes of the graph, graph building, and user-defined ``PythonFunction``s.

``F.tanh(x)`` creates a :class:`Function` node that holds an op instance (``ops/``), its input
Variables and (weakly, as in nnabla) its outputs, and returns the output Variables. The executor
in ``graph.py`` runs nodes; this module only builds them.
"""
import copy
import weakref
from contextlib import contextmanager

import numpy as np

from . import graph, runners
from .context import context_scope, get_current_context
from .ndarray import NdArray
from .ops.registry import REGISTRY, NoGradient, Op, OpValueError, resolve_args
from .random_replay import replayed_random_state, save_random_state
from .thread_state import ThreadSettings
from .variable import Variable

__all__ = ["Function", "FunctionInfo", "PythonFunction", "auto_forward", "set_auto_forward",
           "get_auto_forward", "no_grad"]

# Per thread (see thread_state.py); set_auto_forward from the main thread sets every thread's.
_state = ThreadSettings({"auto_forward": False, "no_grad": False})


def get_auto_forward():
    return _state["auto_forward"]


def set_auto_forward(auto):
    """Run every function as soon as it is built (dynamic graph), or not."""
    _state.set("auto_forward", bool(auto))


@contextmanager
def auto_forward(auto=True):
    """``with nn.auto_forward():`` builds and runs the graph at once (dynamic mode), in this
    thread."""
    with _state.scoped("auto_forward", bool(auto)):
        yield


def get_no_grad():
    """Whether variables built now get need_grad=False (inside ``no_grad``)."""
    return _state["no_grad"]


@contextmanager
def no_grad(no_grad_=True):
    """``with nn.no_grad():`` builds variables with need_grad=False (inference graphs), in this
    thread."""
    with _state.scoped("no_grad", bool(no_grad_)):
        yield



def _input_name(op, i):
    """Input ``i`` of ``op`` as messages name it: its position and table name."""
    names = op.input_names
    return "{} ({})".format(i, names[i]) if i < len(names) else str(i)

class FunctionInfo:
    """``function.info``: the type name, the arguments and the tags of a function (nnabla's
    ``nnabla.function.Info``)."""
    __slots__ = ("type_name", "args", "tags")

    def __init__(self, type_name, args, tags=None):
        self.type_name = type_name
        self.args = args
        self.tags = {} if tags is None else tags

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

    def set_active_input_mask(self, mask):
        """Use only the inputs whose entry of ``mask`` is true, in forward and backward (the
        others' gradients are left untouched); nnabla allows it for AddN and MulN only."""
        if not getattr(self.op, "allows_input_mask", False):
            raise OpValueError("{}.set_active_input_mask: {} does not allow to deactivate inputs"
                               .format(self.op.name, self.op.name))
        mask = [bool(m) for m in mask]
        if len(mask) != len(self.inputs):
            raise OpValueError("{}.set_active_input_mask: the mask has {} entries, the function {} "
                               "inputs".format(self.op.name, len(mask), len(self.inputs)))
        self.op.active_input_mask = tuple(mask)

    @property
    def arguments(self):
        """The arguments as nnabla gives them (``Function.arguments``): shapes as lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.op.args.items()}

    @property
    def tags(self):
        """nnabla's (experimental) function tags: none are set on built-in functions."""
        return {}

    @property
    def context(self):
        return self.ctx

    def min_outputs(self):
        return self.op.min_outputs(len(self._outputs))

    def inplace_data(self, i):
        return self.op.inplace_data(i)

    def inplace_data_with(self, i):
        return self.op.inplace_data_with(i)

    def need_setup_recompute(self, o):
        return self.op.need_setup_recompute(o)

    def setup(self, inputs, outputs):
        """Infer the output shapes from ``inputs`` (lists of Variables) and reset ``outputs``
        to them, as nnabla's ``Function.setup``."""
        node = self._bind("setup", inputs, outputs)
        op = self.op
        if op.python_level:
            op.pyfunc.setup_impl(node.inputs, node.outputs)
        else:
            shapes = op.setup(*[v.shape for v in node.inputs])
            if op.data_dependent:
                shapes = runners.data_dependent_shapes(op, node.inputs, self.compute_dtype) or shapes
            _fit_outputs(op.name + ".setup", node.outputs, shapes)
        node.output_shapes = [v.shape for v in node.outputs]

    def forward(self, inputs, outputs):
        """Run this function's forward on ``inputs``, writing ``outputs`` (lists of Variables
        set up for it), as nnabla's ``Function.forward``."""
        graph.run_node_forward(self._bind("forward", inputs, outputs))

    def backward(self, inputs, outputs, accum=None):
        """Back-propagate the grads of ``outputs`` into the grads of ``inputs`` that have
        need_grad; ``accum[i]`` False overwrites input i's grad, True (the default) adds to it."""
        node = self._bind("backward", inputs, outputs)
        n = len(node.inputs)
        if accum is None:
            accum = [True] * n
        accum = [bool(a) for a in accum]
        if len(accum) != n:
            raise ValueError("{}.backward: accum has {} entries for {} inputs".format(
                self.op.name, len(accum), n))
        op = self.op
        wanted = [v._need_grad for v in node.inputs]
        refused = [i for i in range(n) if wanted[i] and op.refuses_grad(i)]
        if (refused and getattr(op, "line", None) is not None
                and all(0 in tuple(o.shape) for o in node.outputs if o is not None)):
            return   # nnabla's elementwise functions return on empty arrays before refusing
        if refused:
            raise NoGradient("{}.backward: no gradient for input {} (need_grad is True), as in "
                             "nnabla".format(op.name, _input_name(op, refused[0])))
        no_grad = op.no_grad_inputs
        if op.name in op.PASSES_NO_GRADIENT:
            no_grad = range(n)
        for i in no_grad:   # nnabla writes a zero gradient where it overwrites
            if i < n and wanted[i] and not accum[i]:
                node.inputs[i].grad.zero()
        pd = [wanted[i] and i not in no_grad for i in range(n)]
        if not any(pd):
            return
        step = graph._BackwardStep()
        step.node = node
        step.propagate_down = pd
        step.accum = [a and p for a, p in zip(accum, pd)]
        step.alias, seen = [], set()
        for i, v in enumerate(node.inputs):   # an input given twice: the second one adds
            step.alias.append(pd[i] and id(v._body) in seen)
            if pd[i]:
                seen.add(id(v._body))
        step.zero_outputs = [False] * len(node._outputs)
        step.needs_input = [True] * n
        step.free_grads, step.free_data = [], []
        graph.run_node_backward(step)

    def setup_recompute(self, inputs, outputs):
        """Save what ``recompute`` needs to reproduce this forward: the state of the random
        generators the function draws from."""
        self._bind("setup_recompute", inputs, outputs)
        save_random_state(self.op)

    def recompute(self, inputs, outputs):
        """Run the forward again, reproducing the random draws of the forward that followed
        ``setup_recompute``."""
        node = self._bind("recompute", inputs, outputs)
        with replayed_random_state(self.op):
            graph.run_node_forward(node)

    def _bind(self, what, inputs, outputs):
        """This node when ``inputs``/``outputs`` are its own variables, else a node of the same
        op over the given ones (nnabla's Function API takes any set-up variables)."""
        if isinstance(inputs, Variable) or isinstance(outputs, Variable):
            raise TypeError("{}.{}: inputs and outputs are lists of Variables".format(self.op.name, what))
        inputs, outputs = list(inputs), list(outputs)
        for kind, vs in (("inputs", inputs), ("outputs", outputs)):
            for k, v in enumerate(vs):
                if not isinstance(v, Variable):
                    raise TypeError("{}.{}: {}[{}] is a {}, not a Variable".format(
                        self.op.name, what, kind, k, type(v).__name__))
        if len(inputs) != len(self.inputs):
            raise ValueError("{}.{}: {} inputs given, the function takes {}".format(
                self.op.name, what, len(inputs), len(self.inputs)))
        if len(outputs) != len(self._outputs):
            raise ValueError("{}.{}: {} outputs given, the function has {}".format(
                self.op.name, what, len(outputs), len(self._outputs)))
        if (all(a is b for a, b in zip(inputs, self.inputs))
                and all(r() is v for r, v in zip(self._outputs, outputs))):
            return self
        node = Function(self.op, inputs, self.ctx)
        node._outputs = [weakref.ref(v) for v in outputs]
        node.output_shapes = [v.shape for v in outputs]
        return node

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


def _fit_outputs(what, outputs, shapes):
    """Reshape the caller's ``outputs`` (Variables) to ``shapes``, one each."""
    if len(outputs) != len(shapes):
        raise ValueError("{}: {} output variables given, {} expected".format(
            what, len(outputs), len(shapes)))
    for v, shape in zip(outputs, shapes):
        if v.shape != tuple(shape):
            v.reset_shape(shape, force=True)


def _link(node, inputs, outputs):
    """Wire ``node`` into the graph: its ``outputs`` (shaped already) get it as parent and need
    a gradient when an input does (unless under no_grad); its ``inputs`` reference it."""
    need_grad = (not _state["no_grad"]) and any(v._need_grad for v in inputs)
    for v in outputs:
        v._parent = node
        v._rank = node.rank + 1
        v._need_grad = need_grad
    node._outputs = [weakref.ref(v) for v in outputs]
    node.output_shapes = [v.shape for v in outputs]
    for v in inputs:
        v._add_reference(node)


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
    if n_outputs != op.n_outputs:   # the caller chooses the output count (output_stat)
        op = copy.copy(op)          # on a copy: the op given keeps its own
        op.n_outputs = n_outputs
    out_shapes = op.setup(*[v.shape for v in variables])
    ctx = get_current_context()
    if op.data_dependent:
        out_shapes = runners.data_dependent_shapes(op, variables, ctx.compute_dtype) or out_shapes
    node = Function(op, variables, ctx)
    if outputs is not None:
        # an NdArray given as an output is the data of the new output variable (nnabla's
        # ``F.add2(a, b, inplace=True, outputs=[a.data])`` writes into a's buffer)
        outs = [Variable._from_ndarray(v) if isinstance(v, NdArray) else v for v in outputs]
        _fit_outputs(op.name, outs, out_shapes)
    else:
        outs = [Variable(shape) for shape in out_shapes]
    _link(node, variables, outs)
    if imperative or _state["auto_forward"]:
        graph.run_node_forward(node)
    if imperative:
        result = [v._body.data for v in outs]
    else:
        result = outs
    if len(result) == 1 and not (op.spec is not None and op.spec.variadic_outputs):
        return result[0]
    return tuple(result)


# What is a registered parameter is known above this module (parameter.py registers its
# answer here): a function returning the ids of the registered parameters' bodies.
_registered_parameters = [lambda: frozenset()]


def register_parameter_ids(ids_of_parameters):
    """parameter.py: how copy_network learns which leaves are registered parameters."""
    _registered_parameters[0] = ids_of_parameters


def copy_network(root):
    """nnabla's ``Variable.no_grad()``: the graph upstream of ``root`` built again from fresh
    functions (same arguments and contexts) on new leaves that share the old leaves' data;
    returns the copy of ``root``. As in nnabla 1.39, the copies of registered parameters have
    need_grad False, other leaves keep theirs, and the functions' outputs follow their inputs."""
    parameters = _registered_parameters[0]()

    def leaf_copy(v):
        need_grad = False if id(v._body) in parameters else v._need_grad
        return Variable._from_ndarray(v._body.data, need_grad=need_grad)

    if root._parent is None:
        return leaf_copy(root)
    copies = {}   # id(old variable) -> its copy
    for node in graph.upstream_functions([root]):
        op = node.op
        if op.python_level or op.spec is None:
            raise NotImplementedError("no_grad: cannot copy the {} node (a PythonFunction or an internal "
                                      "op)".format(op.name))
        inputs = []
        for v in node.inputs:
            if id(v) not in copies:
                copies[id(v)] = leaf_copy(v)
            inputs.append(copies[id(v)])
        with context_scope(node.ctx):
            outs = build(type(op)(input_names=op.input_names, **op.args), inputs, op.n_outputs)
        for r, new in zip(node._outputs, outs if isinstance(outs, tuple) else (outs,)):
            if r() is not None:
                copies[id(r())] = new
    return copies[id(root)]


# ------------------------------------------------------------------------ PythonFunction
class _PythonOp(Op):
    """Adapter that lets the executor run a user's PythonFunction like a registered op."""

    python_level = True

    def __init__(self, pyfunc):
        super().__init__()
        self.pyfunc = pyfunc
        self.name = pyfunc.name
        self.args = dict(pyfunc.args)   # what node.info.args (and a grad rule) sees

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
        _link(node, variables, outs)
        self._node = node
        if auto_forward or _state["auto_forward"]:
            graph.run_node_forward(node)
        return outs[0] if len(outs) == 1 else tuple(outs)


# ------------------------------------------------------ nnabla's per-type function classes
class FunctionFactory:
    """An unbound function of one type, as nnabla's ``nnabla.function.<Type>(ctx, **args)``:
    calling it on input Variables builds the node in ``ctx`` and returns its outputs
    (``F.<snake_name>`` does the same in one step)."""

    op_class = None   # the registered op, set on each per-type subclass

    def __init__(self, ctx, **args):
        spec = self.op_class.spec
        known = {a.name for a in spec.args}
        unknown = sorted(set(args) - known)
        if unknown:
            raise TypeError("{}: unknown argument(s) {}; it takes {}".format(
                spec.name, ", ".join(unknown), ", ".join(sorted(known)) or "none"))
        self.ctx = ctx
        self.args = args

    @property
    def name(self):
        return self.op_class.spec.name

    def __call__(self, *inputs, n_outputs=-1, auto_forward=False, outputs=None):
        spec = self.op_class.spec
        names = _input_names(spec, len(inputs))
        shapes = {}
        for n, x in zip(names, inputs):
            if _spec_input(spec, n).variadic:
                shapes.setdefault(n, []).append(x.shape)
            else:
                shapes[n] = x.shape
        op = self.op_class(input_names=names, **resolve_args(spec, shapes, self.args))
        with context_scope(self.ctx), _state.scoped("auto_forward",
                                                    bool(auto_forward or _state["auto_forward"])):
            return build(op, list(inputs), n_outputs, outputs)


def _spec_input(spec, name):
    return next(i for i in spec.inputs if i.name == name)


def _input_names(spec, count):
    """The table's names of ``count`` inputs given in order: a variadic input takes all that
    remain; optional inputs left out are the last ones."""
    names = []
    for i in spec.inputs:
        if i.variadic:
            names.extend([i.name] * (count - len(names)))
            break
        names.append(i.name)
    required = sum(1 for i in spec.inputs if not i.optional and not i.variadic)
    if count < required or (count > len(names)):
        raise TypeError("{}: {} inputs given; it takes {}".format(
            spec.name, count, ", ".join(repr(i) for i in spec.inputs)))
    return names[:count]


_function_classes = {}


def __getattr__(name):
    """``nnabla_jit.function.Convolution`` etc.: a FunctionFactory subclass per registered op
    type (made on first use: the ops register themselves after this module is imported)."""
    op_class = REGISTRY.get(name)
    if op_class is None or getattr(op_class, "spec", None) is None:
        raise AttributeError("module 'nnabla_jit.function' has no attribute {!r}".format(name))
    cls = _function_classes.get(name)
    if cls is None:
        cls = _function_classes[name] = type(name, (FunctionFactory,), {
            "op_class": op_class, "__doc__": "nnabla's ``{}`` function class.".format(name)})
    return cls
