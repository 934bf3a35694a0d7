"""Backward kernels and grad rules of the class-label losses and KLMultinomial (the elementwise
losses get theirs from their table lines).

The label decoding shared by the forward and backward kernels of the label losses and of the
validation ops lives here, in the module those ops import.
"""
import numpy as np
from numba import njit, prange

from ..ops.kernels import parallel_kernel


@njit(cache=True)
def label_of(t3, o, i, n_classes):
    """The class index at (o, i): -1 to ignore, -2 if it is not an integer below n_classes."""
    v = t3[o, 0, i]
    k = int(v)
    if k != v or k >= n_classes:
        return -2
    return k if k >= 0 else -1


@njit(cache=True)
def first_bad_label(t3, n_classes):
    """The flat index of the first invalid label, or -1."""
    O, _, I = t3.shape
    for o in range(O):
        for i in range(I):
            if label_of(t3, o, i, n_classes) == -2:
                return o * I + i
    return -1


@parallel_kernel
def softmax_cross_entropy_backward_kernel(prob3, t3, dy, dx3, accum):
    """dx (+)= dy (softmax - onehot(label)); 0 for ignored samples. Laid out as the forward."""
    O, C, I = prob3.shape
    for o in prange(O):
        if I == 1:   # one sample per row: scalars
            k = label_of(t3, o, 0, C)
            g = dy[o] if k >= 0 else 0.0
            for c in range(C):
                v = g * (prob3[o, c, 0] - (1.0 if c == k else 0.0))
                dx3[o, c, 0] = dx3[o, c, 0] + v if accum else v
            continue
        labels = np.empty(I, np.int64)
        g = np.empty(I)
        for i in range(I):
            labels[i] = label_of(t3, o, i, C)
            g[i] = dy[o * I + i] if labels[i] >= 0 else 0.0
        for c in range(C):
            for i in range(I):
                v = g[i] * (prob3[o, c, i] - (1.0 if c == labels[i] else 0.0))
                dx3[o, c, i] = dx3[o, c, i] + v if accum else v


def softmax_cross_entropy_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        t3 = inputs[1].reshape(op.shape3[0], 1, op.shape3[2])
        softmax_cross_entropy_backward_kernel.for_size(t3.size * op.shape3[1])(
            op.saved_prob, t3, grad_outputs[0].reshape(-1), grad_inputs[0].reshape(op.shape3), accum[0])


@parallel_kernel
def categorical_cross_entropy_backward_kernel(x3, t3, dy, dx3, accum):
    """dx[label] (+)= -dy / x[label]; every other element gets 0."""
    O, C, I = x3.shape
    for r in prange(O * I):
        o = r // I
        i = r - o * I
        k = label_of(t3, o, i, C)
        for c in range(C):
            v = -dy[r] / x3[o, c, i] if c == k else 0.0
            if accum:
                dx3[o, c, i] += v
            else:
                dx3[o, c, i] = v


def categorical_cross_entropy_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        x3, t3 = op.views(inputs)
        categorical_cross_entropy_backward_kernel.for_size(x3.size)(x3, t3, grad_outputs[0].reshape(-1),
                                                  grad_inputs[0].reshape(op.shape3), accum[0])


def _label_masks(t, x_shape, axis):
    """onehot(labels) shaped like x, and the mask of samples whose label is not ignored."""
    from .. import functions as F
    n = len(x_shape)
    classes = F.reshape(F.arange(0, x_shape[axis]), [x_shape[axis] if a == axis else 1 for a in range(n)],
                        inplace=False)
    return F.equal(t, classes), F.greater_equal_scalar(t, 0.0)


def softmax_cross_entropy_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    from .. import functions as F
    dy, x, t = grad_inputs[0], inputs[0], inputs[1]
    axis %= len(x.shape)
    onehot, valid = _label_masks(t, tuple(x.shape), axis)
    return [dy * valid * (F.softmax(x, axis) - onehot), None]


def categorical_cross_entropy_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    dy, x, t = grad_inputs[0], inputs[0], inputs[1]
    onehot, _ = _label_masks(t, tuple(x.shape), axis % len(x.shape))
    return [-dy * onehot / x, None]


@parallel_kernel
def kl_multinomial_backward_kernel(p2, q2, dy, dp2, dq2, want_p, want_q, accum_p, accum_q):
    """dp = dy (log(p / q) + 1), dq = -dy p / q."""
    for n in prange(p2.shape[0]):
        g = dy[n]
        for k in range(p2.shape[1]):
            p, q = p2[n, k], q2[n, k]
            if want_p:
                v = g * (np.log(p) - np.log(q) + 1.0)
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


def kl_multinomial_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    s = op.shape2
    p2, q2 = inputs[0].reshape(s), inputs[1].reshape(s)
    dp2 = grad_inputs[0].reshape(s) if propagate_down[0] else p2
    dq2 = grad_inputs[1].reshape(s) if propagate_down[1] else q2
    kl_multinomial_backward_kernel.for_size(p2.size)(p2, q2, grad_outputs[0].reshape(-1), dp2, dq2, propagate_down[0],
                                   propagate_down[1], accum[0], accum[1])


def kl_multinomial_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1):
    from .. import functions as F
    dy, p, q = grad_inputs[0], inputs[0], inputs[1]
    n = len(p.shape)
    base_axis %= n
    dy = F.reshape(dy, list(p.shape[:base_axis]) + [1] * (n - base_axis), inplace=False)
    return [dy * (F.log(p) - F.log(q) + 1.0), -dy * p / q]
