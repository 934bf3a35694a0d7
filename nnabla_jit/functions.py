"""``nnabla_jit.functions`` (``F``): every op of the registry, plus nnabla's Python-level helpers.

The op functions come from ``function_bases`` (generated from the registry). The helpers below
have the signatures of ``nnabla.functions``: ``sum(x, axis, keepdims)`` maps onto the ``Sum`` op,
``batch_normalization(..., output_stat)`` onto ``BatchNormalization``, and so on.
"""
import builtins

import numpy as np

from . import function_bases as _fb
from .function_bases import *  # noqa: F401,F403
from .normalization_functions import (batch_normalization, group_normalization,  # noqa: F401
                                      instance_normalization, layer_normalization)
from .ndarray import NdArray
from .variable import Variable


def _axes(x, axis):
    """nnabla's ``axis`` argument (None, int or iterable) as a tuple of axes."""
    if axis is None:
        return tuple(range(len(x.shape)))
    if isinstance(axis, (int, np.integer)):
        return (int(axis),)
    return tuple(int(a) for a in axis)


# ---------------------------------------------------------------------------------- reductions
def sum(x, axis=None, keepdims=False):
    """Sum over ``axis`` (all axes when None)."""
    return _fb.sum(x, _axes(x, axis), keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean over ``axis`` (all axes when None)."""
    return _fb.mean(x, _axes(x, axis), keepdims)


def max(x, axis=None, keepdims=False, with_index=False, only_index=False):
    """Max over ``axis``; ``with_index`` also returns the argmax, ``only_index`` only it."""
    n_outputs = 2 if with_index and not only_index else 1
    return _fb.max(x, _axes(x, axis), keepdims, with_index, only_index, n_outputs=n_outputs)


def min(x, axis=None, keepdims=False, with_index=False, only_index=False):
    """Min over ``axis``; ``with_index`` also returns the argmin, ``only_index`` only it."""
    n_outputs = 2 if with_index and not only_index else 1
    return _fb.min(x, _axes(x, axis), keepdims, with_index, only_index, n_outputs=n_outputs)


def prod(x, axis=None, keepdims=False):
    """Product over ``axis`` (all axes when None)."""
    return _fb.prod(x, _axes(x, axis), keepdims)


def norm(x, p=None, axis=None, keepdims=False):
    """p-norm over ``axis`` (p=2 when None)."""
    return _fb.norm(x, 2.0 if p is None else p, _axes(x, axis), keepdims)


def reduce(x, op="sum"):
    """Deprecated nnabla helper: reduce_sum or reduce_mean over every element."""
    if op == "sum":
        return _fb.reduce_sum(x)
    if op == "mean":
        return _fb.reduce_mean(x)
    raise ValueError("reduce: op must be 'sum' or 'mean', got {!r}".format(op))


# ---------------------------------------------------------------------------------- arrays
def split(x, axis=0):
    """Split along ``axis`` into a tuple of arrays with that axis removed."""
    outs = _fb.split(x, axis, n_outputs=x.shape[axis])
    return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)


def tile(x, reps):
    """Repeat ``x`` ``reps`` times along each axis (reps may be an int)."""
    if isinstance(reps, (int, np.integer)):
        reps = (int(reps),)
    return _fb.tile(x, reps)


# ---------------------------------------------------------------------------------- clipping
def clip_by_value(x, min, max):
    """Clip ``x`` into [min, max]; the bounds may be numbers or Variables."""
    if np.isscalar(min) and np.isscalar(max):
        return _fb.minimum_scalar(_fb.maximum_scalar(x, min), max)
    if np.isscalar(min):
        min = _fb.constant(float(min), x.shape)
    if np.isscalar(max):
        max = _fb.constant(float(max), x.shape)
    return _fb.minimum2(_fb.maximum2(x, min), max)


def clip_by_norm(x, clip_norm, axis=None):
    """Rescale ``x`` so its L2 norm over ``axis`` is at most ``clip_norm``."""
    axes = _axes(x, axis)
    norm_ = _fb.pow_scalar(_fb.sum(x ** 2, axes, True), 0.5)
    if isinstance(clip_norm, (Variable, NdArray)):
        return x * clip_norm / _fb.maximum2(_fb.broadcast(clip_norm, norm_.shape) if clip_norm.shape != norm_.shape else clip_norm, norm_)
    return x * float(clip_norm) / _fb.maximum_scalar(norm_, float(clip_norm))


# ---------------------------------------------------------------------------------- operators
# Variable and NdArray operators land here; the op choice follows nnabla's (v / 2 is MulScalar).
def _imperative(a, b):
    """Mixed Variable/NdArray operands compute at once on the NdArrays, as nnabla does."""
    if isinstance(a, NdArray) or isinstance(b, NdArray):
        a = a.data if isinstance(a, Variable) else a
        b = b.data if isinstance(b, Variable) else b
    return a, b


def _is_array(v):
    return isinstance(v, (Variable, NdArray))


def _add(a, b):
    a, b = _imperative(a, b)
    return _fb.add2(a, b) if _is_array(b) else _fb.add_scalar(a, float(b))


def _sub(a, b):
    a, b = _imperative(a, b)
    return _fb.sub2(a, b) if _is_array(b) else _fb.add_scalar(a, -float(b))


def _rsub(a, b):   # b - a
    return _fb.r_sub_scalar(a, float(b))


def _mul(a, b):
    a, b = _imperative(a, b)
    return _fb.mul2(a, b) if _is_array(b) else _fb.mul_scalar(a, float(b))


def _div(a, b):
    a, b = _imperative(a, b)
    return _fb.div2(a, b) if _is_array(b) else _fb.mul_scalar(a, 1.0 / float(b))


def _rdiv(a, b):   # b / a
    return _fb.r_div_scalar(a, float(b))


def _pow(a, b):
    a, b = _imperative(a, b)
    return _fb.pow2(a, b) if _is_array(b) else _fb.pow_scalar(a, float(b))


def _rpow(a, b):   # b ** a
    return _fb.r_pow_scalar(a, float(b))


def _matmul(a, b):
    a, b = _imperative(a, b)
    if len(a.shape) == 2 and len(b.shape) == 2:
        return _fb.affine(a, b)
    return _fb.batch_matmul(a, b)


_SCALAR_COMPARE = {"less": _fb.less_scalar, "less_equal": _fb.less_equal_scalar,
                   "greater": _fb.greater_scalar, "greater_equal": _fb.greater_equal_scalar}
_COMPARE = {"less": _fb.less, "less_equal": _fb.less_equal, "greater": _fb.greater,
            "greater_equal": _fb.greater_equal}


def _compare(a, b, kind):
    a, b = _imperative(a, b)
    return _COMPARE[kind](a, b) if _is_array(b) else _SCALAR_COMPARE[kind](a, float(b))


_slice = builtins.slice   # `slice` below is F.slice


def _getitem(x, key):
    """Basic indexing (ints, slices, None, Ellipsis) as Slice + Reshape, like nnabla."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(isinstance(k, (Variable, NdArray, np.ndarray, list)) for k in key):
        raise TypeError("Variable indexing supports ints, slices, None and ...; use F.gather_nd "
                        "or F.bool_gather for array indices")
    n_real = len([k for k in key if k is not None and k is not Ellipsis])
    if n_real > len(x.shape):
        raise IndexError("too many indices ({}) for a variable of shape {}".format(n_real, x.shape))
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (_slice(None),) * (len(x.shape) - n_real) + key[i + 1:]
    else:
        key = key + (_slice(None),) * (len(x.shape) - n_real)
    start, stop, step, out_shape = [], [], [], []
    axis = 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        size = x.shape[axis]
        if isinstance(k, (int, np.integer)):
            k = int(k)
            if not -size <= k < size:
                raise IndexError("index {} is out of bounds for axis {} of size {}".format(k, axis, size))
            k %= size
            start.append(k)
            stop.append(k + 1)
            step.append(1)
        else:
            b, e, s = k.indices(size)
            out_shape.append(len(range(b, e, s)))
            if s < 0 and e < 0:
                e = -size - 1   # "before index 0" for a reversed slice
            start.append(b)
            stop.append(e)
            step.append(s)
        axis += 1
    y = x
    if (tuple(start), tuple(stop), tuple(step)) != ((0,) * len(x.shape), tuple(x.shape), (1,) * len(x.shape)):
        y = _fb.slice(x, start, stop, step)
    if tuple(y.shape) != tuple(out_shape):
        y = _fb.reshape(y, out_shape, inplace=False)
    return y
