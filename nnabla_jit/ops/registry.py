"""The op registry: one entry per nnabla function, the source of truth for everything else.

nnabla describes its functions in one table (``tables/functions.tsv``: category, name, inputs,
arguments with types and defaults, outputs; the project adds a description, the source of
``F``'s docstrings). An op here is a subclass of :class:`Op` registered under a table name
with :func:`register`; it supplies the behaviour the table cannot:

- ``setup(*input_shapes)`` -> output shapes, raising :class:`ValueError` (via :meth:`Op.fail`)
  that names the op, the argument and the shapes when the inputs do not fit;
- ``forward(inputs, outputs)``: runs ``@njit`` kernels that write into the output arrays the
  executor owns;
- ``backward(inputs, outputs, output_grads, input_grads, propagate_down, accum)``: first-order
  kernels that overwrite (``accum[i]`` False) or add into (True) ``input_grads[i]``;
- ``grad_depends_input_data(i, j)`` / ``grad_depends_output_data(i, o)``: what backward reads.

The grad rules ``nn.grad`` uses (built from ``F`` ops, nnabla's signature
``fn(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args)``, where ``grad_inputs``
are the gradients of the function's outputs, the inputs of the gradient) live above ``F`` in
``backward_function/`` and are filed here by op name (:data:`GRAD_RULES`, :func:`grad_rule`),
so the executor and ``nn.grad`` find them without importing upward.

``F.<snake_name>``, ``show_registry()``, ``function_info``, the ONNX mapping and the tests are
all derived from the registered entries.
"""
import csv
import functools
import os
import re
from collections import OrderedDict

import numpy as np

__all__ = ["Op", "register", "REGISTRY", "TABLE", "FunctionSpec", "ArgSpec", "InputSpec", "NoGradient",
           "GRAD_RULES", "grad_rule"]

_TABLE_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "tables", "functions.tsv")


class InputSpec:
    __slots__ = ("name", "optional", "variadic", "param")

    def __init__(self, text):
        text = text.strip()
        self.param = text.endswith("[param]")
        text = text.replace("[param]", "")
        self.variadic = text.startswith("*")
        self.optional = text.endswith("?")
        self.name = text.strip("*?")

    def __repr__(self):
        return "{}{}{}".format("*" if self.variadic else "", self.name, "?" if self.optional else "")


class ArgSpec:
    """An argument: ``name:type=default{choice|choice}`` in the table."""
    __slots__ = ("name", "type", "default", "choices")

    _PATTERN = re.compile(r"^(\w+):([\w ]+?)(?:=(.*?))?(?:\{(.*)\})?$")

    def __init__(self, text):
        m = self._PATTERN.match(text.strip())
        if not m:
            raise ValueError("functions.tsv: cannot parse argument {!r}".format(text))
        self.name, self.type, default, choices = m.groups()
        self.default = default  # a Python expression over the inputs and earlier arguments
        self.choices = choices.split("|") if choices else None

    @property
    def required(self):
        return self.default is None

    def __repr__(self):
        return "{}:{}{}".format(self.name, self.type, "" if self.default is None else "=" + self.default)


def _split_args(text):
    """Split the arguments column on commas that are not inside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


class FunctionSpec:
    """One row of nnabla's functions table."""

    def __init__(self, row):
        self.category = row["category"]
        self.name = row["name"]
        self.snake_name = row["snake_name"]
        self.inputs = [InputSpec(t) for t in row["inputs"].split(",") if t.strip()]
        self.args = [ArgSpec(t) for t in _split_args(row["arguments"])]
        self.outputs = [t.strip() for t in row["outputs"].split(",") if t.strip()]
        # what the function computes, per argument, what it returns, an example: the source
        # of F's docstrings (function_bases_source.py reads it)
        self.description = (row.get("description") or "").strip()

    @property
    def variadic_outputs(self):
        return any(o.startswith("*") for o in self.outputs)

    def __repr__(self):
        return "FunctionSpec({}: {} -> {})".format(self.name, self.inputs, self.outputs)


def _load_table():
    with open(_TABLE_PATH, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return OrderedDict((r["name"], FunctionSpec(r)) for r in rows)


TABLE = _load_table()
REGISTRY = OrderedDict()   # type name -> Op subclass
GRAD_RULES = OrderedDict()  # type name -> grad rule (filled by nnabla_jit.backward_function)


class OpValueError(ValueError, RuntimeError):
    """Bad input to an op. A ValueError, and a RuntimeError too: nnabla reports its ops' setup
    errors ("value error in setup_impl") as RuntimeError, and programs catch that."""


class NoGradient(NotImplementedError):
    """Raised when differentiating through an op that has no gradient."""


# ---------------------------------------------------------------------------------- arguments
def _coerce(op_name, spec, value):
    """Convert an argument to the type the table declares; reject what cannot be converted."""
    t = spec.type
    try:
        if t in ("Shape", "repeated int64"):
            if value is None:
                return None
            if isinstance(value, (int, np.integer)):
                return (int(value),)
            return tuple(int(v) for v in value)
        if t == "repeated float":
            if isinstance(value, (int, float, np.number)):
                return (float(value),)
            return tuple(float(v) for v in value)
        if t in ("float", "double"):
            return float(value)
        if t == "int64":
            # a float is truncated toward zero, as nnabla's int64 arguments take it (2.7 -> 2)
            return None if value is None else int(value)
        if t == "bool":
            return bool(value)
        if t == "string":
            value = str(value)
            if spec.choices and value not in spec.choices:
                raise _NotAChoice("must be one of {}".format(spec.choices))
            return value
    except (TypeError, ValueError, OverflowError) as e:   # OverflowError: int(float("inf"))
        # a string outside its choices is refused by nnabla's setup: a RuntimeError there
        error = OpValueError if isinstance(e, _NotAChoice) else ValueError
        raise error("{}: argument '{}' = {!r} is not a valid {} ({})".format(
            op_name, spec.name, value, t, e)) from None
    return value


class _NotAChoice(ValueError):
    pass


class _ShapeOnly:
    """Stands for an input when the table's default expressions are evaluated (``x.shape``...)."""

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(shape)


def resolve_args(spec, input_shapes_by_name, given):
    """Fill in defaults (the table's expressions) and coerce every argument of ``spec``."""
    scope = {"range": range, "len": len, "tuple": tuple, "list": list, "world": "world"}
    for name, shapes in input_shapes_by_name.items():
        scope[name] = [_ShapeOnly(s) for s in shapes] if isinstance(shapes, list) else _ShapeOnly(shapes)
    resolved = OrderedDict()
    for a in spec.args:
        value = given.get(a.name)
        if value is None and a.default is not None and a.default != "None":
            try:
                value = eval(a.default, scope)  # the table's own expressions, e.g. range(x.ndim)
            except Exception:
                value = None
        if value is None and a.required and a.type not in ("Communicator",):
            raise TypeError("{}: missing required argument '{}'".format(spec.snake_name, a.name))
        value = _coerce(spec.snake_name, a, value)
        if isinstance(value, range):
            value = tuple(value)
        resolved[a.name] = value
        scope[a.name] = value
    return resolved


# ---------------------------------------------------------------------------------- the op
class Op:
    """Base class of registered ops. An instance holds one node's arguments (as attributes and
    in ``args``) and whatever ``setup`` derives from the input shapes."""

    name = None            # nnabla's type name, e.g. "Convolution"
    spec = None            # the FunctionSpec row (None for internal helper ops)
    keep_input_dtypes = ()  # inputs passed to kernels as stored (int labels, indices, masks)
    output_dtype = None    # None: the context's compute type; else a numpy dtype for all outputs
    no_grad_inputs = ()    # inputs that never receive a gradient (labels, indices, shapes)
    refused_grad_inputs = ()  # those of them that backward refuses to propagate to (raises), as
                              # nnabla does (cross-entropy labels, quantization scales); the
                              # others get a zero gradient where backward overwrites
    python_level = False   # True for PythonFunction adapters: forward/backward take Variables
    data_dependent = False  # True if output shapes/dtypes follow input values (output_specs)
    n_outputs = -1         # the output count the caller asked for (-1: the op's own); see build
    recomputing = False    # True while forward is run again for recomputation: ops skip their
                           # state updates (running statistics), which the first run made

    def __init__(self, input_names=(), **args):
        self.input_names = tuple(input_names)
        self.args = args
        for k, v in args.items():
            setattr(self, k, v)

    # --- shape inference -------------------------------------------------------------
    def setup(self, *input_shapes):
        """Return the list of output shapes (default: one output shaped like input 0)."""
        return [input_shapes[0]]

    def fail(self, message, *fmt):
        """Raise the OpValueError every bad input gets: it starts with the op's name."""
        raise OpValueError("{}: {}".format(self.name, message.format(*fmt) if fmt else message))

    def has_input(self, name):
        return name in self.input_names

    def input_index(self, name):
        return self.input_names.index(name)

    def output_dtypes(self, compute_dtype, n_outputs):
        """The dtype of each output buffer (the compute type unless the op says otherwise)."""
        return [self.output_dtype or compute_dtype] * n_outputs

    # --- kernels -----------------------------------------------------------------------
    # Every op defines ``forward(inputs, outputs)`` (arrays in, preallocated arrays written),
    # and a ``data_dependent`` op defines ``output_specs(inputs)``: the ``(shape, dtype)`` of
    # each output from the input arrays (NonZero, Unique, BoolGather count elements; Mod2 and
    # BitShift keep x0's type). The executor calls ``output_specs`` before allocating the
    # outputs of every forward, as nnabla resets such shapes in forward, and when the graph is
    # built, with None for inputs that hold no data yet (it returns None if the shapes need
    # those; ``setup``'s shapes are kept). No default stands in for either, as one could only
    # raise: tests/ops/test_argument_checks_b.py checks that every registered op defines them.

    def backward(self, inputs, outputs, output_grads, input_grads, propagate_down, accum):
        raise NoGradient("{}: this function has no backward".format(self.name))

    def grad_depends_input_data(self, i, j):
        return True

    def grad_depends_output_data(self, i, o):
        return False

    @classmethod
    def has_backward(cls):
        return cls.backward is not Op.backward

    # Metrics whose backward nnabla passes over, giving their inputs no gradient, so that
    # F.sink(loss, error).backward() trains; other ops without a gradient raise, as there.
    PASSES_NO_GRADIENT = frozenset(("TopNError", "BinaryError", "ConfusionMatrix",
                                    "ONNXNonMaxSuppression"))

    @classmethod
    def refuses_grad(cls, i):
        """Whether back-propagating to input ``i`` raises, as in nnabla: every input of an op
        without backward (but the metrics nnabla passes over), and the refused inputs."""
        if not cls.has_backward() and not cls.python_level:
            return cls.name not in cls.PASSES_NO_GRADIENT
        return i in cls.refused_grad_inputs

    def forget_forward(self):
        """Drop what the last forward kept for the next backward (Convolution's col), before a
        backward no forward of this op came before (``ops/adjoint.py`` runs its source op's
        backward alone)."""

    # --- nnabla's Function API answers (``Function`` nodes delegate here) ---------------
    def need_setup_recompute(self, o):
        """Whether recomputing output ``o`` needs the state saved by ``setup_recompute``: true
        for the ops that draw random numbers (all of them, and only them, take a ``seed``)."""
        return "seed" in self.args

    def inplace_data(self, i):
        """nnabla's in-place kind of input ``i``'s data: 0 (not in place). Reshape(inplace=True)
        answers 1 (shares the buffer, read only)."""
        return 0

    # nnabla 1.39 dropped the in-place variants of these; asked, they raise.
    _INPLACE_DROPPED = frozenset(("ReLU", "LeakyReLU", "Add2", "RandomErase"))

    def inplace_data_with(self, i):
        """The output input ``i`` would share its data with (0); only the ops that take an
        ``inplace`` argument answer, the others raise as in nnabla."""
        if self.spec is None or self.name in self._INPLACE_DROPPED or not any(
                a.name == "inplace" for a in self.spec.args):
            raise RuntimeError("{}: not_implemented error in inplace_data_with (this function has "
                               "no in-place support)".format(self.name))
        return 0

    # Ops whose later outputs are optional (nnabla's min_outputs is 1 for them).
    _OPTIONAL_OUTPUTS = frozenset(("Sort", "TopKData", "Unique"))

    def min_outputs(self, n_outputs):
        """The least number of outputs the function produces, given ``n_outputs`` built."""
        if self.spec is None or self.name in self._OPTIONAL_OUTPUTS:
            return 1
        if self.spec.variadic_outputs:
            return n_outputs
        return max(1, len(self.spec.outputs))

    def __repr__(self):
        return "{}({})".format(self.name, ", ".join("{}={!r}".format(k, v) for k, v in self.args.items()))


def _checked_setup(setup):
    """``setup`` whose every failure is a ValueError or TypeError naming the op.

    Ops check their arguments and shapes themselves (``Op.fail``); this is the net below those
    checks: an IndexError, ZeroDivisionError, ... from a combination no check foresaw, or a
    numpy error that names nothing, becomes one line with the op, the input shapes and the
    arguments, and an output shape with a negative dimension is refused here, not when a buffer
    is allocated. A ValueError becomes an OpValueError (a RuntimeError too, as nnabla's)."""
    @functools.wraps(setup)
    def checked(self, *shapes):
        try:
            out = setup(self, *shapes)
        except OpValueError:
            raise
        except (ValueError, TypeError) as e:
            named = bool(self.name) and self.name.lower() in str(e).lower()
            if named and isinstance(e, TypeError):
                raise
            raise (OpValueError if isinstance(e, ValueError) else type(e))(
                str(e) if named else "{}: {} (inputs of shapes {}, arguments {})".format(
                    self.name, e, ", ".join(str(tuple(x)) for x in shapes), self.args)) from e
        except (IndexError, KeyError, ZeroDivisionError, OverflowError, AttributeError) as e:
            raise OpValueError("{}: inputs of shapes {} and arguments {} do not fit together ({}: "
                             "{})".format(self.name, ", ".join(str(tuple(x)) for x in shapes),
                                          self.args, type(e).__name__, e)) from e
        for shape in out or ():
            if any(d < 0 for d in shape):
                self.fail("arguments {} give the output shape {}, which has a negative dimension "
                          "(inputs of shapes {})", self.args, tuple(shape),
                          ", ".join(str(tuple(x)) for x in shapes))
        return out
    checked.checked_setup = True
    return checked


def register(cls=None, *, name=None):
    """Class decorator: register ``cls`` under its table name (the class name by default)."""
    def deco(c):
        c.name = name or c.__dict__.get("name") or c.__name__
        c.spec = TABLE.get(c.name)
        if not getattr(c.setup, "checked_setup", False):
            c.setup = _checked_setup(c.setup)
        REGISTRY[c.name] = c
        return c
    return deco(cls) if cls is not None else deco


def grad_rule(*names):
    """Decorator: file a grad rule (nnabla's signature) under the op type names it serves."""
    def deco(fn):
        for n in names:
            GRAD_RULES[n] = fn
        return fn
    return deco


def accumulate(dst, value, accum):
    """Write ``value`` into ``dst`` (accum False) or add it (accum True)."""
    if accum:
        dst += value
    else:
        dst[...] = value
