"""Grad rules of the elementwise ops, made from their table lines (``ops/elementwise.py``).

A line's derivative expressions are evaluated over Variables: each scalar function becomes the
F op of the same meaning, so ``dy * (1 - y * y)`` becomes a graph that ``nn.grad`` can
differentiate again. ``reduce_to_shape`` sums a broadcast gradient back to an input's shape
(also used by other families' rules).
"""
from .. import functions as F
from ..ops import scalar_math
from ..ops.elementwise import declared_lines
from ..ops.registry import GRAD_RULES
from ..variable import Variable


def _grad_namespace():
    """Evaluate derivative expressions over Variables: each scalar function becomes its F op."""

    def lift(scalar_fn, var_fn):
        def fn(*a):
            if any(isinstance(v, Variable) for v in a):
                return var_fn(*a)
            return scalar_fn(*a)
        return fn

    def where(c, a, b):
        ref = next(v for v in (c, a, b) if isinstance(v, Variable))
        c, a, b = [v if isinstance(v, Variable) else F.constant(float(v), ref.shape) for v in (c, a, b)]
        return F.where(c, a, b)

    ns = dict(scalar_math.CONSTANTS, abs=abs)
    for fn in scalar_math.FUNCTIONS:
        if fn.grad is not None:
            ns[fn.name] = lift(fn.python, getattr(F, fn.grad))
    # the functions whose Variable form is not one F op of the same arguments
    table = {fn.name: fn.python for fn in scalar_math.FUNCTIONS}
    ns.update(
        sqrt=lift(table["sqrt"], lambda v: v ** 0.5),
        where=where,
        minimum=lift(table["minimum"], lambda a, b: _pairwise(a, b, F.minimum2, F.minimum_scalar)),
        maximum=lift(table["maximum"], lambda a, b: _pairwise(a, b, F.maximum2, F.maximum_scalar)),
        eq=lift(table["eq"], lambda a, b: F.equal_scalar(a, b) if not hasattr(b, "shape") else F.equal(a, b)),
        ne=lift(table["ne"], lambda a, b: F.not_equal_scalar(a, b) if not hasattr(b, "shape") else F.not_equal(a, b)),
    )
    return ns


def _pairwise(a, b, both, with_scalar):
    """min/max of two Variables, or of a Variable and a number (either order)."""
    if isinstance(a, Variable) and isinstance(b, Variable):
        return both(a, b)
    return with_scalar(a, float(b)) if isinstance(a, Variable) else with_scalar(b, float(a))


def _make_grad_rule(line):
    """nnabla-signature grad rule evaluating the line's derivatives over Variables."""
    def rule(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
        ns = _grad_namespace()
        ns.update({a: args[a] for a in line.arg_names if a in args})
        ns["dy"] = grad_inputs[0]
        ns["y"] = outputs[0] if outputs else None
        for n, v in zip(line.input_names, inputs):
            ns[n] = v
        out_shape = tuple(output_shapes[0])
        grads = []
        for k, d in enumerate(line.derivatives):
            if d is None:
                grads.append(None)
                continue
            g = eval(d, ns)   # our own table expressions, evaluated over Variables
            if not hasattr(g, "shape") or tuple(g.shape) != out_shape:
                g = F.broadcast(g if hasattr(g, "shape") else F.constant(float(g), ()), out_shape) \
                    if hasattr(g, "shape") else F.constant(float(g), out_shape)
            grads.append(reduce_to_shape(g, tuple(input_shapes[k])))
        return grads
    rule.__name__ = line.ident + "_backward"
    rule.__doc__ = "Gradient of {} from its table line.".format(line.name)
    return rule


def reduce_to_shape(g, shape):
    """Sum a gradient over the axes that broadcasting expanded, giving ``shape``."""
    if tuple(g.shape) == shape:
        return g
    lead = len(g.shape) - len(shape)
    axes = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1]
    if axes:
        g = F.sum(g, axis=axes, keepdims=True)
    return F.reshape(g, shape, inplace=False)


for _line in declared_lines():
    if _line.grad_rule:
        GRAD_RULES[_line.name] = _make_grad_rule(_line)
