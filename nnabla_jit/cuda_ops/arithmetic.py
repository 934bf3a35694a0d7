"""CUDA launchers of AddN and MulN (the other arithmetic ops are elementwise table lines): the
sum or product of the active inputs folded in one at a time, as the CPU's ``combine`` does;
MulN's gradient of input k is dy times the product of the other active inputs."""
from . import device
from .registry import backward, forward, kernel

cuda = None  # numba.cuda, bound by device.load()


@kernel
def combine_kernel(out, x, multiply, first):
    """out = x (first), else out *= x or out += x; flat arrays."""
    i = cuda.grid(1)
    if i < out.size:
        if first:
            out[i] = x[i]
        elif multiply:
            out[i] *= x[i]
        else:
            out[i] += x[i]


def _flat(a):
    return device.flat(a)


def _combine(out, x, multiply, first):
    device.launch(combine_kernel, out.size, out, x, multiply, first)


@forward("AddN", "MulN")
def n_ary_forward(op, inputs, outputs):
    y = _flat(outputs[0])
    active = op.active_indices(len(inputs))
    if not active:
        device.fill(y, 1 if op.multiply else 0)   # the empty product / sum
    for n, k in enumerate(active):
        _combine(y, _flat(inputs[k]), op.multiply, n == 0)


@backward("AddN", "MulN")
def n_ary_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = _flat(output_grads[0])
    active = op.active_indices(len(inputs))
    for k, dx in enumerate(input_grads):
        if not propagate_down[k] or k not in active:
            continue   # an inactive input's gradient is left as it is, as nnabla does
        dx = _flat(dx)
        if not op.multiply:
            if accum[k]:
                device.add_into(dx, dy)
            else:
                device.copy(dy, dx)
            continue
        others = device.empty(dy.shape, dy.dtype)
        device.copy(dy, others)
        for j in active:
            if j != k:
                _combine(others, _flat(inputs[j]), True, False)
        _combine(dx, others, False, not accum[k])
        device.release(others)
