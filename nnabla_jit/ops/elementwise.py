"""Elementwise ops: one table line each, kernels generated from the line.

An elementwise op is declared with its forward expression and one derivative expression per
input, in a small Python-syntax language over scalars::

    elementwise("Tanh", "tanh(x)", dx="dy * (1 - y * y)")
    elementwise("Mul2", "x0 * x1", dx0="dy * x1", dx1="dy * x0")

Names: the inputs (``x`` for one input, ``x0, x1, ...`` otherwise), ``y`` the output, ``dy`` its
gradient, the op's arguments from nnabla's table (``val``, ``alpha``, ...), and the functions of
:data:`SCALAR_FUNCTIONS`. ``where(c, a, b)`` is the only conditional.

From that one line come:

* the CPU kernels: plain ``@njit`` loops rendered from :data:`_FORWARD` and :data:`_BACKWARD`
  into a generated module per op, made when a network first uses the op (written once to the
  kernel cache directory so numba can cache the compiled code on disk; one module of all 90 ops
  cost a first training step 0.3 s to render and load, for the one or two it used):
  a flat loop for same-shaped operands, a 4-d strided loop for NumPy broadcasting, a ``prange``
  variant for large arrays, and the backward loops honouring ``accum``;
* the grad-depends flags (does a derivative mention an input or ``y``?);
* the differentiable grad rule for ``nn.grad`` (made in ``backward_function/elementwise.py``):
  the derivative expressions evaluated over Variables, so ``dy * (1 - y * y)`` becomes a graph
  of F ops that can be differentiated again.
"""
import ast

import numpy as np

from ..deferred_compile import load_generated
from . import scalar_math
from .common import sum_to_shape
from .kernels import uses_parallel
from .registry import TABLE, Op, register

__all__ = ["elementwise", "SCALAR_FUNCTIONS", "generated_kernel"]

# Scalar functions an expression may call: the names of scalar_math's table, which also gives
# the kernels' imports (CPU and CUDA) and the F op grad rules use for each (see _grad_namespace).
SCALAR_FUNCTIONS = scalar_math.NAMES
prelude = scalar_math.kernel_prelude   # the imports of a generated kernel module (also fusion's)


class _TypedLiterals(ast.NodeTransformer):
    """Number literals become ``like(c, ref)``: float32 kernels then stay in float32."""

    def __init__(self, ref):
        self.ref = ref

    def visit_Constant(self, node):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return ast.copy_location(ast.Call(func=ast.Name(id="like", ctx=ast.Load()),
                                              args=[node, ast.Name(id=self.ref, ctx=ast.Load())],
                                              keywords=[]), node)
        return node


def kernel_expression(expr, names):
    """``expr`` as kernel source: literals typed like the first of ``names`` it uses."""
    used = names_in(expr)
    ref = next((n for n in names if n in used), None)
    if ref is None:
        return expr
    return ast.unparse(_TypedLiterals(ref).visit(ast.parse(expr, mode="eval")))


# One op's kernels. {name}: python identifier; {ins}: input array params; {args}: scalar params;
# {flat}: views of the (C-contiguous, any-dimensional) arrays as 1-d; {load}: statements loading
# the scalars an expression needs; {expr}: the expression.
_FORWARD = '''

@njit(cache=True, error_model="numpy")
def {name}_forward({ins}, y_{args}):
{flat}    for i in range(y_.size):
{load1}        y_[i] = {expr}


@njit(cache=True, parallel=True, error_model="numpy")
def {name}_forward_parallel({ins}, y_{args}):
{flat}    for i in prange(y_.size):
{load1}        y_[i] = {expr}


@njit(cache=True, error_model="numpy")
def {name}_forward_nd({ins}, y_{args}):
    for a in range(y_.shape[0]):
        for b in range(y_.shape[1]):
            for c in range(y_.shape[2]):
                for d in range(y_.shape[3]):
{load4}                    y_[a, b, c, d] = {expr}
'''

_BACKWARD = '''

@njit(cache=True, error_model="numpy")
def {name}_backward_{k}({ins}, y_, dy_, dx_, accum{args}):
{flat}    if accum:
        for i in range(dy_.size):
{load1}            dx_[i] += {expr}
    else:
        for i in range(dy_.size):
{load1}            dx_[i] = {expr}


@njit(cache=True, parallel=True, error_model="numpy")
def {name}_backward_{k}_parallel({ins}, y_, dy_, dx_, accum{args}):
{flat}    if accum:
        for i in prange(dy_.size):
{load1}            dx_[i] += {expr}
    else:
        for i in prange(dy_.size):
{load1}            dx_[i] = {expr}


@njit(cache=True, error_model="numpy")
def {name}_backward_{k}_nd({ins}, y_, dy_, dx_{args}):
    # dx_ may be a broadcast (zero-stride) view: += then sums over the broadcast axes.
    for a in range(dy_.shape[0]):
        for b in range(dy_.shape[1]):
            for c in range(dy_.shape[2]):
                for d in range(dy_.shape[3]):
{load4}                    dx_[a, b, c, d] += {expr}
'''


def names_in(expr):
    return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


class _Line:
    """One table line: the parsed expressions of an elementwise op."""

    def __init__(self, name, forward, derivatives, input_names, arg_names, baked_args=()):
        self.name = name
        # arguments fused kernels take as literals: a constant exponent lets LLVM fold
        # power(x, 2.0) into x * x and keep the loop vectorised
        self.baked_args = tuple(baked_args)
        self.ident = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
        self.forward = forward
        self.derivatives = derivatives          # list, one per input (None: no gradient)
        self.input_names = input_names          # expression names of the inputs
        self.arg_names = arg_names
        # what the kernels compute: the same expressions with typed literals
        self.kernel_forward = kernel_expression(forward, input_names)
        self.kernel_derivatives = [None if d is None else kernel_expression(d, input_names + ["y", "dy"])
                                   for d in derivatives]
        self.module = None   # the generated kernels, made on first use (kernels())

    def _loads(self, expr, indent, index, with_grad):
        used = names_in(expr)
        names = list(self.input_names) + (["y", "dy"] if with_grad else [])
        return "".join("{}{} = {}_[{}]\n".format(" " * indent, n, n, index) for n in names if n in used)

    @staticmethod
    def _flatten(names):
        return "".join("    {0} = {0}.reshape({0}.size)\n".format(n) for n in names)

    def source(self):
        arrays = [n + "_" for n in self.input_names]
        ins = ", ".join(arrays)
        args = "".join(", " + a for a in self.arg_names)
        parts = [_FORWARD.format(name=self.ident, ins=ins, args=args, expr=self.kernel_forward,
                                 flat=self._flatten(arrays + ["y_"]),
                                 load1=self._loads(self.forward, 8, "i", False),
                                 load4=self._loads(self.forward, 20, "a, b, c, d", False))]
        for k, d in enumerate(self.kernel_derivatives):
            if d is None:
                continue
            parts.append(_BACKWARD.format(name=self.ident, k=k, ins=ins, args=args, expr=d,
                                          flat=self._flatten(arrays + ["y_", "dy_", "dx_"]),
                                          load1=self._loads(d, 12, "i", True),
                                          load4=self._loads(d, 20, "a, b, c, d", True)))
        return "".join(parts)

    def kernel_names(self):
        """The names of the functions source() defines."""
        names = [self.ident + "_forward" + v for v in ("", "_parallel", "_nd")]
        for k, d in enumerate(self.kernel_derivatives):
            if d is not None:
                names += ["{}_backward_{}{}".format(self.ident, k, v) for v in ("", "_parallel", "_nd")]
        return names

    def kernels(self):
        """The module of this op's kernels (rendered and imported on first use)."""
        if self.module is None:
            self.module = load_generated("nnabla_jit_elementwise_{}_".format(self.ident),
                                         prelude() + self.source())
        return self.module


LINES = []


def declared_lines():
    """Every declared line, in declaration order (the grad rules are made from them)."""
    return list(LINES)


def generated_kernel(name):
    """The generated kernel called ``name`` (e.g. ``re_l_u_forward``), whichever op's it is: how
    the compile worker finds the kernels of the manifest (deferred_compile.py)."""
    for line in LINES:
        if name in line.kernel_names():
            return getattr(line.kernels(), name)
    raise KeyError("no elementwise kernel is called {!r}".format(name))


# ------------------------------------------------------------------------------ shapes
def typed_scalars(values, dtype):
    """Float arguments as ``dtype`` scalars (bools and ints pass unchanged)."""
    return tuple(dtype.type(v) if isinstance(v, float) else v for v in values)


def broadcast_shape(op, shapes):
    """NumPy broadcasting of the input shapes (nnabla's between arrays of one rank; it refuses
    different ranks, which broadcast here), or none at all for ops with ``broadcasts`` False."""
    if not getattr(op, "broadcasts", True) and len({tuple(s) for s in shapes}) > 1:
        op.fail("inputs of shapes {} must have the same shape", ", ".join(str(tuple(s)) for s in shapes))
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        op.fail("inputs of shapes {} cannot be broadcast together", ", ".join(str(s) for s in shapes))


def collapse(out_shape, in_shapes):
    """Merge adjacent axes where every operand is either broadcast or not, to reach <= 4 dims.

    Returns the output shape and per-input strides (in elements, 0 on broadcast axes) of the
    collapsed problem, or None if more than 4 axes remain.
    """
    nd = len(out_shape)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in in_shapes]
    dims, groups = [], []
    for ax in range(nd):
        if out_shape[ax] == 1:
            continue
        pattern = tuple(p[ax] == 1 for p in padded)
        if groups and groups[-1][0] == pattern:
            groups[-1][1].append(ax)
        else:
            groups.append((pattern, [ax]))
    if len(groups) > 4:
        return None
    shape = [int(np.prod([out_shape[a] for a in g])) for _, g in groups]
    strides = []
    for k in range(len(in_shapes)):
        st, acc = [], 1
        for pattern, g in reversed(groups):
            size = int(np.prod([out_shape[a] for a in g]))
            st.append(0 if pattern[k] else acc)
            if not pattern[k]:
                acc *= size
        strides.append(list(reversed(st)))
    pad = 4 - len(shape)
    return [1] * pad + shape, [[0] * pad + s for s in strides]


def _strided_views(arrays, out_shape):
    """4-d (zero-stride where broadcast) views of ``arrays`` over the output shape."""
    collapsed = collapse(out_shape, [a.shape for a in arrays])
    if collapsed is None:   # too many alternating axes: materialize the broadcast instead
        full = [(a if a.shape == tuple(out_shape) else np.ascontiguousarray(np.broadcast_to(a, out_shape)))
                .reshape(-1) for a in arrays]
        return [f.reshape(1, 1, 1, -1) for f in full], (1, 1, 1, int(np.prod(out_shape)))
    shape, strides = collapsed
    views = [np.lib.stride_tricks.as_strided(a, shape, [s * a.itemsize for s in st])
             for a, st in zip(arrays, strides)]
    return views, tuple(shape)


# ------------------------------------------------------------------------------ the op
class ElementwiseOp(Op):
    """An op generated from a table line (see the module docstring)."""

    line = None   # the _Line

    def setup(self, *shapes):
        out = tuple(shapes[0]) if len(shapes) == 1 else broadcast_shape(self, shapes)
        # Pick the kernels once: flat (same shapes) or 4-d strided (broadcasting), serial or
        # prange by size. They take any-dimensional C-contiguous arrays.
        kernels = self.line.kernels()
        self.same_shape = all(tuple(s) == out for s in shapes)
        parallel = uses_parallel(int(np.prod(out, dtype=np.int64)))
        ident = self.line.ident
        suffix = "" if not self.same_shape else ("_parallel" if parallel else "")
        self._forward = getattr(kernels, ident + ("_forward" + suffix if self.same_shape else "_forward_nd"))
        self._backward = [None if d is None else getattr(
            kernels, "{}_backward_{}{}".format(ident, k, suffix if self.same_shape else "_nd"))
            for k, d in enumerate(self.line.derivatives)]
        self._scalar_args = tuple(self.args[a] for a in self.line.arg_names)
        self._typed = {}
        return [out]

    def _scalars(self, dtype):
        """The op's scalar arguments in the kernel's type (float32 math for float32 arrays)."""
        typed = self._typed.get(dtype)
        if typed is None:
            typed = self._typed[dtype] = typed_scalars(self._scalar_args, dtype)
        return typed

    def forward(self, inputs, outputs):
        y = outputs[0]
        scalars = self._scalars(y.dtype)
        if self.same_shape:   # flat views: one compilation whatever the rank
            self._forward(*[x.reshape(-1) for x in inputs], y.reshape(-1), *scalars)
        else:
            views, shape4 = _strided_views(inputs, y.shape)
            self._forward(*views, y.reshape(shape4), *scalars)

    def backward(self, inputs, outputs, output_grads, input_grads, propagate_down, accum):
        y, dy = outputs[0], output_grads[0]
        # Inputs the derivatives do not read may have been freed; any array of the right
        # size stands in for them (the kernel never loads it).
        ins = [x if x is not None else dy for x in inputs]
        if y is None:
            y = dy
        scalars = self._scalars(dy.dtype)
        for k, dx in enumerate(input_grads):
            kernel = self._backward[k]
            if not propagate_down[k] or kernel is None:
                continue
            if self.same_shape:
                kernel(*[x.reshape(-1) for x in ins], y.reshape(-1), dy.reshape(-1), dx.reshape(-1),
                       accum[k], *scalars)
            else:
                if not accum[k]:
                    dx.fill(0)
                target = dx
                if collapse(dy.shape, [x.shape for x in ins] + [dx.shape]) is None:
                    # too many alternating axes for the strided kernel: the full-size gradient,
                    # then summed down to dx
                    target = np.zeros(dy.shape, dx.dtype)
                views, shape4 = _strided_views(ins + [target], dy.shape)
                kernel(*views[:-1], y.reshape(shape4), dy.reshape(shape4), views[-1], *scalars)
                if target is not dx:
                    sum_to_shape(target, dx, True)

    def grad_depends_input_data(self, i, j):
        d = self.line.derivatives[i]
        return d is not None and self.line.input_names[j] in names_in(d)

    def grad_depends_output_data(self, i, o):
        d = self.line.derivatives[i]
        return d is not None and "y" in names_in(d)


def elementwise(name, forward, baked_args=(), grad_rule=True, refused_grad_inputs=(), broadcasts=True,
                **derivatives):
    """Declare and register an elementwise op (see the module docstring).

    ``derivatives`` maps ``dx`` (one input) or ``dx0, dx1, ...`` to expressions; an input
    without one receives no gradient (nnabla raises when asked to differentiate it).
    ``baked_args`` are written into fused kernels as literals (see ``_Line``). ``grad_rule``
    False: the op gets no rule for ``nn.grad`` at all (``backward_function/elementwise.py`` makes
    one from the derivatives of every other line). ``refused_grad_inputs``: the inputs without
    derivative whose need_grad makes backward raise, as nnabla's does (others get zeros).
    ``broadcasts`` False: the inputs must have one shape, as nnabla requires of the op.
    """
    spec = TABLE[name]
    n_in = len(spec.inputs)
    input_names = ["x"] if n_in == 1 else ["x{}".format(i) for i in range(n_in)]
    arg_names = [a.name for a in spec.args if a.name != "inplace"]
    keys = ["dx"] if n_in == 1 else ["dx{}".format(i) for i in range(n_in)]
    unknown = set(derivatives) - set(keys)
    if unknown:
        raise TypeError("elementwise({}): unknown derivative names {}".format(name, sorted(unknown)))
    line = _Line(name, forward, [derivatives.get(k) for k in keys], input_names, arg_names, baked_args)
    line.grad_rule = grad_rule
    LINES.append(line)
    cls = type(name, (ElementwiseOp,), {"line": line, "__doc__": "y = {}".format(forward)})
    if all(d is None for d in line.derivatives):
        cls.backward = Op.backward
    cls.no_grad_inputs = tuple(k for k, d in enumerate(line.derivatives) if d is None)
    cls.refused_grad_inputs = tuple(refused_grad_inputs)
    cls.broadcasts = broadcasts
    register(cls, name=name)
    return cls
