"""Helpers shared by several op families (axes, broadcast sums, class labels).

They sit below every family module so that no family imports another for a helper.
"""
import os

import numpy as np
from numba import njit

# A backward kernel that needs values no forward computed (backward before any forward, or after
# a clearing forward/backward freed them) raises naming the op: nnabla reads its fresh or freed
# buffers there and returns gradients computed from garbage. NNABLA_JIT_UNCOMPUTED_READS=zeros
# reads zeros instead (nnabla's result with a zeroed pool), for programs that rely on it
# (truncated BPTT written as backward() with no forward). Read when a plan is made.
STRICT_READS = os.environ.get("NNABLA_JIT_UNCOMPUTED_READS", "error") != "zeros"


def normalize_axis(op, axis, ndim, arg="axis"):
    """Map a negative axis to its positive index; reject one outside [-ndim, ndim)."""
    if not -ndim <= axis < ndim:
        op.fail("{} {} is out of range for an input of {} dimensions", arg, axis, ndim)
    return axis % ndim


def outer_axis_inner(shape, axis):
    """(outer, size, inner): the input seen as a 3-d array around ``axis``."""
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, shape[axis], inner


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


@njit(cache=True)
def label_of(t3, o, i, n_classes):
    """The class index at (o, i), a float label truncated toward zero as nnabla's C++ cast does
    (2.001 is class 2, -0.5 class 0): -1 to ignore (negative), -2 if NaN or not below n_classes."""
    v = t3[o, 0, i]
    if v != v:
        return -2
    k = int(v)
    if k >= n_classes:
        return -2
    return k if k >= 0 else -1
