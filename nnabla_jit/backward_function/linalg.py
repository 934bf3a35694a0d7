"""Grad rules of the linalg ops (``ops/linalg.py``): graphs of F ops, differentiable again.

Matrix calculus used (X the input, Y the output, G the output's gradient, per matrix):
det: dX = G det(X) X^-T; log|det|: dX = G X^-T; inverse: dX = -Y^T G Y^T; Cholesky
(X = L L^T): P = Phi(L^T G), dX = sym(L^-T P L^-1) with Phi the lower triangle with its
diagonal halved and sym(S) = (S + S^T) / 2 (Murray, 2016).
"""
from .. import functions as F
from ..ops.linalg import Einsum, EinsumEquation
from ..ops.registry import grad_rule
from ..variable import Variable


# ------------------------------------------------------------------------------ grad rules
@grad_rule('MatrixDiag')
def matrix_diag_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [F.matrix_diag_part(grad_inputs[0])]


@grad_rule('MatrixDiagPart')
def matrix_diag_part_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [F.matrix_diag(grad_inputs[0])]


@grad_rule('Trilu')
def trilu_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, k=0, upper=True):
    return [F.trilu(grad_inputs[0], k, upper)]


def _per_matrix(v, batch):
    return F.reshape(v, (batch, 1, 1), inplace=False)


@grad_rule('BatchDet')
def batch_det_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    b = input_shapes[0][0]
    x_inv_t = F.transpose(F.batch_inv(inputs[0]), (0, 2, 1))
    return [_per_matrix(grad_inputs[0], b) * _per_matrix(outputs[0], b) * x_inv_t]


@grad_rule('BatchLogdet')
def batch_logdet_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    b = input_shapes[0][0]
    return [_per_matrix(grad_inputs[0], b) * F.transpose(F.batch_inv(inputs[0]), (0, 2, 1))]


@grad_rule('BatchInv')
def batch_inv_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    y = outputs[0]
    return [-F.batch_matmul(F.batch_matmul(y, grad_inputs[0], True, False), y, False, True)]


@grad_rule('BatchCholesky')
def batch_cholesky_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, upper=False):
    y, g = outputs[0], grad_inputs[0]
    if upper:
        y, g = F.transpose(y, (0, 2, 1)), F.transpose(g, (0, 2, 1))
    p = F.trilu(F.batch_matmul(y, g, True, False), 0, False)
    p = p - F.matrix_diag(F.matrix_diag_part(p)) * 0.5
    y_inv = F.batch_inv(y)
    s = F.batch_matmul(F.batch_matmul(y_inv, p, True, False), y_inv)
    return [(s + F.transpose(s, (0, 2, 1))) * 0.5]


@grad_rule('Einsum')
def einsum_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, equation=""):
    """Each input's gradient is an Einsum of dy, the other inputs and constants (see
    EinsumEquation.gradient), so it can be differentiated again."""
    canonical = EinsumEquation(Einsum(equation=equation), equation, input_shapes)
    grads = []
    for i in range(len(inputs)):
        eq, constants = canonical.gradient(i)
        operands = [grad_inputs[0]] + [x for j, x in enumerate(inputs) if j != i]
        operands += [Variable.from_numpy_array(c, need_grad=False) for c in constants]
        grads.append(F.einsum(*operands, equation=eq))
    return grads
