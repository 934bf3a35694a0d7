"""Grad rules of the affine ops (``ops/affine.py``): graphs of F ops, differentiable again.
"""
import numpy as np

from .. import functions as F
from ..ops.registry import grad_rule


@grad_rule('Affine')
def affine_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1):
    """dx = dy W^T, dW = x^T dy, db = sum(dy) -- written with F.affine / F.batch_matmul."""
    dy = grad_inputs[0]
    x, w = inputs[0], inputs[1]
    xs, ws = tuple(input_shapes[0]), tuple(input_shapes[1])
    base_axis %= len(xs)
    n = int(np.prod(xs[:base_axis]))
    d, m = ws[0], int(np.prod(ws[1:]))
    dy2 = F.reshape(dy, (n, m), inplace=False)
    dx = F.reshape(F.batch_matmul(dy2, F.reshape(w, (d, m), inplace=False), False, True), xs, inplace=False)
    dw = F.reshape(F.batch_matmul(F.reshape(x, (n, d), inplace=False), dy2, True, False), ws, inplace=False)
    grads = [dx, dw]
    if len(input_shapes) == 3:
        grads.append(F.reshape(F.sum(dy2, axis=0), tuple(input_shapes[2]), inplace=False))
    return grads


@grad_rule('Embed')
def embed_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    """dW = scatter-add of dy rows at the indices (a one-hot matrix product)."""
    dy, index = grad_inputs[0], inputs[0]
    ws = tuple(input_shapes[1])
    n = int(np.prod(input_shapes[0]))
    onehot = F.one_hot(F.reshape(index, (n, 1), inplace=False), (ws[0],))
    dw = F.batch_matmul(onehot, F.reshape(dy, (n, int(np.prod(ws[1:]))), inplace=False), True, False)
    return [None, F.reshape(dw, ws, inplace=False)]
