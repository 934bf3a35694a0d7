"""nn.grad's options from chainer.grad: grad_inputs, set_grad, retain_grad, loss_scale."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

X = np.array([0.5, 1.0, -2.0])


def setup_graph():
    x = nn.Variable.from_numpy_array(X, need_grad=True)
    h = F.sin(x)
    y = F.sum(h * h)
    return x, h, y


def dy_dx():
    return 2 * np.sin(X) * np.cos(X)


def test_loss_scale_multiplies_every_gradient():
    x, _, y = setup_graph()
    g, = nn.grad([y], [x], loss_scale=1024.0)
    g.forward()
    np.testing.assert_allclose(g.d, 1024 * dy_dx(), rtol=1e-5)
    weight = np.array(3.0)
    g, = nn.grad([y], [x], grad_outputs=[weight], loss_scale=0.5)
    g.forward()
    np.testing.assert_allclose(g.d, 1.5 * dy_dx(), rtol=1e-5)
    w = nn.Variable.from_numpy_array(np.array(2.0))
    g, = nn.grad([y], [x], grad_outputs=[w], loss_scale=4)
    g.forward()
    np.testing.assert_allclose(g.d, 8 * dy_dx(), rtol=1e-5)
    with pytest.raises(ValueError, match="loss_scale must be a finite number"):
        nn.grad([y], [x], loss_scale=float("inf"))


def test_grad_inputs_are_added_not_in_place():
    x, _, y = setup_graph()
    z = nn.Variable((3,), need_grad=True)   # not reached by y
    start = nn.Variable.from_numpy_array(np.array([10.0, 20.0, 30.0]))
    gx, gz = nn.grad([y], [x, z], grad_inputs=[start, np.ones(3)])
    F.sink(gx, gz).forward()
    np.testing.assert_allclose(gx.d, dy_dx() + [10, 20, 30], rtol=1e-5)
    np.testing.assert_allclose(gz.d, 1)
    np.testing.assert_array_equal(start.d, [10, 20, 30])   # untouched
    gx, = nn.grad([y], [x], grad_inputs=[None])
    gx.forward()
    np.testing.assert_allclose(gx.d, dy_dx(), rtol=1e-5)
    with pytest.raises(ValueError, match="1 grad_inputs for 2 inputs"):
        nn.grad([y], [x, z], grad_inputs=[None])
    with pytest.raises(ValueError, match=r"grad_inputs\[0\] has shape \(2,\), expected \(3,\)"):
        nn.grad([y], [x], grad_inputs=[np.ones(2)])


def test_set_grad_binds_input_grads():
    x, h, y = setup_graph()
    x.g = 0
    h.g = 0
    g, = nn.grad([y], [x], set_grad=True)
    g.forward()
    np.testing.assert_allclose(x.g, dy_dx(), rtol=1e-5)
    np.testing.assert_array_equal(h.g, 0)   # intermediates only with retain_grad


def test_retain_grad_binds_intermediate_grads_too():
    x, h, y = setup_graph()
    g, = nn.grad([y], [x], retain_grad=True)
    g.forward()
    np.testing.assert_allclose(h.g, 2 * np.sin(X), rtol=1e-5)
    np.testing.assert_allclose(y.g, 1)
    np.testing.assert_allclose(x.g, dy_dx(), rtol=1e-5)


def test_default_leaves_grads_alone():
    x, h, y = setup_graph()
    x.g = 7
    g, = nn.grad([y], [x])
    g.forward()
    np.testing.assert_array_equal(x.g, 7)
