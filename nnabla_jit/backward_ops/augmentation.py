"""Backward kernels and grad rules of the augmentation ops (see ``ops/augmentation.py``)."""


def _aug():
    from ..ops import augmentation
    return augmentation


def random_index_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """dx (+)= dy scattered back through the index map of the last forward."""
    if propagate_down[0]:
        _aug().run_index_map(grad_outputs[0], grad_inputs[0], op.index, False, accum[0])


def _index_node(source, g, gather):
    from ..function import build
    return build(_aug().RandomIndexScatter(input_names=("x",), source=source, gather=gather), [g])


def random_index_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    # The rule needs the draws, which live on the forward node's op.
    return [_index_node(outputs[0].parent.op, grad_inputs[0], False)]


def random_index_scatter_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down,
                                  accum):
    if propagate_down[0]:
        _aug().run_index_map(grad_outputs[0], grad_inputs[0], op.source.index, not op.gather,
                             accum[0])


def random_index_scatter_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                              source=None, gather=False):
    return [_index_node(source, grad_inputs[0], not gather)]


def random_erase_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    """Fine-grained: the gradient reaches the elements that were not erased; else all."""
    if not propagate_down[0]:
        return
    if op.ste_fine_grained:
        random_index_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum)
    elif accum[0]:
        grad_inputs[0] += grad_outputs[0]
    else:
        grad_inputs[0][...] = grad_outputs[0]


def random_erase_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                      ste_fine_grained=True, **args):
    if not ste_fine_grained:
        return [grad_inputs[0]]
    return random_index_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes)


def no_gradient_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0] and not accum[0]:
        grad_inputs[0].fill(0)


def no_gradient_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [None]
