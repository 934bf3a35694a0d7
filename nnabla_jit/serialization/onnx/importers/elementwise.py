"""Elementwise ONNX ops: math, activations, arithmetic, comparisons, logic, casts.

A one-element constant operand of a binary op becomes the ``val`` of nnabla's scalar function
(``x + 2`` is AddScalar) when it does not widen the result; other constants become parameters.
Booleans are float 1/0, as nnabla's comparisons produce them.
"""
import math

import numpy as np

from .... import functions as F
from ..builder import Unsupported
from ..dependencies import BOOL, FLOAT, INT64
from .table import imports

UNARY = {
    "Relu": F.relu, "Sigmoid": F.sigmoid, "Tanh": F.tanh, "Softsign": F.softsign, "Abs": F.abs,
    "Exp": F.exp, "Log": F.log, "Ceil": F.ceil, "Floor": F.floor, "Sin": F.sin, "Cos": F.cos,
    "Tan": F.tan, "Sinh": F.sinh, "Cosh": F.cosh, "Asin": F.asin, "Acos": F.acos, "Atan": F.atan,
    "Asinh": F.asinh, "Acosh": F.acosh, "Atanh": F.atanh, "Erf": F.erf,
    "Mish": F.mish, "Not": F.logical_not, "IsNaN": F.isnan, "Softplus": F.softplus,
}


def _unary(c, node):
    return UNARY[node.op_type](c.var(node.inputs[0]))


for _op in UNARY:
    imports(_op)(_unary)


def scalar_operand(c, name, other):
    """The value of constant ``name`` if it holds one element and does not widen ``other``."""
    value = c.scalar(name)
    if value is None or len(c.shape(name)) > len(c.shape(other)):
        return None
    return value


def _logical_scalar(fn):
    return lambda x, v: fn(x, bool(v))


# ONNX binary op -> (F function, F(x, val) for "x op val", F(x, val) for "val op x").
BINARY = {
    "Add": (F.add2, F.add_scalar, F.add_scalar),
    "Sub": (F.sub2, lambda x, v: F.add_scalar(x, -v), F.r_sub_scalar),
    "Mul": (F.mul2, F.mul_scalar, F.mul_scalar),
    "Div": (F.div2, lambda x, v: F.mul_scalar(x, 1.0 / v) if v else None, F.r_div_scalar),
    "Pow": (F.pow2, F.pow_scalar, F.r_pow_scalar),
    "Equal": (F.equal, F.equal_scalar, F.equal_scalar),
    "Greater": (F.greater, F.greater_scalar, F.less_scalar),
    "Less": (F.less, F.less_scalar, F.greater_scalar),
    "GreaterOrEqual": (F.greater_equal, F.greater_equal_scalar, F.less_equal_scalar),
    "LessOrEqual": (F.less_equal, F.less_equal_scalar, F.greater_equal_scalar),
    "And": (F.logical_and,) + (_logical_scalar(F.logical_and_scalar),) * 2,
    "Or": (F.logical_or,) + (_logical_scalar(F.logical_or_scalar),) * 2,
    "Xor": (F.logical_xor,) + (_logical_scalar(F.logical_xor_scalar),) * 2,
}


def binary(c, op_type, a, b):
    both, right, left = BINARY[op_type]
    value = scalar_operand(c, b, a)
    if value is not None and not c.is_const(a):
        y = right(c.var(a), value)
        if y is not None:
            return y
    value = scalar_operand(c, a, b)
    if value is not None and not c.is_const(b):
        return left(c.var(b), value)
    return both(c.var(a), c.var(b))


@imports(*BINARY)
def binary_op(c, node):
    a, b = node.inputs[0], node.inputs[1]
    y = binary(c, node.op_type, a, b)
    if node.op_type == "Div" and c.elem(a) == INT64 and c.elem(b) == INT64:
        return F.mul2(F.sign(y, 0.0), F.floor(F.abs(y)))   # integer division truncates
    return y


@imports("Min", "Max")
def min_max(c, node):
    both, with_scalar = {"Min": (F.minimum2, F.minimum_scalar),
                         "Max": (F.maximum2, F.maximum_scalar)}[node.op_type]
    names = [i for i in node.inputs if i]
    first = next(k for k, n in enumerate(names) if not c.is_const(n))
    y = c.var(names[first])
    for k, name in enumerate(names):
        if k != first:
            value = scalar_operand(c, name, names[first])
            y = with_scalar(y, value) if value is not None else both(y, c.var(name))
    return y


@imports("Sum", "Mean")
def sum_mean(c, node):
    xs = [c.var(i) for i in node.inputs if i]
    shape = tuple(np.broadcast_shapes(*[x.shape for x in xs]))
    xs = [broadcast_to_shape(x, shape) for x in xs]   # AddN takes equal shapes
    y = xs[0] if len(xs) == 1 else F.add_n(*xs)
    return F.mul_scalar(y, 1.0 / len(xs)) if node.op_type == "Mean" else y


@imports("Identity")
def identity(c, node):
    """The input itself (which keeps data-dependent shapes, such as NonZero's, live)."""
    return c.var(node.inputs[0])


@imports("Neg")
def neg(c, node):
    return F.mul_scalar(c.var(node.inputs[0]), -1.0)


@imports("Reciprocal")
def reciprocal(c, node):
    return F.r_div_scalar(c.var(node.inputs[0]), 1.0)


@imports("Sqrt")
def sqrt(c, node):
    return F.pow_scalar(c.var(node.inputs[0]), 0.5)


@imports("Sign")
def sign(c, node):
    return F.sign(c.var(node.inputs[0]), 0.0)


@imports("Round")
def round_half_even(c, node):
    """nnabla rounds halves away from zero: the halves that land on odd numbers step back."""
    x = c.var(node.inputs[0])
    away = F.round(x)
    half = F.equal_scalar(F.abs(F.sub2(x, F.floor(x))), 0.5)
    odd = F.not_equal_scalar(F.mod2(away, F.constant(2.0, x.shape), fmod=True), 0.0)
    return F.sub2(away, F.mul2(F.logical_and(half, odd), F.sign(x, 0.0)))


@imports("Mod")
def mod(c, node):
    a, b = c.var(node.inputs[0]), c.var(node.inputs[1])
    if node.attr("fmod", 0):
        return F.mod2(a, b, fmod=True)
    return F.sub2(a, F.mul2(F.floor(F.div2(a, b)), b))   # the sign of the divisor


@imports("IsInf")
def is_inf(c, node):
    x = c.var(node.inputs[0])
    positive, negative = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    y = F.isinf(x)
    if positive and negative:
        return y
    side = F.greater_scalar(x, 0.0) if positive else F.less_scalar(x, 0.0)
    return F.logical_and(y, side)


@imports("Where")
def where(c, node):
    cond, a, b = node.inputs
    shape = tuple(np.broadcast_shapes(c.shape(cond), c.shape(a), c.shape(b)))
    value_a, value_b = c.scalar(a), c.scalar(b)
    if value_a is not None and value_b is None:
        return F.bool_fill(broadcast_to_shape(c.var(b), shape), c.var(cond), value_a)
    if value_b is not None and value_a is None:
        return F.bool_fill(broadcast_to_shape(c.var(a), shape), F.logical_not(c.var(cond)), value_b)
    return F.where(c.var(cond), c.var(a), c.var(b))


def broadcast_to_shape(x, shape):
    if x.shape == shape:
        return x
    aligned = (1,) * (len(shape) - x.ndim) + tuple(x.shape)
    return F.broadcast(F.reshape(x, aligned), shape)


@imports("Cast")
def cast(c, node):
    return cast_to(c, node.inputs[0], node.attr("to"))


def cast_to(c, name, to):
    """Value ``name`` as ONNX element type ``to``: floats keep their value; to bool: non-zero;
    floats to integers: truncation."""
    x, source = c.var(name), c.elem(name)
    if to == BOOL:
        return F.identity(x) if source == BOOL else F.not_equal_scalar(x, 0.0)
    if to in (1, 10, 11, 16) or source != FLOAT:
        return F.identity(x)
    return F.mul2(F.sign(x, 0.0), F.floor(F.abs(x)))


@imports("Clip")
def clip(c, node):
    x = c.var(node.inputs[0])
    if c.opset >= 11:
        low = c.const(node.input(1), "min").item() if node.input(1) else None
        high = c.const(node.input(2), "max").item() if node.input(2) else None
    else:
        low, high = node.attr("min"), node.attr("max")
    if low is not None:
        x = F.maximum_scalar(x, float(low))
    return F.minimum_scalar(x, float(high)) if high is not None else x


@imports("Softmax", "LogSoftmax")
def softmax(c, node):
    """Along ``axis`` from opset 13; before, over the axes from ``axis`` on, flattened."""
    x = c.var(node.inputs[0])
    fn = F.softmax if node.op_type == "Softmax" else F.log_softmax
    axis = node.attr("axis", -1 if c.opset >= 13 else 1) % x.ndim
    if c.opset >= 13 or axis == x.ndim - 1:
        return fn(x, axis=axis)
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    return F.reshape(fn(F.reshape(x, (rows, -1)), axis=1), x.shape)


@imports("LeakyRelu")
def leaky_relu(c, node):
    return F.leaky_relu(c.var(node.inputs[0]), node.attr("alpha", 0.01))


@imports("Elu")
def elu(c, node):
    return F.elu(c.var(node.inputs[0]), node.attr("alpha", 1.0))


@imports("Selu")
def selu(c, node):
    return F.selu(c.var(node.inputs[0]), scale=node.attr("gamma", 1.0507009873554805),
                  alpha=node.attr("alpha", 1.6732632423543772))


@imports("HardSigmoid")
def hard_sigmoid(c, node):
    x = c.var(node.inputs[0])
    alpha, beta = node.attr("alpha", 0.2), node.attr("beta", 0.5)
    if np.isclose(alpha, 0.2) and np.isclose(beta, 0.5):
        return F.hard_sigmoid(x)
    return F.maximum_scalar(F.minimum_scalar(F.add_scalar(F.mul_scalar(x, alpha), beta), 1.0), 0.0)


@imports("Gelu")
def gelu(c, node):
    x = c.var(node.inputs[0])
    if node.attr("approximate", "none") == "tanh":
        return F.gelu(x)
    return F.mul2(F.mul_scalar(x, 0.5), F.add_scalar(F.erf(F.mul_scalar(x, 1 / math.sqrt(2))), 1.0))


@imports("PRelu")
def prelu(c, node):
    """nnabla's PReLU when the slope is one value or one per channel (axis 1), else
    relu(x) + min(x, 0) * slope."""
    x, slope = c.var(node.inputs[0]), c.var(node.inputs[1])
    shape = tuple(slope.shape)
    if slope.size == 1:
        return F.prelu(x, F.reshape(slope, (1,)), base_axis=1)
    if x.ndim >= 2 and len(shape) == x.ndim - 1 and shape[0] == x.shape[1] and slope.size == shape[0]:
        return F.prelu(x, F.reshape(slope, (shape[0],)), base_axis=1)
    return F.add2(F.relu(x), F.mul2(F.minimum_scalar(x, 0.0), slope))


@imports("Dropout")
def dropout(c, node):
    """The identity at inference; with training_mode (opset 12) set, x times a dropout of ones
    (so the mask output is the kept positions). The mask is all true at inference."""
    x = c.var(node.inputs[0])
    training = bool(c.const(node.input(2), "training_mode").reshape(-1)[0]) if node.input(2) else False
    ratio = float(c.const(node.input(1), "ratio").reshape(-1)[0]) if node.input(1) else node.attr("ratio", 0.5)
    if training and ratio > 0:
        if ratio >= 1:
            raise Unsupported("ratio must be below 1, got {}".format(ratio))
        scaled_mask = F.dropout(F.constant(1.0, x.shape), ratio, node.attr("seed", -1))
        return [F.mul2(x, scaled_mask), F.greater_scalar(scaled_mask, 0.0)]
    return [F.identity(x), F.constant(1.0, x.shape)]
