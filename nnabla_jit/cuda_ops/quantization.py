"""CUDA kernels of the elementwise quantizers FixedPointQuantize and Pow2Quantize and of their
straight-through gradient: one thread per element running the CPU kernels' per-element
formulas (``ops/quantization.py``'s ``*_value`` functions, compiled here as device functions).
"""
from ..ops import quantization as cpu_quantizers
from . import device
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

fixed_point_value = device_function(cpu_quantizers.fixed_point_value.py_func)
pow2_value = device_function(cpu_quantizers.pow2_value.py_func)
range_ste_value = device_function(cpu_quantizers.range_ste_value.py_func)


@kernel
def fixed_point_kernel(x, y, lo, hi, delta):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = fixed_point_value(x[i], lo, hi, delta)


@kernel
def pow2_kernel(x, y, signed, with_zero, p_min, p_max):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = pow2_value(x[i], signed, with_zero, p_min, p_max)


@kernel
def range_ste_backward_kernel(x, dy, dx, lo, hi, has_range, accum):
    """dx (+)= dy inside [lo, hi] (everywhere without ``has_range``)."""
    i = cuda.grid(1)
    if i < dx.size:
        g = range_ste_value(x[i], dy[i], lo, hi) if has_range else dy[i]
        if accum:
            dx[i] += g
        else:
            dx[i] = g


def _flat(a):
    return a.reshape(a.size)


@forward("FixedPointQuantize")
def fixed_point_forward(op, inputs, outputs):
    lo, hi = op.bounds
    device.launch(fixed_point_kernel, outputs[0].size, _flat(inputs[0]), _flat(outputs[0]),
                  lo, hi, float(op.delta))


@forward("Pow2Quantize")
def pow2_forward(op, inputs, outputs):
    device.launch(pow2_kernel, outputs[0].size, _flat(inputs[0]), _flat(outputs[0]),
                  bool(op.sign), bool(op.with_zero), op.levels[0], op.levels[1])


@backward("FixedPointQuantize", "Pow2Quantize")
def range_ste_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dx = _flat(input_grads[0])
    # without a range the input is not read (and may not be held): dx stands in for it
    x = dx if op.range is None else _flat(inputs[0])
    lo, hi = op.range if op.range is not None else (0.0, 0.0)
    device.launch(range_ste_backward_kernel, dx.size, x, _flat(output_grads[0]), dx,
                  float(lo), float(hi), op.range is not None, accum[0])
