"""ONNX export: onnxruntime runs every exportable function like nnabla_jit does (one tiny graph
per case of ``CASES``, at opsets 11, 13, 17 and 20), and whole networks: an MLP, a CNN with
batch normalization and an LSTM; plus the errors, the CLI and the ``.nnp`` path."""
import os
import re
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit.parameter import get_parameter_or_create
from nnabla_jit.serialization import nnp as nnp_io

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
nnabla_onnx = pytest.importorskip("nnabla_jit.serialization.onnx")

# The oldest, the versions where signatures changed (13: axes as inputs, 18: reductions'
# axes), and the newest the installed onnx defines.
OPSETS = (11, 13, 17, 20, onnx.defs.onnx_opset_version())
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


# ------------------------------------------------------------------------------------ cases
class Case:
    """``build(*variables)`` -> output Variable(s), on ``inputs`` (arrays); the inputs whose
    index is in ``params`` are parameters (ONNX initializers), the others graph inputs.
    ``check(onnx_outputs, nnabla_outputs, input_arrays)`` replaces the comparison (random
    functions); ``min_opset``: below it the export must fail with a clear error."""

    def __init__(self, build, *inputs, params=(), rtol=1e-4, atol=1e-5, check=None, min_opset=11):
        self.build, self.inputs, self.params = build, inputs, params
        self.rtol, self.atol, self.check, self.min_opset = rtol, atol, check, min_opset


_rng = np.random.RandomState(1234)


def randn(*shape):
    return _rng.randn(*shape).astype(np.float32)


def uniform(low, high, *shape):
    return _rng.uniform(low, high, shape).astype(np.float32)


def integers(low, high, *shape):
    return _rng.randint(low, high, shape).astype(np.float32)


def distinct(*shape):
    """Values without ties (sorting and top-k agree on the order)."""
    return (_rng.permutation(int(np.prod(shape))).reshape(shape) * 0.37 - 3).astype(np.float32)


def specials():
    return np.array([[0.0, np.nan, 1.5], [-np.inf, 2.0, np.inf]], np.float32)


def check_random(low, high):
    def check(onnx_outputs, nnabla_outputs, inputs):
        y, ref = onnx_outputs[0], nnabla_outputs[0]
        assert y.shape == ref.shape
        assert np.all(y >= low) and np.all(y <= high)
    return check


def check_identity(onnx_outputs, nnabla_outputs, inputs):
    np.testing.assert_array_equal(onnx_outputs[0], inputs[0])


def _ident(x):
    return x


def _pos(*shape):
    return uniform(0.5, 2.0, *shape)


def _round_values():
    return np.array([[-2.5, -1.5, -0.5, 0.5], [1.5, 2.5, 0.2, -0.7]], np.float32)


def _conv_case(**kw):
    channel_last = kw.get("channel_last", False)
    group = kw.get("group", 1)
    x = randn(2, 6, 6, 4) if channel_last else randn(2, 4, 7, 6)
    w = randn(6, 3, 3, 4 // group) if channel_last else randn(6, 4 // group, 3, 3)
    return Case(lambda x, w, b: F.convolution(x, w, b, **kw), x, w, randn(6), params=(1, 2))


def _deconv_case(**kw):
    channel_last = kw.get("channel_last", False)
    group = kw.get("group", 1)
    x = randn(2, 5, 5, 4) if channel_last else randn(2, 4, 5, 4)
    w = randn(4, 3, 3, 6 // group) if channel_last else randn(4, 6 // group, 3, 3)
    return Case(lambda x, w, b: F.deconvolution(x, w, b, **kw), x, w, randn(6), params=(1, 2))


def _rnn_inputs(kind, layers, bidirectional, hidden=3, n_in=4, seq=5, batch=2):
    dirs = 2 if bidirectional else 1
    gates = {"rnn": (), "lstm": (4,), "gru": (3,)}[kind]
    bias_gates = {"rnn": (), "lstm": (4,), "gru": (4,)}[kind]
    arrays = [randn(seq, batch, n_in), randn(layers, dirs, batch, hidden)]
    if kind == "lstm":
        arrays.append(randn(layers, dirs, batch, hidden))
    arrays.append(randn(dirs, *gates, hidden, n_in + hidden) * 0.5)
    if layers > 1:
        arrays.append(randn(layers - 1, dirs, *gates, hidden, dirs * hidden + hidden) * 0.5)
    arrays.append(randn(layers, dirs, *bias_gates, hidden))
    return arrays


def _rnn_case(kind, layers, bidirectional, **kw):
    arrays = _rnn_inputs(kind, layers, bidirectional)
    fn = getattr(F, kind)
    n_state = 3 if kind == "lstm" else 2

    def build(*v):
        states, weights = v[:n_state], v[n_state:]
        weight = weights[1] if layers > 1 else None
        return fn(*states, weights[0], weight, weights[-1], num_layers=layers,
                  bidirectional=bidirectional, training=False, **kw)
    return Case(build, *arrays, params=tuple(range(n_state, len(arrays))), rtol=1e-4, atol=1e-5)


def _bn_inputs(channels=3, shape=(2, 3, 4, 5), axis=1):
    stat = [1] * len(shape)
    stat[axis] = channels
    return [randn(*shape), randn(*stat), _pos(*stat), randn(*stat), _pos(*stat)]


CASES = {
    # activations
    "Sigmoid": [Case(F.sigmoid, randn(2, 3))],
    "Swish": [Case(F.swish, randn(2, 3))],
    "Tanh": [Case(F.tanh, randn(2, 3))],
    "ReLU": [Case(F.relu, randn(2, 3))],
    "LeakyReLU": [Case(lambda x: F.leaky_relu(x, 0.2), randn(2, 3))],
    "Softmax": [Case(F.softmax, randn(2, 3, 4)), Case(lambda x: F.softmax(x, axis=1), randn(2, 3, 4))],
    "LogSoftmax": [Case(lambda x: F.log_softmax(x, axis=0), randn(3, 4))],
    "ELU": [Case(lambda x: F.elu(x, 0.5), randn(2, 3))],
    "SELU": [Case(F.selu, randn(2, 3))],
    "CReLU": [Case(F.crelu, randn(2, 3, 2))],
    "CELU": [Case(lambda x: F.celu(x, 0.7, axis=2), randn(2, 3, 2))],
    "PReLU": [Case(F.prelu, randn(2, 3, 4), randn(3), params=(1,)),
              Case(F.prelu, randn(2, 3), randn(1))],
    "GELU": [Case(F.gelu, randn(2, 5))],
    "Mish": [Case(F.mish, randn(2, 5))],
    "ReLU6": [Case(F.relu6, randn(2, 5) * 5)],
    "HardSigmoid": [Case(F.hard_sigmoid, randn(2, 5) * 3)],
    "HardTanh": [Case(F.hard_tanh, randn(2, 5) * 2)],
    "LogSigmoid": [Case(F.log_sigmoid, randn(2, 5))],
    "SoftPlus": [Case(F.softplus, randn(2, 5)), Case(lambda x: F.softplus(x, 2.0), randn(2, 5))],
    "SoftSign": [Case(F.softsign, randn(2, 5))],
    "TanhShrink": [Case(F.tanh_shrink, randn(2, 5))],
    "Sinc": [Case(F.sinc, np.array([[0.0, 1.0, -2.0], [3.0, 0.5, 0.0]], np.float32))],
    "BinarySigmoid": [Case(F.binary_sigmoid, np.array([[-1.0, 0.0, 2.0]], np.float32))],
    "BinaryTanh": [Case(F.binary_tanh, np.array([[-1.0, 0.0, 2.0]], np.float32))],
    # arithmetic
    "Add2": [Case(F.add2, randn(2, 3), randn(2, 3))],
    "BcAdd2": [Case(F.bc_add2, randn(2, 3, 4), randn(1, 3, 1))],
    "Sub2": [Case(F.sub2, randn(2, 3), randn(1, 3))],
    "Mul2": [Case(F.mul2, randn(2, 3), randn(2, 3))],
    "Div2": [Case(F.div2, randn(2, 3), _pos(2, 3))],
    "Pow2": [Case(F.pow2, _pos(2, 3), randn(2, 3))],
    "Minimum2": [Case(F.minimum2, randn(2, 3), randn(2, 3))],
    "Maximum2": [Case(F.maximum2, randn(2, 3), randn(2, 3))],
    "AddN": [Case(F.add_n, randn(2, 3), randn(2, 3), randn(2, 3))],
    "MulN": [Case(F.mul_n, randn(2, 3), randn(2, 3), randn(2, 3))],
    "AddScalar": [Case(lambda x: F.add_scalar(x, 1.5), randn(2, 3))],
    "MulScalar": [Case(lambda x: F.mul_scalar(x, -2.0), randn(2, 3))],
    "PowScalar": [Case(lambda x: F.pow_scalar(x, 2.0), randn(2, 3)),
                  Case(lambda x: F.pow_scalar(x, 0.5), _pos(2, 3))],
    "RSubScalar": [Case(lambda x: F.r_sub_scalar(x, 3.0), randn(2, 3))],
    "RDivScalar": [Case(lambda x: F.r_div_scalar(x, 3.0), _pos(2, 3))],
    "RPowScalar": [Case(lambda x: F.r_pow_scalar(x, 2.0), randn(2, 3))],
    "MinimumScalar": [Case(lambda x: F.minimum_scalar(x, 0.3), randn(2, 3))],
    "MaximumScalar": [Case(lambda x: F.maximum_scalar(x, 0.3), randn(2, 3))],
    "Sign": [Case(lambda x: F.sign(x, 0.5), np.array([[-2.0, 0.0, 3.0]], np.float32)),
             Case(lambda x: F.sign(x, 0.0), np.array([[-2.0, 0.0, 3.0]], np.float32))],
    "Round": [Case(F.round, _round_values())],
    "ATan2": [Case(F.atan2, np.array([[1, -1, 1, -1, 0, 0, 2, 0]], np.float32),
                   np.array([[1, 1, -1, -1, -1, 1, 0, 0]], np.float32))],
    "Mod2": [Case(F.mod2, randn(2, 3) * 4, _pos(2, 3))],
    "Abs": [Case(F.abs, randn(2, 3))],
    "Exp": [Case(F.exp, randn(2, 3))],
    "Log": [Case(F.log, _pos(2, 3))],
    "Identity": [Case(F.identity, randn(2, 3))],
    "Ceil": [Case(F.ceil, randn(2, 3) * 3)],
    "Floor": [Case(F.floor, randn(2, 3) * 3)],
    "Sin": [Case(F.sin, randn(2, 3))],
    "Cos": [Case(F.cos, randn(2, 3))],
    "Tan": [Case(F.tan, uniform(-1, 1, 2, 3))],
    "Sinh": [Case(F.sinh, randn(2, 3))],
    "Cosh": [Case(F.cosh, randn(2, 3))],
    "ASin": [Case(F.asin, uniform(-0.9, 0.9, 2, 3))],
    "ACos": [Case(F.acos, uniform(-0.9, 0.9, 2, 3))],
    "ATan": [Case(F.atan, randn(2, 3))],
    "ASinh": [Case(F.asinh, randn(2, 3))],
    "ACosh": [Case(F.acosh, uniform(1.1, 3, 2, 3))],
    "ATanh": [Case(F.atanh, uniform(-0.9, 0.9, 2, 3))],
    "Erf": [Case(F.erf, randn(2, 3))],
    "BatchMatmul": [Case(F.batch_matmul, randn(2, 3, 4), randn(2, 4, 5)),
                    Case(lambda a, b: F.batch_matmul(a, b, True, True), randn(2, 4, 3), randn(2, 5, 4))],
    "BatchDet": [Case(F.batch_det, randn(2, 3, 3))],
    "BatchLogdet": [Case(F.batch_logdet, randn(2, 3, 3))],
    "Constant": [Case(lambda: F.constant(2.5, (2, 3)))],
    "Arange": [Case(lambda: F.arange(1.0, 4.0, 0.5))],
    "Linspace": [Case(lambda: F.linspace(-1.0, 2.0, 7))],
    # before opset 12: a broadcast product summed (test_einsum_before_opset_12 has more forms)
    "Einsum": [Case(lambda a, b: F.einsum(a, b, equation="ij,jk->ik"), randn(2, 3), randn(3, 4))],
    "Rand": [Case(lambda: F.rand(-1.0, 2.0, (50, 4)), check=check_random(-1.0, 2.0))],
    "Randn": [Case(lambda: F.randn(0.0, 1.0, (50, 4)), check=check_random(-10.0, 10.0))],
    "Randint": [Case(lambda: F.randint(2, 5, (50, 4)), check=check_random(2, 4))],
    # identity in forward
    "Dropout": [Case(lambda x: F.dropout(x, 0.3), randn(2, 3), check=check_identity)],
    "Unlink": [Case(F.unlink, randn(2, 3))],
    "ClipGradByValue": [Case(F.clip_grad_by_value, randn(2, 3), randn(2, 3), randn(2, 3))],
    "ClipGradByNorm": [Case(F.clip_grad_by_norm, randn(2, 3))],
    "TopKGrad": [Case(lambda x: F.top_k_grad(x, 2), randn(2, 3))],
    # comparison and logical
    "Equal": [Case(F.equal, integers(0, 3, 3, 4), integers(0, 3, 3, 4))],
    "NotEqual": [Case(F.not_equal, integers(0, 3, 3, 4), integers(0, 3, 3, 4))],
    "Greater": [Case(F.greater, integers(0, 3, 3, 4), integers(0, 3, 3, 4))],
    "GreaterEqual": [Case(F.greater_equal, integers(0, 3, 3, 4), integers(0, 3, 3, 4))],
    "Less": [Case(F.less, integers(0, 3, 3, 4), integers(0, 3, 3, 4))],
    "LessEqual": [Case(F.less_equal, integers(0, 3, 3, 4), integers(0, 3, 3, 4))],
    "EqualScalar": [Case(lambda x: F.equal_scalar(x, 1), integers(0, 3, 3, 4))],
    "NotEqualScalar": [Case(lambda x: F.not_equal_scalar(x, 1), integers(0, 3, 3, 4))],
    "GreaterScalar": [Case(lambda x: F.greater_scalar(x, 1), integers(0, 3, 3, 4))],
    "GreaterEqualScalar": [Case(lambda x: F.greater_equal_scalar(x, 1), integers(0, 3, 3, 4))],
    "LessScalar": [Case(lambda x: F.less_scalar(x, 1), integers(0, 3, 3, 4))],
    "LessEqualScalar": [Case(lambda x: F.less_equal_scalar(x, 1), integers(0, 3, 3, 4))],
    "LogicalAnd": [Case(F.logical_and, integers(0, 2, 3, 4), integers(-1, 2, 3, 4))],
    "LogicalOr": [Case(F.logical_or, integers(0, 2, 3, 4), integers(-1, 2, 3, 4))],
    "LogicalXor": [Case(F.logical_xor, integers(0, 2, 3, 4), integers(-1, 2, 3, 4))],
    "LogicalAndScalar": [Case(lambda x: F.logical_and_scalar(x, True), integers(-1, 2, 3, 4))],
    "LogicalOrScalar": [Case(lambda x: F.logical_or_scalar(x, False), integers(-1, 2, 3, 4))],
    "LogicalXorScalar": [Case(lambda x: F.logical_xor_scalar(x, True), integers(-1, 2, 3, 4))],
    "LogicalNot": [Case(F.logical_not, integers(-1, 2, 3, 4))],
    "IsNaN": [Case(F.isnan, specials())],
    "IsInf": [Case(F.isinf, specials())],
    "ResetNaN": [Case(lambda x: F.reset_nan(x, -1.0), specials())],
    "ResetInf": [Case(lambda x: F.reset_inf(x, 7.0), specials())],
    "Where": [Case(F.where, integers(0, 2, 3, 4), randn(3, 4), randn(3, 4))],
    "BoolFill": [Case(lambda d, m: F.bool_fill(d, m, 5.0), randn(3, 4), integers(0, 2, 3, 4))],
    # reductions
    "Sum": [Case(lambda x: F.sum(x, axis=1, keepdims=True), randn(2, 3, 4)), Case(F.sum, randn(2, 3))],
    "Mean": [Case(lambda x: F.mean(x, axis=(0, 2)), randn(2, 3, 4))],
    "Prod": [Case(lambda x: F.prod(x, axis=2), randn(2, 3, 4))],
    "Max": [Case(lambda x: F.max(x, axis=1), randn(2, 3, 4)),
            Case(lambda x: F.max(x, axis=(0, 2), keepdims=True, with_index=True), distinct(2, 3, 4))],
    "Min": [Case(lambda x: F.min(x, axis=2, only_index=True), distinct(2, 3, 4))],
    "Norm": [Case(lambda x: F.norm(x, 2, axis=1), randn(2, 3, 4)),
             Case(lambda x: F.norm(x, 1, axis=(1, 2), keepdims=True), randn(2, 3, 4)),
             Case(lambda x: F.norm(x, 3), randn(2, 3, 4))],
    "CumProd": [Case(lambda x: F.cumprod(x, 1), randn(2, 4)),
                Case(lambda x: F.cumprod(x, 0, exclusive=True, reverse=True), randn(3, 2)),
                Case(lambda x: F.cumprod(x, 0, exclusive=True), randn(1, 2))],
    "ReduceSum": [Case(F.reduce_sum, randn(2, 3))],
    "ReduceMean": [Case(F.reduce_mean, randn(2, 3))],
    "CumSum": [Case(lambda x: F.cumsum(x, 1), randn(2, 4)),
               Case(lambda x: F.cumsum(x, 0, exclusive=True, reverse=True), randn(3, 2))],
    # arrays
    "Reshape": [Case(lambda x: F.reshape(x, (3, -1)), randn(2, 3, 2))],
    "Transpose": [Case(lambda x: F.transpose(x, (2, 0, 1)), randn(2, 3, 4))],
    "Broadcast": [Case(lambda x: F.broadcast(x, (2, 3, 4)), randn(2, 1, 4))],
    "BroadcastTo": [Case(lambda x, y: F.broadcast_to(x, y, axis=1), randn(2, 3, 4, 5), randn(3, 4))],
    "Tile": [Case(lambda x: F.tile(x, (2, 1, 3)), randn(2, 3))],
    "Flip": [Case(lambda x: F.flip(x, (0, 2)), randn(2, 3, 4))],
    "Shift": [Case(lambda x: F.shift(x, (1, -2)), randn(3, 5)),
              Case(lambda x: F.shift(x, (2,), border_mode="reflect"), randn(3, 5))],
    "Pad": [Case(lambda x: F.pad(x, (1, 2), constant_value=0.5), randn(2, 3)),
            Case(lambda x: F.pad(x, (1, 1, 2, 0), "reflect"), randn(2, 3, 4)),
            Case(lambda x: F.pad(x, (2, 1), "repeat"), randn(2, 3))],
    "Slice": [Case(lambda x: F.slice(x, (0, 1), (2, 4), (1, 2)), randn(3, 5)),
              Case(lambda x: F.slice(x, (2, 4), (-4, -6), (-1, -2)), randn(3, 5))],
    "Concatenate": [Case(lambda a, b: F.concatenate(a, b, axis=1), randn(2, 3), randn(2, 2))],
    "Split": [Case(lambda x: F.split(x, axis=1), randn(2, 3, 4))],
    "Stack": [Case(lambda a, b: F.stack(a, b, axis=1), randn(2, 3), randn(2, 3))],
    "OneHot": [Case(lambda x: F.one_hot(x, (5,)), integers(0, 5, 4, 1)),
               Case(lambda x: F.one_hot(x, (3, 4)), np.array([[0, 1], [2, 3], [1, 0]], np.float32))],
    "Sort": [Case(lambda x: F.sort(x, axis=1, with_index=True), distinct(2, 5)),
             Case(lambda x: F.sort(x, axis=0, reverse=True), distinct(4, 3)),
             Case(lambda x: F.sort(x, only_index=True), distinct(2, 5))],
    "Shape": [Case(lambda x: F.shape(x, 1), randn(2, 3, 4))],
    "MatrixDiag": [Case(F.matrix_diag, randn(2, 3))],
    "MatrixDiagPart": [Case(F.matrix_diag_part, randn(2, 3, 3))],
    "Trilu": [Case(lambda x: F.trilu(x, 1, True), randn(2, 3, 4)),
              Case(lambda x: F.trilu(x, -1, False), randn(3, 4))],
    "EyeLike": [Case(lambda x: F.eye_like(x, 1), randn(3, 4))],
    "Meshgrid": [Case(lambda a, b: F.meshgrid(a, b), randn(3), randn(4)),
                 Case(lambda a, b, c: F.meshgrid(a, b, c, ij_indexing=True), randn(2), randn(3), randn(4))],
    # indexing
    "Gather": [Case(lambda x, i: F.gather(x, i, axis=1), randn(2, 4, 3), integers(0, 4, 2, 3))],
    "Embed": [Case(F.embed, integers(0, 5, 2, 3), randn(5, 4), params=(1,))],
    "GatherNd": [Case(F.gather_nd, randn(3, 4, 2), np.array([[0, 2, -1], [1, 3, 0]], np.float32))],
    "ScatterNd": [Case(lambda d, i: F.scatter_nd(d, i, shape=(4, 3)), randn(2, 3),
                       np.array([[0, 2]], np.float32)),
                  Case(lambda d, i: F.scatter_nd(d, i, shape=(4, 3), add=True), randn(3, 3),
                       np.array([[0, 2, 0]], np.float32), min_opset=16)],
    "ScatterAdd": [Case(lambda x0, i, x1: F.scatter_add(x0, i, x1, axis=0), randn(3, 4),
                        np.array([[0, 2, 1, 0], [2, 2, 0, 1]], np.float32), randn(3, 4), min_opset=16)],
    "BoolGather": [Case(F.bool_gather, randn(4, 3), np.array([1, 0, 1, 1], np.float32))],
    "BoolScatter": [Case(F.bool_scatter, randn(3, 2), np.array([1, 0, 1, 1], np.float32))],
    "SearchSorted": [Case(F.searchsorted, np.sort(integers(0, 6, 2, 5), axis=1), integers(-1, 7, 2, 4)),
                     Case(lambda s, v: F.searchsorted(s, v, right=True), np.sort(integers(0, 6, 2, 5), axis=1),
                          integers(-1, 7, 2, 4))],
    "NonZero": [Case(F.nonzero, integers(0, 2, 3, 4))],
    "Unique": [Case(lambda x: F.unique(x, with_index=True, with_inverse=True, with_counts=True),
                    integers(0, 5, 3, 4)),
               Case(lambda x: F.unique(x, flatten=False, axis=1, sorted=False, with_counts=True),
                    np.array([[1, 2, 1, 0], [3, 4, 3, 0]], np.float32))],
    "TopKData": [Case(lambda x: F.top_k_data(x, 3), distinct(2, 6)),
                 Case(lambda x: F.top_k_data(x, 2, abs=True, reduce=False), distinct(2, 3, 2)),
                 Case(lambda x: F.top_k_data(x, 2, largest=False, with_index=True), distinct(2, 5))],
    # layers
    "Affine": [Case(F.affine, randn(4, 3), randn(3, 5), randn(5), params=(1, 2)),
               Case(lambda x, w: F.affine(x, w, base_axis=2), randn(2, 3, 4, 2), randn(8, 2, 3),
                    params=(1,))],
    "BinaryConnectAffine": [Case(F.binary_connect_affine, randn(4, 3), randn(3, 5), randn(3, 5),
                                 randn(5), params=(1, 2, 3))],
    "BinaryWeightAffine": [Case(F.binary_weight_affine, randn(4, 3), randn(3, 5), randn(3, 5),
                                randn(5), randn(5), params=(1, 2, 3, 4))],
    "Convolution": [_conv_case(pad=(1, 1)),
                    _conv_case(stride=(2, 1), dilation=(1, 2), group=2),
                    _conv_case(pad=(1, 0), channel_last=True),
                    Case(lambda x, w: F.convolution(x, w, base_axis=2, pad=(1,)), randn(2, 3, 4, 6),
                         randn(5, 4, 3), params=(1,))],
    "DepthwiseConvolution": [Case(lambda x, w: F.depthwise_convolution(x, w, pad=(1, 1), multiplier=2),
                                  randn(2, 3, 5, 5), randn(6, 3, 3), params=(1,))],
    "DeformableConvolution": [
        Case(lambda x, w, off, m, b: F.deformable_convolution(x, w, off, m, b, pad=(1, 1), deformable_group=2),
             randn(2, 4, 5, 5), randn(3, 4, 3, 3), randn(2, 36, 5, 5) * 0.7, uniform(0, 1, 2, 18, 5, 5), randn(3),
             params=(1, 4), min_opset=19),
        Case(lambda x, w, off: F.deformable_convolution(x, w, off, stride=(2, 1), group=2),
             randn(1, 4, 6, 5), randn(4, 2, 2, 2), randn(1, 8, 6, 5), params=(1,), min_opset=19)],
    "Deconvolution": [_deconv_case(pad=(1, 1), stride=(2, 2)),
                      _deconv_case(stride=(2, 1), output_padding=(1, 0), group=2),
                      _deconv_case(pad=(1, 0), channel_last=True)],
    "DepthwiseDeconvolution": [Case(lambda x, w: F.depthwise_deconvolution(x, w, stride=(2, 2), divisor=2),
                                    randn(2, 4, 3, 3), randn(4, 3, 3), params=(1,))],
    "BinaryConnectConvolution": [Case(lambda x, w, wb, b: F.binary_connect_convolution(x, w, wb, b, pad=(1, 1)),
                                      randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(4, 3, 3, 3), randn(4),
                                      params=(1, 2, 3))],
    "BinaryWeightConvolution": [Case(lambda x, w, wb, a, b: F.binary_weight_convolution(x, w, wb, a, b),
                                     randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(4, 3, 3, 3), randn(4),
                                     randn(4), params=(1, 2, 3, 4))],
    "FusedConvolution": [
        # no bias with the batch normalization: nnabla refuses the pair
        Case(lambda x, w, beta, gamma, mean, var, z: F.fused_convolution(
            x, w, None, beta, gamma, mean, var, z, pad=(1, 1), batch_stat=False, pad_mode="reflect"),
            randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(1, 4, 1, 1), _pos(1, 4, 1, 1),
            randn(1, 4, 1, 1), _pos(1, 4, 1, 1), randn(2, 4, 5, 5), params=(1, 2, 3, 4, 5))],
    "MaxPooling": [Case(lambda x: F.max_pooling(x, (2, 2)), randn(2, 3, 5, 4)),
                   Case(lambda x: F.max_pooling(x, (3, 2), (2, 2), False, (1, 1)), randn(2, 3, 6, 5)),
                   Case(lambda x: F.max_pooling(x, (2, 2), channel_last=True), randn(2, 4, 4, 3))],
    "AveragePooling": [Case(lambda x: F.average_pooling(x, (2, 2), pad=(1, 1)), randn(2, 3, 5, 4)),
                       Case(lambda x: F.average_pooling(x, (2, 2), pad=(1, 1), including_pad=False),
                            randn(2, 3, 5, 4)),
                       Case(lambda x: F.average_pooling(x, (3, 3), (2, 2), False, (1, 0)), randn(2, 3, 6, 5)),
                       Case(lambda x: F.average_pooling(x, (3, 3), (2, 2), False, (1, 1), including_pad=False),
                            randn(2, 3, 6, 5)),
                       Case(lambda x: F.average_pooling(x, (2, 2), channel_last=True), randn(1, 4, 4, 3))],
    "SumPooling": [Case(lambda x: F.sum_pooling(x, (2, 2)), randn(2, 3, 4, 4)),
                   Case(lambda x: F.sum_pooling(x, (3, 3), (2, 2), False), randn(1, 2, 5, 6))],
    "GlobalAveragePooling": [Case(F.global_average_pooling, randn(2, 3, 4, 5))],
    "Unpooling": [Case(lambda x: F.unpooling(x, (2, 3)), randn(2, 3, 2, 2))],
    # normalization
    "BatchNormalization": [
        Case(lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v, batch_stat=False),
             *_bn_inputs(), params=(1, 2, 3, 4)),
        Case(lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v, axes=[3], batch_stat=False),
             *_bn_inputs(5, (2, 3, 4, 5), 3), params=(1, 2, 3, 4)),
        Case(lambda x, m, v: F.batch_normalization(x, None, None, m, v, batch_stat=False),
             randn(4, 3), randn(1, 3), _pos(1, 3)),
        Case(lambda x: F.batch_normalization(x, None, None, None, None), randn(4, 3, 2))],
    "FusedBatchNormalization": [
        Case(lambda x, b, g, m, v, z: F.fused_batch_normalization(x, b, g, m, v, z, batch_stat=False),
             *_bn_inputs(), randn(2, 3, 4, 5), params=(1, 2, 3, 4))],
    "SyncBatchNormalization": [
        Case(lambda x, b, g, m, v: F.sync_batch_normalization(x, b, g, m, v, None, batch_stat=False),
             *_bn_inputs(), params=(1, 2, 3, 4))],
    "TensorNormalization": [Case(lambda x, b, g: F.tensor_normalization(x, (1,), b, g), randn(3, 4, 2),
                                 randn(1, 4, 1), _pos(1, 4, 1), params=(1, 2))],
    "LayerNormalization": [Case(lambda x, b, g: F.layer_normalization(x, b, g), randn(3, 4, 5),
                                randn(1, 4, 5), _pos(1, 4, 5), params=(1, 2))],
    "InstanceNormalization": [Case(lambda x, b, g: F.instance_normalization(x, b, g), randn(2, 3, 5),
                                   randn(1, 3, 1), _pos(1, 3, 1), params=(1, 2))],
    "GroupNormalization": [Case(lambda x, b, g: F.group_normalization(x, b, g, 2), randn(2, 4, 3, 3),
                                randn(1, 4, 1, 1), _pos(1, 4, 1, 1), params=(1, 2))],
    "WeightStandardization": [Case(F.weight_standardization, randn(4, 3, 3), params=(0,))],
    "WeightNormalization": [Case(lambda w, g: F.weight_normalization(w, g, dim=1), randn(3, 4, 2),
                                 randn(4), params=(0, 1))],
    "NormNormalization": [Case(lambda x: F.norm_normalization(x, 2, axes=(1,)), randn(3, 4)),
                          Case(lambda x: F.norm_normalization(x, 3), randn(3, 4))],
    "MeanSubtraction": [Case(lambda x, m, t: F.mean_subtraction(x, m, t, update_running_mean=False),
                             randn(3, 4), randn(4), np.array([3.0], np.float32), params=(1, 2))],
    "SpectralNorm": [Case(lambda w, u: F.spectral_norm(w, u, dim=1, itr=2, test=True), randn(3, 4, 2),
                          randn(4), params=(0, 1), rtol=1e-3, atol=1e-4)],
    # losses
    "SigmoidCrossEntropy": [Case(F.sigmoid_cross_entropy, randn(3, 4), integers(0, 2, 3, 4))],
    "BinaryCrossEntropy": [Case(F.binary_cross_entropy, uniform(0.05, 0.95, 3, 4), uniform(0, 1, 3, 4))],
    "SoftmaxCrossEntropy": [Case(F.softmax_cross_entropy, randn(4, 5), integers(0, 5, 4, 1)),
                            Case(lambda x, t: F.softmax_cross_entropy(x, t, axis=1), randn(2, 5, 3),
                                 np.array([[[0, -1, 4]], [[2, 3, 1]]], np.float32))],
    "CategoricalCrossEntropy": [Case(F.categorical_cross_entropy, uniform(0.1, 1, 4, 5),
                                     integers(0, 5, 4, 1))],
    "SquaredError": [Case(F.squared_error, randn(3, 4), randn(3, 4))],
    "AbsoluteError": [Case(F.absolute_error, randn(3, 4), randn(3, 4))],
    "HuberLoss": [Case(lambda a, b: F.huber_loss(a, b, 0.5), randn(3, 4), randn(3, 4))],
    "EpsilonInsensitiveLoss": [Case(lambda a, b: F.epsilon_insensitive_loss(a, b, 0.3), randn(3, 4),
                                    randn(3, 4))],
    "KLMultinomial": [Case(F.kl_multinomial, uniform(0.1, 1, 2, 3, 2), uniform(0.1, 1, 2, 3, 2))],
    # quantization, geometry, detection
    "QuantizeLinear": [Case(lambda x, s, z: F.quantize_linear(x, s, z), randn(2, 5) * 20,
                            np.full((1, 1), 0.5, np.float32), np.full((1, 1), 3.0, np.float32)),
                       Case(lambda x, s, z: F.quantize_linear(x, s, z, "HALF_TO_EVEN", True, np.uint8),
                            np.array([[0.5, 1.5, 2.5, -7.0, 300.0]], np.float32),
                            np.ones((1, 5), np.float32), np.zeros((1, 5), np.float32))],
    "FixedPointQuantize": [Case(lambda x: F.fixed_point_quantize(x, n=4, delta=0.25), randn(3, 5) * 2),
                           Case(lambda x: F.fixed_point_quantize(x, sign=False, n=3, delta=0.5), randn(3, 5) * 2)],
    "Pow2Quantize": [Case(lambda x: F.pow2_quantize(x, n=4, m=1), randn(4, 5) * 2),
                     Case(lambda x: F.pow2_quantize(x, sign=False, with_zero=False, n=3, m=2), randn(4, 5) * 3)],
    "DequantizeLinear": [Case(F.dequantize_linear, integers(-5, 5, 2, 3), _pos(1, 3), integers(0, 2, 1, 3))],
    "AffineGrid": [Case(lambda t: F.affine_grid(t, (3, 4)), randn(2, 2, 3)),
                   Case(lambda t: F.affine_grid(t, (2, 3, 4), align_corners=True), randn(2, 3, 4))],
    "WarpByGrid": [Case(lambda x, grid, kw=kw: F.warp_by_grid(x, grid, **kw), randn(2, 3, 4, 5),
                        uniform(-1.2, 1.2, 2, 3, 6, 2), min_opset=16)
                   for kw in ({}, {"mode": "nearest", "padding_mode": "repeat"}, {"align_corners": True},
                              {"padding_mode": "reflect"}, {"padding_mode": "reflect", "align_corners": True})] +
                  [Case(lambda x, grid: F.warp_by_grid(x, grid, channel_last=True), randn(2, 4, 5, 3),
                        uniform(-1, 1, 2, 3, 6, 2), min_opset=16),
                   Case(lambda x, grid: F.warp_by_grid(x, grid), randn(1, 2, 3, 4, 5), uniform(-1, 1, 1, 2, 3, 4, 3),
                        min_opset=20)],
    "ONNXNonMaxSuppression": [Case(lambda b, s: F.onnx_non_max_suppression(b, s, 0, 2, 0.5, 0.1),
                                   np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [0, 2.1, 1, 3.2]]],
                                            np.float32), uniform(0, 1, 1, 2, 4))],
    "RoiAlign": [Case(lambda x, b: F.roi_align(x, b, (2, 3), (0.5, 0.5), 2), randn(2, 3, 8, 8),
                      np.array([[0, 1, 1, 9, 11], [1, 0.5, 2, 6, 7]], np.float32), min_opset=16),
                 Case(lambda x, b: F.roi_align(x, b, (3, 2), channel_last=True), randn(1, 6, 6, 2),
                      np.array([[0, 0.2, 0.4, 4, 5]], np.float32), min_opset=16)],
    # validation
    "TopNError": [Case(lambda x, t: F.top_n_error(x, t, n=2), distinct(5, 4),
                       np.array([[0], [3], [-1], [2], [1]], np.float32))],
    "BinaryError": [Case(F.binary_error, uniform(0, 1, 3, 4), uniform(0, 1, 3, 4))],
    "ConfusionMatrix": [Case(F.confusion_matrix, distinct(6, 3), np.array([[0], [2], [1], [-1], [2], [0]], np.float32)),
                        Case(lambda x, t: F.confusion_matrix(x, t, axis=1), distinct(2, 3, 2),
                             np.array([[[0, 2]], [[1, 1]]], np.float32))],
    # recurrent
    "RNN": [_rnn_case("rnn", 2, True), _rnn_case("rnn", 1, False, nonlinearity="relu")],
    "LSTM": [_rnn_case("lstm", 2, True), _rnn_case("lstm", 1, False)],
    "GRU": [_rnn_case("gru", 2, True), _rnn_case("gru", 1, False)],
    # resampling
    "Interpolate": [Case(lambda x, kw=kw: F.interpolate(x, output_size=(5, 7), mode="linear", **kw), randn(1, 2, 3, 4))
                    for kw in ({"align_corners": True}, {"half_pixel": True}, {})] +
                   [Case(lambda x, kw=kw: F.interpolate(x, output_size=(5, 3), mode="nearest", **kw), randn(1, 2, 3, 4))
                    for kw in ({"align_corners": True}, {"half_pixel": True}, {"half_pixel_for_nn": True}, {})] +
                   [Case(lambda x: F.interpolate(x, output_size=(6,), mode="nearest", channel_last=True),
                         randn(2, 3, 4))],
    "FFT": [Case(lambda x: F.fft(x, 1), randn(2, 6, 2), min_opset=17),
            Case(lambda x: F.fft(x, 2, normalized=True), randn(3, 4, 5, 2), min_opset=17)],
    "IFFT": [Case(lambda x: F.ifft(x, 2), randn(2, 3, 4, 2), min_opset=17),
             Case(lambda x: F.ifft(x, 1, normalized=True), randn(5, 2), min_opset=17)],
    "STFT": [Case(lambda x: F.stft(x, 8, 4, 8), randn(2, 30)),
             Case(lambda x: F.stft(x, 6, 3, 8, "hamming", pad_mode="constant"), randn(1, 20)),
             Case(lambda x: F.stft(x, 8, 2, 8, "rectangular", center=False), randn(2, 16))],
    "ISTFT": [Case(lambda r, i: F.istft(r, i, 8, 4, 8, pad_mode="constant"), randn(2, 5, 7), randn(2, 5, 7),
                   min_opset=16, atol=1e-4),
              Case(lambda r, i: F.istft(r, i, 8, 2, 8, "hamming", center=False, pad_mode="constant"),
                   randn(1, 5, 6), randn(1, 5, 6), min_opset=16, atol=1e-4)],
    "ONNXResize": [Case(lambda x: F.onnx_resize(x, sizes=(1, 2, 5, 7), mode="linear"), randn(1, 2, 3, 4)),
                   Case(lambda x: F.onnx_resize(x, scales=(1, 1, 2.0, 1.5), mode="nearest",
                                                coordinate_transformation_mode="asymmetric",
                                                nearest_mode="floor"), randn(1, 2, 3, 4)),
                   Case(lambda x: F.onnx_resize(x, sizes=(1, 2, 4, 4), mode="cubic",
                                                coordinate_transformation_mode="align_corners"),
                        randn(1, 2, 3, 3), rtol=1e-3, atol=1e-4)],
}


# ------------------------------------------------------------------------------------ harness
def run_onnx(model, feeds):
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except ort.capi.onnxruntime_pybind11_state.NotImplemented as e:   # e.g. DeformConv before 1.24
        pytest.skip("onnxruntime {} cannot run this model: {}".format(ort.__version__, e))
    return session.run(None, {k: np.asarray(v, np.float32) for k, v in feeds.items()})


def build_case(case):
    """The case's graph, run by nnabla_jit: (input dict, outputs, their values)."""
    variables, inputs = [], OrderedDict()
    for k, array in enumerate(case.inputs):
        if k in case.params:
            v = get_parameter_or_create("p{}".format(k), initializer=array.copy())
        else:
            v = nn.Variable.from_numpy_array(array)
            inputs["x{}".format(k)] = v
        variables.append(v)
    out = case.build(*variables)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    nn.forward_all(outs) if len(outs) > 1 else outs[0].forward()
    return inputs, outs, [np.array(o.d) for o in outs]


def compare(case, got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=case.rtol,
                                   atol=case.atol, equal_nan=True)


def _case_ids():
    params = []
    for op in sorted(nnabla_onnx.exportable_ops()):
        for k in range(max(1, len(CASES.get(op, ())))):
            params.append(pytest.param(op, k, id="{}-{}".format(op, k)))
    return params


@pytest.mark.parametrize("op,index", _case_ids())
def test_function_matches_onnxruntime(op, index):
    assert op in CASES, "no test case for the exportable function {}".format(op)
    case = CASES[op][index]
    for opset in OPSETS:
        nn.clear_parameters()
        inputs, outs, want = build_case(case)
        if opset < case.min_opset:
            with pytest.raises(nnabla_onnx.OnnxExportError, match=op):
                nnabla_onnx.to_model(outs, inputs, opset)
            continue
        model = nnabla_onnx.to_model(outs, inputs, opset)
        assert model.opset_import[0].version == opset
        got = run_onnx(model, {k: v.d for k, v in inputs.items()})
        if case.check:
            case.check(got, want, [v.d for v in inputs.values()])
        else:
            compare(case, got, want)


@pytest.mark.slow
@pytest.mark.parametrize("op,index", _case_ids())
def test_function_at_opsets_7_to_10(op, index):
    """Below opset 11 a function either exports and runs like nnabla_jit, or the export says
    which opset it needs (docs/onnx.md lists them)."""
    case = CASES[op][index]
    for opset in (7, 8, 9, 10):
        nn.clear_parameters()
        inputs, outs, want = build_case(case)
        try:
            model = nnabla_onnx.to_model(outs, inputs, opset)
        except nnabla_onnx.OnnxExportError as e:
            assert re.search(r"(needs|does|takes).*opset|opset \d+ (does|takes)", str(e)), str(e)
            continue
        got = run_onnx(model, {k: v.d for k, v in inputs.items()})
        if case.check:
            case.check(got, want, [v.d for v in inputs.values()])
        else:
            compare(case, got, want)


EINSUM_FORMS = [("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
                ("i,i", [(3,), (3,)]), ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 4)]),
                ("ij,ij,ij->ij", [(2, 3)] * 3), ("i,j->ij", [(2,), (3,)]), ("ij->", [(2, 3)]),
                ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("iij->j", [(2, 2, 3)]), ("ji", [(2, 3)])]


@pytest.mark.parametrize("opset", [7, 11])
def test_einsum_before_opset_12(opset):
    """Einsum, which ONNX defines from opset 12, as Mul/ReduceSum/Transpose/Reshape: diagonals,
    traces, ellipsis broadcasting, three operands, outer products, implicit outputs."""
    for equation, shapes in EINSUM_FORMS:
        arrays = [randn(*shape) for shape in shapes]
        inputs = OrderedDict(("x{}".format(k), nn.Variable.from_numpy_array(a)) for k, a in enumerate(arrays))
        y = F.einsum(*inputs.values(), equation=equation)
        y.forward()
        model = nnabla_onnx.to_model(y, inputs, opset)
        assert "Einsum" not in {node.op_type for node in model.graph.node}
        got = run_onnx(model, {k: v.d for k, v in inputs.items()})[0]
        np.testing.assert_allclose(got, y.d, rtol=1e-4, atol=1e-5, err_msg=equation)
        np.testing.assert_allclose(got, np.einsum(equation, *arrays), rtol=1e-4, atol=1e-5, err_msg=equation)


@pytest.mark.parametrize("opset", [9, 10])
def test_float_equal_before_opset_11(opset):
    """Equal takes floats from opset 11; before, neither less nor greater nor NaN."""
    a = np.array([[0, np.nan, 1.5, np.inf, -np.inf, 2, np.nan]], np.float32)
    b = np.array([[0, np.nan, 1.0, np.inf, np.inf, 2, 3]], np.float32)
    x, z = nn.Variable.from_numpy_array(a), nn.Variable.from_numpy_array(b)
    y = F.not_equal(x, z)
    y.forward()
    got = run_onnx(nnabla_onnx.to_model(y, [x, z], opset), {"x0": a, "x1": b})[0]
    np.testing.assert_array_equal(got, y.d)
    np.testing.assert_array_equal(got, [[0, 1, 1, 0, 1, 0, 1]])


def test_every_case_is_an_exportable_function():
    assert set(CASES) <= set(nnabla_onnx.exportable_ops())


# ------------------------------------------------------------------------------------ networks
def _check_network(outputs, inputs, feeds, atol=1e-5):
    """Every opset gives onnxruntime outputs equal to nnabla_jit's; parameters are named
    initializers."""
    for name, v in inputs.items():
        v.d = feeds[name]
    nn.forward_all(list(outputs.values()))
    want = [np.array(v.d) for v in outputs.values()]
    params = nn.get_parameters(grad_only=False)
    for opset in OPSETS:
        model = nnabla_onnx.to_model(outputs, inputs, opset)
        onnx.checker.check_model(model, full_check=True)
        assert [i.name for i in model.graph.input] == list(inputs)
        assert [o.name for o in model.graph.output] == list(outputs)
        initializers = {t.name for t in model.graph.initializer}
        assert any(p in initializers for p in params)
        for got, ref in zip(run_onnx(model, feeds), want):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=atol)


def test_mlp():
    x = nn.Variable((5, 12))
    h = F.relu(PF.affine(x, 16, name="fc1"))
    h = F.tanh(PF.affine(h, 8, name="fc2"))
    y = F.softmax(PF.affine(h, 3, name="fc3"))
    _check_network({"y": y}, {"x": x}, {"x": randn(5, 12)})


def cnn(x, test):
    h = PF.convolution(x, 6, (3, 3), pad=(1, 1), name="conv1")
    h = F.max_pooling(F.relu(PF.batch_normalization(h, batch_stat=not test, name="bn1")), (2, 2))
    h = PF.convolution(h, 8, (3, 3), pad=(1, 1), stride=(2, 2), name="conv2")
    h = F.average_pooling(F.elu(PF.batch_normalization(h, batch_stat=not test, name="bn2")), (2, 2))
    h = F.sigmoid(PF.affine(h, 10, name="fc1"))
    return PF.affine(h, 4, name="fc2")


def test_cnn_with_batch_normalization():
    x = nn.Variable((3, 2, 10, 10))
    with nn.parameter_scope("net"):
        y = cnn(x, test=True)
    for p in nn.get_parameters(grad_only=False).values():
        p.d = randn(*p.shape) if p.need_grad else _pos(*p.shape)
    _check_network({"y": y}, {"x": x}, {"x": randn(3, 2, 10, 10)})


def test_training_batch_normalization_exports_its_inference_form():
    """batch_stat=True (the training graph) exports as the graph with the running statistics."""
    x = nn.Variable((3, 2, 10, 10))
    with nn.parameter_scope("net"):
        train_y, test_y = cnn(x, test=False), cnn(x, test=True)
    for p in nn.get_parameters(grad_only=False).values():
        p.d = randn(*p.shape) if p.need_grad else _pos(*p.shape)
    x.d = randn(3, 2, 10, 10)
    test_y.forward()
    model = nnabla_onnx.to_model({"y": train_y}, {"x": x})
    assert [n.op_type for n in model.graph.node].count("BatchNormalization") == 2
    np.testing.assert_allclose(run_onnx(model, {"x": x.d})[0], test_y.d, rtol=1e-4, atol=1e-5)


def test_lstm_network():
    x = nn.Variable((6, 2, 5))
    h = nn.Variable((2, 2, 2, 4))
    c = nn.Variable((2, 2, 2, 4))
    with nn.parameter_scope("lstm"):
        y, h_n, c_n = PF.lstm(x, h, c, num_layers=2, bidirectional=True, training=False)
    logits = PF.affine(F.reshape(y, (12, 8)), 3, name="head")
    feeds = {"x": randn(6, 2, 5), "h": randn(2, 2, 2, 4), "c": randn(2, 2, 2, 4)}
    _check_network(OrderedDict([("logits", logits), ("h_n", h_n), ("c_n", c_n)]),
                   OrderedDict([("x", x), ("h", h), ("c", c)]), feeds)


def test_default_names_and_leaves():
    """Unnamed inputs and outputs are x0, y0 ...; leaves that are neither listed inputs nor
    parameters are constants holding their data."""
    x = nn.Variable.from_numpy_array(randn(2, 3))
    bias = nn.Variable.from_numpy_array(randn(2, 3))
    y = F.add2(F.tanh(x), bias)
    y.forward()
    model = nnabla_onnx.to_model(y)
    assert [i.name for i in model.graph.input] == ["x0", "x1"]
    model = nnabla_onnx.to_model([y], [x])
    assert [i.name for i in model.graph.input] == ["x0"] and model.graph.output[0].name == "y0"
    np.testing.assert_allclose(run_onnx(model, {"x0": x.d})[0], y.d, rtol=1e-5)


def test_index_outputs_feed_float_functions():
    """Indices (int64 in ONNX) are cast back to float where a function reads them as data, as
    nnabla_jit's executor casts them to the compute type."""
    x = nn.Variable.from_numpy_array(distinct(3, 4))
    y = F.mul_scalar(F.max(x, axis=1, only_index=True), 2.0)
    z = F.add2(F.sort(x, axis=1, only_index=True), x)
    nn.forward_all([y, z])
    model = nnabla_onnx.to_model([y, z], [x])
    for got, want in zip(run_onnx(model, {"x0": x.d}), [y.d, z.d]):
        np.testing.assert_allclose(got, want)


# ------------------------------------------------------------------------------------ errors
def test_unsupported_functions_are_reported_together():
    x = nn.Variable((2, 3, 3))
    index = nn.Variable.from_numpy_array(np.zeros((2, 1), np.float32))
    y = F.add2(F.batch_cholesky(x), F.batch_inv(F.tanh(x)))
    z = F.gather(x, index, axis=1, batch_dims=1)
    with pytest.raises(nnabla_onnx.OnnxExportError, match="no ONNX mapping for") as e:
        nnabla_onnx.to_model([y, z], [x])
    message = str(e.value)
    assert "BatchCholesky" in message and "BatchInv" in message and "batch_dims" in message
    with pytest.raises(nnabla_onnx.OnnxExportError, match="BatchInv, BatchCholesky"):
        nnabla_onnx.check_exportable(y)
    nnabla_onnx.check_exportable(F.tanh(x))


def test_exportable_ops_drive_the_function_tables():
    from nnabla_jit.utils.converter import onnx_function_set
    from nnabla_jit.utils.inspection import op_status
    exportable = nnabla_onnx.exportable_ops()
    assert {r["name"] for r in op_status() if r["onnx"]} == set(exportable)
    assert onnx_function_set() == set(exportable)
    assert {"Affine", "Convolution", "BatchNormalization", "LSTM", "SoftmaxCrossEntropy"} <= exportable
    nnabla_onnx.check_exportable(nnp_io.read(os.path.join(FIXTURES, "cnn.nnp")))


def test_without_the_onnx_package():
    """The package and its tables import without onnx; a conversion says what to install."""
    code = ("import sys; sys.modules['onnx'] = None\n"
            "import nnabla_jit as nn, nnabla_jit.functions as F\n"
            "from nnabla_jit.serialization import onnx as o\n"
            "assert 'Affine' in o.exportable_ops() and 'Conv' in o.importable_ops()\n"
            "x = nn.Variable((2, 3))\n"
            "try:\n    o.to_model(F.relu(x), x)\n"
            "except ImportError as e:\n    print(e)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "pip install 'nnabla_jit[onnx]'" in result.stdout


@pytest.mark.parametrize("opset", [6, onnx.defs.onnx_opset_version() + 1, "opset_x", "opset_snpe"])
def test_bad_opsets(opset):
    x = nn.Variable((2, 3))
    with pytest.raises(ValueError, match="opset"):
        nnabla_onnx.to_model(F.relu(x), x, opset)


def test_opset_spellings():
    assert nnabla_onnx.parse_opset("opset_11") == 11 == nnabla_onnx.parse_opset("11")
    assert nnabla_onnx.parse_opset(None) == nnabla_onnx.DEFAULT_OPSET == 17
    newest = onnx.defs.onnx_opset_version()
    assert nnabla_onnx.export_opsets() == range(7, newest + 1)
    assert nnabla_onnx.parse_opset("opset_{}".format(newest)) == newest


def test_failed_export_leaves_the_file_alone(tmp_path):
    path = str(tmp_path / "m.onnx")
    x = nn.Variable((2, 3, 3))
    nnabla_onnx.export(path, F.relu(x), x)
    before = open(path, "rb").read()
    with pytest.raises(nnabla_onnx.OnnxExportError, match="no ONNX mapping for: BatchInv"):
        nnabla_onnx.export(path, F.batch_inv(x), x)
    assert open(path, "rb").read() == before
    assert onnx.load(path).graph.node[0].op_type == "Relu"
    assert os.listdir(str(tmp_path)) == ["m.onnx"]


# ------------------------------------------------------------------------------------ .nnp and CLI
def _nnp_reference(path, feeds):
    from nnabla_jit.utils.nnp_graph import NnpLoader
    loader = NnpLoader(path)
    net = loader.get_network(loader.get_network_names()[0])
    for k, v in net.inputs.items():
        v.d = feeds[k]
    nn.forward_all(list(net.outputs.values()))
    return [np.array(v.d) for v in net.outputs.values()]


def test_export_nnp_matches_the_nnp(tmp_path):
    data = np.load(os.path.join(FIXTURES, "cnn_io.npz"))
    path = str(tmp_path / "cnn.onnx")
    model = nnabla_onnx.export_nnp(os.path.join(FIXTURES, "cnn.nnp"), path, opset="opset_13")
    assert model.opset_import[0].version == 13
    feeds = {i.name: data[i.name] if i.name in data else randn(*[d.dim_value for d in i.type.tensor_type.shape.dim])
             for i in model.graph.input}
    want = _nnp_reference(os.path.join(FIXTURES, "cnn.nnp"), feeds)
    for got, ref in zip(run_onnx(onnx.load(path), feeds), want):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "nnabla_jit"] + list(args), capture_output=True, text=True)


def test_cli_convert_and_function_info(tmp_path):
    from nnabla_jit.utils.save import save
    out = str(tmp_path / "mlp.onnx")
    result = _cli("convert", "--opset", "11", os.path.join(FIXTURES, "mlp.nnp"), out)
    assert result.returncode == 0, result.stderr
    assert onnx.load(out).opset_import[0].version == 11
    result = _cli("convert", "-f", "-d", "opset_20", os.path.join(FIXTURES, "mlp.nnp"), out)
    assert result.returncode == 0 and onnx.load(out).opset_import[0].version == 20
    # a model with a function ONNX lacks: function_info shows the gap, convert names it
    x = nn.Variable((2, 3, 3))
    y = F.batch_inv(F.tanh(x))
    model = str(tmp_path / "gap.nnp")
    save(model, {"networks": [{"name": "net", "batch_size": 2, "outputs": {"y": y}, "names": {"x": x}}],
                 "executors": [{"name": "runtime", "network": "net", "data": ["x"], "output": ["y"]}]})
    result = _cli("function_info", "-f", "ONNX", model)
    assert result.returncode == 0 and "Tanh" in result.stdout
    assert "does not support" in result.stderr and "BatchInv" in result.stderr
    result = _cli("convert", model, str(tmp_path / "gap.onnx"))
    assert result.returncode == 1 and "BatchInv" in result.stderr
    assert not os.path.exists(str(tmp_path / "gap.onnx"))
