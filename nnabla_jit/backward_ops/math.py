"""Backward kernels and grad rules of the math ops that are not table lines."""
import numpy as np

from .reduction_utils import sum_to_shape


def batch_matmul_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """Y = opA(A) opB(B): d opA(A) = dY opB(B)^T and d opB(B) = opA(A)^T dY (BLAS)."""
    def t(m):
        return np.swapaxes(m, -1, -2)
    a, b = inputs
    dy = grad_outputs[0]
    op_a = t(a) if op.transpose_a else a
    op_b = t(b) if op.transpose_b else b
    if propagate_down[0]:
        g = np.matmul(dy, t(op_b))
        sum_to_shape(t(g) if op.transpose_a else g, grad_inputs[0], accum[0])
    if propagate_down[1]:
        g = np.matmul(t(op_a), dy)
        sum_to_shape(t(g) if op.transpose_b else g, grad_inputs[1], accum[1])


def batch_matmul_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                      transpose_a=False, transpose_b=False):
    from .. import functions as F
    from ..ops.elementwise import reduce_to_shape
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
