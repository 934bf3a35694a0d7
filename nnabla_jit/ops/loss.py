"""Loss functions.

The elementwise losses are table lines (see ``elementwise.py``). The class-label losses see their
input as (O, C, I) around the class ``axis`` and their labels as (O, 1, I); labels may be stored
as integers or as floats holding integers. A negative label marks a sample to ignore (its loss and
gradient are 0, as in nnabla); a label that is NaN, +inf or not below the number of classes is an
error (nnabla 1.39 gives a loss of 0 for NaN and +inf and reads past the row for a label too large).
"""
import math

import numpy as np
from numba import njit, prange

from . import common
from .common import label_of, normalize_axis, outer_axis_inner, sample_label, store
from .elementwise import elementwise
from .kernels import parallel_kernel
from .registry import Op, register


# ------------------------------------------------------------------ per-element rules
# What one sample or one element of the label losses and KLMultinomial computes, as
# @njit(inline="always") helpers: the CPU kernels below call them, and the CUDA kernels
# (cuda_ops/loss.py) compile them from their py_func.
@njit(cache=True, inline="always")
def softmax_at(x3, prob3, o, i):
    """The softmax over the classes of sample (o, i) of x3, written into prob3; returns the
    logsumexp of x3 there (the max subtracted first, for stability)."""
    C = x3.shape[1]
    m = x3[o, 0, i]
    for c in range(1, C):
        m = max(m, x3[o, c, i])
    total = 0.0
    for c in range(C):
        e = math.exp(x3[o, c, i] - m)
        prob3[o, c, i] = e
        total += e
    inv = 1.0 / total
    for c in range(C):
        prob3[o, c, i] *= inv
    return m + math.log(total)


@njit(cache=True, inline="always")
def softmax_cross_entropy_grad(g, prob, c, k):
    """d loss / d x[c] of a sample with label k and loss gradient g: g (softmax - onehot)."""
    return g * (prob - (1.0 if c == k else 0.0))


@njit(cache=True, inline="always")
def categorical_cross_entropy_grad(g, x, c, k):
    """d loss / d x[c] of a sample with label k: -g / x[k] at the label, 0 elsewhere."""
    return -g / x if c == k else 0.0


@njit(cache=True, inline="always")
def kl_divergence_at(p2, q2, n):
    """sum over k of p log(p / q) along row n (terms with p == 0 contribute 0)."""
    s = 0.0
    for k in range(p2.shape[1]):
        pk = p2[n, k]
        if pk != 0:
            s += pk * (math.log(pk) - math.log(q2[n, k]))
    return s


@njit(cache=True, inline="always")
def kl_backward_at(p2, q2, g, n, k, dp2, dq2, want_p, want_q, accum_p, accum_q):
    """Element (n, k) of dp = g (log(p / q) + 1) and dq = -g p / q (the wanted ones; added to
    them with accum), g the gradient of row n. Calls no other jitted function: the CUDA kernel
    compiles its py_func."""
    p, q = p2[n, k], q2[n, k]
    if want_p:
        v = g * (math.log(p) - math.log(q) + 1.0)
        if accum_p:
            dp2[n, k] += v
        else:
            dp2[n, k] = v
    if want_q:
        v = -g * p / q
        if accum_q:
            dq2[n, k] += v
        else:
            dq2[n, k] = v


# ------------------------------------------------------------------ backward kernels
@njit(cache=True)
def first_bad_label(t3, n_classes):
    """The flat index of the first invalid label, or -1."""
    O, _, I = t3.shape
    for o in range(O):
        for i in range(I):
            if label_of(t3, o, i, n_classes) == -2:
                return o * I + i
    return -1


# The kernels of one sample per row (I == 1: the class axis last, the common case) are apart from
# the general ones: a network compiles only the kind it runs (each costs about a second).
@parallel_kernel
def softmax_cross_entropy_backward_rows(prob3, t3, dy, dx3, accum):
    """softmax_cross_entropy_backward_kernel for I == 1."""
    O, C, _ = prob3.shape
    for o in prange(O):
        k = label_of(t3, o, 0, C)
        g = dy[o] if k >= 0 else 0.0
        for c in range(C):
            v = softmax_cross_entropy_grad(g, prob3[o, c, 0], c, k)
            dx3[o, c, 0] = dx3[o, c, 0] + v if accum else v


@parallel_kernel
def softmax_cross_entropy_backward_kernel(prob3, t3, dy, dx3, accum):
    """dx (+)= dy (softmax - onehot(label)); 0 for ignored samples. Laid out as the forward."""
    O, C, I = prob3.shape
    for o in prange(O):
        labels = np.empty(I, np.int64)
        g = np.empty(I)
        for i in range(I):
            labels[i] = label_of(t3, o, i, C)
            g[i] = dy[o * I + i] if labels[i] >= 0 else 0.0
        for c in range(C):
            for i in range(I):
                v = softmax_cross_entropy_grad(g[i], prob3[o, c, i], c, labels[i])
                dx3[o, c, i] = dx3[o, c, i] + v if accum else v


def softmax_cross_entropy_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        t3 = inputs[1].reshape(op.shape3[0], 1, op.shape3[2])
        if op.saved_prob is None:   # backward before any forward
            mode = common.uncomputed_reads()
            if mode == "error":
                raise RuntimeError("backward: SoftmaxCrossEntropy needs the softmax its forward "
                                   "computes, and no forward() has run; call forward() first "
                                   "(NNABLA_JIT_UNCOMPUTED_READS=zeros reads zeros as nnabla does)")
            if mode == "warn":
                common.warn_uncomputed_read("The softmax SoftmaxCrossEntropy's backward needs")
            op.saved_prob = np.zeros(op.shape3, input_grads[0].dtype)
        kernel = softmax_cross_entropy_backward_rows if op.shape3[2] == 1 else softmax_cross_entropy_backward_kernel
        kernel.for_size(t3.size * op.shape3[1])(
            op.saved_prob, t3, output_grads[0].reshape(-1), input_grads[0].reshape(op.shape3), accum[0])


@parallel_kernel
def categorical_cross_entropy_backward_kernel(x3, t3, dy, dx3, accum):
    """dx[label] (+)= -dy / x[label]; every other element gets 0."""
    O, C, I = x3.shape
    for r in prange(O * I):
        o, i, k = sample_label(t3, r, C)
        for c in range(C):
            store(dx3, (o, c, i), categorical_cross_entropy_grad(dy[r], x3[o, c, i], c, k), accum)


def categorical_cross_entropy_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        x3, t3 = op.views(inputs)
        categorical_cross_entropy_backward_kernel.for_size(x3.size)(x3, t3, output_grads[0].reshape(-1),
                                                  input_grads[0].reshape(op.shape3), accum[0])


@parallel_kernel
def kl_multinomial_backward_kernel(p2, q2, dy, dp2, dq2, want_p, want_q, accum_p, accum_q):
    """dp = dy (log(p / q) + 1), dq = -dy p / q."""
    for n in prange(p2.shape[0]):
        for k in range(p2.shape[1]):
            kl_backward_at(p2, q2, dy[n], n, k, dp2, dq2, want_p, want_q, accum_p, accum_q)


def kl_multinomial_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    s = op.shape2
    p2, q2 = inputs[0].reshape(s), inputs[1].reshape(s)
    dp2 = input_grads[0].reshape(s) if propagate_down[0] else p2
    dq2 = input_grads[1].reshape(s) if propagate_down[1] else q2
    kl_multinomial_backward_kernel.for_size(p2.size)(p2, q2, output_grads[0].reshape(-1), dp2, dq2, propagate_down[0],
                                   propagate_down[1], accum[0], accum[1])


_TINY = float(np.finfo(np.float32).tiny)   # nnabla clamps log arguments at the float minimum

# nnabla documents 0/1 targets (and truncates others to integers); soft targets work here.
elementwise("SigmoidCrossEntropy", "softplus(x0) - x0 * x1", dx0="dy * (sigmoid(x0) - x1)",
            refused_grad_inputs=(1,), broadcasts=False)
elementwise("BinaryCrossEntropy",
            "-(x1 * log(maximum(x0, {0})) + (1 - x1) * log(maximum(1 - x0, {0})))".format(_TINY),
            dx0="dy * (x0 - x1) / (x0 * (1 - x0))", dx1="dy * (log(1 - x0) - log(x0))", broadcasts=False)
elementwise("SquaredError", "(x0 - x1) ** 2", dx0="2 * dy * (x0 - x1)", dx1="-2 * dy * (x0 - x1)")
elementwise("AbsoluteError", "abs(x0 - x1)", dx0="where(x0 > x1, dy, where(x0 < x1, -dy, 0.0))",
            dx1="where(x0 > x1, -dy, where(x0 < x1, dy, 0.0))")
elementwise("HuberLoss", "where(abs(x0 - x1) < delta, (x0 - x1) ** 2, delta * (2 * abs(x0 - x1) - delta))",
            dx0="2 * dy * where(abs(x0 - x1) < delta, x0 - x1, where(x0 > x1, delta, -delta))",
            dx1="-2 * dy * where(abs(x0 - x1) < delta, x0 - x1, where(x0 > x1, delta, -delta))")
elementwise("EpsilonInsensitiveLoss", "maximum(abs(x0 - x1) - epsilon, 0.0)",
            dx0="where(abs(x0 - x1) > epsilon, where(x0 > x1, dy, -dy), 0.0)",
            dx1="where(abs(x0 - x1) > epsilon, where(x0 > x1, -dy, dy), 0.0)")


@parallel_kernel
def softmax_cross_entropy_rows(x3, t3, prob3, y):
    """softmax_cross_entropy_kernel for I == 1 (one sample per row: scalars)."""
    O, C, _ = x3.shape
    bad = 0
    for o in prange(O):
        logsumexp = softmax_at(x3, prob3, o, 0)
        k = label_of(t3, o, 0, C)
        bad += 1 if k == -2 else 0
        y[o] = logsumexp - x3[o, k, 0] if k >= 0 else 0.0
    return bad


@parallel_kernel
def softmax_cross_entropy_kernel(x3, t3, prob3, y):
    """y = logsumexp(x) - x[label] per (o, i), and the softmax into prob3 (what backward needs).
    Returns the number of invalid labels. Rows o run in parallel; with the class axis not last
    (I > 1) the inner loops run along i, where the memory is contiguous."""
    O, C, I = x3.shape
    bad = 0
    for o in prange(O):
        m = x3[o, 0, :].copy()
        for c in range(1, C):
            for i in range(I):
                m[i] = max(m[i], x3[o, c, i])
        totals = np.zeros(I)
        for c in range(C):
            for i in range(I):
                e = np.exp(x3[o, c, i] - m[i])
                prob3[o, c, i] = e
                totals[i] += e
        inv = 1.0 / totals
        for c in range(C):
            for i in range(I):
                prob3[o, c, i] *= inv[i]
        for i in range(I):
            k = label_of(t3, o, i, C)
            bad += 1 if k == -2 else 0
            y[o * I + i] = m[i] + np.log(totals[i]) - x3[o, k, i] if k >= 0 else 0.0
    return bad


@parallel_kernel
def categorical_cross_entropy_kernel(x3, t3, y):
    """y = -log(x[label]) per (o, i). Returns the number of invalid labels."""
    O, C, I = x3.shape
    bad = 0
    for r in prange(O * I):
        o, i, k = sample_label(t3, r, C)
        if k == -2:
            bad += 1
            y[r] = 0.0
        else:
            y[r] = -np.log(x3[o, k, i]) if k >= 0 else 0.0
    return bad


class LabelOp(Op):
    """Scores x of any shape and class labels shaped like x with the class ``axis`` of size 1
    (the label losses here, TopNError and ConfusionMatrix in ``validation.py``)."""
    keep_input_dtypes = (1,)
    no_grad_inputs = (1,)
    refused_grad_inputs = (1,)   # the losses refuse a label with need_grad; the metrics pass

    def setup(self, x, t):
        self.axis = normalize_axis(self, self.axis, len(x))
        expected = tuple(1 if a == self.axis else s for a, s in enumerate(x))
        if tuple(t) != expected:
            self.fail("target of shape {} does not fit input of shape {} with axis {}: labels must "
                      "have shape {}", tuple(t), tuple(x), self.axis, expected)
        self.shape3 = outer_axis_inner(x, self.axis)
        self.target_shape = expected
        return [expected]

    def check_labels(self, t3, n_bad):
        """Raise on the first invalid label when a kernel reported any."""
        if n_bad:
            bad = first_bad_label(t3, self.shape3[1])
            o, i = divmod(bad, self.shape3[2])
            self.fail("label {!r} at position {} of the target is not a class index: labels must "
                      "be below the number of classes {} (negative ones are ignored)",
                      t3[o, 0, i].item(), tuple(int(k) for k in np.unravel_index(bad, self.target_shape)),
                      self.shape3[1])

    def views(self, inputs):
        O, C, I = self.shape3
        return inputs[0].reshape(O, C, I), inputs[1].reshape(O, 1, I)


@register
class SoftmaxCrossEntropy(LabelOp):
    """-log softmax(x)[label] along ``axis``, fused and numerically stable. The softmax of the
    last forward is kept on the op (as nnabla does) for backward, which then needs no x."""
    saved_prob = None

    def forward(self, inputs, outputs):
        x3, t3 = self.views(inputs)
        if self.saved_prob is None or self.saved_prob.shape != x3.shape or self.saved_prob.dtype != x3.dtype:
            self.saved_prob = np.empty(x3.shape, x3.dtype)
        kernel = (softmax_cross_entropy_rows if self.shape3[2] == 1
                  else softmax_cross_entropy_kernel).for_size(x3.size)
        self.check_labels(t3, kernel(x3, t3, self.saved_prob, outputs[0].reshape(-1)))

    backward = softmax_cross_entropy_backward

    def grad_depends_input_data(self, i, j):
        return j == 1


@register
class CategoricalCrossEntropy(LabelOp):
    """-log x[label] along ``axis`` (x holds probabilities)."""

    def forward(self, inputs, outputs):
        x3, t3 = self.views(inputs)
        kernel = categorical_cross_entropy_kernel.for_size(x3.size)
        self.check_labels(t3, kernel(x3, t3, outputs[0].reshape(-1)))

    backward = categorical_cross_entropy_backward


@parallel_kernel
def kl_multinomial_kernel(p2, q2, y):
    """y[n] = sum over k of p log(p / q) (terms with p == 0 contribute 0)."""
    for n in prange(p2.shape[0]):
        y[n] = kl_divergence_at(p2, q2, n)


@register
class KLMultinomial(Op):
    """KL divergence of multinomials p, q over the axes from ``base_axis`` on."""

    def setup(self, p, q):
        if tuple(p) != tuple(q):
            self.fail("p of shape {} and q of shape {} must have the same shape", tuple(p), tuple(q))
        self.base_axis = normalize_axis(self, self.base_axis, len(p), "base_axis")
        rows = int(np.prod(p[:self.base_axis], dtype=np.int64))
        self.shape2 = (rows, int(np.prod(p[self.base_axis:], dtype=np.int64)))
        return [tuple(p[:self.base_axis]) + (1,)]

    def forward(self, inputs, outputs):
        kl_multinomial_kernel.for_size(inputs[0].size)(inputs[0].reshape(self.shape2), inputs[1].reshape(self.shape2),
                              outputs[0].reshape(-1))

    backward = kl_multinomial_backward
