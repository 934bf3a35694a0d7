"""Exchanging arrays without copies through DLPack (nnabla's ``nnabla.utils.dlpack``).

    dlp = to_dlpack(a)                 # a PyCapsule over a's buffer
    t = torch.utils.dlpack.from_dlpack(dlp)   # or numpy.from_dlpack(a): NdArray has __dlpack__
    b = from_dlpack(torch_tensor)      # an NdArray over the tensor's memory (or a capsule)

The memory is shared both ways: writing through one side changes the other. nnabla_jit's
arrays are host (CPU) buffers, so DLPack producers must hand over CPU memory.
"""
import numpy as np

from ..ndarray import NdArray

__all__ = ["to_dlpack", "from_dlpack"]

_DL_CPU = 1


class _Capsule:
    """A bare DLPack capsule presented as a producer, which ``numpy.from_dlpack`` consumes."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return (_DL_CPU, 0)


def to_dlpack(a, dtype=None, ctx=None):
    """A DLPack capsule borrowing ``a``'s buffer (cast in place to ``dtype`` first if given).
    ``ctx`` may only name a CPU context: the buffer is host memory."""
    if not isinstance(a, NdArray):
        raise TypeError("to_dlpack: expected an NdArray, got {}".format(type(a).__name__))
    if ctx is not None and getattr(ctx, "device", "cpu") != "cpu":
        raise ValueError("to_dlpack: nnabla_jit exports host memory only; ctx {} names a device"
                         .format(ctx))
    if dtype is not None and np.dtype(dtype) != a.dtype:
        a.cast(dtype)
    return a.data.__dlpack__()


def _host_array(dlp):
    producer = dlp if hasattr(dlp, "__dlpack__") else _Capsule(dlp)
    if hasattr(producer, "__dlpack_device__") and producer.__dlpack_device__()[0] != _DL_CPU:
        raise ValueError("from_dlpack: the tensor lives on device {}; nnabla_jit takes CPU memory "
                         "only (move it to the CPU first)".format(producer.__dlpack_device__()))
    try:
        host = np.from_dlpack(producer)
    except (TypeError, BufferError) as e:
        raise ValueError("from_dlpack: cannot read the DLPack tensor ({})".format(e)) from None
    if not host.flags.writeable:
        # numpy marks tensors from unversioned ("dltensor") capsules read-only since they carry
        # no read-only flag; nnabla shares such memory both ways, so view it writable.
        host = np.asarray(_WritableView(host))
    return host


class _WritableView:
    """The memory of a read-only-flagged array, presented writable (keeps the array alive)."""

    def __init__(self, array):
        self._array = array
        interface = dict(array.__array_interface__)
        interface["data"] = (interface["data"][0], False)
        self.__array_interface__ = interface


def from_dlpack(dlp, arr=None):
    """An NdArray sharing the memory of ``dlp`` (a DLPack capsule, or any object with
    ``__dlpack__``); with ``arr``, that NdArray takes the memory (its shape and type become
    the tensor's) and is returned."""
    host = _host_array(dlp)
    target = arr if arr is not None else NdArray(host.shape, host.dtype)
    if not isinstance(target, NdArray):
        raise TypeError("from_dlpack: arr must be an NdArray, got {}".format(type(target).__name__))
    # The NdArray adopts the buffer itself (NdArray.data is a view of it from now on).
    target._array = host
    target._shape = tuple(host.shape)
    target._dtype = host.dtype
    target._device = None
    return target
