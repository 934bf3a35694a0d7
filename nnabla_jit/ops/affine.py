"""Affine (fully connected) and Embed."""
import numpy as np
from numba import njit, prange

from .blas import add_row_vector, gemm, sum_rows
from .common import checked_affine_dims, integer_indices
from .kernels import parallel_kernel
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
def affine_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    n, d, m = op.dims
    dy = output_grads[0].reshape(n, m)
    if propagate_down[0]:   # dx = dy W^T
        gemm(dy, inputs[1].reshape(d, m), input_grads[0].reshape(n, d), trans_b=True, accumulate=accum[0])
    if propagate_down[1]:   # dW = x^T dy
        gemm(inputs[0].reshape(n, d), dy, input_grads[1].reshape(d, m), trans_a=True, accumulate=accum[1])
    if len(inputs) == 3 and propagate_down[2]:
        sum_rows(dy, input_grads[2].reshape(m), accum[2])


@njit(cache=True)
def embed_backward_kernel(index, dy, dw):
    for n in range(index.size):
        dw[index[n], :] += dy[n, :]


def embed_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[1]:
        return
    index, w = inputs
    dw = input_grads[1].reshape(w.shape[0], -1)
    if not accum[1]:
        dw[...] = 0
    index = index.reshape(-1).astype(np.int64)
    embed_backward_kernel(index, output_grads[0].reshape(index.size, dw.shape[1]), dw)


@register
class Affine(Op):
    """y = x W + b, with x flattened to (prod(shape[:base_axis]), prod(shape[base_axis:]))."""

    def setup(self, x, w, b=None):
        self.dims = rows, _, out_cols = checked_affine_dims(self, x, w, b)
        self.bias_kernel = add_row_vector.for_size(rows * out_cols)
        return [tuple(x[:self.base_axis]) + tuple(w[1:])]

    def forward(self, inputs, outputs):
        n, d, m = self.dims
        y = outputs[0].reshape(n, m)
        gemm(inputs[0].reshape(n, d), inputs[1].reshape(d, m), y)
        if len(inputs) == 3:
            self.bias_kernel(y, inputs[2].reshape(m))

    backward = affine_backward

    def grad_depends_input_data(self, i, j):
        return (i == 0 and j == 1) or (i == 1 and j == 0)


@parallel_kernel
def embed_kernel(index, w, y):
    """y[n] = w[index[n]] for flat index arrays and (V, D) weights."""
    for n in prange(index.size):
        y[n, :] = w[index[n], :]


@register
class Embed(Op):
    """Look up rows of the weight: y = w[x0]."""
    keep_input_dtypes = (0,)
    no_grad_inputs = (0,)
    refused_grad_inputs = (0,)

    def setup(self, x, w):
        if len(w) < 1:
            self.fail("weight must have at least 1 dimension, got shape {}", w)
        return [tuple(x) + tuple(w[1:])]

    def forward(self, inputs, outputs):
        index, w = inputs
        index = integer_indices(self, index.reshape(-1))
        if index.size and (index.min() < 0 or index.max() >= w.shape[0]):
            self.fail("index out of range [0, {}): min {} max {}", w.shape[0], index.min(), index.max())
        row = w[0].size
        embed_kernel.for_size(index.size * row)(index, w.reshape(w.shape[0], row), outputs[0].reshape(index.size, row))

    backward = embed_backward

    def grad_depends_input_data(self, i, j):
        return j == 0
