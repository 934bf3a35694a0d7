"""Losses as the formulas of ``ops/loss.py``. The class-label losses pick each sample's
log-probability with GatherElements along the class axis; negative labels (ignored samples in
nnabla) give 0."""
import numpy as np

from .table import exports

_TINY = float(np.finfo(np.float32).tiny)   # nnabla clamps log arguments at the float minimum


def _difference(g, n):
    return g.op("Sub", [n.inputs[0], n.inputs[1]])


@exports("SigmoidCrossEntropy")
def sigmoid_cross_entropy(g, n):
    """softplus(x) - x t."""
    x, t = n.inputs
    return g.op("Sub", [g.op("Softplus", [x]), g.op("Mul", [x, t])])


@exports("BinaryCrossEntropy")
def binary_cross_entropy(g, n):
    """-(t log(max(x, tiny)) + (1 - t) log(max(1 - x, tiny)))."""
    x, t = n.inputs
    one, tiny = g.scalar(1.0), g.scalar(_TINY)
    positive = g.op("Mul", [t, g.op("Log", [g.op("Max", [x, tiny])])])
    negative = g.op("Mul", [g.op("Sub", [one, t]),
                            g.op("Log", [g.op("Max", [g.op("Sub", [one, x]), tiny])])])
    return g.op("Neg", [g.op("Add", [positive, negative])])


def _label_loss(g, n, log_probability):
    """-log_probability[label] along the class axis; 0 where the label is negative."""
    labels = n.inputs[1]
    index = g.as_int64(g.op("Max", [labels, g.scalar(0.0)]))
    picked = g.gather_elements(log_probability, index, n.op.axis, n.in_shapes[0], n.in_shapes[1])
    ignored = g.op("Less", [labels, g.scalar(0.0)])
    return g.where(ignored, g.scalar(0.0), g.op("Neg", [picked]))


@exports("SoftmaxCrossEntropy")
def softmax_cross_entropy(g, n):
    return _label_loss(g, n, g.softmax(n.x, n.op.axis, n.ndim, log=True))


@exports("CategoricalCrossEntropy")
def categorical_cross_entropy(g, n):
    return _label_loss(g, n, g.op("Log", [n.x]))


@exports("SquaredError")
def squared_error(g, n):
    d = _difference(g, n)
    return g.op("Mul", [d, d])


@exports("AbsoluteError")
def absolute_error(g, n):
    return g.op("Abs", [_difference(g, n)])


@exports("HuberLoss")
def huber_loss(g, n):
    """d^2 where |d| < delta, else delta (2 |d| - delta)."""
    d = _difference(g, n)
    size = g.op("Abs", [d])
    delta = g.scalar(float(n.args["delta"]))
    linear = g.op("Mul", [delta, g.op("Sub", [g.op("Mul", [size, g.scalar(2.0)]), delta])])
    return g.where(g.op("Less", [size, delta]), g.op("Mul", [d, d]), linear)


@exports("EpsilonInsensitiveLoss")
def epsilon_insensitive_loss(g, n):
    size = g.op("Abs", [_difference(g, n)])
    return g.op("Relu", [g.op("Sub", [size, g.scalar(float(n.args["epsilon"]))])])


@exports("KLMultinomial")
def kl_multinomial(g, n):
    """Sum over the axes from base_axis of p (log p - log q), terms with p == 0 being 0."""
    p, q = n.inputs
    terms = g.op("Mul", [p, g.op("Sub", [g.op("Log", [p]), g.op("Log", [q])])])
    terms = g.where(g.op("Equal", [p, g.scalar(0.0)]), g.scalar(0.0), terms)
    rows = n.out_shapes[0]
    return g.reduce("ReduceSum", g.reshape(terms, list(rows[:-1]) + [-1]), [len(rows) - 1], True)
