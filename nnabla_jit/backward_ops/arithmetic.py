"""Backward kernels and grad rules of the arithmetic ops that are not table lines."""
import numpy as np
from numba import njit


@njit(cache=True)
def scaled_accumulate(dst, dy, scale, accum):
    """dst (+)= dy * scale over flat arrays."""
    if accum:
        for i in range(dst.size):
            dst[i] += dy[i] * scale[i]
    else:
        for i in range(dst.size):
            dst[i] = dy[i] * scale[i]


def n_ary_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    dy = grad_outputs[0].reshape(-1)
    for k, dx in enumerate(grad_inputs):
        if not propagate_down[k]:
            continue
        scale = np.ones_like(dy)
        if op.multiply:
            for j, x in enumerate(inputs):
                if j != k:
                    scale *= x.reshape(-1)
        scaled_accumulate(dx.reshape(-1), dy, scale, accum[k])


def add_n_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [grad_inputs[0] for _ in input_shapes]


def mul_n_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    from .. import functions as F
    dy = grad_inputs[0]
    grads = []
    for k in range(len(inputs)):
        others = [x for j, x in enumerate(inputs) if j != k]
        grads.append(dy * (F.mul_n(*others) if len(others) > 1 else others[0]))
    return grads
