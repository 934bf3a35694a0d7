"""Grad rules of the augmentation ops (``ops/augmentation.py``): graphs of F ops, differentiable again.
"""
from ..function import build
from ..ops.augmentation import RandomIndexScatter
from ..ops.registry import grad_rule


def _index_node(source, g, gather):
    return build(RandomIndexScatter(input_names=("x",), source=source, gather=gather), [g])


@grad_rule('RandomCrop', 'RandomFlip', 'RandomShift')
def random_index_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    # The rule needs the draws, which live on the forward node's op.
    return [_index_node(outputs[0].parent.op, grad_inputs[0], False)]


@grad_rule('RandomIndexScatter')
def random_index_scatter_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                              source=None, gather=False):
    return [_index_node(source, grad_inputs[0], not gather)]


@grad_rule('RandomErase')
def random_erase_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                      ste_fine_grained=True, **args):
    if not ste_fine_grained:
        return [grad_inputs[0]]
    return random_index_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes)


@grad_rule('ImageAugmentation')
def no_gradient_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [None]
