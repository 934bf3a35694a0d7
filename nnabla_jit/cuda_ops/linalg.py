"""CUDA kernels of the batched small-matrix ops: BatchInv, BatchDet, BatchLogdet, BatchCholesky
and their gradients, one thread per matrix (the matrices these ops see are small: a few to a
few dozen rows); and the element moves MatrixDiag, MatrixDiagPart, Trilu and EyeLike, one thread per
element.

The CPU calls LAPACK (``numpy.linalg``); here one Gauss-Jordan elimination with partial
pivoting (float64, in a workspace) gives the inverse, the determinant and log|det| of a
matrix, and a Cholesky kernel the factor. Their failures are the CPU's: a singular matrix to
invert and a matrix that is not positive definite raise the op's error, read through a
counter in host memory mapped into the device (a synchronisation, no copy). The gradients are
the CPU's formulas through ``blas.matmul``.
"""
import math

import numpy as np
from numba import float64

from ..ops.linalg import triangle_at as cpu_triangle_at
from . import blas, device
from .device import store, unravel3
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

triangle_at = device_function(cpu_triangle_at.py_func)   # an element of Triu/Tril, as the CPU's

INVERSE, DET, LOGDET = 0, 1, 2   # what gauss_jordan_kernel writes


# ---------------------------------------------------------------------------- kernels
@kernel
def gauss_jordan_kernel(x, work, what, inv, value, failures):
    """Per matrix b: [x | I] reduced to [I | x^-1] in ``work`` (B, N, 2N), float64, with
    partial pivoting; writes inv (INVERSE), det (DET) or log|det| (LOGDET) into ``value``.
    A zero pivot counts a failure (inverse), or gives det 0 / log|det| -inf."""
    b = cuda.grid(1)
    if b >= x.shape[0]:
        return
    n = x.shape[1]
    for i in range(n):
        for j in range(n):
            work[b, i, j] = x[b, i, j]
            work[b, i, n + j] = 1.0 if i == j else 0.0
    det = 1.0
    logdet = 0.0
    for c in range(n):
        p = c
        for r in range(c + 1, n):
            if abs(work[b, r, c]) > abs(work[b, p, c]):
                p = r
        pivot = work[b, p, c]
        if pivot == 0.0:
            if what == INVERSE:
                cuda.atomic.add(failures, 0, 1)
            elif what == DET:
                value[b] = 0.0
            else:
                value[b] = -math.inf
            return
        if p != c:
            det = -det
            for j in range(2 * n):
                tmp = work[b, c, j]
                work[b, c, j] = work[b, p, j]
                work[b, p, j] = tmp
        det *= pivot
        logdet += math.log(abs(pivot))
        for j in range(2 * n):
            work[b, c, j] /= pivot
        for r in range(n):
            if r != c:
                f = work[b, r, c]
                if f != 0.0:
                    for j in range(2 * n):
                        work[b, r, j] -= f * work[b, c, j]
    if what == INVERSE:
        for i in range(n):
            for j in range(n):
                inv[b, i, j] = work[b, i, n + j]
    elif what == DET:
        value[b] = det
    else:
        value[b] = logdet


@kernel
def cholesky_kernel(x, y, upper, failures):
    """y = L (x = L L^T, from x's lower triangle) or, with ``upper``, L^T; a non-positive
    pivot counts a failure."""
    b = cuda.grid(1)
    if b >= x.shape[0]:
        return
    n = x.shape[1]
    for j in range(n):
        for i in range(n):
            if i < j:   # above the diagonal of L
                if upper:
                    y[b, j, i] = 0.0
                else:
                    y[b, i, j] = 0.0
                continue
            s = float64(x[b, i, j])
            for k in range(j):
                lik = y[b, k, i] if upper else y[b, i, k]
                ljk = y[b, k, j] if upper else y[b, j, k]
                s -= float64(lik) * float64(ljk)
            if i == j:
                if not s > 0.0:
                    cuda.atomic.add(failures, 0, 1)
                    return
                v = math.sqrt(s)
            else:
                v = s / (y[b, j, j])
            if upper:
                y[b, j, i] = v
            else:
                y[b, i, j] = v


@kernel
def scaled_transpose_kernel(m, dy, y, what, dx, accum):
    """dx[b, i, j] (+)= s_b m[b, j, i], s_b = -1 (INVERSE), dy[b] y[b] (DET), dy[b] (LOGDET)."""
    i = cuda.grid(1)
    n = dx.shape[1]
    if i < dx.size:
        b, r, c = unravel3(i, n, n)
        if what == INVERSE:
            s = -1.0
        elif what == DET:
            s = dy[b] * y[b]
        else:
            s = dy[b]
        v = s * m[b, c, r]
        store(dx, (b, r, c), v, accum)


@kernel
def phi_kernel(p):
    """p = tril(p) with its diagonal halved (Cholesky's gradient)."""
    i = cuda.grid(1)
    n = p.shape[1]
    if i < p.size:
        b, r, c = unravel3(i, n, n)
        if c > r:
            p[b, r, c] = 0.0
        elif c == r:
            p[b, r, c] *= 0.5


@kernel
def symmetric_part_kernel(s, dx, accum):
    """dx (+)= (s + s^T) / 2 per matrix."""
    i = cuda.grid(1)
    n = dx.shape[1]
    if i < dx.size:
        b, r, c = unravel3(i, n, n)
        v = 0.5 * (s[b, r, c] + s[b, c, r])
        store(dx, (b, r, c), v, accum)


@kernel
def diagonal_kernel(x2, y3, to_matrix, accum):
    """One thread per element of the matrices y3: to_matrix, y3[b, i, j] (+)= x2[b, i] on the
    diagonal (0 off it); else x2[b, i] (+)= y3[b, i, i] (threads on the diagonal)."""
    t = cuda.grid(1)
    n = y3.shape[1]
    if t < y3.size:
        b, i, j = unravel3(t, n, n)
        if to_matrix:
            v = x2[b, i] if i == j else 0.0
            store(y3, (b, i, j), v, accum)
        elif i == j:
            store(x2, (b, i), y3[b, i, i], accum)


@kernel
def eye_kernel(y, k):
    """y[i, j] = 1 on the k-th diagonal (j - i == k), else 0."""
    t = cuda.grid(1)
    cols = y.shape[1]
    if t < y.size:
        y[t // cols, t % cols] = 1.0 if t % cols - t // cols == k else 0.0


@kernel
def triangle_kernel(x3, y3, k, upper, accum):
    """y3 (+)= x3 on and above the k-th diagonal (j - i >= k) if upper, else on and below it;
    zero elsewhere (the CPU's ``triangle``)."""
    t = cuda.grid(1)
    rows, cols = y3.shape[1], y3.shape[2]
    if t < y3.size:
        b, i, j = unravel3(t, rows, cols)
        triangle_at(x3, y3, b, i, j, k, upper, accum)


# ---------------------------------------------------------------------------- helpers
def _gauss_jordan(op, x, what, inv=None, value=None):
    """Launch the elimination over the batch x (B, N, N); raises the CPU's error when a matrix
    to invert is singular."""
    batch, n, _ = x.shape
    work = device.workspace("gauss-jordan", batch * n * 2 * n, np.float64).reshape(batch, n, 2 * n)
    failures = device.kept_counter(op, "failures")
    # the output not written gets a stand-in of its type: the workspace
    device.launch(gauss_jordan_kernel, batch, x, work, what, work if inv is None else inv,
                  work[0, 0] if value is None else value, failures)
    if what == INVERSE and device.read_counter(failures):
        op.fail("Singular matrix (input of shape {})", x.shape)


def _square(shape):
    n = shape[-1]
    return int(np.prod(shape, dtype=np.int64)) // (n * n), n


# ---------------------------------------------------------------------------- launchers
@forward("BatchInv")
def batch_inv_forward(op, inputs, outputs):
    _gauss_jordan(op, inputs[0], INVERSE, inv=outputs[0])


@forward("BatchDet", "BatchLogdet")
def batch_det_forward(op, inputs, outputs):
    _gauss_jordan(op, inputs[0], DET if op.name == "BatchDet" else LOGDET, value=outputs[0])


@backward("BatchInv")
def batch_inv_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dx (+)= -(Y^T dY Y^T) = -((Y dY^T Y)^T)."""
    if not propagate_down[0]:
        return
    y, dy = outputs[0], output_grads[0]
    t1 = device.empty(y.shape, y.dtype)
    t2 = device.empty(y.shape, y.dtype)
    blas.matmul(y, dy, t1, trans_b=True, a_batch=_same(y), b_batch=_same(y))
    blas.matmul(t1, y, t2, a_batch=_same(y), b_batch=_same(y))
    # dy and y are not read for INVERSE, but must type as per-matrix vectors: the kernel is
    # compiled for every branch (3-d ones made dy[b] * y[b] an array and failed on a GPU)
    flat = t1.reshape(t1.size)
    device.launch(scaled_transpose_kernel, y.size, t2, flat, flat, INVERSE, input_grads[0],
                  accum[0])
    device.release(t1)
    device.release(t2)


@backward("BatchDet", "BatchLogdet")
def batch_det_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dx (+)= s_b x^-T, s_b = dy det (BatchDet) or dy (BatchLogdet)."""
    if not propagate_down[0]:
        return
    x = inputs[0]
    inv = device.empty(x.shape, x.dtype)
    _gauss_jordan(op, x, INVERSE, inv=inv)
    what = DET if op.name == "BatchDet" else LOGDET
    y = outputs[0] if what == DET else output_grads[0]   # BatchLogdet's y is not read
    device.launch(scaled_transpose_kernel, x.size, inv, output_grads[0], y, what,
                  input_grads[0], accum[0])
    device.release(inv)


@forward("BatchCholesky")
def batch_cholesky_forward(op, inputs, outputs):
    x = inputs[0]
    failures = device.kept_counter(op, "failures")
    device.launch(cholesky_kernel, x.shape[0], x, outputs[0], bool(op.upper), failures)
    if device.read_counter(failures):
        op.fail("Matrix is not positive definite (input of shape {})", x.shape)


@backward("BatchCholesky")
def batch_cholesky_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                            accum):
    """The CPU's formula with L = y (y^T when upper): P = Phi(L^T G), S = L^-T P L^-1,
    dx (+)= (S + S^T) / 2."""
    if not propagate_down[0]:
        return
    y, g = outputs[0], output_grads[0]
    upper = bool(op.upper)
    same = _same(y)
    p, y_inv, t1, s = [device.empty(y.shape, y.dtype) for _ in range(4)]
    blas.matmul(y, g, p, trans_a=not upper, trans_b=upper, a_batch=same, b_batch=same)
    device.launch(phi_kernel, p.size, p)
    _gauss_jordan(op, y, INVERSE, inv=y_inv)   # L^-1 = y^-1 (its transpose when upper)
    blas.matmul(y_inv, p, t1, trans_a=not upper, a_batch=same, b_batch=same)
    blas.matmul(t1, y_inv, s, trans_b=upper, a_batch=same, b_batch=same)
    device.launch(symmetric_part_kernel, y.size, s, input_grads[0], accum[0])
    for a in (p, y_inv, t1, s):
        device.release(a)


def _same(x3):
    return blas.batch_map(x3.shape[0], (x3.shape[0],), (x3.shape[0],))


def _diagonal(op, vectors, matrices, to_matrix, accum=False):
    """The one launch of MatrixDiag, MatrixDiagPart and their adjoints: ``vectors`` (B, n)
    onto the diagonals of ``matrices`` (B, n, n) when ``to_matrix``, else the diagonals into
    ``vectors``."""
    batch, n = op.shape2
    device.launch(diagonal_kernel, batch * n * n, vectors.reshape(batch, n),
                  matrices.reshape(batch, n, n), to_matrix, accum)


@forward("MatrixDiag")
def matrix_diag_forward(op, inputs, outputs):
    _diagonal(op, inputs[0], outputs[0], True)


@backward("MatrixDiag")
def matrix_diag_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        _diagonal(op, input_grads[0], output_grads[0], False, accum[0])


@forward("MatrixDiagPart")
def matrix_diag_part_forward(op, inputs, outputs):
    _diagonal(op, outputs[0], inputs[0], False)


@backward("MatrixDiagPart")
def matrix_diag_part_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                              accum):
    if propagate_down[0]:
        _diagonal(op, output_grads[0], input_grads[0], True, accum[0])


@forward("Trilu")
def trilu_forward(op, inputs, outputs):
    device.launch(triangle_kernel, outputs[0].size, inputs[0].reshape(op.shape3),
                  outputs[0].reshape(op.shape3), op.k, bool(op.upper), False)


@backward("Trilu")
def trilu_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        device.launch(triangle_kernel, input_grads[0].size, output_grads[0].reshape(op.shape3),
                      input_grads[0].reshape(op.shape3), op.k, bool(op.upper), accum[0])


@forward("EyeLike")
def eye_like_forward(op, inputs, outputs):
    device.launch(eye_kernel, outputs[0].size, outputs[0], op.k)


@backward("EyeLike")
def eye_like_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """x's values do not reach y: its gradient is zero (kept when accumulating)."""
    if propagate_down[0] and not accum[0]:
        device.fill(input_grads[0], 0)
