"""nnabla's per-op module paths under backward_function (backward_function/per_op.py)."""
import importlib

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.function_bases
import nnabla_jit.functions as F
from nnabla_jit.ops.registry import GRAD_RULES


def test_a_per_op_module_holds_the_filed_rule_itself():
    relu = importlib.import_module("nnabla_jit.backward_function.relu")
    assert relu.relu_backward is GRAD_RULES["ReLU"]
    average_pooling = importlib.import_module("nnabla_jit.backward_function.average_pooling")
    assert average_pooling.average_pooling_backward is GRAD_RULES["AveragePooling"]


def test_a_family_module_of_the_same_name_wins():
    affine = importlib.import_module("nnabla_jit.backward_function.affine")
    assert affine.__file__.endswith("backward_function/affine.py")
    assert affine.affine_backward is GRAD_RULES["Affine"]    # with the op's per-op names too


def test_an_unknown_op_is_not_importable():
    with pytest.raises(ImportError, match="no_such_op"):
        importlib.import_module("nnabla_jit.backward_function.no_such_op")


@pytest.mark.parametrize("module, cls, fn, shape, args", [
    ("average_pooling", "AveragePoolingDataGrad", F.average_pooling, (2, 3, 5, 6),
     [(2, 2), (2, 1), False, (1, 0), False, True]),
    ("sum_pooling", "SumPoolingDataGrad", F.sum_pooling, (2, 3, 4, 6), [(2, 3), (1, 2), True, (0, 1)]),
    ("slice", "SliceDataGrad", F.slice, (6, 7, 5), [(5, 0, 1), (1, 6, 5), (-1, 2, 3)]),
    # nnabla's constructor takes the op's arguments (output_size, mode, ...), not F.interpolate's
    ("interpolate", "InterpolateDataGrad", nnabla_jit.function_bases.interpolate, (2, 3, 4, 5),
     [(7, 9), "linear"]),
])
def test_data_grad_is_the_ops_input_gradient_and_differentiable(module, cls, fn, shape, args):
    rng = np.random.RandomState(0)
    data_grad = getattr(importlib.import_module("nnabla_jit.backward_function." + module), cls)
    x = nn.Variable.from_numpy_array(rng.randn(*shape).astype(np.float32), need_grad=True)
    y = fn(x, *args)
    dy_values = rng.randn(*y.shape).astype(np.float32)
    y.forward()
    x.grad.zero()
    y.backward(dy_values)
    df = data_grad(nn.Context(), *args)
    df.xshape = shape
    dy = nn.Variable.from_numpy_array(dy_values, need_grad=True)
    dx = df(dy)
    dx.forward()
    np.testing.assert_allclose(dx.d, x.g, rtol=1e-5, atol=1e-6)
    # <dx, g> = <dy, A g>: the gradient wrt dy of sum(dx * g) is the op applied to g
    g = rng.randn(*shape).astype(np.float32)
    loss = F.sum(dx * nn.Variable.from_numpy_array(g))
    loss.forward()
    dy.grad.zero()
    loss.backward()
    a_g = fn(nn.Variable.from_numpy_array(g), *args)
    a_g.forward()
    np.testing.assert_allclose(dy.g, a_g.d, rtol=1e-4, atol=1e-5)


def test_data_grad_needs_xshape():
    df = importlib.import_module("nnabla_jit.backward_function.slice").SliceDataGrad(
        nn.Context(), (0,), (2,), (1,))
    with pytest.raises(ValueError, match="SliceDataGrad: set xshape"):
        df(nn.Variable((2,)))
