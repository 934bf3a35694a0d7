"""CUDA launchers of Identity, Unlink and Sink (graph plumbing, with nnabla's backward semantics: see
``ops/special.py``). VATNoise stays on the host: its backward writes into the data of ``w``,
an input, which a device backward could not mark as the newest copy."""
from . import device
from .registry import backward, forward


@forward("Identity")
def identity_forward(op, inputs, outputs):
    device.copy(inputs[0], outputs[0])


@backward("Identity")
def identity_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0] and accum[0]:
        device.add_into(input_grads[0], output_grads[0])
    elif propagate_down[0]:
        device.copy(output_grads[0], input_grads[0])


@forward("Unlink")
def unlink_forward(op, inputs, outputs):
    device.copy(inputs[0], outputs[0])


@backward("Unlink")
def unlink_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """No gradient reaches x: zeros, unless accumulating."""
    if propagate_down[0] and not accum[0]:
        device.fill(input_grads[0], 0)


@forward("Sink")
def sink_forward(op, inputs, outputs):
    device.fill(outputs[0], 0)


@backward("Sink")
def sink_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """With ``one_input_grad`` each input's gradient is set to ones (not accumulated), else the
    gradients already there are left."""
    if op.one_input_grad:
        for dx, pd in zip(input_grads, propagate_down):
            if pd:
                device.fill(dx, 1)
