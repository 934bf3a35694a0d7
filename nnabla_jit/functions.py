"""``nnabla_jit.functions`` (``F``): every op of the registry, plus nnabla's Python-level helpers.

The op functions come from ``function_bases`` (generated from the registry). The helpers below
have the signatures of ``nnabla.functions``: ``sum(x, axis, keepdims)`` maps onto the ``Sum`` op,
``batch_normalization(..., output_stat)`` onto ``BatchNormalization``, and so on.
"""
import builtins
import weakref

import numpy as np

from . import function_bases as _fb
from .function_bases import *  # noqa: F401,F403
from .normalization_functions import (batch_normalization, group_normalization,  # noqa: F401
                                      instance_normalization, layer_normalization)
from . import composite_functions  # noqa: F401  (registers FusedConvolution, an op made of F ops)
from .ndarray import NdArray
from .variable import Variable


def _axes(x, axis):
    """nnabla's ``axis`` argument (None, int or iterable) as a tuple of axes."""
    if axis is None:
        return tuple(range(len(x.shape)))
    if not hasattr(axis, "__iter__"):
        return (int(axis),)   # a float axis truncates, as nnabla's int64 arguments do
    return tuple(int(a) for a in axis)


# ---------------------------------------------------------------------------------- reductions
def sum(x, axis=None, keepdims=False):
    """Sum of the elements over the given axes.

    Args:
        x (Variable): input, any shape.
        axis (int, tuple of int or None, default None): the axes summed over; None: all.
        keepdims (bool, default False): keep the summed axes as size 1.

    Returns:
        Variable: x's shape without the summed axes (with 1 there under keepdims).

    Example:
        >>> x = nn.Variable((8, 3, 4))
        >>> y = F.sum(x, axis=(1, 2))  # y.shape == (8,)
    """
    return _fb.sum(x, _axes(x, axis), keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean of the elements over the given axes.

    Args:
        x (Variable): input, any shape.
        axis (int, tuple of int or None, default None): the axes averaged over; None: all.
        keepdims (bool, default False): keep the averaged axes as size 1.

    Returns:
        Variable: x's shape without the averaged axes (with 1 there under keepdims).

    Example:
        >>> x = nn.Variable((8, 10))
        >>> loss = F.mean(x)  # loss.shape == ()
    """
    return _fb.mean(x, _axes(x, axis), keepdims)


def max(x, axis=None, keepdims=False, with_index=False, only_index=False):
    """Maximum over the given axes, optionally with where it is.

    Args:
        x (Variable): input, any shape.
        axis (int, tuple of int or None, default None): the axes reduced over; None: all.
        keepdims (bool, default False): keep the reduced axes as size 1.
        with_index (bool, default False): also return the index of the maximum (flat within the
            reduced axes).
        only_index (bool, default False): return only that index.

    Returns:
        Variable: the maxima; ``(maxima, indices)`` with ``with_index``; the indices alone with
        ``only_index``.

    Example:
        >>> x = nn.Variable((8, 10))
        >>> values, index = F.max(x, axis=1, with_index=True)  # index.shape == (8,)
    """
    n_outputs = 2 if with_index and not only_index else 1
    return _fb.max(x, _axes(x, axis), keepdims, with_index, only_index, n_outputs=n_outputs)


def min(x, axis=None, keepdims=False, with_index=False, only_index=False):
    """Minimum over the given axes, optionally with where it is.

    Args:
        x (Variable): input, any shape.
        axis (int, tuple of int or None, default None): the axes reduced over; None: all.
        keepdims (bool, default False): keep the reduced axes as size 1.
        with_index (bool, default False): also return the index of the minimum (flat within the
            reduced axes).
        only_index (bool, default False): return only that index.

    Returns:
        Variable: the minima; ``(minima, indices)`` with ``with_index``; the indices alone with
        ``only_index``.
    """
    n_outputs = 2 if with_index and not only_index else 1
    return _fb.min(x, _axes(x, axis), keepdims, with_index, only_index, n_outputs=n_outputs)


def prod(x, axis=None, keepdims=False):
    """Product of the elements over the given axes.

    Args:
        x (Variable): input, any shape.
        axis (int, tuple of int or None, default None): the axes multiplied over; None: all.
        keepdims (bool, default False): keep the reduced axes as size 1.

    Returns:
        Variable: x's shape without the reduced axes (with 1 there under keepdims).
    """
    return _fb.prod(x, _axes(x, axis), keepdims)


def norm(x, p=None, axis=None, keepdims=False):
    """p-norm over the given axes: ``sum(abs(x) ** p) ** (1 / p)``.

    Args:
        x (Variable): input, any shape.
        p (float or None, default None): the norm's order; None: 2.
        axis (int, tuple of int or None, default None): the axes reduced over; None: all.
        keepdims (bool, default False): keep the reduced axes as size 1.

    Returns:
        Variable: x's shape without the reduced axes (with 1 there under keepdims).
    """
    return _fb.norm(x, 2.0 if p is None else p, _axes(x, axis), keepdims)


def reduce(x, op="sum"):
    """Sum or mean of every element (an old nnabla helper; use :func:`sum` or :func:`mean`).

    Args:
        x (Variable): input, any shape.
        op (str, default 'sum'): 'sum' or 'mean'.

    Returns:
        Variable: a 0-d array.
    """
    if op == "sum":
        return _fb.reduce_sum(x)
    if op == "mean":
        return _fb.reduce_mean(x)
    raise ValueError("reduce: op must be 'sum' or 'mean', got {!r}".format(op))


# ---------------------------------------------------------------------------------- arrays
def split(x, axis=0):
    """Splits x into its slices along one axis, that axis removed from each.

    Args:
        x (Variable): input, any shape.
        axis (int, default 0): the axis split along.

    Returns:
        tuple of Variable: ``x.shape[axis]`` arrays, each of x's shape without ``axis``.

    Example:
        >>> x = nn.Variable((3, 4, 5))
        >>> a, b, c = F.split(x, axis=0)  # a.shape == (4, 5)
    """
    shape = tuple(getattr(x, "shape", ()))
    if not isinstance(axis, (int, np.integer)):   # nnabla indexes the shape with it
        raise TypeError("F.split: axis must be an integer, got {!r}".format(axis))
    in_range = -len(shape) <= axis < len(shape)
    # an axis out of range is left to Split's setup, whose error names the op and the axis
    outs = _fb.split(x, axis, n_outputs=shape[axis] if in_range else -1)
    return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)


def tile(x, reps):
    """Repeats the whole array along each axis (as ``numpy.tile``).

    Args:
        x (Variable): input, any shape.
        reps (int or tuple of int): repetitions per axis, aligned to the last axes; an int repeats
            the last axis.

    Returns:
        Variable: each axis multiplied by its repetition count.

    Example:
        >>> x = nn.Variable((2, 3))
        >>> y = F.tile(x, (2, 2))  # y.shape == (4, 6)
    """
    if isinstance(reps, (int, np.integer)):
        reps = (int(reps),)
    return _fb.tile(x, reps)


# ---------------------------------------------------------------------------------- clipping
def clip_by_value(x, min, max):
    """Clips x elementwise into [min, max].

    Args:
        x (Variable): input, any shape.
        min (float or Variable): the lower bound, a number or an array broadcastable to x.
        max (float or Variable): the upper bound, a number or an array broadcastable to x.

    Returns:
        Variable: shape of x.

    Example:
        >>> x = nn.Variable((4, 3))
        >>> y = F.clip_by_value(x, -1.0, 1.0)  # y.shape == (4, 3)
    """
    if np.isscalar(min) and np.isscalar(max):
        return _fb.minimum_scalar(_fb.maximum_scalar(x, min), max)
    if np.isscalar(min):
        min = _fb.constant(float(min), x.shape)
    if np.isscalar(max):
        max = _fb.constant(float(max), x.shape)
    return _fb.minimum2(_fb.maximum2(x, min), max)


def clip_by_norm(x, clip_norm, axis=None):
    """Rescales x so that its L2 norm over the given axes is at most clip_norm (values already
    within it are left unchanged).

    Args:
        x (Variable): input, any shape.
        clip_norm (float or Variable): the largest norm allowed.
        axis (int, tuple of int or None, default None): the axes the norm is taken over; None: all.

    Returns:
        Variable: shape of x.
    """
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


class MatmulOperandError(ValueError, AssertionError):
    """A 0-d operand of ``@``, or one that is not a Variable or NdArray. An AssertionError too,
    as nnabla raises for them (numpy's wording)."""


def _matmul(a, b):
    if not (_is_array(a) and _is_array(b)):
        raise MatmulOperandError("matmul (@): both operands must be Variables or NdArrays, got {} and {}".format(
            type(a).__name__, type(b).__name__))
    a, b = _imperative(a, b)
    shape_a, shape_b = tuple(np.shape(a)), tuple(np.shape(b))
    for which, shape in (("1st", shape_a), ("2nd", shape_b)):
        if len(shape) == 0:
            raise MatmulOperandError(
                "matmul (@): the {} operand has 0 dimensions; @ needs at least 1 "
                "(a: shape {}, b: shape {})".format(which, shape_a, shape_b))
    # numpy's rules, built from the ops nnabla builds them from: 1-d . 1-d is a sum of products; a
    # 1-d operand is promoted to a matrix (a row on the left, a column on the right) whose added
    # axis is removed from the result; ranks below the other operand's get leading 1s.
    if len(shape_a) == 1 and len(shape_b) == 1:
        return _fb.sum(_fb.mul2(a, b), axes=[0], keep_dims=False)
    ndim = builtins.max(len(shape_a), len(shape_b), 2)
    if len(shape_a) == 1:
        a = _fb.reshape(a, (1,) * (ndim - 1) + shape_a)
    if len(shape_b) == 1:
        b = _fb.reshape(b, (1,) * (ndim - 2) + shape_b + (1,))
    if ndim == 2:
        y = _fb.affine(a, b)
    else:
        if len(a.shape) < ndim:
            a = _fb.reshape(a, (1,) * (ndim - len(a.shape)) + tuple(a.shape))
        if len(b.shape) < ndim:
            b = _fb.reshape(b, (1,) * (ndim - len(b.shape)) + tuple(b.shape))
        y = _fb.batch_matmul(a, b)
    if len(shape_a) == 1 or len(shape_b) == 1:
        out_shape = tuple(y.shape[:-2]) + (() if len(shape_a) == 1 else (y.shape[-2],)) \
            + (() if len(shape_b) == 1 else (y.shape[-1],))
        y = _fb.reshape(y, out_shape)
    return y


_SCALAR_COMPARE = {"less": _fb.less_scalar, "less_equal": _fb.less_equal_scalar,
                   "greater": _fb.greater_scalar, "greater_equal": _fb.greater_equal_scalar}
_COMPARE = {"less": _fb.less, "less_equal": _fb.less_equal, "greater": _fb.greater,
            "greater_equal": _fb.greater_equal}


def _compare(a, b, kind):
    a, b = _imperative(a, b)
    return _COMPARE[kind](a, b) if _is_array(b) else _SCALAR_COMPARE[kind](a, float(b))


_slice = builtins.slice   # `slice` below is F.slice


# The Dropout node last applied to each input Variable: nnabla finds a Dropout's mask from its
# input (its grad rule called without the outputs, nnabla._dropout_workaround._get_dropout_mask).
_DROPOUT_OF_INPUT = weakref.WeakKeyDictionary()


def dropout(x, p=0.5, seed=-1, n_outputs=-1, outputs=None):
    """Dropout: each element zeroed with probability p, the others scaled by 1 / (1 - p).

    Use it only while training; at inference leave it out (or use p=0).

    Args:
        x (Variable): input, any shape.
        p (float, default 0.5): probability of zeroing, in [0, 1).
        seed (int, default -1): -1 draws from the global generator (``nn.seed``); another value
            gives this function a generator of its own.
        n_outputs (int, default -1): accepted for nnabla's signature (one output).
        outputs (list of Variable, default None): Variables to write the result into instead of
            new ones.

    Returns:
        Variable: shape of x.

    Example:
        >>> x = nn.Variable((8, 100))
        >>> h = F.dropout(x, p=0.3)  # h.shape == (8, 100)
    """
    y = _fb.dropout(x, p, seed, n_outputs, outputs)
    if isinstance(x, Variable) and y.parent is not None:
        _DROPOUT_OF_INPUT[x] = weakref.ref(y.parent.op)
    return y


def dropout_applied_to(x):
    """The Dropout function last applied to x by :func:`dropout`, if it still exists.

    nnabla's gradient rule of Dropout finds the mask from the input this way.

    Args:
        x (Variable): the Variable dropout was applied to.

    Returns:
        the Dropout op (holding the last mask), or None.
    """
    ref = _DROPOUT_OF_INPUT.get(x) if isinstance(x, Variable) else None
    return ref() if ref is not None else None


def slice(x, start=None, stop=None, step=None, n_outputs=-1, outputs=None):
    """Slices every axis as Python's ``x[start:stop:step]`` does.

    Args:
        x (Variable): input, any shape.
        start (list of int or None, default None): first index per axis; None (or a None entry):
            the start of the axis (its end for a negative step).
        stop (list of int or None, default None): end index per axis, not included; None (or a None
            entry): past the end of the axis (before its start for a negative step).
        step (list of int or None, default None): step per axis; None (or a None entry): 1.
        n_outputs (int, default -1): accepted for nnabla's signature (one output).
        outputs (list of Variable, default None): Variables to write the result into instead of
            new ones.

    Returns:
        Variable: the slice; ``x[1:3, ::2]`` builds the same.

    Example:
        >>> x = nn.Variable((4, 6))
        >>> y = F.slice(x, start=(1, 0), stop=(3, 6), step=(1, 2))  # y.shape == (2, 3)
    """
    ndim = len(x.shape)
    start = list(start) if start is not None else [0] * ndim
    stop = list(stop) if stop is not None else list(x.shape)
    step = list(step) if step is not None else [1] * ndim
    for i, (s0, s1, s2) in enumerate(zip(start, stop, step)):
        backwards = s2 is not None and s2 < 0
        if s0 is None:
            start[i] = -1 if backwards else 0
        if s1 is None:
            stop[i] = -x.shape[i] - 1 if backwards else x.shape[i]
        if s2 is None:
            step[i] = 1
    return _fb.slice(x, start, stop, step, n_outputs=n_outputs, outputs=outputs)


def _is_advanced(k):
    return isinstance(k, (Variable, NdArray, np.ndarray, list))


def _advanced_getitem(x, key):
    """Index arrays (lists, numpy arrays, NdArrays, Variables) or one boolean mask, as GatherNd
    over the leading axes, like nnabla (which also refuses to mix them with slices or ints)."""
    lead = 0
    while lead < len(key) and key[lead] is None:   # leading Nones add axes of size 1
        lead += 1
    arrays = key[lead:]
    if not arrays or not all(_is_advanced(k) for k in arrays):
        raise NotImplementedError("Variable indexing: mixed advanced indexing: {} (index arrays "
                                  "cannot be combined with slices, ints, ... or inner None)"
                                  .format(", ".join(map(repr, key))))
    if len(arrays) > len(x.shape):
        raise IndexError("too many indices ({}) for a variable of shape {}".format(len(arrays), x.shape))

    def values(k):   # index data known now (a Variable's mask is read at build time, as nnabla)
        if isinstance(k, Variable):
            return k.d
        return k.data if isinstance(k, NdArray) else np.asarray(k)

    boolean = [np.asarray(values(k)).dtype == np.bool_ for k in arrays]
    if any(boolean):
        if len(arrays) != 1:
            raise NotImplementedError("Variable indexing: a boolean mask must be the only index")
        mask = np.asarray(values(arrays[0]))
        if mask.shape != tuple(x.shape[:mask.ndim]):
            raise IndexError("boolean mask of shape {} does not match the leading axes of a variable "
                             "of shape {}".format(mask.shape, x.shape))
        index = Variable.from_numpy_array(np.stack(np.nonzero(mask)).astype(np.int64))
    elif any(isinstance(k, Variable) for k in arrays):   # indices computed by the graph
        shape = next(k.shape for k in arrays if isinstance(k, Variable))
        parts = []
        for k in arrays:
            if not isinstance(k, Variable):
                k = Variable.from_numpy_array(np.broadcast_to(values(k), shape))
            elif k.shape != shape:
                raise IndexError("Variable indexing: index Variables of shapes {} and {} differ"
                                 .format(shape, k.shape))
            parts.append(k)
        index = _fb.stack(*parts, axis=0)
    else:
        idx = np.broadcast_arrays(*[np.asarray(values(k)) for k in arrays])
        for axis, a in enumerate(idx):
            if a.dtype.kind not in "iu":
                raise IndexError("Variable indexing: index arrays must hold integers or booleans, "
                                 "got {}".format(a.dtype))
            size = x.shape[axis]
            if a.size and (a.min() < -size or a.max() >= size):
                raise IndexError("index {} is out of bounds for axis {} of size {}".format(
                    a.max() if a.max() >= size else a.min(), axis, size))
        index = Variable.from_numpy_array(np.stack(idx).astype(np.int64))
    y = _fb.gather_nd(x, index)
    if lead:
        y = _fb.reshape(y, (1,) * lead + tuple(y.shape), inplace=False)
    return y


def _setitem(x, key, value):
    """``x[key] = value`` (``Variable.__setitem__``): ScatterNd of ``value``, broadcast to the
    selection, at the selected positions into x's previous value, with x as its output."""
    if isinstance(key, (Variable, NdArray)):
        key = key.d if isinstance(key, Variable) else key.data
    positions = np.indices(x.shape)[(_slice(None),) + (key if isinstance(key, tuple) else (key,))]
    target = positions.shape[1:]
    if isinstance(value, NdArray):
        value = Variable._from_ndarray(value)
    if not isinstance(value, Variable):
        value = Variable.from_numpy_array(np.broadcast_to(np.asarray(value, x._body.data.dtype), target))
    elif value.shape != target:
        value = broadcast(reshape(value, (1,) * (len(target) - value.ndim) + value.shape), target)
    indices = Variable.from_numpy_array(positions.reshape(positions.shape[0], -1))
    value = reshape(value, (indices.shape[1],) + tuple(x.shape[positions.shape[0]:]))
    old = x._hand_over()
    _fb.scatter_nd(value, indices, old, shape=x.shape, outputs=[x])


def _getitem(x, key):
    """Basic indexing (ints, slices, None, Ellipsis) as Slice + Reshape, like nnabla; index
    arrays and boolean masks as GatherNd."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(_is_advanced(k) for k in key):
        return _advanced_getitem(x, key)
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


# ---------------------------------------------------------------------------------- normalization
from .normalization_functions import (fused_batch_normalization, sync_batch_normalization,  # noqa: E402,F401
                                      tensor_normalization, weight_standardization)


def spectral_norm(w, u, dim=0, itr=1, eps=1e-12, test=False, output_u=False, outputs=None):
    """Spectral normalization: w / sigma, sigma the largest singular value of w seen as a matrix
    (axis ``dim`` against the rest), estimated by power iteration from u.

    Args:
        w (Variable): weight, any shape.
        u (Variable): the power iteration's vector (w.shape[dim],), updated in place unless
            ``test``.
        dim (int, default 0): the axis forming the matrix's rows.
        itr (int, default 1): power iterations per call.
        eps (float, default 1e-12): keeps the vectors' normalization away from 0 / 0.
        test (bool, default False): leave u unchanged (inference).
        output_u (bool, default False): also return u as it was before this call.
        outputs (list of Variable, default None): Variables to write the results into instead of
            new ones.

    Returns:
        Variable: shape of w; ``(w_sn, u)`` with ``output_u``.
    """
    return _fb.spectral_norm(w, u, dim, itr, eps, test, output_u, n_outputs=2 if output_u else 1,
                             outputs=outputs)


def norm_normalization(x, p=None, axes=None, eps=1e-12):
    """Divides x by its p-norm over the given axes: ``x / (sum(abs(x) ** p) + eps) ** (1 / p)``.

    Args:
        x (Variable): input, any shape.
        p (float or None, default None): the norm's order; None: 2.
        axes (int, tuple of int or None, default None): the axes of the norm; None: all.
        eps (float, default 1e-12): added to the sum before the root.

    Returns:
        Variable: shape of x.
    """
    return _fb.norm_normalization(x, 2.0 if p is None else p, _axes(x, axes), eps)


def mean_subtraction(x, mean, t, base_axis=1, update_running_mean=True):
    """Subtracts a running mean: x - mean, mean the average of every batch mean seen so far.

    Args:
        x (Variable): input (N..., *features).
        mean (Variable): running mean, shape ``x.shape[base_axis:]``; updated in place.
        t (Variable): one-element count of the batches seen; incremented in place.
        base_axis (int, default 1): the first feature axis.
        update_running_mean (bool, default True): fold this batch into mean and t (training).

    Returns:
        Variable: shape of x.
    """
    return _fb.mean_subtraction(x, mean, t, base_axis, update_running_mean)


# ---------------------------------------------------------------------------------- indexing, linalg
from .numpy_compat_functions import dot  # noqa: E402,F401  (nnabla re-exports them in F)


def linspace(start, stop, num):
    """num evenly spaced values from start to stop, both included (as ``numpy.linspace``).

    Args:
        start (float): the first value.
        stop (float): the last value.
        num (int): how many values (non-negative).

    Returns:
        Variable: 1-d, of num values.

    Example:
        >>> y = F.linspace(0.0, 1.0, 5)
        >>> y.forward()  # y.shape == (5,)
    """
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)):
        raise TypeError("linspace: '{}' object cannot be interpreted as an integer".format(
            type(num).__name__))
    if num < 0:
        raise ValueError("linspace: number of samples, {}, must be non-negative".format(num))
    return _fb.linspace(start, stop, int(num))


def sort(x, axis=-1, reverse=False, with_index=False, only_index=False):
    """Stable sort along one axis, optionally with the sorting indices.

    Args:
        x (Variable): input, any shape.
        axis (int, default -1): the axis sorted along.
        reverse (bool, default False): descending order.
        with_index (bool, default False): also return the indices that sort x.
        only_index (bool, default False): return only those indices.

    Returns:
        Variable: the sorted values; ``(values, indices)`` with ``with_index``; the indices alone
        with ``only_index``. All have x's shape.

    Example:
        >>> x = nn.Variable((4, 5))
        >>> values, index = F.sort(x, axis=1, with_index=True)  # index.shape == (4, 5)
    """
    n_outputs = 2 if with_index and not only_index else 1
    ys = _fb.sort(x, axis, reverse, with_index, only_index, n_outputs=n_outputs)
    return ys[0] if n_outputs == 1 else ys


def meshgrid(*x, ij_indexing=False):
    """Coordinate grids from 1-d arrays (as ``numpy.meshgrid``).

    Args:
        *x (Variable): the 1-d coordinate arrays.
        ij_indexing (bool, default False): matrix indexing (the grid is (len(x[0]), len(x[1]),
            ...)); False: Cartesian indexing, the first two axes swapped.

    Returns:
        Variable or tuple of Variable: one grid per input (the grid alone for one input).
    """
    ys = _fb.meshgrid(*x, ij_indexing=ij_indexing, n_outputs=len(x))
    return ys[0] if len(x) == 1 else ys


def _index_input(indices, like):
    """Indices given as a list or NumPy array become an (int) Variable, or an NdArray when the
    data is an NdArray (so the call stays imperative)."""
    if isinstance(indices, (Variable, NdArray)):
        return indices
    indices = np.asarray(indices)
    if indices.dtype.kind not in "iu":
        indices = indices.astype(np.int64)
    if isinstance(like, NdArray):
        return NdArray.from_numpy_array(indices)
    return Variable.from_numpy_array(indices)


def gather_nd(data, indices):
    """Gathers elements (or blocks) of data at index tuples:
    ``y[i...] = data[indices[0, i...], ..., indices[M - 1, i...]]``.

    Args:
        data (Variable): input, any shape.
        indices (Variable, NdArray, numpy array or list): (M, ...) integer index tuples down the
            first axis; M at most data.ndim; negative indices count from the end.

    Returns:
        Variable: shape ``indices.shape[1:] + data.shape[M:]``.
    """
    return _fb.gather_nd(data, _index_input(indices, data))


def scatter_nd(data, indices, shape=None, out=None, add=False):
    """Writes the blocks of data at the index tuples of indices, into zeros of a given shape or
    into out; the inverse of :func:`gather_nd`.

    Args:
        data (Variable): values, shape ``indices.shape[1:] + shape[M:]``.
        indices (Variable, NdArray, numpy array or list): (M, ...) integer index tuples.
        shape (tuple of int, default None): the output shape; give shape or out.
        out (Variable or NdArray, default None): an array written into in place.
        add (bool, default False): add the values of repeated indices instead of overwriting.

    Returns:
        Variable: shape ``shape`` (or out's).
    """
    if shape is None and out is None:
        raise TypeError("scatter_nd: one of `shape` or `out` argument must be supplied")
    if shape is not None and out is not None:
        raise TypeError("scatter_nd: only one of `shape` or `out` argument may be used")
    if out is not None:
        if not isinstance(out, (Variable, NdArray)):
            raise TypeError("scatter_nd: `out` argument must be NdArray or Variable type")
        shape = out.shape
    return _fb.scatter_nd(data, _index_input(indices, data), out, tuple(np.atleast_1d(shape).tolist()),
                          add)


def scatter_add(x0, indices, x1, axis=None):
    """A copy of x0 with the values of x1 added at the positions indices names along an axis.

    Args:
        x0 (Variable): input, any shape.
        indices (Variable): integer positions along axis, same number of axes as x0, no larger
            than x1 (nor than x0 outside axis).
        x1 (Variable): the values added.
        axis (int or None, default None): the axis indices point along; None: 0.

    Returns:
        Variable: shape of x0.
    """
    return _fb.scatter_add(x0, indices, x1, axis)


# ---------------------------------------------------------------------------------- signal, quantization
# nnabla's Python-level wrappers of Interpolate, STFT/ISTFT and the quantizers (different
# signatures from the table's: ``scale=``, ``window_type=None``, ``quantize=``, numpy dtypes).
def interpolate(x, scale=None, output_size=None, mode="linear", align_corners=False,
                half_pixel=False, half_pixel_for_nn=False, channel_last=False):
    """Resizes the last spatial axes by a scale or to a size (nearest or linear interpolation).

    Args:
        x (Variable): input (..., *spatial), or (..., *spatial, C) with channel_last.
        scale (tuple of float, default None): factors per resized axis (the output size is
            floor(scale * size)); give scale or output_size.
        output_size (tuple of int, default None): the new size of each resized axis.
        mode (str, default 'linear'): 'nearest' or 'linear'.
        align_corners (bool, default False): map the corner pixels of input and output onto each
            other (linear mode).
        half_pixel (bool, default False): sample at pixel centres (linear mode).
        half_pixel_for_nn (bool, default False): use pixel centres in nearest mode too.
        channel_last (bool, default False): the resized axes are the ones before the last.

    Returns:
        Variable: x's shape with the resized axes changed.

    Example:
        >>> x = nn.Variable((2, 3, 8, 8))
        >>> y = F.interpolate(x, scale=(2, 2), mode='nearest')  # y.shape == (2, 3, 16, 16)
    """
    if scale is None and output_size is None:
        raise ValueError("interpolate: either scale or output_size must be given")
    if output_size is None:
        nd = len(scale)
        spatial = x.shape[-nd - 1:-1] if channel_last else x.shape[-nd:]
        output_size = [int(np.floor(s * d)) for d, s in zip(spatial, scale)]
    return _fb.interpolate(x, output_size, mode, align_corners, half_pixel, half_pixel_for_nn,
                           channel_last)


def stft(x, window_size, stride, fft_size, window_type="hanning", center=True, pad_mode="reflect",
         as_istft_backward=False):
    """Short-time Fourier transform of a batch of 1-d signals: the DFT of windowed frames taken every
    stride samples.

    Args:
        x (Variable): signals (B, L).
        window_size (int): the window's length, at most fft_size.
        stride (int): the hop between frames.
        fft_size (int): the frame length and DFT size.
        window_type (str or None, default 'hanning'): 'hanning', 'hamming' or 'rectangular'
            (also None).
        center (bool, default True): pad fft_size // 2 samples at both ends so frames are centred.
        pad_mode (str, default 'reflect'): how center pads: 'reflect' or 'constant' (zeros).
        as_istft_backward (bool, default False): compute the transpose of :func:`istft` instead.

    Returns:
        tuple of Variable: the real and imaginary parts, each (B, fft_size // 2 + 1, frames).

    Example:
        >>> x = nn.Variable((2, 100))
        >>> re, im = F.stft(x, 16, 4, 16)  # re.shape == (2, 9, 26)
    """
    return _fb.stft(x, window_size, stride, fft_size, window_type or "rectangular", center,
                    pad_mode, as_istft_backward)


def istft(y_r, y_i, window_size, stride, fft_size, window_type="hanning", center=True,
          pad_mode="reflect", as_stft_backward=False):
    """Inverse short-time Fourier transform by windowed overlap-add.

    Args:
        y_r (Variable): real parts (B, fft_size // 2 + 1, frames).
        y_i (Variable): imaginary parts, shape of y_r.
        window_size (int): the window's length, at most fft_size.
        stride (int): the hop between frames.
        fft_size (int): the frame length and DFT size.
        window_type (str or None, default 'hanning'): 'hanning', 'hamming' or 'rectangular'
            (also None).
        center (bool, default True): remove the fft_size // 2 samples :func:`stft` padded.
        pad_mode (str, default 'reflect'): must be 'constant' unless as_stft_backward (as in
            nnabla).
        as_stft_backward (bool, default False): compute the transpose of :func:`stft` instead.

    Returns:
        Variable: the signals (B, L).
    """
    return _fb.istft(y_r, y_i, window_size, stride, fft_size, window_type or "rectangular", center,
                     pad_mode, as_stft_backward)


def fixed_point_quantize(x, sign=True, n=8, delta=2 ** -4, quantize=True, ste_fine_grained=True,
                         outputs=None):
    """Fixed-point quantization: x rounded to a multiple of delta and clipped to the range n bits
    hold; the gradient passes straight through.

    Args:
        x (Variable): input, any shape.
        sign (bool, default True): signed range (one bit for the sign).
        n (int, default 8): number of bits.
        delta (float, default 2 ** -4): the step between levels.
        quantize (bool, default True): False returns x unchanged.
        ste_fine_grained (bool, default True): pass the gradient only inside the representable
            range.
        outputs (list of Variable, default None): Variables to write the result into instead of
            new ones.

    Returns:
        Variable: shape of x.
    """
    if not quantize:
        return x
    return _fb.fixed_point_quantize(x, sign, n, delta, ste_fine_grained, outputs=outputs)


def pow2_quantize(x, sign=True, with_zero=True, n=8, m=1, quantize=True, ste_fine_grained=True,
                  outputs=None):
    """Power-of-two quantization: each value rounded to a signed power of two (or zero); the
    gradient passes straight through.

    Args:
        x (Variable): input, any shape.
        sign (bool, default True): keep the sign (one bit).
        with_zero (bool, default True): allow 0 as a value (one bit).
        n (int, default 8): total number of bits.
        m (int, default 1): the exponent of the largest value, 2 ** m.
        quantize (bool, default True): False returns x unchanged.
        ste_fine_grained (bool, default True): pass the gradient only inside the representable
            range.
        outputs (list of Variable, default None): Variables to write the result into instead of
            new ones.

    Returns:
        Variable: shape of x.
    """
    if not quantize:
        return x
    return _fb.pow2_quantize(x, sign, with_zero, n, m, ste_fine_grained, outputs=outputs)


def min_max_quantize(x, qr_min, qr_max, ql_min, ql_max, decay=0.999, x_min_max=False, ema=False,
                     ste_fine_grained=True, eps=0.01, quantize=True, outputs=None):
    """Uniform quantization into the levels [ql_min, ql_max] over the range [qr_min, qr_max]
    (nudged so 0 is a level); the gradient passes straight through.

    Args:
        x (Variable): input, any shape.
        qr_min (Variable): the range's minimum, broadcastable to x; updated in place with
            x_min_max.
        qr_max (Variable): the range's maximum, shape of qr_min.
        ql_min (Variable): the lowest level (e.g. 0), shape of qr_min.
        ql_max (Variable): the highest level (e.g. 255), shape of qr_min.
        decay (float, default 0.999): the moving-average factor of ema.
        x_min_max (bool, default False): set the range from x's minimum and maximum at every
            forward.
        ema (bool, default False): with x_min_max, move the range by an exponential moving average.
        ste_fine_grained (bool, default True): pass the gradient only inside the range.
        eps (float, default 0.01): the smallest width kept between qr_min and qr_max.
        quantize (bool, default True): False returns x unchanged.
        outputs (list of Variable, default None): Variables to write the result into instead of
            new ones.

    Returns:
        Variable: shape of x.
    """
    if not quantize:
        return x
    return _fb.min_max_quantize(x, qr_min, qr_max, ql_min, ql_max, decay, x_min_max, ema,
                                ste_fine_grained, eps, outputs=outputs)


def quantize_linear(x, scale, zero_point, round_mode="HALF_AWAY_FROM_ZERO", narrow_range=False,
                    dtype=np.int8):
    """ONNX QuantizeLinear: ``saturate(round(x / scale) + zero_point)`` into the range of int8 or
    uint8 (the result is kept as floats).

    Args:
        x (Variable): input, any shape.
        scale (Variable): broadcastable to x (same number of axes).
        zero_point (Variable): broadcastable to x (same number of axes).
        round_mode (str, default 'HALF_AWAY_FROM_ZERO'): or 'HALF_TO_EVEN'.
        narrow_range (bool, default False): drop the lowest value of the range.
        dtype (numpy type or int, default np.int8): np.int8 or np.uint8 (or nnabla's codes 1, 2).

    Returns:
        Variable: shape of x.
    """
    code = dtype if isinstance(dtype, (int, np.integer)) else np.dtype(dtype).num
    return _fb.quantize_linear(x, scale, zero_point, round_mode, narrow_range, int(code))


# ---------------------------------------------------------------------------------- attention
def multi_head_attention(query, key, value, num_heads, q_weight, k_weight, v_weight, out_weight,
                         q_bias=None, k_bias=None, v_bias=None, out_bias=None, attn_bias_k=None,
                         attn_bias_v=None, dropout=0.0, additive_mask=None, key_padding_mask=None):
    """Multi-head scaled dot-product attention (nnabla's layouts: time first), built from F ops.

    Args:
        query (Variable): (L_T, B, D_q).
        key (Variable): (L_S, B, D_k).
        value (Variable): (L_S, B, D_v).
        num_heads (int): number of heads; divides both embedding sizes.
        q_weight (Variable): (D_q, E), the query projection.
        k_weight (Variable): (D_k, E), the key projection.
        v_weight (Variable): (D_v, E_v), the value projection.
        out_weight (Variable): (E_v, E_out), the output projection.
        q_bias (Variable, default None): (E,).
        k_bias (Variable, default None): (E,).
        v_bias (Variable, default None): (E_v,).
        out_bias (Variable, default None): (E_out,).
        attn_bias_k (Variable, default None): (E,): one learned key step appended (with
            attn_bias_v).
        attn_bias_v (Variable, default None): (E_v,): the matching value step.
        dropout (float, default 0.0): dropout probability of the attention weights.
        additive_mask (Variable, default None): (L_T, L_S), added to the attention logits.
        key_padding_mask (Variable, default None): (B, L_S), 1 where a key is padding (its logits
            become -inf).

    Returns:
        tuple of Variable: the output (L_T, B, E_out) and the attention weights
        (B * num_heads, L_T, L_S).
    """
    tgt_len, batch, _ = query.shape
    src_len = key.shape[0]
    embed, v_embed = q_weight.shape[1], v_weight.shape[1]
    if value.shape[0] != src_len or key.shape[1] != batch or value.shape[1] != batch:
        raise ValueError("multi_head_attention: key {} and value {} must be (L_S, B, *) with the "
                         "batch size of query {}".format(key.shape, value.shape, query.shape))
    if k_weight.shape[1] != embed:
        raise ValueError("multi_head_attention: q_weight {} and k_weight {} must have the same "
                         "embedding dimension".format(q_weight.shape, k_weight.shape))
    if embed % num_heads or v_embed % num_heads:
        raise ValueError("multi_head_attention: embedding dimensions {} (query/key) and {} (value) "
                         "must be divisible by num_heads={}".format(embed, v_embed, num_heads))
    if key_padding_mask is not None and tuple(key_padding_mask.shape) != (batch, src_len):
        raise ValueError("multi_head_attention: key_padding_mask of shape {} must be (B, L_S) = {}"
                         .format(key_padding_mask.shape, (batch, src_len)))
    head_dim, head_vdim = embed // num_heads, v_embed // num_heads
    q = affine(query, q_weight, q_bias, base_axis=2) * (float(head_dim) ** -0.5)
    k = affine(key, k_weight, k_bias, base_axis=2)
    v = affine(value, v_weight, v_bias, base_axis=2)
    if attn_bias_k is not None:   # one extra key/value step, never masked
        k = concatenate(k, broadcast(reshape(attn_bias_k, (1, 1, embed)), (1, batch, embed)), axis=0)
        v = concatenate(v, broadcast(reshape(attn_bias_v, (1, 1, v_embed)), (1, batch, v_embed)), axis=0)
        src_len += 1
        if additive_mask is not None:
            additive_mask = pad(additive_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))

    def heads(t, dim):   # (L, B, H * dim) -> (B * H, L, dim)
        return transpose(reshape(t, (t.shape[0], batch * num_heads, dim)), (1, 0, 2))

    logits = batch_matmul(heads(q, head_dim), heads(k, head_dim), transpose_b=True)
    if additive_mask is not None:
        logits = logits + reshape(additive_mask, (1, tgt_len, src_len))
    if key_padding_mask is not None:
        shape4 = (batch, num_heads, tgt_len, src_len)
        masked = broadcast(reshape(key_padding_mask, (batch, 1, 1, src_len)), shape4)
        logits = reshape(where(masked, constant(float("-inf"), shape4), reshape(logits, shape4)),
                         (batch * num_heads, tgt_len, src_len))
    weights = softmax(logits, axis=2)
    if dropout > 0:
        weights = _fb.dropout(weights, dropout)
    out = transpose(batch_matmul(weights, heads(v, head_vdim)), (1, 0, 2))
    out = affine(reshape(out, (tgt_len, batch, v_embed)), out_weight, out_bias, base_axis=2)
    return out, weights


# ---------------------------------------------------------------------------------- convolution
def patch_correlation(x1, x2, patch=(1, 1), shift=(0, 0), patch_step=(1, 1), shift_step=(1, 1),
                      padding=(0, 0, 0, 0), channel_last=False):
    """FlowNet correlation of two feature maps: for every output position and displacement, the dot
    product of a patch of x1 with the displaced patch of x2.

    Args:
        x1 (Variable): (N, C, H, W), or (N, H, W, C) with channel_last.
        x2 (Variable): shape of x1.
        patch (int or pair, default (1, 1)): (height, width) of the compared patches.
        shift (int or pair, default (0, 0)): the largest (vertical, horizontal) displacement.
        patch_step (int or pair, default (1, 1)): step between output positions.
        shift_step (int or pair, default (1, 1)): step between displacements.
        padding (int, pair or 4-tuple, default (0, 0, 0, 0)): zero padding (top, bottom, left,
            right), or (vertical, horizontal), or one for all.
        channel_last (bool, default False): channel-last input and output.

    Returns:
        Variable: (N, Cy, Cx, Ho, Wo), or (N, Ho, Wo, Cy, Cx) with channel_last, where
        Cy = 2 * shift[0] // shift_step[0] + 1 and Cx likewise.
    """
    if not len(x1.shape) == len(x2.shape) == 4:
        raise ValueError("patch_correlation: both inputs x1 and x2 must have 4 dimensions, got {} and {}"
                         .format(x1.shape, x2.shape))
    if tuple(x1.shape) != tuple(x2.shape):
        raise ValueError("patch_correlation: inputs x1 {} and x2 {} must have equal shape".format(x1.shape, x2.shape))

    def pair(v):
        return (int(v),) * 2 if isinstance(v, (int, np.integer)) else tuple(v)
    patch, shift, patch_step, shift_step = map(pair, (patch, shift, patch_step, shift_step))
    if isinstance(padding, (int, np.integer)):
        padding = (int(padding),) * 4
    elif len(padding) == 2:
        padding = (padding[0], padding[0], padding[1], padding[1])
    if not channel_last:
        x1, x2 = (_fb.transpose(v, (0, 2, 3, 1)) for v in (x1, x2))
    y = _fb.patch_correlation(x1, x2, patch, shift, patch_step, shift_step, tuple(padding))
    return y if channel_last else _fb.transpose(y, (0, 3, 4, 1, 2))

# nnabla.functions also re-exports these.
from .context import get_current_context  # noqa: E402,F401
from .function import get_auto_forward  # noqa: E402,F401
