"""CUDA launchers of Affine: y = x W + b through the tiled matrix product."""
from . import blas, reduction
from .registry import backward, forward


@forward("Affine")
def affine_forward(op, inputs, outputs):
    n, d, m = op.dims
    y = outputs[0]
    blas.matmul(inputs[0].reshape(1, n, d), inputs[1].reshape(1, d, m), y.reshape(1, n, m))
    if len(inputs) == 3:
        reduction.broadcast_into(inputs[2], y.reshape(n, m), (0, 1), accum=True)


@backward("Affine")
def affine_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    n, d, m = op.dims
    dy = output_grads[0].reshape(1, n, m)
    if propagate_down[0]:   # dx = dy W^T
        blas.matmul(dy, inputs[1].reshape(1, d, m), input_grads[0].reshape(1, n, d),
                    trans_b=True, accum=accum[0])
    if propagate_down[1]:   # dW = x^T dy
        blas.matmul(inputs[0].reshape(1, n, d), dy, input_grads[1].reshape(1, d, m),
                    trans_a=True, accum=accum[1])
    if len(inputs) == 3 and propagate_down[2]:   # db = sum of dy's rows
        reduction.reduce(dy.reshape(n, m), input_grads[2].reshape(m), (0,), accum=accum[2])
