"""Backward kernels and grad rules of Unlink, Sink and VATNoise (see ``ops/special.py``)."""


def _zero_unless_accum(dx, accum):
    if not accum:
        dx.fill(0)


def unlink_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        _zero_unless_accum(grad_inputs[0], accum[0])


def unlink_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes):
    return [None]


def sink_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not op.one_input_grad:
        return   # the gradients already in the inputs are the ones to propagate
    for dx, pd in zip(grad_inputs, propagate_down):
        if pd:
            dx.fill(1)


def sink_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, one_input_grad=True):
    from .. import functions as F
    if not one_input_grad:
        return [None] * len(inputs)
    return [F.constant(1.0, tuple(s)) for s in input_shapes]


def vat_noise_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    w = inputs[1]
    w.reshape(-1)[...] = op.eps * grad_outputs[0].reshape(-1)
    if propagate_down[0]:
        _zero_unless_accum(grad_inputs[0], accum[0])
    if propagate_down[1]:
        _zero_unless_accum(grad_inputs[1], accum[1])


def vat_noise_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1, eps=1.0):
    """x gets no gradient; w's "gradient" is the data its backward overwrites, not a derivative."""
    return [None, None]
