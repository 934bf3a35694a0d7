"""CUDA kernels of the cumulative sums and products (CumSum, CumProd).

As on the CPU (``ops/cumulative.py``), the input is (outer, n, inner) around the axis and one
thread scans one line with the CPU's own line function (``cumulate_line``, compiled as a device
function); CumSum's backward is the same scan the other way. CumProd's backward gives each
element its own thread: dx_k = prod(factors before k) * sum over the outputs y_i that include
x_k of dy_i * prod(factors of y_i after k), with no division, so exact with zeros like the CPU's
recurrence (which needs a per-line buffer a thread cannot allocate).
"""
from ..ops.cumulative import cumulate_line as cpu_cumulate_line
from . import device
from .device import store, unravel3
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

cumulate_line = device_function(cpu_cumulate_line.py_func)


@kernel
def cumulate_kernel(x3, y3, multiply, exclusive, reverse, accum):
    """One thread per (outer, inner) line: ``cumulate_line``."""
    line = cuda.grid(1)
    inner = x3.shape[2]
    if line < x3.shape[0] * inner:
        cumulate_line(x3, y3, line // inner, line % inner, multiply, exclusive, reverse, accum)


@kernel
def cumprod_grad_kernel(x3, dy3, dx3, exclusive, reverse, accum):
    """dx of a cumulative product, one thread per element (positions counted in the order of
    accumulation, t for this element)."""
    i = cuda.grid(1)
    outer, n, inner = x3.shape
    if i < outer * n * inner:
        a, k, c = unravel3(i, n, inner)
        t = n - 1 - k if reverse else k
        before = 1.0   # the factors accumulated before this one
        for s in range(t):
            before *= x3[a, n - 1 - s if reverse else s, c]
        total = 0.0
        after = 1.0    # the factors of output u after this one
        for u in range(t if not exclusive else t + 1, n):
            m = n - 1 - u if reverse else u
            if exclusive:
                total += dy3[a, m, c] * after
                after *= x3[a, m, c]
            else:
                if u > t:
                    after *= x3[a, m, c]
                total += dy3[a, m, c] * after
        g = before * total
        store(dx3, (a, k, c), g, accum)


def _lines(op):
    return op.shape3[0] * op.shape3[2]


@forward("CumSum", "CumProd")
def cumulative_forward(op, inputs, outputs):
    device.launch(cumulate_kernel, _lines(op), inputs[0].reshape(op.shape3),
                  outputs[0].reshape(op.shape3), op.multiply, op.exclusive, op.reverse, False)


@backward("CumSum")
def cumsum_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """The adjoint of a cumulative sum: the cumulative sum the other way."""
    if propagate_down[0]:
        device.launch(cumulate_kernel, _lines(op), output_grads[0].reshape(op.shape3),
                      input_grads[0].reshape(op.shape3), False, op.exclusive, not op.reverse,
                      accum[0])


@backward("CumProd")
def cumprod_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        s = op.shape3
        device.launch(cumprod_grad_kernel, s[0] * s[1] * s[2], inputs[0].reshape(s),
                      output_grads[0].reshape(s), input_grads[0].reshape(s), op.exclusive,
                      op.reverse, accum[0])
