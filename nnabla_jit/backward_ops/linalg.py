"""Backward kernels and grad rules of the linear algebra ops.

Matrix calculus used (X the input, Y the output, G the output's gradient, per matrix):
det: dX = G det(X) X^-T; log|det|: dX = G X^-T; inverse: dX = -Y^T G Y^T; Cholesky
(X = L L^T): P = Phi(L^T G), dX = sym(L^-T P L^-1) with Phi the lower triangle with its
diagonal halved and sym(S) = (S + S^T) / 2 (Murray, 2016).
"""
import numpy as np

from ..ops.registry import accumulate


def _ops():
    from ..ops import linalg
    return linalg


def _t(m):
    return np.swapaxes(m, -1, -2)


# ------------------------------------------------------------------------------ kernels
def matrix_diag_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        n = op.shape2[1]
        op.part(grad_outputs[0].reshape(-1, n, n), grad_inputs[0].reshape(op.shape2), accum[0])


def matrix_diag_part_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        n = op.shape2[1]
        op.embed(grad_outputs[0].reshape(op.shape2), grad_inputs[0].reshape(-1, n, n), accum[0])


def trilu_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        op.kernel(grad_outputs[0].reshape(op.shape3), grad_inputs[0].reshape(op.shape3), op.k,
                  op.upper, accum[0])


def batch_det_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        x = inputs[0]
        scale = (grad_outputs[0] * outputs[0])[:, None, None]
        accumulate(grad_inputs[0], scale * _t(op.linalg(np.linalg.inv, x)), accum[0])


def batch_logdet_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        x = inputs[0]
        accumulate(grad_inputs[0], grad_outputs[0][:, None, None] * _t(op.linalg(np.linalg.inv, x)),
                   accum[0])


def batch_inv_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        yt = _t(outputs[0])
        accumulate(grad_inputs[0], -(yt @ grad_outputs[0] @ yt), accum[0])


def batch_cholesky_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        y, g = outputs[0], grad_outputs[0]
        lower, g = (_t(y), _t(g)) if op.upper else (y, g)
        p = np.tril(_t(lower) @ g)
        p -= 0.5 * np.eye(p.shape[-1]) * p   # Phi: halve the diagonal
        lower_inv = op.linalg(np.linalg.inv, lower)
        s = _t(lower_inv) @ p @ lower_inv
        accumulate(grad_inputs[0], 0.5 * (s + _t(s)), accum[0])


def einsum_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    dy = grad_outputs[0]
    for i, dx in enumerate(grad_inputs):
        if propagate_down[i]:
            eq, constants, path = op.gradients[i]
            others = [x for j, x in enumerate(inputs) if j != i]
            operands = [dy] + others + [c.astype(dy.dtype) for c in constants]
            accumulate(dx, np.einsum(eq, *operands, optimize=path), accum[i])


# ------------------------------------------------------------------------------ grad rules
def matrix_diag_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    return [F.matrix_diag_part(grad_inputs[0])]


def matrix_diag_part_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    return [F.matrix_diag(grad_inputs[0])]


def trilu_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, k=0, upper=True):
    from .. import functions as F
    return [F.trilu(grad_inputs[0], k, upper)]


def _per_matrix(v, batch):
    from .. import functions as F
    return F.reshape(v, (batch, 1, 1), inplace=False)


def batch_det_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    b = input_shapes[0][0]
    x_inv_t = F.transpose(F.batch_inv(inputs[0]), (0, 2, 1))
    return [_per_matrix(grad_inputs[0], b) * _per_matrix(outputs[0], b) * x_inv_t]


def batch_logdet_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    b = input_shapes[0][0]
    return [_per_matrix(grad_inputs[0], b) * F.transpose(F.batch_inv(inputs[0]), (0, 2, 1))]


def batch_inv_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    y = outputs[0]
    return [-F.batch_matmul(F.batch_matmul(y, grad_inputs[0], True, False), y, False, True)]


def batch_cholesky_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, upper=False):
    from .. import functions as F
    y, g = outputs[0], grad_inputs[0]
    if upper:
        y, g = F.transpose(y, (0, 2, 1)), F.transpose(g, (0, 2, 1))
    p = F.trilu(F.batch_matmul(y, g, True, False), 0, False)
    p = p - F.matrix_diag(F.matrix_diag_part(p)) * 0.5
    y_inv = F.batch_inv(y)
    s = F.batch_matmul(F.batch_matmul(y_inv, p, True, False), y_inv)
    return [(s + F.transpose(s, (0, 2, 1))) * 0.5]


def einsum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, equation=""):
    """Each input's gradient is an Einsum of dy, the other inputs and constants (see
    EinsumEquation.gradient), so it can be differentiated again."""
    from .. import functions as F
    from ..variable import Variable
    canonical = _ops().EinsumEquation(_ops().Einsum(equation=equation), equation, input_shapes)
    grads = []
    for i in range(len(inputs)):
        eq, constants = canonical.gradient(i)
        operands = [grad_inputs[0]] + [x for j, x in enumerate(inputs) if j != i]
        operands += [Variable.from_numpy_array(c, need_grad=False) for c in constants]
        grads.append(F.einsum(*operands, equation=eq))
    return grads
