"""nn.grad exactly as seeds 000/001: higher order, grad_outputs, persistent and bound outputs."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.backward_functions as BF
import nnabla_jit.functions as F
from nnabla_jit.testing import numerical_grad


def _nth_grad(y, x, n):
    dx = [y]
    for _ in range(n):
        dx = nn.grad([dx[0]], [x])
    return dx[0]


def test_tenth_derivative_of_sin():
    x = nn.Variable.from_numpy_array(np.random.randn(2, 2)).apply(need_grad=True)
    x.grad.zero()
    y = F.sin(x)
    dnx = _nth_grad(y, x, 10)
    dnx.forward()
    np.testing.assert_allclose(dnx.d, -np.sin(x.d), rtol=1e-4, atol=1e-5)
    dnx.backward()
    np.testing.assert_allclose(x.g, -np.cos(x.d), rtol=1e-4, atol=1e-5)


def test_second_derivative_matches_finite_differences():
    from nnabla_jit.context import Context
    with nn.context_scope(Context(["cpu:double"])):
        x = nn.Variable.from_numpy_array(np.array([0.3, -0.7, 1.1]), need_grad=True)

        def first(v):
            return nn.grad([F.sum(F.tanh(v) * v ** 2)], [v])[0]

        g = first(x)
        g.forward()
        total = F.sum(g)
        total.forward()
        x.g = 0
        total.backward()
        analytic = x.g.copy()
        numeric = numerical_grad(first, [x], [np.ones(3)], 0, 1e-6)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


def test_grad_outputs_forms():
    x = nn.Variable.from_numpy_array(np.array([1.0, 2.0], np.float32), need_grad=True)
    y = x * x
    for go, scale in [(None, 1.0), (3, 3.0), (0.5, 0.5), (np.array([2.0, 2.0]), 2.0),
                      (nn.NdArray.from_numpy_array(np.full(2, 4.0)), 4.0),
                      (nn.Variable.from_numpy_array(np.full(2, 5.0)), 5.0)]:
        g = nn.grad([y], [x], grad_outputs=[go])[0]
        g.forward()
        np.testing.assert_allclose(g.d, 2 * x.d * scale, rtol=1e-6)


def test_grad_outputs_errors():
    x = nn.Variable((2,), need_grad=True)
    y = x * 2
    with pytest.raises(ValueError, match="shape"):
        nn.grad([y], [x], grad_outputs=[np.ones(3)])
    with pytest.raises(ValueError, match=r"grad_outputs\[0\] must be None, a number, an array"):
        nn.grad([y], [x], grad_outputs=["bad"])
    with pytest.raises(ValueError, match="1 grad_outputs for 2 outputs"):
        nn.grad([y, y], [x], grad_outputs=[None])
    with pytest.raises(ValueError, match="every input must be a Variable"):
        nn.grad([y], [np.ones(2)])


def test_sum_over_several_outputs():
    x = nn.Variable.from_numpy_array(np.array([0.5, 1.5], np.float32), need_grad=True)
    g = nn.grad([F.sin(x), x * 3], [x])[0]
    g.forward()
    np.testing.assert_allclose(g.d, np.cos(x.d) + 3, rtol=1e-6)


def test_unreached_input_gets_zero():
    x = nn.Variable.from_numpy_array(np.ones(2, np.float32), need_grad=True)
    other = nn.Variable((3, 2), need_grad=True)
    gx, gother = nn.grad([F.sum(x * 2)], [x, other])
    gother.forward()
    assert gother.shape == (3, 2) and np.all(gother.d == 0)
    assert gother.parent.name == "Constant"


def test_persistent_outputs():
    x = nn.Variable((2,), need_grad=True)
    y = x * 2
    nn.grad([y], [x])
    assert y.persistent
    y2 = x * 3
    nn.grad([y2], [x], persistent_outputs=[False])
    assert not y2.persistent
    with pytest.raises(ValueError, match="persistent_outputs must be empty or one flag per output"):
        nn.grad([y2], [x], persistent_outputs=[True, False])


def test_bind_grad_output():
    x = nn.Variable.from_numpy_array(np.array([1.0, 2.0], np.float32), need_grad=True)
    g = nn.grad([x * x], [x], bind_grad_output=True)[0]
    g.forward()
    np.testing.assert_allclose(x.g, [2, 4])


def test_inputs_matched_by_equality_to_graph_variables():
    """Parameters from get_parameters() equal the unlinked copies placed in the graph."""
    w = nn.parameter.get_parameter_or_create("w", (2, 2), np.ones((2, 2), np.float32))
    x = nn.Variable.from_numpy_array(np.ones((1, 2), np.float32))
    y = F.sum(F.affine(x, w) * F.affine(x, nn.parameter.get_parameter_or_create("w", (2, 2))))
    params = nn.get_parameters()
    assert list(params) == ["w"]
    g = nn.grad([y], list(params.values()))[0]
    g.forward()
    # d/dW sum((xW)^2) = 2 x^T (xW) with W used twice through two unlinked copies
    np.testing.assert_allclose(g.d, 2 * x.d.T @ (x.d @ np.ones((2, 2))), rtol=1e-6)


def test_register_replaces_a_rule_and_show_registry(capsys):
    x = nn.Variable.from_numpy_array(np.array([1.0], np.float32), need_grad=True)
    original = BF.registry["Tanh"]
    try:
        BF.register("Tanh", lambda grad_inputs, inputs, input_shapes, outputs, output_shapes:
                    [grad_inputs[0] * 100.0])
        g = nn.grad([F.tanh(x)], [x])[0]
        g.forward()
        np.testing.assert_allclose(g.d, [100.0])
    finally:
        BF.register("Tanh", original)
    BF.show_registry()
    out = capsys.readouterr().out
    assert "Tanh" in out and "Affine" in out


def test_missing_rule_is_a_clear_error():
    class Cube(nn.PythonFunction):
        def setup_impl(self, inputs, outputs):
            outputs[0].reset_shape(inputs[0].shape, True)

        def forward_impl(self, inputs, outputs):
            outputs[0].d = inputs[0].d ** 3

        def backward_impl(self, inputs, outputs, propagate_down, accum):
            pass

    x = nn.Variable((2,), need_grad=True)
    with pytest.raises(ValueError, match="Cube.*registry"):
        nn.grad([Cube()(x)], [x])


def test_gradient_penalty_example_matches_finite_differences():
    """Seed 000's gradient-penalty example: the penalty's gradient goes through nn.grad's
    graph (second derivatives of conv, relu, max pooling, affine and softmax cross entropy)."""
    from nnabla_jit.context import Context
    import nnabla_jit.parametric_functions as PF
    rng = np.random.RandomState(0)
    with nn.context_scope(Context(["cpu:double"])):
        x = nn.Variable.from_numpy_array(rng.randn(2, 3, 8, 8))
        y = nn.Variable.from_numpy_array(rng.randint(0, 10, 2).reshape(2, 1))
        h = F.relu(PF.convolution(x, 4, (3, 3), (1, 1), name="conv1"))
        h = F.max_pooling(h, (2, 2))
        h = F.relu(PF.convolution(h, 4, (3, 3), (1, 1), name="conv2"))
        h = F.max_pooling(h, (2, 2))
        p = PF.affine(h, 10, name="pred")
        loss = F.mean(F.softmax_cross_entropy(p, y))
        params = nn.get_parameters()
        for v in params.values():   # PF creates float32 parameters; differences need float64
            v.d = v.d.astype(np.float64)
        grads = nn.grad([loss], params.values())
        gp = sum([(F.sum(g ** 2) ** 0.5 - 0) ** 2 for g in grads])
        total = loss + gp
        total.forward()
        for v in params.values():
            v.grad.zero()
        total.backward()
        for name in ["conv1/conv/W", "pred/affine/W"]:
            w = params[name]
            analytic = w.g.reshape(-1)[:5].copy()
            flat = w.d.reshape(-1)
            for k in range(5):
                orig = flat[k]
                flat[k] = orig + 1e-6
                total.forward()
                up = float(total.d)
                flat[k] = orig - 1e-6
                total.forward()
                down = float(total.d)
                flat[k] = orig
                np.testing.assert_allclose(analytic[k], (up - down) / 2e-6, rtol=1e-4, atol=1e-7)


def test_grad_through_a_wide_fan_of_functions():
    """Thousands of functions waiting at once (the heap-ordered traversal) give the right sum."""
    x = nn.Variable.from_numpy_array(np.array([0.3, -0.2], np.float32), need_grad=True)
    y = F.add_n(*[F.tanh(x * (1 + k % 3)) for k in range(1500)])
    dx, = nn.grad([y], [x])
    dx.forward()
    want = sum((1 + k % 3) * (1 - np.tanh((1 + k % 3) * x.d) ** 2) for k in range(1500))
    np.testing.assert_allclose(dx.d, want, rtol=1e-4)


def test_grad_takes_only_the_active_inputs_after_set_active_input_mask():
    xs = [nn.Variable.from_numpy_array(np.full((2,), k + 2.0, np.float32), need_grad=True)
          for k in range(3)]
    y = F.mul_n(*xs)
    y.parent.set_active_input_mask([True, False, True])
    g0, g1, g2 = nn.grad([y], xs)
    F.sink(g0, g1, g2).forward()
    np.testing.assert_array_equal(g0.d, 4)   # d(x0 x2)/dx0, without the inactive x1
    np.testing.assert_array_equal(g1.d, 0)
    np.testing.assert_array_equal(g2.d, 2)
