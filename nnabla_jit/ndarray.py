"""NdArray: a typed, shaped buffer on the host (and, under a CUDA context, on the device).

The host buffer is a NumPy array created on first use; ``data`` hands out that array itself, so
edits through it are seen by the graph (nnabla's reference semantics). ``clear()`` drops the
buffer; the executor uses it to free intermediates under ``clear_buffer``.
"""
import ctypes
import ctypes.util
import os
import sys
import weakref

import numpy as np

from .operators import Operators
from .ops import common

__all__ = ["NdArray", "NotComputed", "DataFreed"]


class NotComputed(RuntimeError):
    """Values were asked for that an NdArray does not hold (never computed, or cleared)."""


class DataFreed(NotComputed):
    """The values of an intermediate were read after the executor's clearing freed them."""


def _dimension(s, shape, who):
    if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
        # anything else with __index__ (a 0-d integer array) counts as an integer; a float,
        # even a whole one, does not (2.5 used to become 2)
        try:
            return int(s.__index__())
        except (AttributeError, TypeError):
            raise TypeError("{}: shape {} has a dimension {!r} that is not an integer"
                            .format(who, shape, s)) from None
    return int(s)


def _as_shape(shape, who="shape"):
    """``shape`` as a tuple of ints (a single int is a 1-d shape); a dimension that is not an
    integer is an error (negative ones pass: reshape resolves -1)."""
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        dims = list(shape)
    except TypeError:
        raise TypeError("{}: shape must be an int or a sequence of ints, got {!r}"
                        .format(who, shape)) from None
    return tuple(_dimension(s, shape, who) for s in dims)


def _refuse_complex(dtype, who):
    """nnabla has no complex type: a complex value is an error, never a silent cast to real."""
    if np.dtype(dtype).kind == "c":
        raise TypeError("{}: complex values ({}) are not supported; store the real and "
                        "imaginary parts separately (numpy .real / .imag)".format(who, np.dtype(dtype)))


def native(dtype):
    """``dtype`` in this machine's byte order: values stored in an NdArray always are (as in
    nnabla, which converts on every store), so a ``>f4`` array from an .h5 file or a file
    written on another machine reaches the kernels as float32, which numba compiles."""
    dtype = np.dtype(dtype)
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def checked_shape(shape, who):
    """:func:`_as_shape`, with every dimension non-negative (the shape of a buffer)."""
    if type(shape) is tuple:   # the common case, checked without building a new tuple
        for s in shape:
            if type(s) is not int or s < 0:
                break
        else:
            return shape
    shape = _as_shape(shape, who)
    if any(s < 0 for s in shape):
        raise ValueError("{}: shape {} has a negative dimension".format(who, shape))
    return shape


# Buffers freed by clear() wait here for the next allocation that fits: a training step that
# clears and refills its intermediates then touches no new memory (fresh pages cost a page fault
# each), and, since the executor frees each intermediate after its last reader (its clearing
# plan is the liveness), a later producer of any shape takes the memory an earlier one gave
# back, so a step's peak is its live set rather than every intermediate it ever made. Small
# buffers are pooled by (shape, dtype); large ones are views of byte buffers pooled by size
# class (four per octave, so at most 19% is wasted), whatever their shape and type. Only
# buffers nobody else references are kept. NNABLA_JIT_MEMORY_PLAN=0 pools large buffers by
# shape too and leaves malloc's thresholds alone (the behaviour before size classes).
_KIND_NAMES = {"U": "text", "S": "bytes", "O": "Python object", "V": "structured",
               "M": "datetime", "m": "timedelta"}
_POOL = {}
_POOL_DEPTH = 4
SIZE_CLASSES = os.environ.get("NNABLA_JIT_MEMORY_PLAN", "1") != "0"
_CLASS_MIN_BYTES = 1 << 16     # smaller buffers: by shape (a view costs more than they save)
_CLASS_POOL = {}               # size class (bytes) -> free byte buffers of that size
_CLASS_DEPTH = 1               # deeper buckets held more memory than they saved faults (benchmarks/README.md)
_CLASS_REACH = 4               # a request may take a buffer up to this many classes larger
_CLASS_BASES = {}              # id -> weak reference of the byte buffers this pool made


def _size_classes(nbytes):
    """The size class of ``nbytes`` (the smallest 2**e * (4 + k) / 4 >= nbytes) and the
    next ``_CLASS_REACH`` ones."""
    e = max(0, (nbytes - 1).bit_length() - 3)
    q = -(-nbytes // (1 << e))          # 4..8 quarters of 2**(e+2)
    if q == 8:
        q, e = 4, e + 1
    classes = []
    for _ in range(_CLASS_REACH + 1):
        classes.append(q << e)
        q += 1 if q < 7 else -3
        if q == 4:
            e += 1
    return classes


def pooled_empty(shape, dtype):
    """An uninitialised buffer, reusing a cleared one that fits if any."""
    if SIZE_CLASSES:
        nbytes = dtype.itemsize
        for s in shape:
            nbytes *= s
        if nbytes >= _CLASS_MIN_BYTES:
            classes = _size_classes(nbytes)
            base = None
            for c in classes:
                bucket = _CLASS_POOL.get(c)
                if bucket:
                    base = bucket.pop()
                    break
            if base is None:
                base = np.empty(classes[0], np.uint8)
                key = id(base)
                _CLASS_BASES[key] = weakref.ref(base, lambda _, key=key: _CLASS_BASES.pop(key, None))
            return base[:nbytes].view(dtype).reshape(shape)
    bucket = _POOL.get((shape, dtype))
    if bucket:
        return bucket.pop()
    return np.empty(shape, dtype)


def _give_back(a):
    """Keep the freed host buffer ``a`` for reuse, if nobody else references it (the caller
    holds two references: its own and the one it is dropping)."""
    base = a.base
    if base is None:
        # 4 references: the caller's two, the local a, getrefcount's argument
        if sys.getrefcount(a) == 4:
            bucket = _POOL.setdefault((a.shape, a.dtype), [])
            if len(bucket) < _POOL_DEPTH:
                bucket.append(a)
        return
    # a view of a pooled byte buffer: the view's base reference, the local, the argument
    ours = _CLASS_BASES.get(id(base))
    if sys.getrefcount(a) == 4 and ours is not None and ours() is base and sys.getrefcount(base) == 3:
        bucket = _CLASS_POOL.setdefault(base.size, [])
        if len(bucket) < _CLASS_DEPTH:
            bucket.append(base)


def _glibc():
    """The C library when it is glibc (whose malloc takes the thresholds below), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version
        return libc
    except (OSError, AttributeError, TypeError):
        return None


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_LIBC = _glibc() if SIZE_CLASSES else None


def _keep_freed_heap_memory(libc):
    """Keep memory that is freed for the next allocation instead of giving it back to the kernel.

    glibc serves a large block from its own mmap and unmaps it on free (the threshold starts at
    128 KiB and grows up to 32 MiB), and trims the heap's free top back to the kernel; the next
    step's buffer of that size then faults every page in again, each one zeroed by the kernel.
    On LeNet that was ~400 page faults and 1-2 ms of system time per step, the pool above
    notwithstanding (it keeps one buffer per class). With both thresholds raised, freed
    blocks stay in malloc's heap and the next request of any shape reuses them, as nnabla's
    caching allocator keeps its blocks; ``clear_memory_cache()`` hands them back.
    """
    for threshold in (1 << 30, 32 << 20):   # older glibc refuses an mmap threshold over 32 MiB
        if libc.mallopt(_M_MMAP_THRESHOLD, threshold):
            break
    libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)


if _LIBC is not None:
    _keep_freed_heap_memory(_LIBC)


def clear_memory_cache():
    """Drop the buffers kept for reuse, and hand the heap's free memory back to the kernel."""
    _POOL.clear()
    _CLASS_POOL.clear()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _numpy_key(key):
    """An index with NdArrays in it as numpy takes it."""
    if isinstance(key, NdArray):
        return key.data
    if isinstance(key, tuple):
        return tuple(k.data if isinstance(k, NdArray) else k for k in key)
    return key


class NdArray(Operators):
    """nnabla's ``NdArray(shape)``. The type is float32 until something else is stored.
    Operators (``+``, ``*``, ...) compute at once and return NdArrays."""

    __slots__ = ("_array", "_shape", "_dtype", "_device", "_zeroing", "_cleared", "_freed_by",
                 "_kept_for_user", "__weakref__")

    def __init__(self, shape=(), dtype=np.float32):
        self._shape = checked_shape(shape, "NdArray")
        self._dtype = native(dtype)
        _refuse_complex(self._dtype, "NdArray")
        self._array = None
        self._device = None  # device-side mirror, managed by nnabla_jit.cuda_ops
        self._zeroing = False  # zero() called and the buffer not handed out since (``zeroing``)
        self._cleared = False  # clear() called (``clear_called`` while no buffer is held since)
        self._freed_by = None  # which clearing call freed the values (see free), until rewritten
        self._kept_for_user = False  # set as a Variable's data by the user (see keep_for_user)

    # ----------------------------------------------------------------- creation
    @staticmethod
    def from_numpy_array(nparr):
        """A new NdArray holding a copy of ``nparr`` (its dtype is kept)."""
        nparr = np.asarray(nparr)
        _refuse_complex(nparr.dtype, "from_numpy_array")
        a = NdArray(nparr.shape, nparr.dtype)
        a._array = np.array(nparr, dtype=a._dtype, copy=True, order="C")
        return a

    # ----------------------------------------------------------------- buffer
    def _host(self):
        """The host buffer, allocated (zero-filled) on first use; synced from the device."""
        self._zeroing = False
        if self._device is not None:
            self._array = self._device.to_host(self._array)
        if self._array is None:
            self._array = np.zeros(self._shape, self._dtype)
            self._freed_by = None
        return self._array

    # The executor's access to the buffers (graph.py, fusion.py and cuda_ops go through these
    # and never through the attributes). Each checks the common case, a host buffer already
    # of the wanted type and no device copy, first: plans call them for every array of every
    # step.
    def host_as(self, dtype=None):
        """The values on the host for reading, as ``dtype`` (None: as stored): the buffer
        itself, or a converted copy when stored otherwise (this NdArray keeps its type).
        Synced from the device; zeros when nothing is held."""
        self._zeroing = False
        a = self._array
        if a is None or self._device is not None:
            a = self._host()
        if dtype is None or a.dtype is dtype or a.dtype == dtype:
            return a
        return a.astype(dtype)

    def host_if_held(self, dtype=None):
        """:meth:`host_as`, or None when no values are held (never allocated, or cleared)."""
        self._zeroing = False
        a = self._array
        if self._device is None:
            if a is None:
                return None
            if dtype is None or a.dtype is dtype:
                return a
        return self.host_as(dtype)

    @property
    def holds_values(self):
        """Whether a host or device buffer is held (the opposite of ``clear_called``)."""
        return self._array is not None or self._device is not None

    def output_buffer(self, dtype):
        """A host buffer of ``dtype`` that a kernel overwrites: the current one when it fits,
        else a new uninitialised one (any device copy is dropped, the type becomes ``dtype``)."""
        self._zeroing = False
        a = self._array
        if a is not None and self._device is None and a.dtype is dtype:
            return a
        self._device = None
        self._freed_by = None
        a = pooled_empty(self._shape, dtype)
        self._array = a
        self._dtype = a.dtype
        return a

    def hold_view(self, array):
        """Hold ``array`` (another buffer's values, same size) reshaped to this shape, sharing
        its memory (an in-place Reshape's output); the type becomes ``array``'s."""
        self._zeroing = False
        self._device = None
        self._freed_by = None
        self._array = array.reshape(self._shape)
        self._dtype = self._array.dtype

    def host_needed(self, dtype=None):
        """:meth:`host_as`, raising :class:`NotComputed` when no values are held (a kernel
        needs them: zeros would be a silently wrong result)."""
        self._zeroing = False
        a = self._array
        if self._device is None:
            if a is None:
                raise NotComputed("NdArray{}: no values held".format(self._shape))
            if dtype is None or a.dtype is dtype:
                return a
        return self.host_as(dtype)

    def grad_buffer(self, dtype, zero=True):
        """A host buffer of ``dtype`` that a kernel adds into: the current values (synced from
        the device, converted in place when stored otherwise), or, when none are held, a new
        buffer of zeros (uninitialised when ``zero`` is False: it will be overwritten)."""
        self._zeroing = False
        a = self._array
        if a is not None and self._device is None and a.dtype is dtype:
            return a
        return self._retyped_host(dtype, zero)

    def overwritten_grad_buffer(self, dtype):
        """:meth:`grad_buffer` for a kernel that overwrites it (``accum`` False)."""
        self._zeroing = False
        a = self._array
        if a is not None and self._device is None and a.dtype is dtype:
            return a
        return self._retyped_host(dtype, False)

    def zeroed_buffer(self, dtype):
        """:meth:`grad_buffer`, filled with zeros."""
        self._zeroing = False
        a = self._array
        if a is None or self._device is not None or a.dtype is not dtype:
            a = self._retyped_host(dtype, False)
        a.fill(0)
        return a

    def _retyped_host(self, dtype, zero):
        a = self._array
        if self._device is not None:
            a = self._host()
            self._device = None
        if a is None or a.shape != self._shape:
            a = pooled_empty(self._shape, dtype)
            self._freed_by = None
            if zero:
                a.fill(0)
        elif a.dtype != dtype:
            a = a.astype(dtype)
        self._array = a
        self._dtype = a.dtype
        return a

    def store_as(self, dtype):
        """Convert the held host buffer to ``dtype`` in place (values beyond a narrower type's
        range become inf, as nnabla's float16 storage does); nothing when none is held."""
        a = self._array
        if a is not None and a.dtype != dtype:
            with np.errstate(over="ignore"):
                self._array = a.astype(dtype)
            self._dtype = self._array.dtype

    # The device side (cuda_ops.device): the mirror object, swapped in and out.
    @property
    def device_mirror(self):
        """The device copy (a ``cuda_ops.device.DeviceMirror``), or None."""
        return self._device

    def attach_device(self, mirror, dtype=None):
        """Hold ``mirror`` as the device copy (None: drop it); ``dtype`` retypes the array."""
        self._device = mirror
        if dtype is not None:
            self._dtype = np.dtype(dtype)

    @property
    def data(self):
        """The values as a ``numpy.ndarray`` that references (does not copy) this buffer.
        Values the executor's clearing freed are an error to read, or zeros with a warning
        (:meth:`free`)."""
        if self._freed_by is not None and self._array is None and self._device is None:
            self._read_freed()
        arr = self._host()
        if self._device is not None:
            self._device.host_modified(self)
        return arr

    @data.setter
    def data(self, value):
        self._assign(value, "NdArray.data")

    def _assign(self, value, what):
        if isinstance(value, NdArray):
            value = value.data
        self._freed_by = None   # new values: nothing freed is read
        if np.isscalar(value) or (isinstance(value, np.ndarray) and value.ndim == 0):
            self.fill(value)
            return
        try:
            value = np.asarray(value)
        except ValueError as e:       # ragged nested lists
            raise ValueError("{}: the value is not an array of numbers ({})".format(what, e)) from None
        if value.dtype.kind not in "fiubc":
            raise TypeError("{}: cannot store {} values (an array of dtype {} and shape {}); numbers "
                            "expected".format(what, _KIND_NAMES.get(value.dtype.kind, "non-numeric"),
                                              value.dtype, value.shape))
        _refuse_complex(value.dtype, what)
        if value.dtype.kind in "fiub" and native(value.dtype) != self._dtype:
            # nnabla keeps the type of what was stored last (an int label array stays int).
            self.cast(value.dtype)
        arr = self.data
        try:
            np.copyto(arr, value, casting="unsafe")
        except ValueError:
            raise ValueError("{}: cannot store an array of shape {} into a buffer of shape {}"
                             .format(what, value.shape, self._shape)) from None

    def fill(self, value):
        """Set every element to ``value``."""
        self._zeroing = False
        self._freed_by = None
        if isinstance(value, (complex, np.complexfloating)) or (
                isinstance(value, np.ndarray) and value.dtype.kind == "c"):
            _refuse_complex(np.asarray(value).dtype, "NdArray.fill")
        if self._device is not None and self._device.fill(self, value):
            return    # filled on the device (a gradient seed): nothing copied either way
        if self._array is None:
            self._array = np.full(self._shape, value, self._dtype)
            if self._device is not None:
                self._device.host_modified(self)
        else:
            self.data.fill(value)

    def zero(self):
        """Set every element to 0; ``zeroing`` is then True until the values are next used."""
        self.fill(0)
        self._zeroing = True

    @property
    def zeroing(self):
        """nnabla's flag: True after :meth:`zero` until the values are read or written (through
        ``data``, ``cast``, a function or a solver); solvers skip a gradient still zeroing."""
        return self._zeroing

    def copy_from(self, arr, use_current_context=True):
        """Copy the values of another NdArray into this one (shapes must match); return this one,
        as nnabla's (``use_current_context``: accepted; there is one device per array here)."""
        if not isinstance(arr, NdArray):
            raise TypeError("NdArray.copy_from: expected an NdArray, got {}".format(type(arr).__name__))
        if arr.shape != self._shape:
            raise ValueError("NdArray.copy_from: shape {} does not match {}".format(arr.shape, self._shape))
        values = arr.data
        self._freed_by = None
        np.copyto(self.data, values, casting="unsafe")
        return self

    def cast(self, dtype, ctx=None):
        """Convert the buffer to ``dtype`` in place; return it as a numpy array when ``ctx`` is
        None, else nothing (nnabla's ``cast``: with a context the array is only made ready)."""
        dtype = native(dtype)
        _refuse_complex(dtype, "NdArray.cast")
        self._zeroing = False
        if dtype != self._dtype:
            if self._array is not None or self._device is not None:
                self._array = self._host().astype(dtype)
            self._dtype = dtype
        if ctx is not None:
            self._host()
            return None
        return self.data

    def get_data(self, mode="rw", dtype=None):
        """The values as a numpy array: ``mode`` 'r' gives a read-only view, 'w' and 'rw' a
        writable one; ``dtype`` returns a converted copy (the array's own type is kept)."""
        if mode not in ("r", "w", "rw"):
            raise ValueError('NdArray.get_data: invalid mode {!r} (use "r", "w" or "rw")'.format(mode))
        if mode == "w":
            self._freed_by = None   # to be overwritten: nothing freed is read
        elif self._freed_by is not None and self._array is None and self._device is None:
            self._read_freed()
        arr = self._host() if mode == "r" else self.data
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            arr = arr.astype(dtype)
        if mode == "r":
            arr = arr.view()
            arr.flags.writeable = False
        return arr

    def data_ptr(self, dtype, ctx=None, write_only=False):
        """The address of the host buffer as ``dtype`` (cast in place first), as an int."""
        if ctx is None:   # nnabla finds no array class for a missing context and raises
            raise RuntimeError("NdArray.data_ptr: ctx=None names no array class; pass a context "
                               "(nn.get_current_context())")
        self.cast(dtype, ctx)
        return int(self._host().ctypes.data)

    @property
    def modification_count(self):
        """0 while nothing is stored (new or cleared), 1 once the array holds data: what
        nnabla 1.39 reports for a host array."""
        return 1 if self.holds_values else 0

    def bool_fill(self, mask, value):
        """Set the elements where ``mask`` (an NdArray or array, broadcast to this shape) is
        non-zero to ``value``, in place; returns a new NdArray sharing this one's buffer, as
        nnabla does (a later write to either shows in both)."""
        mask = mask.data if isinstance(mask, NdArray) else np.asarray(mask)
        try:
            where = np.broadcast_to(mask != 0, self._shape)
        except ValueError:
            raise ValueError("NdArray.bool_fill: mask of shape {} does not broadcast to {}"
                             .format(mask.shape, self._shape)) from None
        data = self.data
        data[where] = value
        self.data = data
        shared = NdArray(self._shape, self._dtype)
        shared._array = data
        return shared

    masked_fill = bool_fill

    def narrow(self, dim, start, length):
        """An NdArray of rows ``[start, start + length)`` of axis 0 sharing this buffer."""
        if dim != 0:
            raise ValueError("NdArray.narrow: dim must be 0, got {}".format(dim))
        if not self._shape or start < 0 or length < 0 or start + length > self._shape[0]:
            raise ValueError("NdArray.narrow: rows [{}, {}) are out of range for shape {}".format(
                start, start + length, self._shape))
        out = NdArray((length,) + self._shape[1:], self._dtype)
        out._array = self.data[start:start + length]
        return out

    def view(self, shape):
        """An NdArray of ``shape`` (same size) sharing this buffer."""
        shape = _as_shape(shape)
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError("NdArray.view: cannot view shape {} as {}".format(self._shape, shape))
        out = NdArray(shape, self._dtype)
        out._array = self.data.reshape(shape)
        return out

    def __getitem__(self, key):
        """numpy indexing (ints, slices, lists, arrays, boolean masks) into a new NdArray."""
        return NdArray.from_numpy_array(self.data[_numpy_key(key)])

    def __setitem__(self, key, value):
        if isinstance(value, NdArray):
            value = value.data
        self._freed_by = None
        self.data[_numpy_key(key)] = value

    def clear(self):
        """Release the buffer; the next access allocates a fresh, zeroed one."""
        self._zeroing = False
        a = self._array
        if a is not None:
            _give_back(a)
        self._array = None
        if self._device is not None:
            self._device.release()   # back to the device pool (cuda_ops.device)
        self._device = None
        self._cleared = True
        self._freed_by = None

    def free(self, by):
        """:meth:`clear`, as the executor's clearing frees an intermediate (``by`` names the
        call, e.g. 'forward(clear_buffer=True)'). Reading the values before anything writes
        them again raises :class:`DataFreed`, or reads zeros with a warning, as
        ``ops.common.uncomputed_reads()`` says: nnabla returns whatever its memory pool left
        there, never reliably the values."""
        self.clear()
        self._freed_by = by

    def _read_freed(self):
        mode = common.uncomputed_reads()
        if mode == "error":
            raise DataFreed(
                "the data of this variable (NdArray{}) was freed by {} after its last use; to "
                "read it, set persistent=True on the variable before that call, or call it "
                "without clearing (nnabla returns whatever its memory pool left there)".format(
                    self._shape, self._freed_by))
        if mode == "warn":
            common.warn_uncomputed_read("The data of an intermediate (NdArray{}) that {} freed"
                                        .format(self._shape, self._freed_by))

    def keep_for_user(self):
        """Mark this NdArray as set by the user as a Variable's data (``h0.data = h.data``, an
        LSTM state carried across steps): the executor's clearing never frees it, since the
        user's variable still references the values."""
        self._kept_for_user = True

    @property
    def kept_for_user(self):
        """Whether :meth:`keep_for_user` was called: clearing leaves these values."""
        return self._kept_for_user

    def _reset_shape(self, shape):
        shape = checked_shape(shape, "reset_shape")
        if shape == self._shape:
            return
        same_size = int(np.prod(shape, dtype=np.int64)) == int(np.prod(self._shape, dtype=np.int64))
        self._shape = shape
        if same_size and self._array is not None and self._device is None:
            self._array = self._array.reshape(shape)   # nnabla keeps the values of the same size
        else:
            self.clear()

    # ----------------------------------------------------------------- properties
    @property
    def shape(self):
        return self._shape

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def size(self):
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def dtype(self):
        return self._dtype

    @property
    def strides(self):
        # a list, as nnabla's (its C++ Strides vector)
        return list(int(np.prod(self._shape[i + 1:], dtype=np.int64)) for i in range(len(self._shape)))

    def size_from_axis(self, axis=-1):
        """Product of the dimensions from ``axis`` on (``-1``: the whole size)."""
        if axis < 0:
            axis = 0
        return int(np.prod(self._shape[axis:], dtype=np.int64))

    # DLPack producer protocol: numpy.from_dlpack(a), torch.from_dlpack(a) share the buffer.
    def __dlpack__(self, stream=None, **kwargs):
        return self.data.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return (1, 0)    # kDLCPU: the host buffer is what is shared

    @property
    def clear_called(self):
        """nnabla's flag: ``clear()`` released the buffer and none has been made since (a new
        NdArray, which holds no buffer until first used, has not been cleared);
        ``holds_values`` says whether values are held at all."""
        return self._cleared and self._array is None and self._device is None

    def __repr__(self):
        return "<NdArray({}) at {}>".format(self._shape, hex(id(self)))

    # ----------------------------------------------------------------- in place
    def __iadd__(self, other):
        self.copy_from(self + other)
        return self

    def __isub__(self, other):
        self.copy_from(self - other)
        return self

    # nnabla writes *= and /= in place only for a scalar operand; with an NdArray it returns
    # the new NdArray of the product (quotient) and leaves this one as it was
    def __imul__(self, other):
        if isinstance(other, NdArray):
            return self * other
        self.copy_from(self * other)
        return self

    def __itruediv__(self, other):
        if isinstance(other, NdArray):
            return self / other
        self.copy_from(self / other)
        return self

    # identity semantics, as in nnabla
    __eq__ = object.__eq__
    __hash__ = object.__hash__

