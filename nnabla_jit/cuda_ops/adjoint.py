"""CUDA launchers of the bilinear adjoints (``ops/adjoint.py``'s BilinearAdjoint: nnabla's
AffineDataGrad / AffineFilterGrad, ConvolutionDataGrad / ..., DeconvolutionFilterGrad), run on
the source op's CUDA launchers exactly as the CPU's run on its kernels: the forward is the
source's backward for slot ``wrt``, the backward its forward (d dy) and its backward for the
other slot. Neither launcher of a source reads the slot it differentiates, so the output
array stands in for it. No kernels of their own: convolution's double backward stays on the
device."""
from ..ops.adjoint import BILINEAR_SOURCES
from . import device, registry
from .registry import backward, forward

NAMES = tuple(source + suffix for source in BILINEAR_SOURCES
              for suffix in ("DataGrad", "FilterGrad"))


def _source_on_device(op):
    """The source op's launchers handle its set-up (the adjoint runs on them)."""
    return op.source in registry.FORWARD and registry.handles(op.op)


def _slot_grad(op, slot, filled, other, dy, out, accum):
    """out (+)= the source's gradient wrt input ``slot`` for output gradient dy, the other
    input holding ``other`` (``filled`` stands in for the slot, not read)."""
    slots, grads, pd, acc = [None, None], [None, None], [False, False], [False, False]
    slots[slot], slots[1 - slot] = filled, other
    grads[slot], pd[slot], acc[slot] = out, True, accum
    registry.BACKWARD[op.source](op.op, slots, [dy], [dy], grads, pd, acc)


@forward(*NAMES, when=_source_on_device)
def adjoint_forward(op, inputs, outputs):
    dy, other = inputs
    _slot_grad(op, op.wrt, outputs[0], other, dy, outputs[0], False)


@backward(*NAMES)
def adjoint_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy, other = inputs
    g = output_grads[0]
    if propagate_down[1]:   # the partner adjoint: the source's backward for the other slot
        _slot_grad(op, 1 - op.wrt, input_grads[1], g, dy, input_grads[1], accum[1])
    if propagate_down[0]:   # d dy = the source with g in slot wrt
        slots = [None, None]
        slots[op.wrt], slots[1 - op.wrt] = g, other
        y = device.empty(op.y_shape, g.dtype) if accum[0] else input_grads[0]
        registry.FORWARD[op.source](op.op, slots, [y])
        if accum[0]:
            device.add_into(input_grads[0], y)
            device.release(y)
