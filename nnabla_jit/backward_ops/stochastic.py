"""Backward kernels and grad rules of Dropout and RandomChoice (the generators have none)."""
from numba import njit

from ..ops.registry import accumulate


def dropout_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        accumulate(grad_inputs[0], grad_outputs[0] * op.mask, accum[0])


def _mask_node(dy, dropout):
    from ..function import build
    from ..ops.registry import REGISTRY
    return build(REGISTRY["DropoutMask"](input_names=("dy",), dropout=dropout), [dy])


def dropout_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, p=0.5, seed=-1):
    """dx = dy * mask, the mask being the one the Dropout node drew in its last forward."""
    return [_mask_node(grad_inputs[0], outputs[0].parent.op)]


def dropout_mask_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        accumulate(grad_inputs[0], grad_outputs[0] * op.dropout.mask, accum[0])


def dropout_mask_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, dropout=None):
    return [_mask_node(grad_inputs[0], dropout)]


@njit(cache=True)
def scatter_draws(index, dy, dx):
    """dx[b, index[b, k]] += dy[b, k]."""
    for b in range(index.shape[0]):
        for k in range(index.shape[1]):
            dx[b, index[b, k]] += dy[b, k]


def random_choice_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    index = op.saved_index
    dy = grad_outputs[0].reshape(index.shape)
    for i in range(2):
        if propagate_down[i]:
            g = grad_inputs[i].reshape(index.shape[0], -1)
            if not accum[i]:
                g[...] = 0
            scatter_draws(index, dy, g)


def random_choice_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shape=(), replace=True,
                       seed=-1):
    """nnabla gives RandomChoice no gradient in nn.grad (only its backward routes dy)."""
    return [None, None]
