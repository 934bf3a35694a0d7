"""User-defined ops with PythonFunction, as in nnabla."""
import numpy as np

import nnabla_jit as nn
import nnabla_jit.functions as F


class Square(nn.PythonFunction):
    def __init__(self, ctx=None, scale=1.0):
        super().__init__(ctx)
        self.scale = scale

    @property
    def name(self):
        return "Square"

    def setup_impl(self, inputs, outputs):
        outputs[0].reset_shape(inputs[0].shape, True)

    def forward_impl(self, inputs, outputs):
        outputs[0].d = self.scale * inputs[0].d ** 2

    def backward_impl(self, inputs, outputs, propagate_down, accum):
        if not propagate_down[0]:
            return
        g = 2 * self.scale * inputs[0].d * outputs[0].g
        if accum[0]:
            inputs[0].g += g
        else:
            inputs[0].g = g


def test_forward_backward_in_a_graph():
    x = nn.Variable.from_numpy_array(np.array([1.0, -2.0, 3.0], np.float32), need_grad=True)
    y = Square(scale=0.5)(x)
    assert y.parent.name == "Square"
    loss = F.sum(F.tanh(y))
    loss.forward()
    np.testing.assert_allclose(y.d, 0.5 * x.d ** 2)
    x.g = 0
    loss.backward()
    np.testing.assert_allclose(x.g, (1 - np.tanh(0.5 * x.d ** 2) ** 2) * x.d, rtol=1e-5)
    loss.backward()   # leaves accumulate
    np.testing.assert_allclose(x.g, 2 * (1 - np.tanh(0.5 * x.d ** 2) ** 2) * x.d, rtol=1e-5)


def test_auto_forward_runs_python_function():
    x = nn.Variable.from_numpy_array(np.array([2.0], np.float32))
    with nn.auto_forward():
        y = Square()(x)
    np.testing.assert_allclose(y.d, [4.0])
