"""Grad rules of the math ops (``ops/math.py``): graphs of F ops, differentiable again.
"""
from .. import functions as F
from ..ops.registry import grad_rule
from .elementwise import reduce_to_shape


@grad_rule('Identity')
def identity_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [grad_inputs[0]]


@grad_rule('BatchMatmul')
def batch_matmul_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                      transpose_a=False, transpose_b=False):
    dy = grad_inputs[0]
    a, b = inputs
    if not transpose_a:
        da = F.batch_matmul(dy, b, False, not transpose_b)
    else:
        da = F.batch_matmul(b, dy, transpose_b, True)
    if not transpose_b:
        db = F.batch_matmul(a, dy, not transpose_a, False)
    else:
        db = F.batch_matmul(dy, a, True, transpose_a)
    return [reduce_to_shape(da, tuple(input_shapes[0])), reduce_to_shape(db, tuple(input_shapes[1]))]
