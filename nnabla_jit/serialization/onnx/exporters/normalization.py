"""Normalizations. Batch normalization over the channel axis is ONNX BatchNormalization with the
running statistics (the inference form, whatever ``batch_stat`` says); the others are the
standardization (x - mean) / sqrt(var + eps) over their axes, scaled and shifted."""
import numpy as np

from .table import exports


def standardize(g, x, axes, eps):
    """(x - mean) / sqrt(var + eps), statistics over ``axes`` (kept)."""
    centered = g.op("Sub", [x, g.reduce("ReduceMean", x, axes, True)])
    var = g.reduce("ReduceMean", g.op("Mul", [centered, centered]), axes, True)
    return g.op("Div", [centered, g.op("Sqrt", [g.op("Add", [var, g.scalar(eps)])])])


def scale_shift(g, y, gamma, beta):
    if gamma is not None:
        y = g.op("Mul", [y, gamma])
    return y if beta is None else g.op("Add", [y, beta])


def _other_axes(ndim, kept):
    kept = {a % ndim for a in kept}
    return [a for a in range(ndim) if a not in kept]


@exports("BatchNormalization", "SyncBatchNormalization", "FusedBatchNormalization")
def batch_normalization(g, n):
    x, ndim = n.x, n.ndim
    axes = sorted(a % ndim for a in n.args["axes"])
    eps = float(n.args["eps"])
    beta, gamma = n.input("beta"), n.input("gamma")
    mean, var = n.input("mean"), n.input("variance")
    if mean is None or var is None:          # no running statistics: the batch's
        y = scale_shift(g, standardize(g, x, _other_axes(ndim, axes), eps), gamma, beta)
    elif axes == [1] and ndim >= 2:
        channels = n.in_shapes[0][1]

        def per_channel(name, fill):
            return g.reshape(name, [channels]) if name is not None else g.const(
                np.full(channels, fill, np.float32))
        y = g.op("BatchNormalization", [x, per_channel(gamma, 1.0), per_channel(beta, 0.0),
                                        per_channel(mean, 0.0), per_channel(var, 1.0)], epsilon=eps)
    else:
        std = g.op("Sqrt", [g.op("Add", [var, g.scalar(eps)])])
        y = scale_shift(g, g.op("Div", [g.op("Sub", [x, mean]), std]), gamma, beta)
    if n.type == "FusedBatchNormalization":
        z = n.input("z")
        y = g.op("Relu", [y if z is None else g.op("Add", [y, z])])
    return y


@exports("TensorNormalization")
def tensor_normalization(g, n):
    y = standardize(g, n.x, _other_axes(n.ndim, n.args["axes"]), float(n.args["eps"]))
    return scale_shift(g, y, n.input("gamma"), n.input("beta"))


@exports("LayerNormalization")
def layer_normalization(g, n):
    y = standardize(g, n.x, _other_axes(n.ndim, n.args["batch_axis"]), float(n.args["eps"]))
    return scale_shift(g, y, n.input("gamma"), n.input("beta"))


@exports("InstanceNormalization")
def instance_normalization(g, n):
    kept = list(n.args["batch_axis"]) + [n.args["channel_axis"]]
    y = standardize(g, n.x, _other_axes(n.ndim, kept), float(n.args["eps"]))
    return scale_shift(g, y, n.input("gamma"), n.input("beta"))


@exports("GroupNormalization")
def group_normalization(g, n):
    """Instance normalization of x with its channel axis split into (groups, channels/groups)."""
    shape = list(n.in_shapes[0])
    ca = n.args["channel_axis"] % n.ndim
    groups = int(n.args["num_groups"])
    work = shape[:ca] + [groups, shape[ca] // groups] + shape[ca + 1:]
    kept = [a % n.ndim + (a % n.ndim > ca) for a in n.args["batch_axis"]] + [ca]
    y = standardize(g, g.reshape(n.x, work), _other_axes(len(work), kept), float(n.args["eps"]))
    return scale_shift(g, g.reshape(y, shape), n.input("gamma"), n.input("beta"))


@exports("WeightStandardization")
def weight_standardization(g, n):
    return standardize(g, n.x, _other_axes(n.ndim, [n.args["channel_axis"]]), float(n.args["eps"]))


@exports("WeightNormalization")
def weight_normalization(g, n):
    """g * w / sqrt(sum over the axes but dim of w^2 + eps)."""
    w, scale = n.inputs
    dim = n.args["dim"] % n.ndim
    aligned = [1] * n.ndim
    aligned[dim] = n.in_shapes[0][dim]
    squares = g.reduce("ReduceSum", g.op("Mul", [w, w]), _other_axes(n.ndim, [dim]), True)
    norm = g.op("Sqrt", [g.op("Add", [squares, g.scalar(float(n.args["eps"]))])])
    return g.op("Mul", [g.op("Div", [w, norm]), g.reshape(scale, aligned)])


@exports("NormNormalization")
def norm_normalization(g, n):
    """x / max(||x||_p over axes, eps) (no axes: each element its own norm)."""
    p = float(n.args["p"])
    powered = g.op("Pow", [g.op("Abs", [n.x]), g.scalar(p)])
    total = g.reduce("ReduceSum", powered, list(n.op.axes), True) if n.op.axes else powered
    norm = g.op("Max", [g.op("Pow", [total, g.scalar(1.0 / p)]), g.scalar(float(n.args["eps"]))])
    return g.op("Div", [n.x, norm])


@exports("MeanSubtraction")
def mean_subtraction(g, n):
    """x minus the running mean (inference form: the mean is not updated)."""
    return g.op("Sub", [n.x, n.inputs[1]])


@exports("SpectralNorm")
def spectral_norm(g, n):
    """w / sigma, sigma from ``itr`` power iterations started at u (as in test mode)."""
    w, u = n.inputs
    shape = n.in_shapes[0]
    dim = n.args["dim"] % n.ndim
    eps = g.scalar(float(n.args["eps"]))
    perm = [dim] + [a for a in range(n.ndim) if a != dim]
    matrix = g.reshape(g.transpose(w, perm), [shape[dim], -1])

    def unit(v):
        return g.op("Div", [v, g.op("Sqrt", [g.op("Add", [g.reduce("ReduceSum", g.op("Mul", [v, v]),
                                                                    None, False), eps])])])
    left = u
    for _ in range(int(n.args["itr"])):
        right = unit(g.op("MatMul", [left, matrix]))
        left = unit(g.op("MatMul", [matrix, right]))
    sigma = g.reduce("ReduceSum", g.op("Mul", [left, g.op("MatMul", [matrix, right])]), None, False)
    y = g.op("Div", [w, sigma])
    return [y, g.op("Identity", [u])] if n.args["output_u"] else y
