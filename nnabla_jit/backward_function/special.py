"""Grad rules of the special ops (``ops/special.py``): graphs of F ops, differentiable again.
"""
from .. import functions as F
from ..ops.registry import grad_rule


@grad_rule('Unlink')
def unlink_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [None]


@grad_rule('Sink')
def sink_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, one_input_grad=True):
    if not one_input_grad:
        return [None] * len(inputs)
    return [F.constant(1.0, tuple(s)) for s in input_shapes]


@grad_rule('VATNoise')
def vat_noise_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1, eps=1.0):
    """x gets no gradient; w's "gradient" is the data its backward overwrites, not a derivative."""
    return [None, None]
