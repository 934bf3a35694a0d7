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


# nnabla's DataGrad / FilterGrad of the bilinear ops: (module, op function, x shape, w shape, args)
BILINEAR_CASES = [
    ("affine", F.affine, (2, 3, 4), (12, 5), [1]),
    ("convolution", F.convolution, (2, 4, 6, 5), (6, 2, 3, 2), [1, (1, 0), (2, 1), (1, 2), 2]),
    ("deconvolution", F.deconvolution, (2, 4, 3, 4), (4, 3, 2, 3), [1, (0, 1), (2, 1), (1, 1), 1, False,
                                                                    (1, 0)]),
]


@pytest.mark.parametrize("module, fn, x_shape, w_shape, args", BILINEAR_CASES)
def test_data_and_filter_grads_are_the_op_gradients_and_differentiable(module, fn, x_shape, w_shape, args):
    rng = np.random.RandomState(1)
    mod = importlib.import_module("nnabla_jit.backward_function." + module)
    kind = module.title().replace("_", "")
    x = nn.Variable.from_numpy_array(rng.randn(*x_shape).astype(np.float32), need_grad=True)
    w = nn.Variable.from_numpy_array(rng.randn(*w_shape).astype(np.float32), need_grad=True)
    y = fn(x, w, None, *args)
    dy_values = rng.randn(*y.shape).astype(np.float32)
    y.forward()
    x.grad.zero()
    w.grad.zero()
    y.backward(dy_values)
    dy = nn.Variable.from_numpy_array(dy_values, need_grad=True)
    data_grad = getattr(mod, kind + "DataGrad")(nn.Context(), *args)
    data_grad.xshape = x_shape
    filter_grad = getattr(mod, kind + "FilterGrad")(nn.Context(), *args)
    filter_grad.wshape = w_shape
    dx, dw = data_grad(dy, w), filter_grad(dy, x)
    assert dx.parent.info.type_name == kind + "DataGrad"
    assert dx.parent.info.args == y.parent.info.args   # the op's arguments, as in nnabla
    F.sink(dx, dw).forward()
    np.testing.assert_allclose(dx.d, x.g, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw.d, w.g, rtol=1e-4, atol=1e-4)
    # sum(dx * gx) is bilinear in (dy, w): its gradients are the op on gx and the filter grad
    gx = rng.randn(*x_shape).astype(np.float32)
    loss = F.sum(dx * nn.Variable.from_numpy_array(gx))
    loss.forward()
    dy.grad.zero()
    w.grad.zero()
    loss.backward()
    a_g = fn(nn.Variable.from_numpy_array(gx), w, None, *args)
    a_g.forward()
    np.testing.assert_allclose(dy.g, a_g.d, rtol=1e-4, atol=1e-4)
    x.d = gx
    dw_g = filter_grad(dy, x)
    dw_g.forward()
    np.testing.assert_allclose(w.g, dw_g.d, rtol=1e-4, atol=1e-4)
    # nn.grad goes through the rules the same way
    g_dy, g_w = nn.grad([dx], [dy, w], grad_outputs=[gx])
    F.sink(g_dy, g_w).forward()
    np.testing.assert_allclose(g_dy.d, a_g.d, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(g_w.d, dw_g.d, rtol=1e-4, atol=1e-4)
    assert getattr(mod, module + "_data_grad_backward") is GRAD_RULES[kind + "DataGrad"]


def test_bilinear_grad_checks_its_shapes():
    df = importlib.import_module("nnabla_jit.backward_function.convolution").ConvolutionFilterGrad(
        nn.Context(), 1, (0, 0))
    with pytest.raises(ValueError, match="ConvolutionFilterGrad: set wshape"):
        df(nn.Variable((2, 3, 4, 4)), nn.Variable((2, 2, 6, 6)))
    df.wshape = (3, 2, 3, 3)
    with pytest.raises(ValueError, match="ConvolutionFilterGrad: dy of shape"):
        df(nn.Variable((2, 3, 5, 5)), nn.Variable((2, 2, 6, 6)))


@pytest.mark.parametrize("is_add", [False, True])
def test_fused_batch_normalization_backward_is_the_ops_gradient(is_add):
    rng = np.random.RandomState(2)
    mod = importlib.import_module("nnabla_jit.backward_function.fused_batch_normalization")
    shape, stat = (4, 3, 2, 2), (1, 3, 1, 1)

    def var(s, need_grad=False):
        return nn.Variable.from_numpy_array(rng.randn(*s).astype(np.float32), need_grad=need_grad)

    x, beta, gamma = var(shape, True), var(stat, True), var(stat, True)
    mean, variance = nn.Variable.from_numpy_array(np.zeros(stat, np.float32)), \
        nn.Variable.from_numpy_array(np.ones(stat, np.float32))
    z = var(shape, True) if is_add else None
    y = F.fused_batch_normalization(x, beta, gamma, mean, variance, z, axes=[1])
    y.forward()
    dy = var(shape, True)
    for v in (x, beta, gamma) + ((z,) if is_add else ()):
        v.grad.zero()
    y.backward(dy.d)
    df = mod.FusedBatchNormalizationBackward(nn.Context(), [1], 0.9, 1e-5, True, "relu")
    df.is_add = is_add
    y_data = nn.Variable.from_numpy_array(y.d)   # the ReLU mask of the second derivative
    outs = df(dy, x, beta, gamma, mean, variance, y_data, *((z,) if is_add else ()))
    assert len(outs) == (4 if is_add else 3)
    stats_before = mean.d.copy(), variance.d.copy()
    F.sink(*outs).forward()
    np.testing.assert_array_equal(mean.d, stats_before[0])   # running statistics left alone
    for out, v in zip(outs, (x, beta, gamma) + ((z,) if is_add else ())):
        np.testing.assert_allclose(out.d, v.g, rtol=1e-4, atol=1e-5)
    # its backward (the second derivative) is its grad rule evaluated
    assert outs[0].parent.info.args["axes"] == [1]
    g_outs = [rng.randn(*o.shape).astype(np.float32) for o in outs]
    rule = GRAD_RULES["FusedBatchNormalizationBackward"]
    assert mod.fused_batch_normalization_backward_backward is rule
    for o, g in zip(outs, g_outs):
        o.g = g
    for v in (dy, x, gamma):
        v.grad.zero()
    F.sink(*outs, one_input_grad=False).backward()
    graph = rule([nn.Variable.from_numpy_array(g) for g in g_outs], outs[0].parent.inputs, None, None, None,
                 **outs[0].parent.info.args)
    assert graph[2] is None and graph[4] is None
    F.sink(graph[0], graph[1], graph[3]).forward()
    for k, v in ((0, dy), (1, x), (3, gamma)):
        np.testing.assert_allclose(graph[k].d, v.g, rtol=1e-4, atol=1e-4)
