"""CUDA launchers of BatchMatmul (one tiled matrix product per batch, broadcast batches read
through index maps; the gradient of a broadcast operand is summed over the batches it served)
and of the generators Constant, Arange and Linspace (one thread per element; no inputs, so no
backward)."""
import numpy as np

from . import blas, device, reduction
from .registry import backward, forward, kernel

cuda = None  # numba.cuda, bound by device.load()


def _as3(a):
    """A (..., r, c) device array as (batch, r, c)."""
    *batch, rows, cols = a.shape
    return device.reshaped(a, int(np.prod(batch, dtype=np.int64)), rows, cols)


def _maps(op_shapes, out_shape):
    batch = tuple(out_shape[:-2])
    n = int(np.prod(batch, dtype=np.int64))
    return n, [blas.batch_map(n, tuple(s[:-2]), batch) for s in op_shapes]


@forward("BatchMatmul")
def batch_matmul_forward(op, inputs, outputs):
    a, b = inputs
    y = outputs[0]
    n, (a_map, b_map) = _maps((a.shape, b.shape), y.shape)
    blas.matmul(_as3(a), _as3(b), _as3(y), op.transpose_a, op.transpose_b, a_batch=a_map,
                b_batch=b_map)


def _into_gradient(dx, n, out_batch, accum, left, right, trans_left, trans_right, left_map,
                   right_map):
    """dx (+)= op(left) @ op(right), batch by batch: directly when dx has a batch per output
    batch, else through a temporary summed over the batches dx is broadcast to."""
    *_, rows, cols = dx.shape
    if dx.size == n * rows * cols:
        blas.matmul(left, right, device.reshaped(dx, n, rows, cols), trans_left, trans_right, accum,
                    left_map, right_map)
        return
    full = device.empty((n, rows, cols), dx.dtype)
    blas.matmul(left, right, full, trans_left, trans_right, False, left_map, right_map)
    reduction.sum_to_shape(device.reshaped(full, tuple(out_batch) + (rows, cols)), dx, accum)
    device.release(full)


@backward("BatchMatmul")
def batch_matmul_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """Y = opA(A) opB(B): d opA(A) = dY opB(B)^T and d opB(B) = opA(A)^T dY (transposed back
    for a transposed operand)."""
    dy = output_grads[0]
    out_batch = tuple(dy.shape[:-2])
    n, (a_map, b_map) = _maps((inputs[0].shape, inputs[1].shape), dy.shape)
    same = blas.batch_map(n, out_batch, out_batch)
    dy3 = _as3(dy)
    ta, tb = op.transpose_a, op.transpose_b
    if propagate_down[0]:
        b3 = _as3(inputs[1])
        operands = (b3, dy3, tb, True, b_map, same) if ta else (dy3, b3, False, not tb, same, b_map)
        _into_gradient(input_grads[0], n, out_batch, accum[0], *operands)
    if propagate_down[1]:
        a3 = _as3(inputs[0])
        operands = (dy3, a3, True, ta, same, a_map) if tb else (a3, dy3, not ta, False, a_map, same)
        _into_gradient(input_grads[1], n, out_batch, accum[1], *operands)


# ------------------------------------------------------------------------------ generators
@kernel
def progression_kernel(y, start, step, last, set_last):
    """y[i] = start + i step; the last element ``last`` when ``set_last`` (Linspace's exact
    stop)."""
    i = cuda.grid(1)
    if i < y.size:
        y[i] = last if set_last and i == y.size - 1 else start + i * step


@forward("Constant")
def constant_forward(op, inputs, outputs):
    device.fill(device.flat(outputs[0]), op.val)


@forward("Arange", "Linspace")
def progression_forward(op, inputs, outputs):
    y = outputs[0]
    if op.name == "Arange":
        device.launch(progression_kernel, y.size, y, float(op.start), float(op.step), 0.0, False)
        return
    n = y.size
    step = (op.stop - op.start) / (n - 1) if n > 1 else 0.0   # as the CPU's linspace_kernel
    device.launch(progression_kernel, n, y, float(op.start), step, float(op.stop), n > 1)
