"""Validation functions as comparisons and counts: TopNError, BinaryError, ConfusionMatrix."""
import numpy as np

from .arithmetic import compare
from .table import exports


def _class_axis_last(g, n, x):
    """x with the class axis moved last and the other axes merged: (samples, classes)."""
    axis = n.op.axis
    perm = [a for a in range(n.ndim) if a != axis] + [axis]
    return g.reshape(g.transpose(x, perm), [-1, n.in_shapes[0][axis]])


@exports("TopNError")
def top_n_error(g, n):
    """1 where at least n other classes score at least the label's score (0 for ignored,
    negative labels)."""
    x, labels = n.inputs
    axis = n.op.axis
    index = g.as_int64(g.op("Max", [labels, g.scalar(0.0)]))
    label_score = g.gather_elements(x, index, axis, n.in_shapes[0], n.in_shapes[1])
    at_least = g.reduce("ReduceSum", g.as_float(compare(g, "GreaterOrEqual", x, label_score)), [axis], True)
    error = g.as_float(compare(g, "GreaterOrEqual", at_least, g.scalar(float(n.args["n"]) + 1.0)))
    return g.where(g.op("Less", [labels, g.scalar(0.0)]), g.scalar(0.0), error)


@exports("BinaryError")
def binary_error(g, n):
    half = g.scalar(0.5)
    x, target = (compare(g, "GreaterOrEqual", v, half) for v in n.inputs)
    return g.as_float(g.op("Xor", [x, target]))


@exports("ConfusionMatrix")
def confusion_matrix(g, n):
    """One-hot labels (zero rows for ignored ones) times one-hot argmax classes, summed over
    the samples: cm[label, predicted]."""
    classes = n.in_shapes[0][n.op.axis]
    depth, values = g.ints([classes]), g.const(np.array([0.0, 1.0], np.float32))
    scores = _class_axis_last(g, n, n.inputs[0])
    predicted = g.op("OneHot", [g.op("ArgMax", [scores], axis=1, keepdims=0), depth, values], axis=-1)
    labels = g.reshape(n.inputs[1], [-1])
    kept = g.as_float(compare(g, "GreaterOrEqual", labels, g.scalar(0.0)))
    truth = g.op("OneHot", [g.as_int64(g.op("Max", [labels, g.scalar(0.0)])), depth, values], axis=-1)
    truth = g.op("Mul", [truth, g.unsqueeze(kept, [1])])
    return g.op("MatMul", [g.transpose(truth, [1, 0]), predicted])
