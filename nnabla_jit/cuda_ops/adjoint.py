"""CUDA launchers of the adjoints of ``ops/adjoint.py``, run on the source op's CUDA launchers
exactly as the CPU's run on its kernels; no kernels of their own.

* The bilinear adjoints (BilinearAdjoint: nnabla's AffineDataGrad / AffineFilterGrad,
  ConvolutionDataGrad / ..., DeconvolutionFilterGrad): the forward is the source's backward for
  slot ``wrt``, the backward its forward (d dy) and its backward for the other slot. Neither
  launcher of a source reads the slot it differentiates, so the output array stands in for it.
  Convolution's double backward thus stays on the device.
* LinearAdjoint (the ``dx = A^T dy`` node of Pad, Slice, Shift, sum / average pooling, ...): the
  forward is the source's backward, the backward its forward, on the device whenever the
  source's launchers handle its set-up (a source without them runs both on the host).
"""
from ..ops.adjoint import BILINEAR_SOURCES
from . import device, registry
from .registry import backward, forward

BILINEAR_NAMES = tuple(source + suffix for source in BILINEAR_SOURCES
              for suffix in ("DataGrad", "FilterGrad"))


def _source_on_device(op):
    """The source op's launchers handle its set-up (the adjoint runs on them)."""
    return (op.source in registry.FORWARD and op.source in registry.BACKWARD
            and registry.handles(op.op))


def _slot_grad(op, slot, filled, other, dy, out, accum):
    """out (+)= the source's gradient wrt input ``slot`` for output gradient dy, the other
    input holding ``other`` (``filled`` stands in for the slot, not read)."""
    slots, grads, pd, acc = [None, None], [None, None], [False, False], [False, False]
    slots[slot], slots[1 - slot] = filled, other
    grads[slot], pd[slot], acc[slot] = out, True, accum
    registry.BACKWARD[op.source](op.op, slots, [dy], [dy], grads, pd, acc)


@forward(*BILINEAR_NAMES, when=_source_on_device)
def adjoint_forward(op, inputs, outputs):
    dy, other = inputs
    _slot_grad(op, op.wrt, outputs[0], other, dy, outputs[0], False)


@backward(*BILINEAR_NAMES)
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


# ------------------------------------------------------------------------------ linear
@forward("LinearAdjoint", when=_source_on_device)
def linear_adjoint_forward(op, inputs, outputs):
    """dx = the source's backward of (dy_0, ...): outputs not differentiated get zero
    gradients; input 0 and the outputs, never read by a linear op's backward, are stood in
    for by arrays of their shapes."""
    dys, held = list(inputs[:op.n_dy]), list(inputs[op.n_dy:])
    dx = outputs[0]
    zeros = [device.zeros(shape, dx.dtype) for shape in op.y_shapes[op.n_dy:]]
    grads = dys + zeros
    registry.BACKWARD[op.source](op.op, [dx] + held, grads, grads, [dx] + held,
                                 [True] + [False] * len(held), [False] * (1 + len(held)))
    for z in zeros:
        device.release(z)


@backward("LinearAdjoint")
def linear_adjoint_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                            accum):
    """d dy_k (+)= output k of the source applied to the incoming gradient."""
    if not any(propagate_down[:op.n_dy]):
        return
    held = list(inputs[op.n_dy:])
    g = output_grads[0]
    ys, temporaries = [], []
    for k, shape in enumerate(op.y_shapes):
        if k < op.n_dy and propagate_down[k] and not accum[k]:
            ys.append(input_grads[k])   # written straight into the gradient it overwrites
        else:
            ys.append(device.empty(shape, g.dtype))
            temporaries.append(k)
    registry.FORWARD[op.source](op.op, [g] + held, ys)
    for k in temporaries:
        if k < op.n_dy and propagate_down[k]:
            device.add_into(input_grads[k], ys[k])
        device.release(ys[k])
