"""Activation functions. Those ONNX lacks (or gained late: Gelu 20, Mish 18) are composites
of the formulas nnabla_jit's kernels compute (``ops/activation.py``)."""
import math

from .table import exports

# nnabla function -> the ONNX op computing the same thing on its one input.
SAME_OP = {"Sigmoid": "Sigmoid", "Tanh": "Tanh", "ReLU": "Relu", "SoftSign": "Softsign"}


def _same_op(g, n):
    return g.op(SAME_OP[n.type], [n.x])


for _name in SAME_OP:
    exports(_name)(_same_op)


@exports("LeakyReLU")
def leaky_relu(g, n):
    return g.op("LeakyRelu", [n.x], alpha=float(n.args["alpha"]))


@exports("ELU")
def elu(g, n):
    return g.op("Elu", [n.x], alpha=float(n.args["alpha"]))


@exports("SELU")
def selu(g, n):
    return g.op("Selu", [n.x], alpha=float(n.args["alpha"]), gamma=float(n.args["scale"]))


@exports("Swish")
def swish(g, n):
    return g.op("Mul", [n.x, g.op("Sigmoid", [n.x])])


@exports("GELU")
def gelu(g, n):
    """x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))), nnabla's tanh approximation."""
    if g.opset >= 20:
        return g.op("Gelu", [n.x], approximate="tanh")
    x = n.x
    cube = g.op("Mul", [g.op("Mul", [x, x]), x])
    inner = g.op("Add", [x, g.op("Mul", [cube, g.scalar(0.044715)])])
    t = g.op("Tanh", [g.op("Mul", [inner, g.scalar(math.sqrt(2 / math.pi))])])
    return g.op("Mul", [g.op("Mul", [x, g.scalar(0.5)]), g.op("Add", [t, g.scalar(1.0)])])


@exports("Mish")
def mish(g, n):
    if g.opset >= 18:
        return g.op("Mish", [n.x])
    return g.op("Mul", [n.x, g.op("Tanh", [g.op("Softplus", [n.x])])])


@exports("ReLU6")
def relu6(g, n):
    return g.clip(n.x, 0.0, 6.0)


@exports("HardSigmoid")
def hard_sigmoid(g, n):
    return g.op("HardSigmoid", [n.x], alpha=0.2, beta=0.5)


@exports("HardTanh")
def hard_tanh(g, n):
    return g.clip(n.x, -1.0, 1.0)


@exports("LogSigmoid")
def log_sigmoid(g, n):
    return g.op("Neg", [g.op("Softplus", [g.op("Neg", [n.x])])])


@exports("SoftPlus")
def softplus(g, n):
    beta = float(n.args["beta"])
    if beta == 1.0:
        return g.op("Softplus", [n.x])
    scaled = g.op("Softplus", [g.op("Mul", [n.x, g.scalar(beta)])])
    return g.op("Div", [scaled, g.scalar(beta)])


@exports("TanhShrink")
def tanh_shrink(g, n):
    return g.op("Sub", [n.x, g.op("Tanh", [n.x])])


@exports("Sinc")
def sinc(g, n):
    """sin(x) / x, 1 at 0."""
    ratio = g.op("Div", [g.op("Sin", [n.x]), n.x])
    return g.where(g.op("Equal", [n.x, g.scalar(0.0)]), g.scalar(1.0), ratio)


@exports("Softmax", "LogSoftmax")
def softmax(g, n):
    return g.softmax(n.x, n.op.axis, n.ndim, log=n.type == "LogSoftmax")


@exports("CReLU")
def crelu(g, n):
    pos, neg = g.op("Relu", [n.x]), g.op("Relu", [g.op("Neg", [n.x])])
    return g.op("Concat", [pos, neg], axis=n.op.axis)


@exports("CELU")
def celu(g, n):
    alpha = float(n.args["alpha"])
    pos = g.op("Elu", [n.x], alpha=alpha)
    neg = g.op("Elu", [g.op("Neg", [n.x])], alpha=alpha)
    return g.op("Concat", [pos, neg], axis=n.op.axis)


@exports("PReLU")
def prelu(g, n):
    """One slope, or one per channel at base_axis (reshaped to broadcast from there)."""
    slope_shape = n.in_shapes[1]
    size = 1
    for s in slope_shape:
        size *= s
    tail = n.ndim - n.op.base_axis - 1
    shape = [1] if size == 1 else [size] + [1] * tail
    return g.op("PRelu", [n.x, g.reshape(n.inputs[1], shape)])


@exports("BinarySigmoid")
def binary_sigmoid(g, n):
    return g.as_float(g.op("Greater", [n.x, g.scalar(0.0)]))


@exports("BinaryTanh")
def binary_tanh(g, n):
    return g.where(g.op("Greater", [n.x, g.scalar(0.0)]), g.scalar(1.0), g.scalar(-1.0))
