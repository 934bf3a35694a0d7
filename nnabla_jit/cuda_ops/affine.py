"""CUDA launchers of Affine: y = x W + b through the tiled matrix product."""
from . import blas, device, reduction
from .registry import backward, forward


@forward("Affine")
def affine_forward(op, inputs, outputs):
    n, d, m = op.dims
    y = outputs[0]
    view = device.reshaped
    blas.matmul(view(inputs[0], 1, n, d), view(inputs[1], 1, d, m), view(y, 1, n, m))
    if len(inputs) == 3:
        reduction.broadcast_into(inputs[2], view(y, n, m), (0, 1), accum=True)


@backward("Affine")
def affine_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    n, d, m = op.dims
    view = device.reshaped
    dy = view(output_grads[0], 1, n, m)
    if propagate_down[0]:   # dx = dy W^T
        blas.matmul(dy, view(inputs[1], 1, d, m), view(input_grads[0], 1, n, d),
                    trans_b=True, accum=accum[0])
    if propagate_down[1]:   # dW = x^T dy
        blas.matmul(view(inputs[0], 1, n, d), dy, view(input_grads[1], 1, d, m),
                    trans_a=True, accum=accum[1])
    if len(inputs) == 3 and propagate_down[2]:   # db = sum of dy's rows
        reduction.reduce(view(dy, n, m), view(input_grads[2], m), (0,), accum=accum[2])
