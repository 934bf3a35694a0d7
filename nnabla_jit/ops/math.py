"""Math ops: elementwise functions as table lines, plus Constant, Arange and BatchMatmul."""
import numpy as np
from numba import njit

from .common import KeepsInputType, sum_to_shape
from .elementwise import elementwise
from .registry import Op, accumulate, register


# ------------------------------------------------------------------ backward kernels
def batch_matmul_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """Y = opA(A) opB(B): d opA(A) = dY opB(B)^T and d opB(B) = opA(A)^T dY (BLAS)."""
    def t(m):
        return np.swapaxes(m, -1, -2)
    a, b = inputs
    dy = output_grads[0]
    op_a = t(a) if op.transpose_a else a
    op_b = t(b) if op.transpose_b else b
    if propagate_down[0]:
        g = np.matmul(dy, t(op_b))
        sum_to_shape(t(g) if op.transpose_a else g, input_grads[0], accum[0])
    if propagate_down[1]:
        g = np.matmul(t(op_a), dy)
        sum_to_shape(t(g) if op.transpose_b else g, input_grads[1], accum[1])


elementwise("Abs", "abs(x)", dx="where(x >= 0, dy, -dy)")
elementwise("Exp", "exp(x)", dx="dy * y")
elementwise("Log", "log(x)", dx="dy / x")
# nnabla passes the gradient straight through rounding (straight-through estimator).
elementwise("Round", "round_away(x)", dx="dy")
elementwise("Ceil", "ceil(x)", dx="dy")
elementwise("Floor", "floor(x)", dx="dy")
elementwise("Sin", "sin(x)", dx="dy * cos(x)")
elementwise("Cos", "cos(x)", dx="-dy * sin(x)")
elementwise("Tan", "tan(x)", dx="dy * (1 + y * y)")
elementwise("Sinh", "sinh(x)", dx="dy * cosh(x)")
elementwise("Cosh", "cosh(x)", dx="dy * sinh(x)")
elementwise("ASin", "asin(x)", dx="dy / sqrt(1 - x * x)")
elementwise("ACos", "acos(x)", dx="-dy / sqrt(1 - x * x)")
elementwise("ATan", "atan(x)", dx="dy / (1 + x * x)")
elementwise("ATan2", "atan2(x0, x1)", dx0="dy * x1 / (x0 * x0 + x1 * x1)",
            dx1="-dy * x0 / (x0 * x0 + x1 * x1)")
elementwise("ASinh", "asinh(x)", dx="dy / sqrt(x * x + 1)")
elementwise("ACosh", "acosh(x)", dx="dy / sqrt(x * x - 1)")
elementwise("ATanh", "atanh(x)", dx="dy / (1 - x * x)")
elementwise("Erf", "erf(x)", dx="dy * 2 / sqrt(pi) * exp(-x * x)")


@register
class Identity(KeepsInputType, Op):
    """y = x in x's own dtype; dx = dy."""

    def forward(self, inputs, outputs):
        outputs[0][...] = inputs[0]

    def backward(self, inputs, outputs, output_grads, input_grads, propagate_down, accum):
        if propagate_down[0]:
            accumulate(input_grads[0], output_grads[0], accum[0])

    def grad_depends_input_data(self, i, j):
        return False


@register
class Constant(Op):
    """An array of ``shape`` filled with ``val``."""

    def setup(self):
        if any(s < 0 for s in self.shape):
            self.fail("shape {} has a negative dimension", self.shape)
        return [self.shape]

    def forward(self, inputs, outputs):
        outputs[0].fill(self.val)


@njit(cache=True)
def arange_kernel(y, start, step):
    for i in range(y.size):
        y[i] = start + i * step


@register
class Arange(Op):
    """start, start + step, ... below stop."""

    def setup(self):
        if not all(np.isfinite(v) for v in (self.start, self.stop, self.step)):
            self.fail("start {}, stop {} and step {} must be finite", self.start, self.stop, self.step)
        if self.step == 0:
            self.fail("step must not be 0")
        n = int(np.ceil((self.stop - self.start) / self.step))
        return [(max(n, 0),)]

    def forward(self, inputs, outputs):
        arange_kernel(outputs[0], self.start, self.step)


@register
class BatchMatmul(Op):
    """y[b] = op(a[b]) @ op(b[b]) over leading batch dimensions (broadcast like NumPy)."""

    def setup(self, a, b):
        if len(a) < 2 or len(b) < 2:
            self.fail("inputs need at least 2 dimensions; got a {} and b {}", a, b)
        ra, ca = (a[-1], a[-2]) if self.transpose_a else (a[-2], a[-1])
        rb, cb = (b[-1], b[-2]) if self.transpose_b else (b[-2], b[-1])
        if ca != rb:
            self.fail("inner dimensions differ: a {} (transpose_a={}) and b {} (transpose_b={})",
                      a, self.transpose_a, b, self.transpose_b)
        try:
            batch = np.broadcast_shapes(a[:-2], b[:-2])
        except ValueError:
            self.fail("batch dimensions of a {} and b {} cannot be broadcast", a, b)
        return [tuple(batch) + (ra, cb)]

    def forward(self, inputs, outputs):
        a, b = inputs
        if self.transpose_a:
            a = np.swapaxes(a, -1, -2)
        if self.transpose_b:
            b = np.swapaxes(b, -1, -2)
        np.matmul(a, b, out=outputs[0])   # BLAS

    backward = batch_matmul_backward


# ------------------------------------------------------------------------------ Linspace, BitShift
# (appended with the indexing/linalg family)
from .elementwise import broadcast_shape  # noqa: E402


@njit(cache=True)
def linspace_kernel(y, start, stop):
    """y[i] = start + i (stop - start) / (n - 1), the last one exactly ``stop``."""
    n = y.size
    step = (stop - start) / (n - 1) if n > 1 else 0.0
    for i in range(n):
        y[i] = start + i * step
    if n > 1:
        y[n - 1] = stop


@register
class Linspace(Op):
    """``num`` evenly spaced values from start to stop, both included."""

    def setup(self):
        if self.num < 0:
            self.fail("num must be non-negative, got {}", self.num)
        return [(self.num,)]

    def forward(self, inputs, outputs):
        linspace_kernel(outputs[0], self.start, self.stop)


@register
class BitShift(Op):
    """x << shift or x >> shift for unsigned integer x (shift cast to x's type; shifting by
    the bit width or more gives 0). The output keeps x's type; no gradient."""
    keep_input_dtypes = (0, 1)
    data_dependent = True

    def setup(self, x, shift):
        self.out_shape = broadcast_shape(self, (x, shift))
        return [self.out_shape]

    def output_specs(self, inputs):
        x = inputs[0]
        if x is None:
            return None
        if x.dtype.kind != "u":
            self.fail("x must have an unsigned integer type, got {}", x.dtype)
        return [(self.out_shape, x.dtype)]

    def forward(self, inputs, outputs):
        x, shift = inputs
        shifter = np.left_shift if self.direction == "LEFT" else np.right_shift
        shifter(x, shift.astype(x.dtype), out=outputs[0])   # the ufunc defines the semantics
