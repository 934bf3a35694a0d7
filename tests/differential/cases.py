"""The differential cases of every function of nnabla's table, drawn from its signature.

Pure NumPy (it runs under the oracle's Python as well as the project's). For each row of
``nnabla_jit/tables/functions.tsv`` (a copy of nnabla 1.39's table), ``cases_for(row)`` starts
from a base call (``BASE`` gives the inputs and required arguments of the functions that need
more than one (2, 3, 4) array of normal values) and derives the variants from the argument
types: each bool flipped, each enum value, every axis from -ndim-1 to ndim, axis lists (empty,
negative, out of range, repeated), shapes and numbers nudged, optional inputs left out, inputs
in float16, float64 and int32, and input shapes with a size-1, an empty or a dropped leading
dimension. ``EXTRA`` adds the few variants a generic rule cannot reach (a convolution group,
a matching transpose). Every case draws its values from a seed made of the function's name and
the case's label, so a case never depends on the others.
"""
import csv
import json
import os
import re
import zlib

import numpy as np

SEED = 20261128
TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "nnabla_jit", "tables", "functions.tsv")

# Functions whose outputs are random draws: their fixtures keep only shapes, dtypes and errors.
RANDOM = {"dropout", "rand", "randint", "randn", "rand_binomial", "rand_beta", "rand_gamma",
          "random_choice", "random_crop", "random_flip", "random_shift", "random_erase",
          "image_augmentation"}

# Functions nnabla computes only under auto_forward (their output shapes follow the values).
AUTO_FORWARD = {"unique", "nonzero"}

AXIS_ARGS = {"axis", "base_axis", "channel_axis", "dim"}
AXES_ARGS = {"axes", "batch_axis"}
INT_KINDS = ("label", "index", "vals", "lengths")   # inputs that never get a gradient


# ------------------------------------------------------------------------- the table
class Arg:
    def __init__(self, text):
        m = re.match(r"^(\w+):([\w ]+?)(?:=(.*?))?(?:\{(.*)\})?$", text.strip())
        self.name, self.type, self.default, choices = m.groups()
        self.choices = choices.split("|") if choices else None

    def default_value(self):
        """The table's default when it is a literal, else None (an expression over inputs)."""
        if self.default is None:
            return None
        try:
            value = eval(self.default, {"__builtins__": {}}, {"world": "world"})
        except Exception:
            return None
        return tuple(value) if isinstance(value, (list, tuple, range)) else value


def _split_args(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in parts + [cur] if p.strip()]


class Row:
    def __init__(self, row):
        self.name, self.snake = row["name"], row["snake_name"]
        self.inputs = []   # (name, optional, variadic)
        for t in row["inputs"].split(","):
            t = t.strip().replace("[param]", "")
            if t:
                self.inputs.append((t.strip("*?"), t.endswith("?"), t.startswith("*")))
        self.args = [Arg(t) for t in _split_args(row["arguments"])]


def table():
    with open(TABLE, newline="") as f:
        return [Row(r) for r in csv.DictReader(f, delimiter="\t")]


# ------------------------------------------------------------------------- value domains
def draw(kind, shape, rng):
    """Values of one input. ``kind``: normal, pos, nz (away from 0), unit (-0.9..0.9), gt1,
    prob (0.05..0.95), bin (0/1), int (-3..3 integers), label:K / index:K (0..K-1, no
    gradient), sorted (along the last axis), dist (probabilities along the last axis), spd,
    mat (well conditioned), special (with nan and inf), sparse (half zeros), const:V,
    vals:[...] (given values, no gradient)."""
    shape = tuple(shape)
    name, _, param = kind.partition(":")
    n = rng.standard_normal(shape)
    if name == "normal":
        v = n
    elif name == "pos":
        v = np.abs(n) + 0.5
    elif name == "nz":
        v = np.where(n < 0, n - 0.5, n + 0.5)
    elif name == "unit":
        v = rng.uniform(-0.9, 0.9, shape)
    elif name == "gt1":
        v = np.abs(n) + 1.1
    elif name == "prob":
        v = rng.uniform(0.05, 0.95, shape)
    elif name == "bin":
        v = rng.randint(0, 2, shape)
    elif name == "int":
        v = rng.randint(-3, 4, shape)
    elif name in ("label", "index"):
        v = rng.randint(0, int(param), shape)
    elif name == "sorted":
        v = np.sort(n, axis=-1) if n.ndim else n
    elif name == "dist":
        e = np.exp(n)
        v = e / e.sum(axis=-1, keepdims=True) if n.ndim else e
    elif name in ("spd", "mat"):
        k = shape[-1] if shape else 1
        if name == "spd" and len(shape) >= 2 and shape[-1] == shape[-2]:
            v = n @ np.swapaxes(n, -1, -2) + k * np.eye(k)
        else:
            v = n + (3 * np.eye(shape[-2], shape[-1]) if len(shape) >= 2 else 0)
    elif name == "special":
        v = n.copy()
        flat = v.reshape(-1)
        flat[::5] = np.nan
        flat[1::7] = np.inf
        flat[3::7] = -np.inf
    elif name == "sparse":
        v = n * rng.randint(0, 2, shape)
    elif name == "const":
        v = np.full(shape, float(param))
    elif name == "vals":
        v = np.array(json.loads(param), dtype=np.float64).reshape(shape)
    elif name == "lengths":   # a decreasing sequence of lengths (pack_padded_sequence)
        v = np.sort(rng.randint(1, int(param) + 1, shape).reshape(-1))[::-1].copy()
        v[:1] = int(param)
        v = v.reshape(shape)
    else:
        raise ValueError("cases.draw: unknown kind {!r}".format(kind))
    return np.asarray(v, np.float64)


def default_dtype(kind):
    return np.int32 if kind.split(":")[0] in ("index", "lengths") else np.float32


# ------------------------------------------------------------------------- base calls
# name -> {input: shape | (shape, kind) | [shapes...] (variadic), "_args": {...}}.
# Functions not listed take one (2, 3, 4) normal array per required input.
X = (2, 3, 4)
IMG = (2, 3, 5, 5)
BASE = {
    "affine": dict(x=X, weight=(12, 5), bias=(5,)),
    "rnn": dict(x=(3, 2, 4), h=(1, 1, 2, 5), weight_l0=(1, 5, 9), bias=(1, 1, 5)),
    "lstm": dict(x=(3, 2, 4), h=(1, 1, 2, 5), c=(1, 1, 2, 5), weight_l0=(1, 4, 5, 9), bias=(1, 1, 4, 5)),
    "gru": dict(x=(3, 2, 4), h=(1, 1, 2, 5), weight_l0=(1, 3, 5, 9), bias=(1, 1, 4, 5)),
    "convolution": dict(x=IMG, weight=(4, 3, 3, 3), bias=(4,)),
    "fused_convolution": dict(x=IMG, weight=(4, 3, 3, 3), beta=(1, 4, 1, 1), gamma=(1, 4, 1, 1),
                              mean=(1, 4, 1, 1), variance=((1, 4, 1, 1), "pos"), z=(2, 4, 3, 3)),
    "depthwise_convolution": dict(x=IMG, weight=(3, 3, 3), bias=(3,)),
    "deconvolution": dict(x=(2, 4, 3, 3), weight=(4, 3, 3, 3), bias=(3,)),
    "depthwise_deconvolution": dict(x=(2, 3, 3, 3), weight=(3, 3, 3), bias=(3,)),
    "deformable_convolution": dict(x=IMG, weight=(4, 3, 3, 3), offset=(2, 18, 5, 5),
                                   mask=((2, 9, 5, 5), "prob"), bias=(4,)),
    "adaptive_separable_convolution": dict(x=(2, 3, 6, 6), vertical_kernel=(2, 3, 4, 4),
                                           horizontal_kernel=(2, 3, 4, 4)),
    "max_pooling": dict(x=IMG, _args=dict(kernel=(2, 2))),
    "average_pooling": dict(x=IMG, _args=dict(kernel=(2, 2))),
    "sum_pooling": dict(x=IMG, _args=dict(kernel=(2, 2))),
    "unpooling": dict(x=(2, 3, 2, 2), _args=dict(kernel=(2, 2))),
    "embed": dict(x0=((2, 3), "index:5"), w=(5, 4)),
    "roi_align": dict(input=(2, 3, 6, 6), boxes=((3, 5), "vals:[0,0.5,0.5,4,4, 1,1,0,5,3, 0,2,1.5,5.5,5]"),
                      _args=dict(output_size=(2, 2))),
    "prelu": dict(x0=X, x1=(3,)),
    "fused_batch_normalization": dict(x=X, beta=(1, 3, 1), gamma=(1, 3, 1), mean=(1, 3, 1),
                                      variance=((1, 3, 1), "pos"), z=X),
    "batch_normalization": dict(x=X, beta=(1, 3, 1), gamma=(1, 3, 1), mean=(1, 3, 1),
                                variance=((1, 3, 1), "pos")),
    "group_normalization": dict(x=(2, 4, 3), beta=(1, 4, 1), gamma=(1, 4, 1), _args=dict(num_groups=2)),
    "instance_normalization": dict(x=X, beta=(1, 3, 1), gamma=(1, 3, 1)),
    "layer_normalization": dict(x=X, beta=(1, 3, 4), gamma=(1, 3, 4)),
    "sync_batch_normalization": dict(x=X, beta=(1, 3, 1), gamma=(1, 3, 1), mean=(1, 3, 1),
                                     variance=((1, 3, 1), "pos"), _args=dict(comm=None)),
    "tensor_normalization": dict(x=X, beta=(1, 3, 1), gamma=(1, 3, 1)),
    "weight_normalization": dict(w=(4, 3, 2), g=(4,)),
    "weight_standardization": dict(w=(4, 3, 2)),
    "spectral_norm": dict(w=(4, 3, 2), u=(4,)),
    "mean_subtraction": dict(x=X, rmean=(3, 4), t=((1,), "vals:[3]")),
    "clip_grad_by_value": dict(x=X, min=(X, "const:-0.5"), max=(X, "const:0.5")),
    "add_n": dict(x=[X, X, X]),
    "mul_n": dict(x=[X, X, X]),
    "div2": dict(x0=X, x1=(X, "nz")),
    "pow2": dict(x0=(X, "pos"), x1=X),
    "pow_scalar": dict(x=(X, "pos"), _args=dict(val=1.5)),
    "r_div_scalar": dict(x=(X, "nz")),
    "r_pow_scalar": dict(_args=dict(val=2.0)),
    "logical_and": dict(x0=(X, "bin"), x1=(X, "bin")),
    "logical_or": dict(x0=(X, "bin"), x1=(X, "bin")),
    "logical_xor": dict(x0=(X, "bin"), x1=(X, "bin")),
    "equal": dict(x0=(X, "int"), x1=(X, "int")),
    "not_equal": dict(x0=(X, "int"), x1=(X, "int")),
    "greater_equal": dict(x0=(X, "int"), x1=(X, "int")),
    "greater": dict(x0=(X, "int"), x1=(X, "int")),
    "less_equal": dict(x0=(X, "int"), x1=(X, "int")),
    "less": dict(x0=(X, "int"), x1=(X, "int")),
    "searchsorted": dict(sorted_sequence=((2, 3, 5), "sorted"), values=((2, 3, 4), "int")),
    "logical_and_scalar": dict(x0=(X, "bin"), _args=dict(val=True)),
    "logical_or_scalar": dict(x0=(X, "bin"), _args=dict(val=False)),
    "logical_xor_scalar": dict(x0=(X, "bin"), _args=dict(val=True)),
    "equal_scalar": dict(x0=(X, "int")),
    "not_equal_scalar": dict(x0=(X, "int")),
    "greater_equal_scalar": dict(x0=(X, "int")),
    "greater_scalar": dict(x0=(X, "int")),
    "less_equal_scalar": dict(x0=(X, "int")),
    "less_scalar": dict(x0=(X, "int")),
    "logical_not": dict(x0=(X, "bin")),
    "isnan": dict(x0=(X, "special")),
    "isinf": dict(x0=(X, "special")),
    "reset_nan": dict(x0=(X, "special")),
    "reset_inf": dict(x0=(X, "special")),
    "where": dict(condition=(X, "bin"), x_true=X, x_false=X),
    "constant": dict(_args=dict(shape=(2, 3))),
    "arange": dict(_args=dict(start=0.0, stop=5.0, step=1.0)),
    "linspace": dict(_args=dict(start=-1.0, stop=2.0, num=5)),
    "log": dict(x=(X, "pos")),
    "batch_matmul": dict(a=(2, 3, 4), b=(2, 4, 5)),
    "asin": dict(x=(X, "unit")),
    "acos": dict(x=(X, "unit")),
    "atanh": dict(x=(X, "unit")),
    "acosh": dict(x=(X, "gt1")),
    "concatenate": dict(x=[X, X]),
    "stack": dict(x=[X, X]),
    "slice": dict(x=(4, 5), _args=dict(start=(1, 0), stop=(3, 5), step=(1, 2))),
    "pad": dict(_args=dict(pad_width=(1, 2))),
    "transpose": dict(_args=dict(axes=(1, 0, 2))),
    "broadcast": dict(x=(1, 3, 1), _args=dict(shape=(2, 3, 4))),
    "broadcast_to": dict(x=X, y=(3, 4)),
    "tile": dict(_args=dict(reps=(2, 1, 2))),
    "one_hot": dict(x=((2, 3, 1), "index:4"), _args=dict(shape=(4,))),
    "shift": dict(_args=dict(shifts=(1, -1, 2))),
    "reshape": dict(_args=dict(shape=(4, 6))),
    "matrix_diag": dict(x=(2, 3)),
    "matrix_diag_part": dict(x=(2, 3, 3)),
    "meshgrid": dict(x=[(3,), (4,)], _args=dict(n_outputs=2)),   # nnabla segfaults with -1
    "batch_det": dict(x=((2, 3, 3), "mat")),
    "batch_inv": dict(x=((2, 3, 3), "mat")),
    "batch_logdet": dict(x=((2, 3, 3), "spd")),
    "batch_cholesky": dict(x=((2, 3, 3), "spd")),
    "gather": dict(x=(4, 3, 2), Indices=((2, 3), "index:3")),
    "gather_nd": dict(x=(4, 3), indices=((2, 5), "index:3")),
    "bool_gather": dict(input=(4, 3), mask=((4,), "vals:[1,0,1,1]")),
    "scatter_nd": dict(data=(3, 2), indices=((1, 3), "vals:[4,0,2]"), _args=dict(shape=(5, 2))),
    "scatter_add": dict(x0=(3, 4), indices=((2, 4), "index:3"), x1=(2, 4)),
    "bool_scatter": dict(input=(3, 2), mask=((4,), "vals:[1,0,1,1]")),
    "bool_fill": dict(data=X, mask=(X, "bin")),
    "pack_padded_sequence": dict(padded_sequence=(4, 3, 2), lengths=((3,), "lengths:4")),
    "pad_packed_sequence": dict(packed_sequence=(6, 2), batch_sizes=((3,), "vals:[3,2,1]")),
    "nonzero": dict(x=(X, "sparse")),
    "interpolate": dict(x=(2, 3, 4, 4), _args=dict(output_size=(6, 5), mode="linear")),
    "onnx_resize": dict(x=(1, 2, 4, 4), _args=dict(scales=(1.0, 1.0, 2.0, 1.5))),
    "fft": dict(x=(2, 4, 2), _args=dict(signal_ndim=1)),
    "ifft": dict(x=(2, 4, 2), _args=dict(signal_ndim=1)),
    "stft": dict(x=(2, 32), _args=dict(window_size=8, stride=4, fft_size=8)),
    "istft": dict(y_r=(2, 5, 9), y_i=(2, 5, 9), _args=dict(window_size=8, stride=4, fft_size=8,
                                                          pad_mode="constant")),
    "top_k_data": dict(x=(2, 5), _args=dict(k=2)),
    "top_k_grad": dict(x=(2, 5), _args=dict(k=2)),
    "rand": dict(_args=dict(shape=(2, 3))),
    "randint": dict(_args=dict(low=0, high=5, shape=(2, 3))),
    "randn": dict(_args=dict(shape=(2, 3))),
    "rand_binomial": dict(_args=dict(shape=(2, 3))),
    "rand_beta": dict(_args=dict(shape=(2, 3))),
    "rand_gamma": dict(_args=dict(shape=(2, 3))),
    "random_choice": dict(x=(2, 4), w=((2, 4), "pos"), _args=dict(shape=(3,))),
    "random_crop": dict(x=IMG, _args=dict(shape=(3, 3, 3))),
    "random_flip": dict(x=IMG),
    "random_shift": dict(x=IMG, _args=dict(shifts=(0, 1, 1))),
    "random_erase": dict(x=IMG),
    "image_augmentation": dict(x=IMG),
    "sigmoid_cross_entropy": dict(x=X, target=(X, "bin")),
    "binary_cross_entropy": dict(x=(X, "prob"), target=(X, "prob")),
    "softmax_cross_entropy": dict(x=(2, 3, 5), target=((2, 3, 1), "label:5")),
    "categorical_cross_entropy": dict(x=((2, 3, 5), "dist"), target=((2, 3, 1), "label:5")),
    "epsilon_insensitive_loss": dict(_args=dict(epsilon=0.3)),
    "kl_multinomial": dict(p=((2, 5), "dist"), q=((2, 5), "dist")),
    "affine_grid": dict(theta=(2, 2, 3), _args=dict(size=(4, 5))),
    "warp_by_grid": dict(x=(2, 3, 4, 5), grid=((2, 3, 3, 2), "unit")),
    "warp_by_flow": dict(data=(2, 3, 4, 5), flow=(2, 2, 4, 5)),
    "binary_connect_affine": dict(x=X, weight=(12, 5), binary_weight=(12, 5), bias=(5,)),
    "binary_connect_convolution": dict(x=IMG, weight=(4, 3, 3, 3), binary_weight=(4, 3, 3, 3), bias=(4,)),
    "binary_weight_affine": dict(x=X, weight=(12, 5), binary_weight=(12, 5), alpha=(5,), bias=(5,)),
    "binary_weight_convolution": dict(x=IMG, weight=(4, 3, 3, 3), binary_weight=(4, 3, 3, 3),
                                      alpha=(4,), bias=(4,)),
    "inq_affine": dict(x=X, weight=(12, 5), indicator_fixedweights=((12, 5), "label:2"), bias=(5,)),
    "inq_convolution": dict(x=IMG, weight=(4, 3, 3, 3), indicator_fixedweights=((4, 3, 3, 3), "label:2"),
                            bias=(4,)),
    "min_max_quantize": dict(x=X, qr_min=((1,), "const:-1"), qr_max=((1,), "const:1"),
                             ql_min=((1,), "const:0"), ql_max=((1,), "const:255")),
    "quantize_linear": dict(x=X, scale=((1, 1, 1), "const:0.05"), zero_point=((1, 1, 1), "vals:[3]")),
    "dequantize_linear": dict(x=(X, "int"), scale=((1, 1, 1), "const:0.05"),
                              zero_point=((1, 1, 1), "vals:[3]")),
    "top_n_error": dict(x=(2, 3, 5), target=((2, 3, 1), "label:5")),
    "binary_error": dict(x=(X, "prob"), target=(X, "bin")),
    "confusion_matrix": dict(x=(4, 3), target=((4, 1), "label:3")),
    "vat_noise": dict(x=X, w=X),
    "sink": dict(x=[X, X]),
    "nms_detection2d": dict(x=((1, 4, 7), "vals:[1,1,2,2,0.9,0.8,0.2, 1.1,1,2,2,0.8,0.3,0.7,"
                                         "5,5,1,1,0.7,0.5,0.5, 1,1.2,2,2,0.2,0.9,0.1]")),
    "onnx_non_max_suppression": dict(boxes=((1, 3, 4), "vals:[0,0,1,1, 0,0.1,1,1.1, 2,2,3,3]"),
                                     scores=((1, 2, 3), "prob"),
                                     _args=dict(max_output_boxes_per_class=2, iou_threshold=0.5)),
    "max_pooling_backward": dict(dy=(2, 3, 2, 2), x=IMG, _args=dict(kernel=(2, 2))),
    "patch_correlation": dict(x1=(2, 5, 5, 3), x2=(2, 5, 5, 3)),
    "unique": dict(x=((8,), "int"), _args=dict(axis=0)),
    "eye_like": dict(x=(3, 4)),
    "mod2": dict(x0=(X, "int"), x1=((X), "vals:" + json.dumps([1, 2, -3, 4] * 6))),
    "bit_shift": dict(x=(X, "index:8", "uint8"), shift=(X, "index:3", "uint8")),
    "einsum": dict(x=[(2, 3), (3, 4)], _args=dict(equation="ij,jk->ik")),
}

# Variants no generic rule reaches: argument and input overrides on top of the base call.
EXTRA = {
    "rnn": [dict(bidirectional=True, h=(1, 2, 2, 5), weight_l0=(2, 5, 9), bias=(1, 2, 5)),
            dict(num_layers=2, h=(2, 1, 2, 5), weight=(1, 1, 5, 10), bias=(2, 1, 5))],
    "lstm": [dict(bidirectional=True, h=(1, 2, 2, 5), c=(1, 2, 2, 5), weight_l0=(2, 4, 5, 9),
                  bias=(1, 2, 4, 5))],
    "gru": [dict(bidirectional=True, h=(1, 2, 2, 5), weight_l0=(2, 3, 5, 9), bias=(1, 2, 4, 5))],
    "convolution": [dict(pad=(1, 1)), dict(stride=(2, 2)), dict(dilation=(2, 2)),
                    dict(group=3, weight=(3, 1, 3, 3), bias=(3,)),
                    dict(channel_last=True, x=(2, 5, 5, 3)), dict(x=(2, 3, 6), weight=(4, 3, 3))],
    "deconvolution": [dict(stride=(2, 2), output_padding=(1, 1)), dict(pad=(1, 1)),
                      dict(group=2, weight=(4, 1, 3, 3), bias=(2,))],
    "depthwise_convolution": [dict(multiplier=2, weight=(6, 3, 3), bias=(6,)), dict(pad=(1, 1))],
    "depthwise_deconvolution": [dict(divisor=3, weight=(3, 3, 3), bias=(1,)), dict(stride=(2, 2))],
    "max_pooling": [dict(stride=(1, 1)), dict(pad=(1, 1)), dict(ignore_border=False, kernel=(2, 3)),
                    dict(channel_last=True, x=(2, 5, 5, 3)), dict(kernel=(2, 2, 2))],
    "average_pooling": [dict(pad=(1, 1)), dict(pad=(1, 1), including_pad=False),
                        dict(ignore_border=False, kernel=(3, 2))],
    "sum_pooling": [dict(pad=(1, 1)), dict(ignore_border=False, kernel=(3, 2))],
    "batch_matmul": [dict(transpose_a=True, a=(2, 4, 3)), dict(transpose_b=True, b=(2, 5, 4)),
                     dict(a=(1, 3, 4)), dict(a=(3, 4), b=(4, 5))],
    "transpose": [dict(axes=(2, 0, 1)), dict(axes=(-1, 0, 1)), dict(axes=(0, 1))],
    "broadcast_to": [dict(y=(3,), axis=1), dict(y=(2, 3), axis=0), dict(y=(4,), axis=-1)],
    "slice": [dict(start=(-3, 0), stop=(-1, 5)), dict(start=(3, 4), stop=(0, 0), step=(-1, -2)),
              dict(start=(0,), stop=(2,), step=(1,)), dict(step=(0, 1))],
    "pad": [dict(pad_width=(1, 1, 2, 0)), dict(pad_width=(1, 1, 2, 0, 0, 1)), dict(pad_width=(3, 3), mode="reflect")],
    "reshape": [dict(shape=(-1, 6)), dict(shape=(2, -1, 2)), dict(shape=(5, 5)), dict(shape=(24,))],
    "one_hot": [dict(x=((2, 3, 2), "index:3"), shape=(4, 3)), dict(x=((2, 1), "vals:[-1,2]"))],
    "interpolate": [dict(mode="nearest"), dict(output_size=(2, 3)), dict(x=(2, 3, 4), output_size=(7,)),
                    dict(x=(1, 2, 3, 4, 4), output_size=(4, 6, 5))],
    "onnx_resize": [dict(scales=(), sizes=(1, 2, 6, 5)), dict(mode="linear"), dict(mode="cubic")],
    "sum": [dict(keep_dims=True, axes=(1,))],
    "max": [dict(with_index=True, axes=(1,)), dict(only_index=True, axes=(2,))],
    "min": [dict(with_index=True, axes=(1,)), dict(only_index=True, axes=(2,))],
    "sort": [dict(with_index=True), dict(only_index=True, axis=0)],
    "unique": [dict(flatten=False, axis=0, x=((4, 2), "int")), dict(with_index=True, with_inverse=True,
                                                                    with_counts=True)],
    "fft": [dict(signal_ndim=2, x=(2, 3, 4, 2)), dict(normalized=True)],
    "ifft": [dict(signal_ndim=2, x=(2, 3, 4, 2)), dict(normalized=True)],
    "split": [dict(axis=1), dict(axis=-1)],
    "gather": [dict(axis=1, Indices=((2,), "index:3")), dict(batch_dims=1, Indices=((4, 2), "index:3"), axis=1)],
    "scatter_nd": [dict(add=True, indices=((1, 3), "vals:[4,0,4]"))],
    "einsum": [dict(equation="ij,kj->ik", x=[(2, 3), (4, 3)]), dict(equation="ii->i", x=[(3, 3)]),
               dict(equation="bij,bjk->bik", x=[(2, 2, 3), (2, 3, 4)])],
    "matrix_diag": [dict(x=(3,))],
    "trilu": [dict(k=1), dict(k=-2), dict(upper=False, k=1)],
    "fused_convolution": [dict(bias=(4,)), dict(nonlinearity="leaky_relu", nonlinearity_args=(0.2,)),
                          dict(nonlinearity="elu", nonlinearity_args=(1.0,)), dict(pad=(1, 1), z=(2, 4, 5, 5))],
    "prelu": [dict(x1=(1,)), dict(base_axis=2, x1=(4,))],
    "rand_binomial": [dict(n=5, p=0.3)],
    "randint": [dict(low=3, high=3)],
    "stft": [dict(center=False), dict(window_type="rectangular", pad_mode="constant")],
    "istft": [dict(center=False, y_r=(2, 5, 7), y_i=(2, 5, 7))],
    "top_k_data": [dict(reduce=False), dict(abs=True, with_index=True), dict(largest=False)],
    "tile": [dict(reps=(2,)), dict(reps=(2, 1, 1, 2))],
    "roi_align": [dict(sampling_ratio=2), dict(spatial_scale=(0.5, 0.5))],
    "group_normalization": [dict(num_groups=4), dict(num_groups=3)],
    "mean_subtraction": [dict(update_running_mean=False)],
    "spectral_norm": [dict(dim=1, u=(3,)), dict(itr=2), dict(test=True, output_u=True)],
    "weight_normalization": [dict(dim=1, g=(3,))],
    "embed": [dict(x0=((2, 3), "vals:[0,4,1,2,3,0]"), w=(5, 2, 3))],
    "concatenate": [dict(x=[X, (2, 3, 2)]), dict(x=[(2, 3), (1, 3)], axis=0)],
    "stack": [dict(x=[X, X, X], axis=3)],
    "shape": [dict(start=1, end=-1), dict(start=-2)],
    "quantize_linear": [dict(round_mode="HALF_TO_EVEN", x=((2, 4), "vals:[0.025,0.075,-0.025,-0.075,0.125,1,-1,20]")),
                        dict(dtype=2), dict(dtype=3), dict(narrow_range=True, dtype=2)],
    "clip_grad_by_norm": [dict(clip_norm=0.1, axes=(1,))],
    "norm": [dict(p=1.0), dict(p=3.0, axes=(0, 2))],
    "norm_normalization": [dict(p=1.0), dict(axes=(1,))],
    "cumsum": [dict(exclusive=True, reverse=True, axis=1)],
    "cumprod": [dict(exclusive=True, reverse=True, axis=1), dict(x=(X, "sparse"))],
    "prod": [dict(x=(X, "sparse"))],
    "warp_by_grid": [dict(mode="nearest", padding_mode="reflect"), dict(align_corners=True, padding_mode="repeat"),
                     dict(x=(2, 3, 3, 4, 5), grid=((2, 2, 3, 3, 3), "unit"))],
    "random_choice": [dict(replace=False, shape=(2,))],
}


# ------------------------------------------------------------------------- deriving cases
def _seed(*parts):
    return (SEED + zlib.crc32("/".join(str(p) for p in parts).encode())) % (2 ** 31)


def _slot(spec):
    """(shape, kind, dtype) from a BASE entry: a shape, (shape, kind) or (shape, kind, dtype)."""
    if isinstance(spec, tuple) and len(spec) >= 2 and isinstance(spec[1], str):
        shape, kind = tuple(spec[0]), spec[1]
        dtype = spec[2] if len(spec) == 3 else np.dtype(default_dtype(kind)).name
        return (shape, kind, dtype)
    return (tuple(spec), "normal", "float32")


class Case:
    """One call: ``slots`` is per table input None (left out), an (shape, kind, dtype) triple,
    or a list of them (a variadic input); ``args`` the arguments passed by name."""

    def __init__(self, label, slots, args):
        self.label, self.slots, self.args = label, slots, args

    def key(self):
        return json.dumps([self.slots, sorted((k, repr(v)) for k, v in self.args.items())], default=str)

    def arrays(self, op):
        """Draw the input values (the same every time for the same op and label)."""
        rng = np.random.RandomState(_seed(op, self.label))
        out = []
        for slot in self.slots:
            if slot is None:
                out.append(None)
            elif isinstance(slot, list):
                out.append([draw(k, s, rng).astype(d) for s, k, d in slot])
            else:
                s, k, d = slot
                out.append(draw(k, s, rng).astype(d))
        return out


def _base(row):
    spec = BASE.get(row.snake, {})
    slots = []
    for name, optional, variadic in row.inputs:
        given = spec.get(name)
        if given is None:
            slots.append(None if optional else (X, "normal", "float32") if not variadic
                         else [(X, "normal", "float32"), (X, "normal", "float32")])
        elif variadic:
            slots.append([_slot(g) for g in given])
        else:
            slots.append(_slot(given))
    return slots, dict(spec.get("_args", {}))


def _ndim(slots):
    for s in slots:
        if s is not None:
            return len((s[0] if isinstance(s, list) else s)[0])
    return 0


def _nudge_shape(value):
    """Variants of a shape-like argument: bigger entries, one entry fewer, a negative entry."""
    value = tuple(value)
    if not value:
        return []
    return [tuple(v + 1 for v in value), value[1:], (-abs(value[0]) - 1,) + value[1:]]


def _arg_variants(row, args, nd):
    for a in row.args:
        if a.name == "seed" or a.type == "Communicator":
            continue
        cur = args.get(a.name, a.default_value())
        values = []
        if a.type == "bool":
            values = [not cur] if cur is not None else [True, False]
        elif a.choices:
            values = [c for c in a.choices if c != cur]
        elif a.type == "int64" and a.name in AXIS_ARGS:
            values = list(range(-nd - 1, nd + 1))
        elif a.type == "int64":
            values = [0, -1, (cur if isinstance(cur, int) else 0) + 1]
        elif a.type in ("float", "double"):
            values = [0.0, 2.5]
        elif a.type == "repeated int64" and a.name in AXES_ARGS:
            values = [(), (0,), (-1,), (nd - 1, 0), (nd,), (-nd - 1,), (0, 0), tuple(range(nd))]
        elif a.type in ("repeated int64", "Shape") and cur is not None:
            values = _nudge_shape(cur)
        elif a.type == "repeated float" and cur:
            values = [tuple(2 * v for v in cur), tuple(cur)[1:]]
        for v in values:
            if v != cur:
                yield "{}={}".format(a.name, v), {a.name: v}


def _shape_variants(shape):
    out = []
    if len(shape) >= 1 and shape[0] != 1:
        out.append(("dim0=1", (1,) + shape[1:]))
    if len(shape) >= 1:
        out.append(("dim0=0", (0,) + shape[1:]))
        out.append(("shorter", shape[1:]))
    if len(shape) >= 2 and shape[-1] != 1:
        out.append(("last=1", shape[:-1] + (1,)))
    return out


def _input_variants(row, slots):
    names = [n for n, _, _ in row.inputs]
    float_inputs = [i for i, s in enumerate(slots) if s is not None and not isinstance(s, list)
                    and s[1].split(":")[0] not in INT_KINDS]
    for dtype in ("float16", "float64"):
        new = [s if i not in float_inputs else (s[0], s[1], dtype) for i, s in enumerate(slots)]
        if float_inputs:
            yield "float_inputs={}".format(dtype), new
    if float_inputs and slots[float_inputs[0]][1] != "special":
        i = float_inputs[0]
        new = list(slots)
        new[i] = (slots[i][0], slots[i][1] if slots[i][1] != "normal" else "int", "int32")
        yield "{}.dtype=int32".format(names[i]), new
    for i, s in enumerate(slots):
        if s is None:
            continue
        if isinstance(s, list):
            for label, shape in _shape_variants(s[0][0]):
                new = list(slots)
                new[i] = [(shape, s[0][1], s[0][2])] + s[1:]
                yield "{}[0].{}".format(names[i], label), new
            continue
        kind = s[1]
        if kind.startswith("vals"):
            continue
        if kind.split(":")[0] in ("label", "index"):   # labels and indices as floats and int64
            other = "float32" if s[2] != "float32" else "int64"
            new = list(slots)
            new[i] = (s[0], kind, other)
            yield "{}.dtype={}".format(names[i], other), new
        for label, shape in _shape_variants(s[0]):
            new = list(slots)
            new[i] = (shape, kind, s[2])
            yield "{}.{}".format(names[i], label), new
        if row.inputs[i][1]:
            new = list(slots)
            new[i] = None
            yield "omit:{}".format(names[i]), new


def _apply_extra(row, slots, args, extra):
    names = [n for n, _, _ in row.inputs]
    slots, args = list(slots), dict(args)
    for k, v in extra.items():
        if k in names:
            i = names.index(k)
            slots[i] = [_slot(g) for g in v] if isinstance(v, list) else _slot(v)
        else:
            args[k] = v
    return slots, args


def cases_for(row):
    """Every case of one function, without duplicates, base first."""
    slots, args = _base(row)
    nd = _ndim(slots)
    found, seen = [], set()

    def add(label, slots_, args_):
        case = Case(label, slots_, args_)
        k = case.key()
        if k not in seen:
            seen.add(k)
            found.append(case)

    add("base", slots, args)
    for label, a in _arg_variants(row, args, nd):
        add(label, slots, dict(args, **a))
    for label, s in _input_variants(row, slots):
        add(label, s, args)
    for extra in EXTRA.get(row.snake, []):
        s, a = _apply_extra(row, slots, args, extra)
        add("extra:" + ",".join("{}={}".format(k, v) for k, v in sorted(extra.items())), s, a)
    return found
