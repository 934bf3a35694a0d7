"""Grad rules of the detection ops (``ops/detection.py``): graphs of F ops, differentiable again.

NmsDetection2d passes no gradient (nnabla's backward leaves zero), and its grad rule says the
same.
"""
from ..ops.registry import grad_rule


@grad_rule('NmsDetection2d')
def zero_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [None]
