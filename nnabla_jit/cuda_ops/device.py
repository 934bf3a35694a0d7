"""Device buffers: numba.cuda loading, the device mirror of an NdArray, launch helpers.

An NdArray's ``device_mirror`` is a :class:`DeviceMirror` while it has a device copy. Either copy may
be the newer one: a CUDA node writing an output makes the host copy stale (``.data`` copies it
down), and ``.data`` on the host, which hands out a writable array, makes the device copy stale
(the next CUDA node reading it copies it up). ``clear()`` drops both.
"""
import functools

import numpy as np

from .. import buffers
from ..ndarray import NotComputed
from . import registry
from .registry import device_function, kernel

__all__ = ["load", "DeviceMirror", "DeviceMemory", "MEMORY", "fresh_on_device", "read", "write",
           "accumulator", "zeroed", "upload", "zeros", "empty",
           "launch", "fill", "copy", "add_into", "flat_offset", "contiguous_strides",
           "broadcast_strides"]

cuda = None  # numba.cuda, bound by load()

THREADS = 128   # threads per block of the one-thread-per-element kernels

_NO_CUDA = ("CUDA context: numba.cuda finds no GPU (set NUMBA_ENABLE_CUDASIM=1 to run the CUDA "
            "kernels in numba's simulator)")


def load():
    """Import numba.cuda and bind the kernels; ImportError (as ``import_extension_module``
    raises) when numba.cuda is missing or sees no GPU."""
    if cuda is not None:
        return cuda
    try:
        from numba import cuda as numba_cuda
    except ImportError as e:
        raise ImportError("CUDA context: numba.cuda is not installed ({}); install "
                          "nnabla_jit[cuda]".format(e)) from None
    if not numba_cuda.is_available():
        raise ImportError(_NO_CUDA)
    registry.bind_kernels(numba_cuda)
    return numba_cuda


# ---------------------------------------------------------------------------- the mirror
class DeviceMirror:
    """The device copy of one NdArray (see the module docstring)."""

    __slots__ = ("array", "host_stale", "device_stale")

    def __init__(self, array):
        self.array = array
        self.host_stale = False
        self.device_stale = False

    def to_host(self, host):
        """The host array holding the newest values: ``host`` (the NdArray's host buffer, or
        None) when it is current, else the device values copied into it (or into a new array
        when it does not fit). Called by ``NdArray._host``."""
        if not self.host_stale:
            return host
        if host is None or host.shape != self.array.shape or host.dtype != self.array.dtype:
            host = np.empty(self.array.shape, self.array.dtype)
        self.array.copy_to_host(host)
        self.host_stale = False
        return host

    def host_modified(self, nd):
        """The host copy is the newest (it was handed out writable, or filled)."""
        self.host_stale = False
        self.device_stale = True

    @property
    def fresh(self):
        """Whether the device copy holds the newest values."""
        return not self.device_stale


def fresh_on_device(nd):
    """Whether ``nd``'s newest values are on the device already (no copy to read them)."""
    mirror = nd.device_mirror
    return mirror is not None and not mirror.device_stale


def _device_copy(nd):
    """``nd``'s device array, made current (copied up, or zeros when ``nd`` holds no data)."""
    mirror = nd.device_mirror
    if mirror is not None and not mirror.device_stale:
        return mirror.array
    if not nd.holds_values:
        mirror = DeviceMirror(zeros(nd.shape, nd.dtype))
        mirror.host_stale = True
        nd.attach_device(mirror)
        return mirror.array
    host = np.ascontiguousarray(nd.host_as())   # the host copy is the newer one here
    if mirror is None:
        nd.attach_device(DeviceMirror(cuda.to_device(host)))
        mirror = nd.device_mirror
    elif mirror.array.shape != host.shape or mirror.array.dtype != host.dtype:
        mirror.array = cuda.to_device(host)
    else:
        mirror.array.copy_to_device(host)
    mirror.device_stale = False
    mirror.host_stale = False
    return mirror.array


def read(nd, dtype=None):
    """``nd`` as a device array to read, of ``dtype`` (None: as stored). A converted copy is a
    temporary; ``nd`` keeps its type."""
    array = _device_copy(nd)
    if dtype is None or array.dtype == dtype:
        return array
    converted = empty(array.shape, dtype)
    copy(array, converted)
    return converted


def write(nd, dtype):
    """A device array of ``nd``'s shape and ``dtype`` that a kernel overwrites: ``nd`` then
    holds it as its newest copy (the host copy is stale)."""
    mirror = nd.device_mirror
    if mirror is None:
        mirror = DeviceMirror(empty(nd.shape, dtype))
    elif mirror.array.shape != nd.shape or mirror.array.dtype != dtype:
        mirror.array = empty(nd.shape, dtype)
    nd.attach_device(mirror, dtype)
    mirror.host_stale = True
    mirror.device_stale = False
    return mirror.array


def accumulator(nd, dtype):
    """``nd`` as a device array of ``dtype`` that a kernel adds into (a gradient with ``accum``):
    its current values (zeros if it holds none), converted in place when stored otherwise."""
    current = read(nd, dtype)
    mirror = nd.device_mirror
    if mirror.array is not current:   # converted: the copy becomes the buffer
        mirror.array = current
        nd.attach_device(mirror, dtype)
    mirror.host_stale = True
    return current


def zeroed(nd, dtype):
    """:func:`write`, filled with zeros."""
    array = write(nd, dtype)
    fill(array, 0)
    return array


class DeviceMemory:
    """The device side of the executor's buffer resolver (``nnabla_jit/buffers.py``): the
    getters of each kind of slot, on device arrays."""

    @staticmethod
    def read(nd):
        return functools.partial(read, nd)

    @staticmethod
    def read_if_held(nd):
        """Values already on the device, else None (what a backward kernel does not need is
        not copied up for it)."""
        def get(dtype):
            return read(nd, dtype) if fresh_on_device(nd) else None
        return get

    # Device kernels take shapes from the node, not from absent inputs.
    read_or_absent = read_if_held

    @staticmethod
    def read_needed(nd):
        """Values a kernel needs (copied up if the host has the newer); zeros when none are
        held, or ``NotComputed`` under ``buffers.STRICT_READS``."""
        if not buffers.STRICT_READS:
            return functools.partial(read, nd)

        def get(dtype):
            if not nd.holds_values:
                raise NotComputed("NdArray{}: no values held".format(nd.shape))
            return read(nd, dtype)
        return get

    @staticmethod
    def write(nd):
        return functools.partial(write, nd)

    @staticmethod
    def accumulate(nd):
        return functools.partial(accumulator, nd)

    @staticmethod
    def overwrite_grad(nd):
        return functools.partial(write, nd)

    @staticmethod
    def zeroed(nd):
        return functools.partial(zeroed, nd)

    @staticmethod
    def temporary(shape):
        return functools.partial(zeros, tuple(shape))

    @staticmethod
    def add_into(nd, array, dtype):
        add_into(accumulator(nd, dtype), array)


MEMORY = DeviceMemory()


# ---------------------------------------------------------------------------- arrays
def upload(host):
    """A new device array holding a copy of the NumPy array ``host``."""
    return cuda.to_device(np.ascontiguousarray(host))


def empty(shape, dtype):
    """A new, uninitialised device array."""
    return cuda.device_array(tuple(shape), dtype)


def zeros(shape, dtype):
    """A new device array of zeros."""
    array = empty(shape, dtype)
    fill(array, 0)
    return array


def fill(array, value):
    """Set every element of a device array to ``value``."""
    launch(fill_kernel, array.size, array.reshape(array.size), value)


def copy(src, dst):
    """dst = src (converted to dst's type) for device arrays of one size."""
    launch(cast_kernel, dst.size, src.reshape(src.size), dst.reshape(dst.size))


def add_into(dst, src):
    """dst += src for device arrays of one size."""
    launch(add_kernel, dst.size, dst.reshape(dst.size), src.reshape(src.size))


def launch(kern, n, *args):
    """Run a one-thread-per-element kernel over ``n`` elements."""
    if n == 0:
        return
    threads = THREADS if n >= THREADS else (n + 31) // 32 * 32
    kern[(n + threads - 1) // threads, threads](*args)


def contiguous_strides(shape):
    """Element strides of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return tuple(reversed(strides))


def broadcast_strides(shape, out_shape):
    """Element strides of an array of ``shape`` read over ``out_shape`` (NumPy broadcasting:
    0 along the axes it is broadcast over)."""
    pad = len(out_shape) - len(shape)
    padded = (1,) * pad + tuple(shape)
    return tuple(0 if s == 1 else st for s, st in zip(padded, contiguous_strides(padded)))


# ---------------------------------------------------------------------------- kernels
@device_function
def flat_offset(i, shape, strides):
    """The element offset of the C-order position ``i`` over ``shape`` in an array with
    ``strides`` (tuples of one length, at least 1)."""
    offset = 0
    for ax in range(len(shape) - 1, -1, -1):
        offset += (i % shape[ax]) * strides[ax]
        i //= shape[ax]
    return offset


@kernel
def fill_kernel(dst, value):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = value


@kernel
def cast_kernel(src, dst):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


@kernel
def add_kernel(dst, src):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] += src[i]
