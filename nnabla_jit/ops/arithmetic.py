"""Arithmetic ops (nnabla's "Arithmetic" category).

The two-operand ops broadcast like NumPy. Each line: forward expression, then the gradient of
each input in terms of the inputs, the output ``y`` and its gradient ``dy``.
"""
from numba import njit

from ..backward_ops import arithmetic as bw
from .elementwise import elementwise
from .registry import Op, register

elementwise("Add2", "x0 + x1", dx0="dy", dx1="dy")
elementwise("BcAdd2", "x0 + x1", dx0="dy", dx1="dy")
elementwise("Sub2", "x0 - x1", dx0="dy", dx1="-dy")
elementwise("Mul2", "x0 * x1", dx0="dy * x1", dx1="dy * x0")
elementwise("Div2", "x0 / x1", dx0="dy / x1", dx1="-dy * x0 / (x1 * x1)")
elementwise("Pow2", "x0 ** x1", dx0="dy * x1 * x0 ** (x1 - 1)", dx1="dy * y * log(x0)")
elementwise("AddScalar", "x + val", dx="dy")
elementwise("MulScalar", "x * val", dx="dy * val")
elementwise("PowScalar", "x ** val", dx="dy * val * x ** (val - 1)")
elementwise("RSubScalar", "val - x", dx="-dy")
elementwise("RDivScalar", "val / x", dx="-dy * val / (x * x)")
elementwise("RPowScalar", "val ** x", dx="dy * y * log(val)")


@njit(cache=True)
def combine(out, x, multiply, first):
    """out = x (first), else out *= x or out += x; flat arrays."""
    if first:
        for i in range(out.size):
            out[i] = x[i]
    elif multiply:
        for i in range(out.size):
            out[i] *= x[i]
    else:
        for i in range(out.size):
            out[i] += x[i]


class _NAryOp(Op):
    """AddN / MulN: the sum or product of any number of same-shaped inputs."""
    multiply = False

    def setup(self, *shapes):
        if not shapes:
            self.fail("needs at least one input")
        if any(s != shapes[0] for s in shapes):
            self.fail("all inputs must have the same shape; got {}", ", ".join(map(str, shapes)))
        return [shapes[0]]

    def forward(self, inputs, outputs):
        y = outputs[0].reshape(-1)
        for k, x in enumerate(inputs):
            combine(y, x.reshape(-1), self.multiply, k == 0)

    backward = bw.n_ary_backward

    def grad_depends_input_data(self, i, j):
        return self.multiply and i != j


@register
class AddN(_NAryOp):
    grad = bw.add_n_grad


@register
class MulN(_NAryOp):
    multiply = True
    grad = bw.mul_n_grad
