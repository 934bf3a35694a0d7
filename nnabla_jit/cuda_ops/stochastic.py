"""Dropout on the device with the CPU's draws: the mask is drawn on the host from the op's
numpy stream (``Dropout.draw_mask``, the CPU's per-element factor), so a seed gives the CPU
path's units, and copied up; the device multiplies x, and dy in backward, by it. The host
keeps the mask too (``op.mask``). DropoutMask, Dropout's grad rule (nn.grad), multiplies by the
device copy its Dropout's forward left. The other random ops draw on the host (docs/cuda.md
says why)."""
from . import device
from .device import store
from .registry import backward, forward, kernel

cuda = None  # numba.cuda, bound by device.load()


@kernel
def masked_kernel(x, mask, y, accum):
    """y (+)= x * mask."""
    i = cuda.grid(1)
    if i < y.size:
        store(y, i, x[i] * mask[i], accum)


def _device_mask(op):
    mask = op.__dict__.get("device_mask")
    if mask is None or mask.size != op.mask.size:
        mask = op.device_mask = device.empty((op.mask.size,), op.mask.dtype)
    return mask


def _flat(a):
    return a.reshape(a.size)


def _mask_of(dropout):
    """The device copy of ``dropout``'s mask: the one its device forward left, else the host's
    copied up (a Dropout that ran on the host)."""
    mask = dropout.__dict__.get("device_mask")
    if mask is None or mask.size != dropout.mask.size:
        mask = _device_mask(dropout)
        device.copy_up(dropout.mask.reshape(-1), mask)
    return mask


@forward("Dropout")
def dropout_forward(op, inputs, outputs):
    op.draw_mask()
    mask = _device_mask(op)
    device.copy_up(op.mask.reshape(-1), mask)
    device.launch(masked_kernel, mask.size, _flat(inputs[0]), mask, _flat(outputs[0]), False)


@backward("Dropout")
def dropout_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dx = input_grads[0]
        device.launch(masked_kernel, dx.size, _flat(output_grads[0]), _device_mask(op), _flat(dx),
                      bool(accum[0]))


@forward("DropoutMask")
def dropout_mask_forward(op, inputs, outputs):
    mask = _mask_of(op.dropout)
    device.launch(masked_kernel, mask.size, _flat(inputs[0]), mask, _flat(outputs[0]), False)


@backward("DropoutMask")
def dropout_mask_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dx = input_grads[0]
        device.launch(masked_kernel, dx.size, _flat(output_grads[0]), _mask_of(op.dropout), _flat(dx),
                      bool(accum[0]))
