"""Helpers for backward kernels whose gradient must be summed back to a smaller shape."""
import numpy as np


def sum_to_shape(g, dst, accum):
    """Write (or add) ``g`` summed over its broadcast axes into ``dst``."""
    if g.shape != dst.shape:
        lead = g.ndim - dst.ndim
        axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(dst.shape)
                                          if s == 1 and g.shape[lead + i] != 1)
        g = g.sum(axis=axes).reshape(dst.shape)
    if accum:
        dst += g
    else:
        dst[...] = g
