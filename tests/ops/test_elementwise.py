"""Every elementwise table line of the arithmetic, math, activation and logical families:
forward against NumPy, backward, grad rule and double backward (through nnabla_jit.testing),
over hypothesis-drawn shapes (and NumPy-broadcast shapes for the two-operand ops)."""
import importlib
import inspect

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st
from scipy.special import erf

import nnabla_jit.functions as F
from nnabla_jit.ops.elementwise import LINES
from nnabla_jit.testing import check_backward, check_function, strategies as nst


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softplus(x):
    return np.logaddexp(0, x)


def gelu(x):
    return x / 2 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


# name: (F call, NumPy reference, low, high, kinks to keep away from)
UNARY = {
    "AddScalar": (lambda x: F.add_scalar(x, 1.5), lambda x: x + 1.5, -2, 2, ()),
    "MulScalar": (lambda x: F.mul_scalar(x, -0.7), lambda x: x * -0.7, -2, 2, ()),
    "PowScalar": (lambda x: F.pow_scalar(x, 2.5), lambda x: x ** 2.5, 0.2, 2, ()),
    "PowScalar_square": (lambda x: F.pow_scalar(x, 2.0), lambda x: x ** 2, -2, 2, ()),
    "RSubScalar": (lambda x: F.r_sub_scalar(x, 3.0), lambda x: 3 - x, -2, 2, ()),
    "RDivScalar": (lambda x: F.r_div_scalar(x, 2.0), lambda x: 2 / x, 0.3, 2, ()),
    "RPowScalar": (lambda x: F.r_pow_scalar(x, 1.7), lambda x: 1.7 ** x, -2, 2, ()),
    "Abs": (F.abs, np.abs, -2, 2, (0,)),
    "Exp": (F.exp, np.exp, -2, 2, ()),
    "Log": (F.log, np.log, 0.2, 3, ()),
    "Identity": (F.identity, lambda x: x, -2, 2, ()),
    "Sin": (F.sin, np.sin, -3, 3, ()),
    "Cos": (F.cos, np.cos, -3, 3, ()),
    "Tan": (F.tan, np.tan, -1.2, 1.2, ()),
    "Sinh": (F.sinh, np.sinh, -2, 2, ()),
    "Cosh": (F.cosh, np.cosh, -2, 2, ()),
    "ASin": (F.asin, np.arcsin, -0.9, 0.9, ()),
    "ACos": (F.acos, np.arccos, -0.9, 0.9, ()),
    "ATan": (F.atan, np.arctan, -2, 2, ()),
    "ASinh": (F.asinh, np.arcsinh, -2, 2, ()),
    "ACosh": (F.acosh, np.arccosh, 1.2, 3, ()),
    "ATanh": (F.atanh, np.arctanh, -0.9, 0.9, ()),
    "Erf": (F.erf, erf, -2, 2, ()),
    "Sigmoid": (F.sigmoid, sigmoid, -4, 4, ()),
    "Swish": (F.swish, lambda x: x * sigmoid(x), -4, 4, ()),
    "Tanh": (F.tanh, np.tanh, -3, 3, ()),
    "ReLU": (F.relu, lambda x: np.maximum(x, 0), -2, 2, (0,)),
    "LeakyReLU": (lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x), -2, 2, (0,)),
    "ELU": (lambda x: F.elu(x, 1.3), lambda x: np.where(x >= 0, x, 1.3 * (np.exp(x) - 1)), -2, 2, (0,)),
    "SELU": (F.selu, lambda x: np.where(x > 0, 1.05070098735548 * x,
                                        1.05070098735548 * 1.673263242354377 * (np.exp(x) - 1)), -2, 2, (0,)),
    "GELU": (F.gelu, gelu, -3, 3, ()),
    "Mish": (F.mish, lambda x: x * np.tanh(softplus(x)), -3, 3, ()),
    "ReLU6": (F.relu6, lambda x: np.clip(x, 0, 6), -1, 7, (0, 6)),
    "HardSigmoid": (F.hard_sigmoid, lambda x: np.clip(0.2 * x + 0.5, 0, 1), -4, 4, (-2.5, 2.5)),
    "HardTanh": (F.hard_tanh, lambda x: np.clip(x, -1, 1), -2, 2, (-1, 1)),
    "LogSigmoid": (F.log_sigmoid, lambda x: -softplus(-x), -4, 4, ()),
    "SoftPlus": (lambda x: F.softplus(x, 1.5), lambda x: softplus(1.5 * x) / 1.5, -3, 3, ()),
    "SoftSign": (F.softsign, lambda x: x / (1 + np.abs(x)), -3, 3, (0,)),
    "TanhShrink": (F.tanh_shrink, lambda x: x - np.tanh(x), -3, 3, ()),
    "Sinc": (F.sinc, lambda x: np.sinc(x / np.pi), -4, 4, ()),
    "MinimumScalar": (lambda x: F.minimum_scalar(x, 0.3), lambda x: np.minimum(x, 0.3), -2, 2, (0.3,)),
    "MaximumScalar": (lambda x: F.maximum_scalar(x, 0.3), lambda x: np.maximum(x, 0.3), -2, 2, (0.3,)),
    "ResetNaN": (lambda x: F.reset_nan(x, 0.0), lambda x: x, -2, 2, ()),
    "ResetInf": (lambda x: F.reset_inf(x, 0.0), lambda x: x, -2, 2, ()),
}

BINARY = {
    "Add2": (F.add2, np.add, -2, 2),
    "BcAdd2": (F.bc_add2, np.add, -2, 2),
    "Sub2": (F.sub2, np.subtract, -2, 2),
    "Mul2": (F.mul2, np.multiply, -2, 2),
    "Div2": (F.div2, np.divide, 0.4, 2),
    "Pow2": (F.pow2, np.power, 0.4, 2),
    "ATan2": (F.atan2, np.arctan2, 0.3, 2),
    "Minimum2": (F.minimum2, np.minimum, -2, 2),
    "Maximum2": (F.maximum2, np.maximum, -2, 2),
}

# Outputs 1.0 / 0.0 and no gradient in nnabla.
COMPARISONS = {
    "LogicalAnd": (F.logical_and, lambda a, b: (a != 0) & (b != 0)),
    "LogicalOr": (F.logical_or, lambda a, b: (a != 0) | (b != 0)),
    "LogicalXor": (F.logical_xor, lambda a, b: (a != 0) ^ (b != 0)),
    "Equal": (F.equal, np.equal),
    "NotEqual": (F.not_equal, np.not_equal),
    "GreaterEqual": (F.greater_equal, np.greater_equal),
    "Greater": (F.greater, np.greater),
    "LessEqual": (F.less_equal, np.less_equal),
    "Less": (F.less, np.less),
}
SCALAR_COMPARISONS = {
    "LogicalAndScalar": (lambda x: F.logical_and_scalar(x, True), lambda x: x != 0),
    "LogicalOrScalar": (lambda x: F.logical_or_scalar(x, False), lambda x: x != 0),
    "LogicalXorScalar": (lambda x: F.logical_xor_scalar(x, True), lambda x: x == 0),
    "EqualScalar": (lambda x: F.equal_scalar(x, 1.0), lambda x: x == 1),
    "NotEqualScalar": (lambda x: F.not_equal_scalar(x, 1.0), lambda x: x != 1),
    "GreaterEqualScalar": (lambda x: F.greater_equal_scalar(x, 1.0), lambda x: x >= 1),
    "GreaterScalar": (lambda x: F.greater_scalar(x, 1.0), lambda x: x > 1),
    "LessEqualScalar": (lambda x: F.less_equal_scalar(x, 1.0), lambda x: x <= 1),
    "LessScalar": (lambda x: F.less_scalar(x, 1.0), lambda x: x < 1),
    "LogicalNot": (F.logical_not, lambda x: x == 0),
    "IsNaN": (F.isnan, np.isnan),
    "IsInf": (F.isinf, np.isinf),
}
STRAIGHT_THROUGH = {   # nnabla passes the gradient through unchanged
    "Round": (F.round, lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)),
    "Ceil": (F.ceil, np.ceil),
    "Floor": (F.floor, np.floor),
    "Sign": (lambda x: F.sign(x, 0.5), lambda x: np.where(x > 0, 1.0, np.where(x < 0, -1.0, 0.5))),
}


def _lines_defined_in(family):
    source = inspect.getsource(importlib.import_module("nnabla_jit.ops." + family))
    return {line.name for line in LINES if 'elementwise("{}"'.format(line.name) in source}


def test_the_table_covers_these_families():
    lines = set().union(*[_lines_defined_in(f) for f in ("arithmetic", "math", "activation", "logical")])
    covered = {n.split("_")[0] for n in UNARY} | set(BINARY) | set(COMPARISONS) | \
        set(SCALAR_COMPARISONS) | set(STRAIGHT_THROUGH) | {"Where"}
    assert sorted(lines - covered) == []


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary(name, data):
    fn, ref, low, high, kinks = UNARY[name]
    x = data.draw(nst.away_from(nst.arrays(nst.shapes(1, 2, 1, 4), low, high), kinks, 0.05))
    check_function(fn, [x], ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_with_broadcasting(name, data):
    fn, ref, low, high = BINARY[name]
    shape_a, shape_b = data.draw(nst.broadcastable_shapes(1, 3, 2))
    if data.draw(st.booleans()):
        shape_a, shape_b = shape_b, shape_a
    a = data.draw(nst.arrays(st.just(shape_a), low, high))
    b = data.draw(nst.arrays(st.just(shape_b), low, high))
    if name in ("Minimum2", "Maximum2"):     # the kink is a == b: keep the operands apart
        assume(np.min(np.abs(np.subtract(a, b))) > 0.05)
    check_function(fn, [a, b], ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_comparisons(name):
    fn, ref = COMPARISONS[name]
    rng = np.random.RandomState(0)
    a = rng.randint(-1, 2, (3, 4)).astype(np.float64)
    b = rng.randint(-1, 2, (4,)).astype(np.float64)
    from nnabla_jit.testing import check_forward
    check_forward(fn, [a, b], lambda a, b: ref(a, b).astype(np.float64))
    _assert_no_gradient(lambda v: fn(v, v * 2), a)


@pytest.mark.parametrize("name", sorted(SCALAR_COMPARISONS))
def test_scalar_comparisons(name):
    fn, ref = SCALAR_COMPARISONS[name]
    x = np.array([[0.0, 1.0, -1.0, 2.0], [np.nan, np.inf, -np.inf, 1.0]])
    from nnabla_jit.testing import check_forward
    with np.errstate(invalid="ignore"):
        check_forward(fn, [x], lambda x: ref(x).astype(np.float64))
    _assert_no_gradient(fn, x)


def _assert_no_gradient(fn, x):
    import nnabla_jit as nn
    from nnabla_jit.ops.registry import NoGradient
    v = nn.Variable.from_numpy_array(x, need_grad=True)
    y = fn(v)
    y.forward()
    with pytest.raises(NoGradient, match="has no (gradient|backward)"):
        y.backward()


@pytest.mark.parametrize("name", sorted(STRAIGHT_THROUGH))
def test_straight_through_gradient(name):
    fn, ref = STRAIGHT_THROUGH[name]
    x = np.array([[-2.5, -1.5, -0.3, 0.0], [0.3, 1.5, 2.5, 3.7]])
    from nnabla_jit.testing import check_forward, check_grad_rule
    check_forward(fn, [x], ref)
    import nnabla_jit as nn
    v = nn.Variable.from_numpy_array(x, need_grad=True)
    y = fn(v)
    y.forward()
    v.g = 0
    y.backward(grad=np.arange(8.0).reshape(2, 4))
    np.testing.assert_array_equal(v.g, np.arange(8.0).reshape(2, 4))
    check_grad_rule(fn, [x])


@given(data=st.data())
def test_where(data):
    shape = data.draw(nst.shapes(1, 3, 1, 4))
    c = (data.draw(nst.arrays(st.just(shape))) > 0).astype(np.float64)
    a, b = data.draw(nst.arrays(st.just(shape))), data.draw(nst.arrays(st.just(shape)))
    check_function(F.where, [c, a, b], lambda c, a, b: np.where(c != 0, a, b), wrt=[1, 2])


def test_reset_nan_and_inf_values():
    from nnabla_jit.testing import check_forward
    x = np.array([1.0, np.nan, np.inf, -np.inf])
    check_forward(lambda v: F.reset_nan(v, -1.0), [x], lambda x: np.where(np.isnan(x), -1.0, x))
    check_forward(lambda v: F.reset_inf(v, 7.0), [x], lambda x: np.where(np.isinf(x), 7.0, x))


def test_division_by_zero_gives_inf_not_an_exception():
    import nnabla_jit as nn
    x = nn.Variable.from_numpy_array(np.array([0.0, 1.0], np.float32))
    y = 1.0 / x
    y.forward()
    assert np.isinf(y.d[0]) and y.d[1] == 1.0


@given(data=st.data())
def test_add_n_mul_n(data):
    shape = data.draw(nst.shapes(1, 3, 1, 3))
    xs = [data.draw(nst.arrays(st.just(shape))) for _ in range(3)]
    check_function(lambda *v: F.add_n(*v), xs, lambda *v: sum(v))
    check_function(lambda *v: F.mul_n(*v), xs, lambda a, b, c: a * b * c)


def test_float32_and_float64_kernels_agree():
    import nnabla_jit as nn
    from nnabla_jit.context import Context
    x = np.linspace(-3, 3, 101)
    with nn.context_scope(Context(["cpu:double"])):
        d = F.gelu(nn.Variable.from_numpy_array(x))
    f = F.gelu(nn.Variable.from_numpy_array(x.astype(np.float32)))
    d.forward()
    f.forward()
    assert f.d.dtype == np.float32 and d.d.dtype == np.float64
    np.testing.assert_allclose(f.d, d.d, rtol=2e-6, atol=1e-6)
