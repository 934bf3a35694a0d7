"""CUDA kernels of the activations with their own CPU kernels: Softmax and LogSoftmax (one
thread per row along the axis of the CPU's (outer, n, inner) layout), CReLU / CELU (one thread
per element, the CPU's per-element f and f' as device functions) and PReLU (one thread per
element; the slope's gradient is the reduction kernel's sum of per-element terms)."""
import math

from ..ops.activation import concatenated_slope, concatenated_value
from . import device, reduction
from .device import store
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

half_value = device_function(concatenated_value.py_func)   # the CPU's formulas
half_slope = device_function(concatenated_slope.py_func)


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
            store(dx, j, g, accum)


@forward("Softmax", "LogSoftmax")
def softmax_forward(op, inputs, outputs):
    outer, n, inner = op.shape3
    x, y = inputs[0], outputs[0]
    if x.size:
        device.launch(softmax_kernel, outer * inner, device.flat(x), device.flat(y),
                      outer * inner, n, inner, op.log)


@backward("Softmax", "LogSoftmax")
def softmax_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    outer, n, inner = op.shape3
    y, dy, dx = outputs[0], output_grads[0], input_grads[0]
    if y.size:
        device.launch(softmax_backward_kernel, outer * inner, device.flat(y),
                      device.flat(dy), device.flat(dx), outer * inner, n, inner, op.log,
                      accum[0])


# ------------------------------------------------------------------------------ CReLU, CELU
@kernel
def concatenated_kernel(x, y, n, inner, alpha, elu):
    """y[o, h, k, i] = f(x[o, k, i]) for h = 0, f(-x[o, k, i]) for h = 1."""
    j = cuda.grid(1)
    if j < y.size:
        o = j // (2 * n * inner)
        rest = j - o * 2 * n * inner
        h = rest // (n * inner)
        v = x[o * n * inner + rest - h * n * inner]
        y[j] = half_value(v if h == 0 else -v, alpha, elu)


@kernel
def concatenated_backward_kernel(x, dy, dx, n, inner, alpha, elu, accum):
    """dx = dy[:, 0] f'(x) - dy[:, 1] f'(-x)."""
    j = cuda.grid(1)
    if j < dx.size:
        o = j // (n * inner)
        first = o * 2 * n * inner + j - o * n * inner
        v = x[j]
        g = (dy[first] * half_slope(v, alpha, elu)
             - dy[first + n * inner] * half_slope(-v, alpha, elu))
        store(dx, j, g, accum)


def _flat(a):
    return device.flat(a)


@forward("CReLU", "CELU")
def concatenated_forward(op, inputs, outputs):
    _, n, inner = op.shape3
    y = outputs[0]
    device.launch(concatenated_kernel, y.size, _flat(inputs[0]), _flat(y), n, inner,
                  float(op.args.get("alpha", 0.0)), op.elu)


@backward("CReLU", "CELU")
def concatenated_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        _, n, inner = op.shape3
        dx = input_grads[0]
        device.launch(concatenated_backward_kernel, dx.size, _flat(inputs[0]),
                      _flat(output_grads[0]), _flat(dx), n, inner,
                      float(op.args.get("alpha", 0.0)), op.elu, accum[0])


# ------------------------------------------------------------------------------ PReLU
@kernel
def prelu_kernel(x, w, y, n, inner):
    """y = x where x > 0, else slope x (one slope, or one per channel of (outer, n, inner))."""
    j = cuda.grid(1)
    if j < y.size:
        v = x[j]
        y[j] = v if v > 0 else w[(j // inner) % n if w.size > 1 else 0] * v


@kernel
def prelu_backward_kernel(x, w, dy, dx, slope_terms, n, inner, want_dx, want_dw, accum_dx):
    """dx (+)= dy (x > 0) or slope dy; slope_terms = dy x where x <= 0, else 0 (summed per
    slope afterwards)."""
    j = cuda.grid(1)
    if j < dy.size:
        v = x[j]
        g = dy[j]
        if want_dx:
            gx = g if v > 0 else w[(j // inner) % n if w.size > 1 else 0] * g
            store(dx, j, gx, accum_dx)
        if want_dw:
            slope_terms[j] = g * v if v <= 0 else 0.0


@forward("PReLU")
def prelu_forward(op, inputs, outputs):
    _, n, inner = op.shape3
    y = outputs[0]
    device.launch(prelu_kernel, y.size, _flat(inputs[0]), _flat(inputs[1]), _flat(y), n, inner)


@backward("PReLU")
def prelu_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not (propagate_down[0] or propagate_down[1]):
        return
    x, w, dy = _flat(inputs[0]), _flat(inputs[1]), _flat(output_grads[0])
    terms = device.empty(op.shape3, dy.dtype) if propagate_down[1] else None
    device.launch(prelu_backward_kernel, dy.size, x, w, dy,
                  _flat(input_grads[0]) if propagate_down[0] else dy,
                  _flat(terms) if terms is not None else dy, op.shape3[1], op.shape3[2],
                  propagate_down[0], propagate_down[1], accum[0])
    if terms is not None:
        reduction.reduce(terms, _flat(input_grads[1]), (0, 2), accum=accum[1])
        device.release(terms)
