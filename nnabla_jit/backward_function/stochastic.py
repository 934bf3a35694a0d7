"""Grad rules of the stochastic ops (``ops/stochastic.py``): graphs of F ops, differentiable again.
"""
from ..function import build
from ..ops.registry import REGISTRY, grad_rule


def _mask_node(dy, dropout):
    return build(REGISTRY["DropoutMask"](input_names=("dy",), dropout=dropout), [dy])


@grad_rule('Dropout')
def dropout_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, p=0.5, seed=-1):
    """dx = dy * mask, the mask being the one the Dropout node drew in its last forward."""
    return [_mask_node(grad_inputs[0], outputs[0].parent.op)]


@grad_rule('DropoutMask')
def dropout_mask_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, dropout=None):
    return [_mask_node(grad_inputs[0], dropout)]


@grad_rule('RandomChoice')
def random_choice_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shape=(), replace=True,
                       seed=-1):
    """nnabla gives RandomChoice no gradient in nn.grad (only its backward routes dy)."""
    return [None, None]
