"""``nnabla.numpy_compat_functions``: NumPy-style helpers over Variables and NdArrays, also
available as ``F.<name>``."""
import numpy as np

from .ndarray import NdArray
from .variable import Variable

__all__ = ["dot"]

_ARRAYS = (Variable, NdArray)


def dot(a, b, out=None):
    """``numpy.dot`` for Variables and NdArrays.

    1-d with 1-d: the inner product; 2-d with 2-d: the matrix product; a 0-d operand: the
    elementwise product; N-d with 1-d: the sum product over the last axes; N-d with M-d (M >= 2):
    the sum product over the last axis of a and the second-to-last of b.

    Args:
        a (Variable or NdArray): the first operand (or a number).
        b (Variable or NdArray): the second operand (or a number).
        out (Variable or NdArray, default None): receives the result (an NdArray is overwritten,
            a Variable rewired onto the result's graph); nothing is returned then.

    Returns:
        Variable or NdArray: shape ``a.shape[:-1] + b.shape[:-2] + b.shape[-1:]`` in the N-d
        case; None when out is given.

    Example:
        >>> a, b = nn.Variable((3, 4)), nn.Variable((4, 5))
        >>> y = F.dot(a, b)  # y.shape == (3, 5)
    """
    from . import functions as F
    if not (isinstance(a, _ARRAYS) and isinstance(b, _ARRAYS)):
        if isinstance(a, _ARRAYS) or isinstance(b, _ARRAYS):
            scalar, array = (b, a) if isinstance(a, _ARRAYS) else (a, b)
            if not np.isscalar(scalar):
                raise TypeError("dot: a Variable or NdArray cannot be combined with a {}"
                                .format(type(scalar).__name__))
            result = F.mul_scalar(array, float(scalar))
        else:
            result = np.dot(a, b)
    elif a.ndim == 0 or b.ndim == 0:
        result = a * b
    elif a.ndim == 1 and b.ndim == 1:
        result = F.sum(a * b)
    elif a.ndim == 2 and b.ndim == 2:
        result = F.affine(a, b)
    elif b.ndim == 1:
        h = F.affine(a, F.reshape(b, (b.shape[0], 1), inplace=False), base_axis=a.ndim - 1)
        result = F.reshape(h, h.shape[:-1], inplace=False)
    else:
        axes = [b.ndim - 2] + [d for d in range(b.ndim) if d != b.ndim - 2]
        result = F.affine(a, F.transpose(b, axes), base_axis=a.ndim - 1)
    if out is None:
        return result
    if type(out) is not type(result) or tuple(out.shape) != tuple(np.shape(result)):
        raise ValueError("dot: out must be a {} of shape {} (the type and shape of the result); "
                         "got a {} of shape {}".format(type(result).__name__, np.shape(result),
                                                       type(out).__name__, tuple(out.shape)))
    if isinstance(out, NdArray):
        out.cast(result.dtype)[...] = result.data
    elif isinstance(out, Variable):
        out.rewire_on(result)
    else:
        out[...] = result
