"""ONNX QuantizeLinear / DequantizeLinear as nnabla's (floats holding the integers). A scale or
zero point that is one value, or one per ``axis`` entry, is reshaped to broadcast."""
import numpy as np

from .... import functions as F
from ..builder import Unsupported
from .table import imports


def _aligned(c, node, k, ndim, default):
    """Input k shaped to broadcast against an input of ``ndim`` dimensions."""
    name = node.input(k)
    if name is None:
        return F.constant(default, (1,) * ndim)
    shape = c.shape(name)
    if len(shape) == ndim:
        return c.var(name)
    aligned = [1] * ndim
    if shape and shape[0] != 1:
        aligned[node.attr("axis", 1) % ndim] = shape[0]
    return F.reshape(c.var(name), tuple(aligned))


@imports("QuantizeLinear")
def quantize_linear(c, node):
    x = c.var(node.inputs[0])
    zero_point = node.input(2)
    dtype = c.const(zero_point, "zero_point").dtype if zero_point else np.dtype(np.uint8)
    if dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
        raise Unsupported("only int8 and uint8 quantization is supported, not {}".format(dtype))
    return F.quantize_linear(x, _aligned(c, node, 1, x.ndim, 1.0), _aligned(c, node, 2, x.ndim, 0.0),
                             "HALF_TO_EVEN", False, dtype.type)


@imports("DequantizeLinear")
def dequantize_linear(c, node):
    x = c.var(node.inputs[0])
    return F.dequantize_linear(x, _aligned(c, node, 1, x.ndim, 1.0), _aligned(c, node, 2, x.ndim, 0.0))
