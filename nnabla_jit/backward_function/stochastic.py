"""Grad rules of the stochastic ops (``ops/stochastic.py``): graphs of F ops, differentiable again.
"""
from .. import functions as F
from ..function import build
from ..ops.registry import REGISTRY, OpValueError, grad_rule


def _mask_node(dy, dropout):
    return build(REGISTRY["DropoutMask"](input_names=("dy",), dropout=dropout), [dy])


@grad_rule('Dropout')
def dropout_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, p=0.5, seed=-1):
    """dx = dy * mask, the mask being the one the Dropout node drew in its last forward: the
    node of the output, or, as nnabla, the one last applied to the input when no output is given."""
    y = outputs[0] if outputs else None
    op = y.parent.op if y is not None and y.parent is not None else F.dropout_applied_to(inputs[0])
    if op is None:
        raise OpValueError("Dropout's grad rule: no Dropout was applied to the input given (and no "
                           "output was given), so there is no mask; apply F.dropout to it first")
    return _mask_node(grad_inputs[0], op)   # a Variable, not a list, as nnabla's rule returns


@grad_rule('DropoutMask')
def dropout_mask_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, dropout=None):
    return [_mask_node(grad_inputs[0], dropout)]


@grad_rule('RandomChoice')
def random_choice_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, shape=(), replace=True,
                       seed=-1):
    """nnabla gives RandomChoice no gradient in nn.grad (only its backward routes dy)."""
    return [None, None]
