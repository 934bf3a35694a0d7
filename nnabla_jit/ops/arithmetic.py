"""Arithmetic ops (nnabla's "Arithmetic" category).

The two-operand ops broadcast like NumPy. Each line: forward expression, then the gradient of
each input in terms of the inputs, the output ``y`` and its gradient ``dy``.
"""
from numba import njit

from .elementwise import elementwise
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
@njit(cache=True)
def scaled_accumulate(dst, dy, scale, accum):
    """dst (+)= dy * scale over flat arrays."""
    if accum:
        for i in range(dst.size):
            dst[i] += dy[i] * scale[i]
    else:
        for i in range(dst.size):
            dst[i] = dy[i] * scale[i]


def n_ary_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = output_grads[0].reshape(-1)
    active = op.active_indices(len(inputs))
    for k, dx in enumerate(input_grads):
        if not propagate_down[k] or k not in active:
            continue   # an inactive input's gradient is left as it is, as nnabla does
        scale = np.ones_like(dy)
        if op.multiply:
            for j in active:
                x = inputs[j]
                if j != k:
                    scale *= x.reshape(-1)
        scaled_accumulate(dx.reshape(-1), dy, scale, accum[k])


elementwise("Add2", "x0 + x1", dx0="dy", dx1="dy")
elementwise("BcAdd2", "x0 + x1", dx0="dy", dx1="dy")
elementwise("Sub2", "x0 - x1", dx0="dy", dx1="-dy")
elementwise("Mul2", "x0 * x1", dx0="dy * x1", dx1="dy * x0")
elementwise("Div2", "x0 / x1", dx0="dy / x1", dx1="-dy * x0 / (x1 * x1)")
elementwise("Pow2", "x0 ** x1", dx0="dy * x1 * x0 ** (x1 - 1)", dx1="dy * y * log(x0)")
elementwise("AddScalar", "x + val", dx="dy")
elementwise("MulScalar", "x * val", dx="dy * val")
elementwise("PowScalar", "power(x, val)", dx="dy * val * power(x, val - 1)", baked_args=("val",))
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
    """AddN / MulN: the sum or product of any number of same-shaped inputs; only of the active
    ones after ``Function.set_active_input_mask`` (nnabla's, for these two ops only)."""
    multiply = False
    allows_input_mask = True
    active_input_mask = None   # None: every input; else one bool per input

    def active_indices(self, n_inputs):
        mask = self.active_input_mask
        return list(range(n_inputs)) if mask is None else [k for k in range(n_inputs) if mask[k]]

    def setup(self, *shapes):
        if not shapes:
            self.fail("needs at least one input")
        if any(s != shapes[0] for s in shapes):
            self.fail("all inputs must have the same shape; got {}", ", ".join(map(str, shapes)))
        return [shapes[0]]

    def forward(self, inputs, outputs):
        y = outputs[0].reshape(-1)
        active = self.active_indices(len(inputs))
        if not active:
            y.fill(1 if self.multiply else 0)   # the empty product / sum
        for n, k in enumerate(active):
            combine(y, inputs[k].reshape(-1), self.multiply, n == 0)

    backward = n_ary_backward

    def grad_depends_input_data(self, i, j):
        return self.multiply and i != j


@register
class AddN(_NAryOp):
    pass


@register
class MulN(_NAryOp):
    multiply = True


# ------------------------------------------------------------------------------ Mod2
# (appended with the indexing/linalg family)
import numpy as np  # noqa: E402

from .elementwise import broadcast_shape  # noqa: E402


@register
class Mod2(Op):
    """Remainder: numpy.fmod (sign of x0) for float x0 or with ``fmod``, else numpy.mod (sign of
    x1), x1 cast to x0's type. The output keeps x0's type; no gradient."""
    keep_input_dtypes = (0, 1)
    data_dependent = True

    def setup(self, x0, x1):
        self.out_shape = broadcast_shape(self, (x0, x1))
        return [self.out_shape]

    def output_specs(self, inputs):
        x0 = inputs[0]
        return None if x0 is None else [(self.out_shape, x0.dtype)]

    def forward(self, inputs, outputs):
        x0, x1 = inputs
        remainder = np.fmod if self.fmod or x0.dtype.kind == "f" else np.mod
        with np.errstate(divide="ignore", invalid="ignore"):   # x % 0: nan (float), 0 (int)
            remainder(x0, x1.astype(x0.dtype), out=outputs[0])
