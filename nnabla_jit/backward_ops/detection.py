"""Backward of the detection ops: NmsDetection2d passes no gradient (nnabla's backward leaves
zero), and its grad rule says the same."""


def zero_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0] and not accum[0]:
        grad_inputs[0].fill(0)


def zero_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [None]
