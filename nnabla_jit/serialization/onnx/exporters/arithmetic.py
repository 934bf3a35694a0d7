"""Arithmetic, comparison, logical and elementwise math functions.

nnabla's comparisons and logical functions produce float 1/0, so the ONNX boolean results are
cast back to float; their float inputs are cast to bool (non-zero is true) where ONNX wants
booleans. Scalar variants take their ``val`` as a constant.
"""
import math

import numpy as np

from ..dependencies import BOOL
from .table import exports

# nnabla function -> ONNX op of the same inputs and meaning.
SAME_OP = {
    "Add2": "Add", "BcAdd2": "Add", "Sub2": "Sub", "Mul2": "Mul", "Div2": "Div", "Pow2": "Pow",
    "Minimum2": "Min", "Maximum2": "Max", "AddN": "Sum", "Identity": "Identity",
    "Abs": "Abs", "Exp": "Exp", "Log": "Log", "Ceil": "Ceil", "Floor": "Floor", "Sin": "Sin",
    "Cos": "Cos", "Tan": "Tan", "Sinh": "Sinh", "Cosh": "Cosh", "ASin": "Asin", "ACos": "Acos",
    "ATan": "Atan", "ASinh": "Asinh", "ACosh": "Acosh", "ATanh": "Atanh", "Erf": "Erf",
    "BatchDet": "Det",
}

# Identity in forward (of their first input): their work is in backward, or in training only.
IDENTITY_IN_FORWARD = ("Dropout", "Unlink", "ClipGradByValue", "ClipGradByNorm", "TopKGrad")

# x op val, and val op x.
SCALAR_OP = {"AddScalar": "Add", "MulScalar": "Mul", "PowScalar": "Pow",
             "MinimumScalar": "Min", "MaximumScalar": "Max"}
REVERSED_SCALAR_OP = {"RSubScalar": "Sub", "RDivScalar": "Div", "RPowScalar": "Pow"}

# Comparisons: nnabla name (and its Scalar twin) -> ONNX op, negated?
COMPARISON = {"Equal": ("Equal", False), "NotEqual": ("Equal", True),
              "Greater": ("Greater", False), "Less": ("Less", False),
              "GreaterEqual": ("GreaterOrEqual", False), "LessEqual": ("LessOrEqual", False)}
# Before opset 12: a >= b as not (a < b), a <= b as not (a > b).
_OPSET11_COMPARISON = {"GreaterOrEqual": "Less", "LessOrEqual": "Greater"}

LOGICAL = {"LogicalAnd": "And", "LogicalOr": "Or", "LogicalXor": "Xor"}


def _same_op(g, n):
    return g.op(SAME_OP[n.type], n.inputs)


def _scalar_op(g, n):
    return g.op(SCALAR_OP[n.type], [n.x, g.scalar(n.args["val"])])


def _reversed_scalar_op(g, n):
    return g.op(REVERSED_SCALAR_OP[n.type], [g.scalar(n.args["val"]), n.x])


def compare(g, op_type, a, b):
    """The bool result of an ONNX comparison, including >= and <= before opset 12."""
    if g.opset < 12 and op_type in _OPSET11_COMPARISON:
        return g.op("Not", [g.op(_OPSET11_COMPARISON[op_type], [a, b])])
    return g.op(op_type, [a, b])


def _comparison(g, n):
    op_type, negate = COMPARISON[n.type.replace("Scalar", "")]
    other = g.scalar(n.args["val"]) if n.type.endswith("Scalar") else n.inputs[1]
    result = compare(g, op_type, n.x, other)
    return g.as_float(g.op("Not", [result]) if negate else result)


def _logical(g, n):
    op_type = LOGICAL[n.type.replace("Scalar", "")]
    other = g.scalar(bool(n.args["val"]), BOOL) if n.type.endswith("Scalar") else g.as_bool(n.inputs[1])
    return g.as_float(g.op(op_type, [g.as_bool(n.x), other]))


@exports(*IDENTITY_IN_FORWARD)
def identity_in_forward(g, n):
    return g.op("Identity", [n.x])


for _name in SAME_OP:
    exports(_name)(_same_op)
for _name in SCALAR_OP:
    exports(_name)(_scalar_op)
for _name in REVERSED_SCALAR_OP:
    exports(_name)(_reversed_scalar_op)
for _name in COMPARISON:
    exports(_name, _name + "Scalar")(_comparison)
for _name in LOGICAL:
    exports(_name, _name + "Scalar")(_logical)


@exports("MulN")
def mul_n(g, n):
    y = n.inputs[0]
    for x in n.inputs[1:]:
        y = g.op("Mul", [y, x])
    return y


@exports("Sign")
def sign(g, n):
    """1, -1, and alpha at 0."""
    y = g.op("Sign", [n.x])
    alpha = float(n.args["alpha"])
    if alpha == 0.0:
        return y
    return g.where(g.op("Equal", [n.x, g.scalar(0.0)]), g.scalar(alpha), y)


def round_half_away(g, x):
    """nnabla rounds halves away from zero (ONNX Round rounds them to even)."""
    magnitude = g.op("Floor", [g.op("Add", [g.op("Abs", [x]), g.scalar(0.5)])])
    return g.op("Mul", [g.op("Sign", [x]), magnitude])


@exports("Round")
def round_(g, n):
    return round_half_away(g, n.x)


@exports("ATan2")
def atan2(g, n):
    """atan(y / x) moved to the quadrant of (x, y), as math.atan2."""
    y, x = n.inputs
    zero = g.scalar(0.0)
    base = g.op("Atan", [g.op("Div", [y, x])])
    left = g.where(compare(g, "GreaterOrEqual", y, zero), g.op("Add", [base, g.scalar(math.pi)]),
                   g.op("Sub", [base, g.scalar(math.pi)]))
    vertical = g.where(g.op("Greater", [y, zero]), g.scalar(math.pi / 2),
                       g.where(g.op("Less", [y, zero]), g.scalar(-math.pi / 2), zero))
    return g.where(g.op("Greater", [x, zero]), base,
                   g.where(g.op("Less", [x, zero]), left, vertical))


@exports("LogicalNot")
def logical_not(g, n):
    return g.as_float(g.op("Not", [g.as_bool(n.x)]))


@exports("IsNaN", "IsInf")
def is_nan_inf(g, n):
    return g.as_float(g.op("IsNaN" if n.type == "IsNaN" else "IsInf", [n.x]))


@exports("ResetNaN", "ResetInf")
def reset_nan_inf(g, n):
    found = g.op("IsNaN" if n.type == "ResetNaN" else "IsInf", [n.x])
    return g.where(found, g.scalar(n.args["val"]), n.x)


@exports("Where")
def where(g, n):
    return g.where(n.inputs[0], n.inputs[1], n.inputs[2])


@exports("BoolFill")
def bool_fill(g, n):
    return g.where(n.inputs[1], g.scalar(n.args["value"]), n.inputs[0])


@exports("Mod2")
def mod2(g, n):
    """nnabla_jit keeps float x0 as float: numpy.fmod, the sign of x0."""
    return g.op("Mod", n.inputs, fmod=1)


@exports("BatchMatmul")
def batch_matmul(g, n):
    a, b = n.inputs

    def swap_last(name, ndim):
        perm = list(range(ndim))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        return g.transpose(name, perm)
    if n.args["transpose_a"]:
        a = swap_last(a, len(n.in_shapes[0]))
    if n.args["transpose_b"]:
        b = swap_last(b, len(n.in_shapes[1]))
    return g.op("MatMul", [a, b])


@exports("BatchLogdet")
def batch_logdet(g, n):
    return g.op("Log", [g.op("Abs", [g.op("Det", [n.x])])])


@exports("Constant", "Arange", "Linspace")
def input_free(g, n):
    """Functions of their arguments only: their values, computed by nnabla_jit's kernels."""
    value = np.empty(n.out_shapes[0], np.float32)
    n.op.forward([], [value])
    return g.const(value)


@exports("Rand", "Randn", "Randint")
def random(g, n):
    """Uniform / normal draws of the runtime (its generator, not nnabla's); Randint is the
    floor of a uniform draw in [low, high)."""
    args = n.args
    seed = None if args["seed"] == -1 else float(args["seed"])
    shape = list(n.out_shapes[0])
    if n.type == "Randn":
        return g.op("RandomNormal", [], mean=float(args["mu"]), scale=float(args["sigma"]),
                    shape=shape, dtype=1, seed=seed)
    y = g.op("RandomUniform", [], low=float(args["low"]), high=float(args["high"]), shape=shape,
             dtype=1, seed=seed)
    return g.op("Floor", [y]) if n.type == "Randint" else y


@exports("Einsum")
def einsum(g, n):
    if g.opset >= 12:
        return g.op("Einsum", n.inputs, equation=n.args["equation"])
    return _einsum_by_broadcasting(g, n)


def _einsum_by_broadcasting(g, n):
    """Einsum before opset 12 (which lacks it), from the op's canonical equation (one label per
    dimension, ellipses expanded): each diagonal is a product with an identity matrix summed
    over one of its axes; every operand is laid out over all labels (output labels first, size
    1 where it lacks one), the operands are multiplied with broadcasting, and the labels
    outside the output are summed away. The product spans every label at once: memory grows
    with it, unlike the contraction order of Einsum itself."""
    canonical = n.op.canonical
    out, sizes = list(canonical.out), canonical.sizes
    operands = []
    for x, labels in zip(n.inputs, canonical.terms):
        labels = list(labels)
        while len(set(labels)) < len(labels):
            q = next(k for k, c in enumerate(labels) if c in labels[:k])
            p = labels.index(labels[q])
            eye_shape = [sizes[labels[p]] if k in (p, q) else 1 for k in range(len(labels))]
            x = g.op("Mul", [x, g.const(np.eye(sizes[labels[p]], dtype=np.float32).reshape(eye_shape))])
            x = g.reduce("ReduceSum", x, [q], False)
            del labels[q]
        operands.append((x, labels))
    order = out + [c for _, labels in operands for c in labels if c not in out]
    order = list(dict.fromkeys(order))
    product = None
    for x, labels in operands:
        present = sorted(labels, key=order.index)
        x = g.transpose(x, [labels.index(c) for c in present])
        x = g.reshape(x, [sizes[c] if c in labels else 1 for c in order])
        product = x if product is None else g.op("Mul", [product, x])
    summed = list(range(len(out), len(order)))
    y = g.reduce("ReduceSum", product, summed, False) if summed else product
    return y
