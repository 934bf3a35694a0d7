"""CUDA kernels of Softmax and LogSoftmax: one thread per row along the axis of the CPU's
(outer, n, inner) layout."""
import math

from . import device
from .registry import backward, forward, kernel

cuda = None  # numba.cuda, bound by device.load()


@kernel
def softmax_kernel(x, y, rows, n, inner, log):
    r = cuda.grid(1)
    if r < rows:
        o = r // inner
        base = o * n * inner + (r - o * inner)
        m = x[base]
        for k in range(1, n):
            m = max(m, x[base + k * inner])
        s = 0.0
        for k in range(n):
            s += math.exp(x[base + k * inner] - m)
        if log:
            ls = math.log(s)
            for k in range(n):
                y[base + k * inner] = x[base + k * inner] - m - ls
        else:
            for k in range(n):
                y[base + k * inner] = math.exp(x[base + k * inner] - m) / s


@kernel
def softmax_backward_kernel(y, dy, dx, rows, n, inner, log, accum):
    """Softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy)."""
    r = cuda.grid(1)
    if r < rows:
        o = r // inner
        base = o * n * inner + (r - o * inner)
        s = 0.0
        for k in range(n):
            j = base + k * inner
            s += dy[j] if log else dy[j] * y[j]
        for k in range(n):
            j = base + k * inner
            g = dy[j] - math.exp(y[j]) * s if log else y[j] * (dy[j] - s)
            if accum:
                dx[j] += g
            else:
                dx[j] = g


@forward("Softmax", "LogSoftmax")
def softmax_forward(op, inputs, outputs):
    outer, n, inner = op.shape3
    x, y = inputs[0], outputs[0]
    if x.size:
        device.launch(softmax_kernel, outer * inner, x.reshape(x.size), y.reshape(y.size),
                      outer * inner, n, inner, op.log)


@backward("Softmax", "LogSoftmax")
def softmax_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    outer, n, inner = op.shape3
    y, dy, dx = outputs[0], output_grads[0], input_grads[0]
    if y.size:
        device.launch(softmax_backward_kernel, outer * inner, y.reshape(y.size),
                      dy.reshape(dy.size), dx.reshape(dx.size), outer * inner, n, inner, op.log,
                      accum[0])
