"""Backward kernels and grad rules of Affine and Embed."""
import numpy as np
from numba import njit

from ..ops.blas import gemm, sum_rows


def affine_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    n, d, m = op.dims
    dy = grad_outputs[0].reshape(n, m)
    if propagate_down[0]:   # dx = dy W^T
        gemm(dy, inputs[1].reshape(d, m), grad_inputs[0].reshape(n, d), trans_b=True, accumulate=accum[0])
    if propagate_down[1]:   # dW = x^T dy
        gemm(inputs[0].reshape(n, d), dy, grad_inputs[1].reshape(d, m), trans_a=True, accumulate=accum[1])
    if len(inputs) == 3 and propagate_down[2]:
        sum_rows(dy, grad_inputs[2].reshape(m), accum[2])


def affine_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1):
    """dx = dy W^T, dW = x^T dy, db = sum(dy) -- written with F.affine / F.batch_matmul."""
    from .. import functions as F
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


@njit(cache=True)
def embed_backward_kernel(index, dy, dw):
    for n in range(index.size):
        dw[index[n], :] += dy[n, :]


def embed_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[1]:
        return
    index, w = inputs
    dw = grad_inputs[1].reshape(w.shape[0], -1)
    if not accum[1]:
        dw[...] = 0
    index = index.reshape(-1).astype(np.int64)
    embed_backward_kernel(index, grad_outputs[0].reshape(index.size, -1), dw)


def embed_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    """dW = scatter-add of dy rows at the indices (a one-hot matrix product)."""
    from .. import functions as F
    dy, index = grad_inputs[0], inputs[0]
    ws = tuple(input_shapes[1])
    n = int(np.prod(input_shapes[0]))
    onehot = F.one_hot(F.reshape(index, (n, 1), inplace=False), (ws[0],))
    dw = F.batch_matmul(onehot, F.reshape(dy, (n, int(np.prod(ws[1:]))), inplace=False), True, False)
    return [None, F.reshape(dw, ws, inplace=False)]
