"""Grad rules of the loss ops (``ops/loss.py``): graphs of F ops, differentiable again.

The class-label losses and KLMultinomial (the elementwise losses get their rules from their
table lines).

The label decoding shared by the forward and backward kernels of the label losses and of the
validation ops lives here, in the module those ops import.
"""
from .. import functions as F
from ..ops.registry import grad_rule


def _label_masks(t, x_shape, axis):
    """onehot(labels) shaped like x, and the mask of samples whose label is not ignored."""
    n = len(x_shape)
    classes = F.reshape(F.arange(0, x_shape[axis]), [x_shape[axis] if a == axis else 1 for a in range(n)],
                        inplace=False)
    return F.equal(t, classes), F.greater_equal_scalar(t, 0.0)


@grad_rule('SoftmaxCrossEntropy')
def softmax_cross_entropy_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    dy, x, t = grad_inputs[0], inputs[0], inputs[1]
    axis %= len(x.shape)
    onehot, valid = _label_masks(t, tuple(x.shape), axis)
    return [dy * valid * (F.softmax(x, axis) - onehot), None]


@grad_rule('CategoricalCrossEntropy')
def categorical_cross_entropy_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, axis=None):
    dy, x, t = grad_inputs[0], inputs[0], inputs[1]
    onehot, _ = _label_masks(t, tuple(x.shape), axis % len(x.shape))
    return [-dy * onehot / x, None]


@grad_rule('KLMultinomial')
def kl_multinomial_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1):
    dy, p, q = grad_inputs[0], inputs[0], inputs[1]
    n = len(p.shape)
    base_axis %= n
    dy = F.reshape(dy, list(p.shape[:base_axis]) + [1] * (n - base_axis), inplace=False)
    return [dy * (F.log(p) - F.log(q) + 1.0), -dy * p / q]
