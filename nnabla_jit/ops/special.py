"""nnabla's "special use" functions: Unlink, Sink and VATNoise.

They exist for graph plumbing in nnabla's GUI and keep its odd backward semantics:

* ``Unlink`` is the identity forward and blocks the gradient (the input gets zero);
* ``Sink`` joins any number of variables into one ``()``-shaped output so a single
  ``forward``/``backward`` call reaches them all; with ``one_input_grad`` its backward *sets*
  each input's gradient to ones (it does not accumulate, even into leaves), otherwise it leaves
  the gradients the user put there;
* ``VATNoise`` normalises noise per sample, ``y = eps * x / sqrt(sum(x**2) + 1e-8)``; its
  backward writes ``eps * dy`` into the *data* of ``w`` (the buffer that carries the gradient
  back to the next VAT step) and gives ``x`` no gradient.
"""
import numpy as np
from numba import prange

from .common import KeepsInputType, normalize_axis
from .kernels import parallel_kernel
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
def _zero_unless_accum(dx, accum):
    if not accum:
        dx.fill(0)


def unlink_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        _zero_unless_accum(input_grads[0], accum[0])


def sink_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not op.one_input_grad:
        return   # the gradients already in the inputs are the ones to propagate
    for dx, pd in zip(input_grads, propagate_down):
        if pd:
            dx.fill(1)


def vat_noise_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    w = inputs[1]
    w.reshape(-1)[...] = op.eps * output_grads[0].reshape(-1)
    if propagate_down[0]:
        _zero_unless_accum(input_grads[0], accum[0])
    if propagate_down[1]:
        _zero_unless_accum(input_grads[1], accum[1])


VAT_NORM_EPS = 1e-8   # nnabla's constant under the square root


@register
class Unlink(KeepsInputType, Op):
    """y = x in x's own dtype; no gradient reaches x."""

    def forward(self, inputs, outputs):
        outputs[0][...] = inputs[0]

    backward = unlink_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Sink(Op):
    """A ()-shaped dummy output depending on every input."""

    def setup(self, *xs):
        if not xs:
            self.fail("needs at least one input")
        return [()]

    def forward(self, inputs, outputs):
        outputs[0][...] = 0

    backward = sink_backward

    def grad_depends_input_data(self, i, j):
        return False


@parallel_kernel
def vat_noise_kernel(x, y, eps, norm_eps):
    """y[n] = eps * x[n] / sqrt(sum(x[n]**2) + norm_eps) for each row n of 2-d arrays."""
    for n in prange(x.shape[0]):
        s = 0.0
        for k in range(x.shape[1]):
            s += x[n, k] * x[n, k]
        scale = eps / np.sqrt(s + norm_eps)
        for k in range(x.shape[1]):
            y[n, k] = x[n, k] * scale


@register
class VATNoise(Op):
    """Per-sample L2-normalised noise (see the module docstring for the backward)."""
    keep_input_dtypes = (1,)   # backward writes w's data: take the stored buffer itself

    def setup(self, x, w):
        self.base_axis = normalize_axis(self, self.base_axis, len(x), "base_axis")
        if tuple(w) != tuple(x) and int(np.prod(w, dtype=np.int64)) != int(np.prod(x, dtype=np.int64)):
            self.fail("w of shape {} must have as many elements as x of shape {}", w, x)
        self.rows = int(np.prod(x[:self.base_axis], dtype=np.int64))
        return [x]

    def forward(self, inputs, outputs):
        x = inputs[0]
        kernel = vat_noise_kernel.for_size(x.size)
        kernel(x.reshape(self.rows, -1), outputs[0].reshape(self.rows, -1), self.eps, VAT_NORM_EPS)

    backward = vat_noise_backward

    def grad_depends_input_data(self, i, j):
        return j == 1   # backward writes into w's data buffer
