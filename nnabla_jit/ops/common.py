"""Helpers shared by several op families (axes, broadcast sums, class labels).

They sit below every family module so that no family imports another for a helper.
"""
import os
import sys
import warnings

import numpy as np
from numba import njit

# Values no forward computed: what a backward kernel needs before any forward, data a clearing
# forward/backward freed, ``h.d`` of an intermediate that clear_buffer freed. nnabla reads its
# buffers there anyway: zeros for one never written, whatever its memory pool left in one freed
# (a result that changes from run to run). NNABLA_JIT_UNCOMPUTED_READS says what happens here:
#   error  raise, naming the op (or the variable) and the value;
#   warn   read zeros (nnabla's never-written buffer) and warn once per process;
#   zeros  read zeros silently (for programs that rely on it, e.g. truncated BPTT written as
#          backward() with no forward).
# Unset, it is "error" when nnabla_jit is imported as itself, and "warn" when it runs as nnabla
# (install_as_nnabla, python -m nnabla_jit.as_nnabla, any other alias): programs written for
# nnabla then run as there, with a word. Read when a plan is made and at each read of freed data.
UNCOMPUTED_READS = os.environ.get("NNABLA_JIT_UNCOMPUTED_READS") or None
_READ_MODES = ("error", "warn", "zeros")
_warned = []


class UncomputedReadWarning(RuntimeWarning):
    """Zeros were read for values no forward computed (or clearing freed), as nnabla would."""


def uncomputed_reads():
    """The policy for values no forward computed: 'error', 'warn' or 'zeros' (see above)."""
    mode = UNCOMPUTED_READS
    if mode is None:
        running_as_nnabla = sys.modules.get("nnabla") is sys.modules.get("nnabla_jit") is not None
        return "warn" if running_as_nnabla else "error"
    if mode not in _READ_MODES:
        raise ValueError("NNABLA_JIT_UNCOMPUTED_READS={!r}: use one of {}".format(mode, ", ".join(_READ_MODES)))
    return mode


def warn_uncomputed_read(what):
    """The once-per-process warning of the 'warn' policy; ``what`` says which values."""
    if _warned:
        return
    _warned.append(what)
    warnings.warn("{} were read as zeros: no forward() computed them, or clear_buffer / "
                  "clear_no_need_grad freed them. nnabla reads its buffer there too (zeros if "
                  "never written, else whatever its memory pool left); importing nnabla_jit "
                  "directly makes this an error (NNABLA_JIT_UNCOMPUTED_READS=error|warn|zeros; "
                  "this warning is given once)".format(what), UncomputedReadWarning, stacklevel=3)


def normalize_axis(op, axis, ndim, arg="axis"):
    """Map a negative axis to its positive index; reject one outside [-ndim, ndim)."""
    if not -ndim <= axis < ndim:
        op.fail("{} {} is out of range for an input of {} dimensions", arg, axis, ndim)
    return axis % ndim


def shape_size(shape):
    """The number of elements of ``shape`` (a Python int; 1 for ())."""
    return int(np.prod(shape, dtype=np.int64))


def checked_affine_dims(op, x, w, b):
    """(rows, inner, out_cols) of an affine map of x (flattened at ``op.base_axis``, normalized
    here) by the weight w (inner, *out) plus the bias b (out, or None); the argument checks of
    Affine and the quantized affine ops."""
    op.base_axis = normalize_axis(op, op.base_axis, len(x), "base_axis") if x else 0
    rows = int(np.prod(x[:op.base_axis], dtype=np.int64))
    inner = int(np.prod(x[op.base_axis:], dtype=np.int64))
    if not w or w[0] != inner:
        op.fail("weight of shape {} does not fit input of shape {} with base_axis {}: "
                "weight must be ({}, ...)", w, x, op.base_axis, inner)
    if b is not None and tuple(b) != tuple(w[1:]):
        op.fail("bias of shape {} must have shape {} (weight shape {})", b, tuple(w[1:]), w)
    return rows, inner, int(np.prod(w[1:], dtype=np.int64))


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


@njit(cache=True, inline="always")
def unravel3(i, rows, inner):
    """(outer, row, col) of flat position ``i`` of a C-order (outer, rows, inner) array: which
    element a task of a flattened loop handles. Every one-thread-per-element CUDA kernel that
    names its element's coordinates does it with this rule (``cuda_ops/device.py`` compiles its
    py_func); with four axes, the last part is split again."""
    return i // (rows * inner), (i // inner) % rows, i % inner


@njit(cache=True, inline="always")
def store(out, at, value, accum):
    """out[at] = value, or out[at] += value with ``accum``: how a kernel writes a result that may
    be added to the gradient already there (``at``: an index or a tuple of indices). The CUDA
    kernels compile the same rule (``cuda_ops/device.py``)."""
    if accum:
        out[at] += value
    else:
        out[at] = value


@njit(cache=True)
def label_of(t3, o, i, n_classes):
    """The class index at (o, i), a float label truncated toward zero as nnabla's C++ cast does
    (2.001 is class 2, -0.5 class 0): -1 to ignore (negative, -inf included), -2 if NaN, +inf
    or not below n_classes. The range is checked on the value before the cast: casting inf or
    1e30 to an integer gives INT64_MIN on x86, which read as an ignored label (loss 0)."""
    v = t3[o, 0, i]
    if not v < n_classes:
        return -2
    if v <= -1:
        return -1
    return int(v)


def integer_indices(op, a, arg="index"):
    """Index values as int64, floats truncated toward zero; a NaN, infinite or huge float is
    refused naming ``arg`` (cast, it would become an arbitrary integer: INT64_MIN on x86)."""
    if a.dtype.kind == "f" and a.size:
        flat = a.reshape(-1)
        bad = ~(np.abs(flat) < 2.0 ** 62)
        if bad.any():
            op.fail("{} {} is not an integer index", arg, flat[bad][0].item())
    return a.astype(np.int64)


@njit(cache=True, inline="always")
def sample_label(t3, r, n_classes):
    """(o, i, k): sample r of (O, 1, I) labels t3 as (o, i), and its class index (``label_of``)."""
    I = t3.shape[2]
    o = r // I
    i = r - o * I
    return o, i, label_of(t3, o, i, n_classes)
