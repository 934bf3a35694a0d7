"""LinearAdjoint: the transpose of a linear op made from the op's own backward kernel."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.backward_function.adjoint import linear_adjoint
from nnabla_jit.function import build
from nnabla_jit.ops.registry import GRAD_RULES, REGISTRY

# (source op, arguments, input shape): linear maps of their input 0
LINEAR_OPS = [
    ("Pad", dict(pad_width=(1, 2, 0, 1), mode="constant", constant_value=0.0), (2, 3, 4)),
    ("Pad", dict(pad_width=(2, 1), mode="reflect", constant_value=0.0), (2, 5)),
    ("Slice", dict(start=(0, 1), stop=(2, 4), step=(1, 2)), (3, 5)),
    ("Shift", dict(shifts=(1, -2), border_mode="nearest"), (3, 4)),
    ("SumPooling", dict(kernel=(2, 2), stride=(1, 2), ignore_border=True, pad=(1, 0),
                        channel_last=False), (1, 2, 4, 5)),
    ("AveragePooling", dict(kernel=(3, 2), stride=(2, 2), ignore_border=False, pad=(1, 1),
                            channel_last=False, including_pad=False), (2, 1, 5, 4)),
]


def _assert_same_inner_product(ay_dy, x_adx):
    """The two sides of <A x, dy> = <x, A^T dy> (float32 sums: relative to their size)."""
    scale = sum(np.abs(a * b).sum() for a, b in ay_dy)
    np.testing.assert_allclose(sum(np.sum(a * b) for a, b in ay_dy), np.sum(x_adx[0] * x_adx[1]),
                               rtol=0, atol=1e-5 * scale)


def _apply(name, args, x):
    return build(REGISTRY[name](input_names=("x",), **args), [x])


@pytest.mark.parametrize("name, args, shape", LINEAR_OPS)
def test_adjoint_is_the_transpose(name, args, shape):
    """<A x, dy> == <x, A^T dy> for random x and dy."""
    rng = np.random.RandomState(0)
    x = nn.Variable.from_numpy_array(rng.randn(*shape))
    y = _apply(name, args, x)
    y.forward()
    dy = nn.Variable.from_numpy_array(rng.randn(*y.shape))
    dx = linear_adjoint(name, args, shape, [dy])
    dx.forward()
    assert dx.shape == shape
    _assert_same_inner_product([(y.d, dy.d)], (x.d, dx.d))


@pytest.mark.parametrize("name, args, shape", LINEAR_OPS)
def test_adjoint_backward_and_grad_rule_are_the_source_op(name, args, shape):
    rng = np.random.RandomState(1)
    x = nn.Variable.from_numpy_array(rng.randn(*shape))
    y = _apply(name, args, x)
    dy = nn.Variable.from_numpy_array(rng.randn(*y.shape), need_grad=True)
    dx = linear_adjoint(name, args, shape, [dy])
    g = rng.randn(*shape)
    # backward: d dy = A g, accumulated onto what is there
    dy.grad.fill(1.0)
    dx.forward()
    dx.backward(g)
    x.d = g
    y.forward()
    np.testing.assert_allclose(dy.g, y.d + 1.0, rtol=1e-5, atol=1e-6)
    # grad rule (nn.grad): the source op again
    gv = nn.Variable.from_numpy_array(g)
    d_dy, = nn.grad([dx], [dy], grad_outputs=[gv])
    d_dy.forward()
    np.testing.assert_allclose(d_dy.d, y.d, rtol=1e-5, atol=1e-6)
    assert d_dy.parent.info.type_name == name


def test_held_inputs_get_no_gradient_and_multi_output_sources():
    # GridCorners: linear in x, coordinates held; STFT: two outputs, both differentiated
    rng = np.random.RandomState(2)
    x = nn.Variable.from_numpy_array(rng.randn(1, 2, 12))
    coords = nn.Variable.from_numpy_array(rng.uniform(0, 3, (1, 5, 2)))
    args = dict(spatial=(3, 4), nearest=False)
    y, _ = build(REGISTRY["GridCorners"](input_names=("x", "coords"), **args), [x, coords])
    y.forward()
    dy = nn.Variable.from_numpy_array(rng.randn(*y.shape))
    dx = linear_adjoint("GridCorners", args, x.shape, [dy], held=[coords], source_inputs=("x", "coords"))
    dx.forward()
    _assert_same_inner_product([(y.d, dy.d)], (x.d, dx.d))
    assert dx.parent.op.no_grad_inputs == (1,)

    signal = nn.Variable.from_numpy_array(rng.randn(2, 37))
    yr, yi = F.stft(signal, 8, 3, 8, "hanning", False, "constant", False)
    yr.forward()
    yi.forward()
    dyr = nn.Variable.from_numpy_array(rng.randn(*yr.shape))
    dyi = nn.Variable.from_numpy_array(rng.randn(*yi.shape))
    stft_args = dict(yr.parent.info.args)
    ds = linear_adjoint("STFT", stft_args, signal.shape, [dyr, dyi])
    ds.forward()
    _assert_same_inner_product([(yr.d, dyr.d), (yi.d, dyi.d)], (signal.d, ds.d))


def test_one_rule_serves_every_linear_adjoint():
    assert "LinearAdjoint" in GRAD_RULES
    for old in ("PadAdjoint", "SliceAdjoint", "ShiftAdjoint", "PoolingAdjoint", "ResampleAdjoint",
                "STFTAdjoint", "GridCornersAdjoint"):
        assert old not in REGISTRY and old not in GRAD_RULES


def test_bad_gradient_shape_names_the_op():
    dy = nn.Variable((2, 2))
    with pytest.raises(ValueError, match=r"LinearAdjoint: gradient shapes \[\(2, 2\)\] do not match .*Slice"):
        linear_adjoint("Slice", dict(start=(0,), stop=(3,), step=(1,)), (4,), [dy])
    with pytest.raises(ValueError, match="LinearAdjoint: unknown source op 'NoSuchOp'"):
        linear_adjoint("NoSuchOp", {}, (4,), [dy])
