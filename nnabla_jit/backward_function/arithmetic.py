"""Grad rules of the arithmetic ops (``ops/arithmetic.py``): graphs of F ops, differentiable again.
"""
from .. import functions as F
from ..ops.registry import grad_rule


@grad_rule('AddN')
def add_n_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [grad_inputs[0] for _ in input_shapes]


@grad_rule('MulN')
def mul_n_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    dy = grad_inputs[0]
    grads = []
    for k in range(len(inputs)):
        others = [x for j, x in enumerate(inputs) if j != k]
        grads.append(dy * (F.mul_n(*others) if len(others) > 1 else others[0]))
    return grads
