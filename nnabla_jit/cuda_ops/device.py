"""Device buffers: numba.cuda loading, the device mirror of an NdArray, launch helpers.

An NdArray's ``device_mirror`` is a :class:`DeviceMirror` while it has a device copy. Either copy may
be the newer one: a CUDA node writing an output makes the host copy stale (``.data`` copies it
down), and ``.data`` on the host, which hands out a writable array, makes the device copy stale
(the next CUDA node reading it copies it up). ``clear()`` drops both.
"""
import ctypes
import functools
import inspect
import math
import os
import sys
from importlib import metadata

import numpy as np
from numba.core import types as numba_types

from .. import tracing
from ..ndarray import NotComputed
from ..ops import common
from . import registry
from .registry import device_function, kernel

__all__ = ["load", "unavailable_reason", "properties", "HOW_TO_GET_CUDA", "DeviceMirror",
           "DeviceMemory", "MEMORY", "fresh_on_device", "written_on_device", "read", "write", "accumulator", "zeroed",
           "upload", "copy_up", "copy_down", "host_counter", "read_counter", "stats",
           "reset_stats", "zeros", "empty", "release", "free_pool", "POOL_DEPTH", "workspace", "launch", "fill", "copy", "add_into",
           "flat_offset", "contiguous_strides", "broadcast_strides", "flat", "reshaped", "row"]

cuda = None  # numba.cuda, bound by load()


def switch(name):
    """Whether the speed-up ``NNABLA_JIT_CUDA_<name>`` is on: its own variable when set, else
    ``NNABLA_JIT_CUDA_FAST`` (default on; ``NNABLA_JIT_CUDA_FAST=0`` gives the first, plainer
    CUDA path, to measure before and after in one run or to rule a speed-up out)."""
    value = os.environ.get("NNABLA_JIT_CUDA_" + name)
    if value is None:
        value = os.environ.get("NNABLA_JIT_CUDA_FAST", "1")
    return value != "0"


THREADS = 128   # threads per block of the one-thread-per-element kernels

HOW_TO_GET_CUDA = (
    "To run on a GPU: an NVIDIA driver and `pip install 'nnabla_jit[cuda]'` (numba-cuda). "
    "Without one: set NUMBA_ENABLE_CUDASIM=1 before numba is imported to run the same kernels "
    "in numba's CUDA simulator (slow; for tests).")


def unavailable_reason():
    """Why numba.cuda cannot run kernels here, with how to get a GPU or the simulator; None
    when it can (a GPU it sees, or the simulator)."""
    try:
        from numba import cuda as numba_cuda
    except ImportError as e:
        return "numba.cuda cannot be imported ({}). {}".format(e, HOW_TO_GET_CUDA)
    if not numba_cuda.is_available():
        return "numba.cuda finds no GPU and the simulator is off. " + HOW_TO_GET_CUDA
    return None


def restore_numpy_aliases_for_numba_cuda():
    """numba-cuda (0.30.4 and before) registers an overload for ``np.row_stack`` when its typing
    tables first load, at the first kernel compile, and NumPy 2.5 removed that name (an alias
    of ``np.vstack`` since NumPy 2.0): without it no CUDA kernel compiles at all (seen on an
    H200 with numpy 2.5.2 and numba-cuda 0.30.4). Give the alias back, only where it is
    missing, before numba.cuda compiles anything; it is exactly ``np.vstack``. Returns the
    names restored."""
    restored = []
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
        restored.append("row_stack")
    return restored


def load():
    """Import numba.cuda and bind the kernels; ImportError (as ``import_extension_module``
    raises) when numba.cuda is missing or sees no GPU."""
    if cuda is not None:
        return cuda
    reason = unavailable_reason()
    if reason is not None:
        raise ImportError("CUDA context: " + reason)
    from numba import cuda as numba_cuda   # importable: unavailable_reason checked it
    restore_numpy_aliases_for_numba_cuda()
    registry.bind_kernels(numba_cuda)
    return numba_cuda


def properties(device_id=0):
    """The GPU ``device_id`` as a dict: ``name``, ``compute_capability`` (major, minor),
    ``total_memory`` and ``free_memory`` in bytes (None where numba's simulator has no value)."""
    numba_cuda = load()
    with numba_cuda.gpus[int(device_id)]:
        context = numba_cuda.current_context()
        free, total = context.get_memory_info()
        gpu = context.device
        name = getattr(gpu, "name", None)   # the simulator's device has none
    if isinstance(name, bytes):
        name = name.decode()
    finite = (lambda v: int(v) if v != float("inf") else None)
    return {"name": name or "numba CUDA simulator",
            "compute_capability": tuple(gpu.compute_capability),
            "total_memory": finite(total), "free_memory": finite(free)}


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
        copy_down(self.array, host)
        self.host_stale = False
        return host

    def host_modified(self, nd):
        """The host copy is the newest (it was handed out writable, or filled)."""
        self.host_stale = False
        self.device_stale = True

    def fill(self, nd, value):
        """Set every element of the device copy to the scalar ``value``, making it the newest
        (no copy); False, doing nothing, when ``value`` is not a scalar or ``nd`` has been
        retyped since. Called by ``NdArray.fill``."""
        if np.ndim(value) != 0 or self.array.dtype != nd.dtype or self.array.size != nd.size:
            return False
        fill(self.array, value)
        self.host_stale = True
        self.device_stale = False
        return True

    @property
    def fresh(self):
        """Whether the device copy holds the newest values."""
        return not self.device_stale

    def release(self):
        """The NdArray drops this copy (``clear()``): its array goes back to the pool."""
        array, self.array = self.array, None
        release(array)


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
        nd.attach_device(DeviceMirror(upload(host)))
        mirror = nd.device_mirror
    elif mirror.array.shape != host.shape or mirror.array.dtype != host.dtype:
        mirror.release()
        mirror.array = upload(host)
    else:
        copy_up(host, mirror.array)
    mirror.device_stale = False
    mirror.host_stale = False
    return mirror.array


def written_on_device(nd):
    """A kernel wrote into ``nd``'s device array in place (an input updated by its op): the
    device copy is the newest."""
    mirror = nd.device_mirror
    if mirror is not None:
        mirror.host_stale = True
        mirror.device_stale = False


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
        mirror.release()
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
        held: ``NotComputed``, or zeros (warned of under the 'warn' policy), as
        ``ops.common.uncomputed_reads()`` says."""
        mode = common.uncomputed_reads()
        if mode == "zeros":
            return functools.partial(read, nd)

        def get(dtype):
            if not nd.holds_values:
                if mode == "error":
                    raise NotComputed("NdArray{}: no values held".format(nd.shape))
                common.warn_uncomputed_read("Values a backward kernel needs (NdArray{})".format(nd.shape))
            return read(nd, dtype)
        return get

    @staticmethod
    def write(nd):
        return functools.partial(write, nd)

    @staticmethod
    def accumulate(nd):
        return functools.partial(accumulator, nd)

    overwrite_grad = write   # a gradient written over is written like any output

    @staticmethod
    def zeroed(nd):
        return functools.partial(zeroed, nd)

    @staticmethod
    def temporary(shape, slot=0):
        """Zeros for the gradient of a node's input ``slot`` that repeats an earlier input,
        added in afterwards: one workspace per slot, reused by every node and step (the add
        that reads it is queued before any later kernel writes it)."""
        shape = tuple(shape)
        size = math.prod(shape)

        def get(dtype):
            array = reshaped(workspace(("repeated input's gradient", slot), size, dtype), shape)
            fill(array, 0)
            return array
        return get

    @staticmethod
    def add_into(nd, array, dtype):
        add_into(accumulator(nd, dtype), array)

    @staticmethod
    def fill(nd, value):
        """Set every element of ``nd`` to the scalar ``value`` on the device, which then holds
        the newest values (nothing is copied up, even when ``nd`` had no device copy)."""
        if nd.device_mirror is None:
            write(nd, nd.dtype)
        nd.fill(value)


MEMORY = DeviceMemory()


# ---------------------------------------------------------------------------- transfers
# Every copy between host and device goes through upload / copy_up / copy_down, which count
# them: a training step that stays on the device shows none but the loss read (stats()).
# The pool's allocations are counted with them: after the first step, none.
_STATS = dict.fromkeys(("host_to_device", "host_to_device_bytes", "device_to_host",
                        "device_to_host_bytes", "allocations", "allocated_bytes", "reused"), 0)


def stats():
    """The host -> device and device -> host copies made so far: a dict of their counts
    (``host_to_device``, ``device_to_host``) and sizes (``..._bytes``); and the device
    buffers handed out: new ``allocations`` (``allocated_bytes``) and ``reused`` ones from the
    pool (:func:`empty`)."""
    return dict(_STATS)


def reset_stats():
    """Zero the counts of :func:`stats`."""
    for key in _STATS:
        _STATS[key] = 0


def _count(direction, nbytes):
    _STATS[direction] += 1
    _STATS[direction + "_bytes"] += int(nbytes)


def kept(owner, name, host):
    """NumPy array ``host`` copied up on first use and kept on ``owner`` (an op) under ``name``
    and its type: the op's set-up tables and constants, read by every later step."""
    constants = owner.__dict__.setdefault("device_constants", {})
    key = (name, np.dtype(host.dtype))
    if key not in constants:
        constants[key] = upload(host)
    return constants[key]


def upload(host):
    """A device array (from the pool) holding a copy of the NumPy array ``host``."""
    host = np.ascontiguousarray(host)
    if host.strides != tuple(host.itemsize * n for n in contiguous_strides(host.shape)):
        # NumPy calls an array with a 0 or odd stride on a length-1 axis (x[:, None]) contiguous;
        # numba's copy compares the strides themselves
        host = host.copy()
    array = empty(host.shape, host.dtype)
    copy_up(host, array)
    return array


def copy_up(host, array):
    """Copy the NumPy array ``host`` into the device array ``array`` (same shape and type)."""
    _count("host_to_device", host.nbytes)
    if tracing.recorder is not None:
        return tracing.recorder.copy("host_to_device", host.nbytes, array.copy_to_device, host)
    array.copy_to_device(host)


def copy_down(array, host=None):
    """The device array ``array`` copied into ``host`` (a new NumPy array when None)."""
    _count("device_to_host", array.size * array.dtype.itemsize)
    if tracing.recorder is not None:
        return tracing.recorder.copy("device_to_host", array.size * array.dtype.itemsize,
                                     _copy_to_host, array, host)
    return _copy_to_host(array, host)


def _copy_to_host(array, host):
    if host is None:
        return array.copy_to_host()
    array.copy_to_host(host)
    return host


def host_counter():
    """A one-element int64 array in host memory mapped into the device: kernels add to it
    (``cuda.atomic.add``) and :func:`read_counter` reads it without a copy."""
    return cuda.mapped_array(1, np.int64)


def kept_counter(owner, name):
    """The :func:`host_counter` kept on ``owner`` (an op) under ``name``, zeroed: what one
    launch's kernels count (invalid labels, indices out of range, failed factorizations)."""
    counters = owner.__dict__.setdefault("device_counters", {})
    counter = counters.get(name)
    if counter is None:
        counter = counters[name] = host_counter()
    counter[0] = 0
    return counter


def read_counter(counter):
    """The value of a :func:`host_counter` once the kernels queued so far are done."""
    cuda.synchronize()
    return int(counter[0])


# ---------------------------------------------------------------------------- arrays

# The device pool. Buffers an NdArray drops (``clear()``, a retyped or reshaped buffer) come
# back here, by element count and type, and :func:`empty` hands them out again, so a training
# step after the first allocates nothing: the activations and gradients cleared in one step
# are the next step's. Kernels run in order on one stream, so a buffer handed out again is
# written only after the kernels queued on its previous owner.
_POOL = {}          # (size, dtype) -> arrays no one holds
POOL_DEPTH = 64     # most arrays kept per (size, dtype)


def empty(shape, dtype):
    """An uninitialised device array: one from the pool when one of its size and type is
    there, else a new allocation."""
    shape, dtype = tuple(int(s) for s in shape), np.dtype(dtype)
    size = math.prod(shape)
    bucket = _POOL.get((size, dtype))
    if bucket:
        _STATS["reused"] += 1
        array = bucket.pop()
        return array if array.shape == shape else array.reshape(shape)
    _STATS["allocations"] += 1
    _STATS["allocated_bytes"] += size * dtype.itemsize
    return cuda.device_array(shape, dtype)


def release(array):
    """Give ``array`` back to the pool, when nothing else holds it (a view or a kernel's
    saved state keeps it out)."""
    # 3 references: the caller's, this argument and getrefcount's
    if array is None or sys.getrefcount(array) > 3:
        return
    bucket = _POOL.setdefault((int(array.size), np.dtype(array.dtype)), [])
    if len(bucket) < POOL_DEPTH:
        bucket.append(array)


def free_pool():
    """Free the pooled buffers (numba returns them to the driver)."""
    _POOL.clear()


_WORKSPACE = {}


def workspace(name, size, dtype):
    """A flat device array of ``size`` elements, the work buffer ``name`` kept for reuse across
    launches and steps (grown as needed; kernels on one stream run in order, so consecutive
    users of one name do not overlap)."""
    key = (name, np.dtype(dtype))
    held = _WORKSPACE.get(key)
    if held is None or held[0].size < size:
        held = _WORKSPACE[key] = (empty((size,), dtype), {})
    array, views = held
    if not LAUNCH_CACHE:
        return array[:size]
    view = views.get(size)    # numba builds a new array object for every slice: kept per size
    if view is None:
        if len(views) >= CONFIGURED_MAX:
            views.clear()
        view = views[size] = array[:size]
    return view


def zeros(shape, dtype):
    """A new device array of zeros."""
    array = empty(shape, dtype)
    fill(array, 0)
    return array


def fill(array, value):
    """Set every element of a device array to ``value``."""
    launch(fill_kernel, array.size, flat(array), value)


def copy(src, dst):
    """dst = src (converted to dst's type) for device arrays of one size."""
    launch(cast_kernel, dst.size, flat(src), flat(dst))


def add_into(dst, src):
    """dst += src for device arrays of one size."""
    launch(add_kernel, dst.size, flat(dst), flat(src))


# numba builds a launch configuration object on every ``kernel[grid, block]``; the same few
# configurations recur every step, so they are kept (NNABLA_JIT_CUDA_LAUNCH_CACHE=0: built on
# every launch, as numba does). A configuration holds the dispatcher, the grid and block sizes
# and the default stream: nothing that changes between launches.
LAUNCH_CACHE = switch("LAUNCH_CACHE")
_CONFIGURED = {}
CONFIGURED_MAX = 8192   # configurations kept; the table starts again when full


def configured(kern, grid, block):
    """``kern[grid, block]``, built once per (kernel, grid, block) (a :class:`ResolvedLaunch`
    around it under ``NNABLA_JIT_CUDA_RESOLVED_LAUNCH``)."""
    if not LAUNCH_CACHE:
        return kern[grid, block]
    key = (kern, grid, block)
    config = _CONFIGURED.get(key)
    if config is None:
        config = kern[grid, block]
        if config is kern:   # numba's simulator configures the kernel object itself: not kept
            return config
        if RESOLVED_LAUNCH and _RESOLVED_OK[0]:
            config = ResolvedLaunch(kern, config)
        if len(_CONFIGURED) >= CONFIGURED_MAX:
            _CONFIGURED.clear()
        _CONFIGURED[key] = config
    return config


# numba types a kernel's arguments on every launch (a Python ``typeof`` per device array) to
# pick the compiled overload. What decides the type of the arguments passed here is cheap to
# read: a device array's dtype, shape and strides (its layout, 'C', 'F' or 'A', follows from
# them), a scalar's Python type. ResolvedLaunch keeps, per such key, the overload numba picked
# for it the first time and launches it directly (the very call numba's dispatcher makes after
# resolving); anything else (another argument kind, an overload numba did not match exactly, a
# numba whose dispatcher lacks these parts) takes numba's own path.
# NNABLA_JIT_CUDA_RESOLVED_LAUNCH=0: numba resolves every launch.
RESOLVED_LAUNCH = switch("RESOLVED_LAUNCH")
_RESOLVED_OK = [True]    # False once a dispatcher lacked what ResolvedLaunch reads
_PLAIN = object()        # a key whose launches take numba's own path
_SCALAR_TYPES = (bool, float, np.bool_, np.integer, np.floating)
INT_BOUND = 1 << 62      # Python ints typed int64 whatever their value below this
ARRAY_CLASS = "DeviceNDArray"   # the device arrays whose type _arg_key reads
KEYS_MAX = 512           # argument keys kept per configuration; the table starts again when full


def _arg_key(value, array_type):
    """What decides numba's type of the kernel argument ``value``, or None when this is not
    known here (the launch then takes numba's path)."""
    kind = type(value)
    if kind is array_type:
        return value.dtype, value.shape, value.strides
    if kind is int:
        return int if -INT_BOUND < value < INT_BOUND else None
    if kind is tuple:
        keys = tuple(_arg_key(v, array_type) for v in value)
        return None if None in keys else (tuple, keys)
    if isinstance(value, _SCALAR_TYPES):
        return kind
    return None


class ResolvedLaunch:
    """A configured kernel (``kernel[grid, block]``) whose launches reuse numba's overload
    resolution per argument key (see above)."""

    __slots__ = ("dispatcher", "config", "kernels", "array_type", "packed", "packers")

    def __init__(self, dispatcher, config):
        self.dispatcher = dispatcher
        self.config = config
        self.kernels = {}         # argument key -> numba's compiled kernel, or _PLAIN
        self.array_type = None    # numba's device array class, from the first launch
        self.packed = {}          # value key -> a packed launch (see "packed launches" below)
        self.packers = {}         # argument key -> _Packer, or _PLAIN

    def __call__(self, *args):
        array_type = self.array_type
        vkey = None
        if PACKED_LAUNCH and array_type is not None:
            driver = _PACKING[0]
            if driver is _UNRESOLVED:
                driver = packing_driver()
            if driver is not None:
                vkey = _value_keys(args, array_type, driver)
                entry = self.packed.get(vkey) if vkey is not None else None
                if entry is not None:
                    try:
                        if driver.core_launch is None:
                            driver.launch_kernel(*entry[0], cooperative=entry[1])
                        else:
                            driver.core_launch(*entry[0])
                        return
                    except TypeError as e:   # a launch_kernel taking other arguments after all
                        _stop_packing(e)
                        vkey = None
        key = tuple(_arg_key(a, array_type) for a in args)
        kernel = self.kernels.get(key)
        if kernel is None or kernel is _PLAIN or None in key:
            self.config(*args)    # numba's path: resolves (compiling if needed) and launches
            if kernel is None and None not in key:
                if len(self.kernels) >= KEYS_MAX:
                    self.kernels.clear()
                self._learn(key, args)
            elif self.array_type is None:
                self._learn_array_type(args)
            return
        config = self.config
        if vkey is not None and _launch_packed(self, kernel, key, vkey, args):
            return
        try:
            kernel.launch(args, config.griddim, config.blockdim, config.stream, config.sharedmem)
        except (TypeError, AttributeError):
            # a numba whose kernels launch otherwise (the failure comes before the launch
            # itself): numba's own path, for this launch and from now on
            _RESOLVED_OK[0] = False
            self.kernels[key] = _PLAIN
            self.config(*args)

    def _learn_array_type(self, args):
        """numba's device array class (``DeviceNDArray``), from the arguments."""
        for a in args:
            if type(a).__name__ == ARRAY_CLASS:
                self.array_type = type(a)
                return

    def _learn(self, key, args):
        """After numba's launch for ``key``: keep the overload it picked, when it is the one
        compiled for exactly these argument types."""
        try:
            types = tuple(self.dispatcher.typeof_pyval(a) for a in args)
            kernel = self.dispatcher.overloads.get(types)
            config = self.config
            (config.griddim, config.blockdim, config.stream, config.sharedmem, kernel.launch)
        except Exception:   # a numba without these: its own path from now on
            _RESOLVED_OK[0] = False
            self.kernels[key] = _PLAIN
            return
        self.kernels[key] = kernel if kernel is not None else _PLAIN


# ---------------------------------------------------------------------------- packed launches
# ======== numba-cuda internals: every private numba-cuda name this project reads is in this
# section (and ResolvedLaunch above) ========
#
# After resolving, numba's ``_Kernel.launch`` still converts every argument on every launch
# (``_prepare_args``: ``wrap_arg(...).to_device``, the device pointer, one ctypes object per
# field) before its one launch call: ``driver.launch_kernel`` in the numba-cuda releases before
# 0.30, cuda.core's ``launch(stream, LaunchConfig, kernel, *params)`` in 0.30 (read from
# 0.30.4's source on the device image; its parameters mix ints and ctypes objects, so there the
# parameters packed are numba's own ``_prepare_args`` output, kept per value key). Those parameters depend only on
# the arguments' values: for a device array its size, item size, data pointer, shape and
# strides (the array model's meminfo and parent are 0); for a scalar its value as numba's type
# of it; tuples flattened. A packed launch builds that list once per value key (the arrays'
# pointers, shapes and strides, the scalars' values) and afterwards launches with one dict
# lookup and the driver call. The first packing for each overload and argument key is checked
# against numba's own ``_prepare_args`` for the same arguments; any difference, a numba-cuda
# version other than the ones read (PACKED_VERSIONS), a launch_kernel of another signature,
# a debug kernel or one with argument extensions take numba's own path.
# A packed launch uses the kernel's function handle of the device current when it was packed:
# the CUDA path runs on one device per process. NNABLA_JIT_CUDA_PACKED_LAUNCH=0: numba
# converts the arguments of every launch.
PACKED_LAUNCH = switch("PACKED_LAUNCH")
PACKED_VERSIONS = ((0, 30),)   # numba-cuda (major, minor) launching through cuda.core (read)
PACKED_MAX = 1024              # packed launches kept per configuration; the table starts again
LAUNCH_KERNEL_PARAMS = ("cufunc_handle", "gx", "gy", "gz", "bx", "by", "bz", "sharedmem",
                        "hstream", "args", "cooperative")
_UNRESOLVED = object()
_PACKING = [_UNRESOLVED]       # the _PackingDriver, None when packing is off, or _UNRESOLVED
PACKING_STATS = {"packed": 0, "checked": 0, "refused": 0, "reason": None}
POINTER_ATTR = "_nnabla_jit_pointer"   # a device array's data pointer, kept on it


class _PackingDriver:
    """How a packed launch reaches the GPU: numba-cuda's ``driver.launch_kernel`` (before 0.30)
    or cuda.core's ``launch`` with numba-cuda's ``LaunchConfig`` (0.30: ``core_launch`` set),
    and ``driver.device_pointer``."""

    def __init__(self, launch_kernel, device_pointer, core_launch=None, launch_config=None,
                 core_ge_1_0=False):
        self.launch_kernel = launch_kernel
        self.device_pointer = device_pointer
        self.core_launch = core_launch
        self.launch_config = launch_config
        self.core_ge_1_0 = core_ge_1_0


def packing_unavailable_reason(version, launch_kernel):
    """Why packed launches through ``driver.launch_kernel`` cannot be used with numba-cuda
    ``version`` (a string, None when numba-cuda is not installed); None when they can. (The
    0.30 releases launch through cuda.core instead: see _resolve_packing.)"""
    if version is None:
        return "numba-cuda is not installed (numba's own CUDA target or its simulator)"
    try:
        major_minor = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return "numba-cuda version {!r} not understood".format(version)
    if major_minor >= (0, 31):
        return "numba-cuda {} is newer than the ones whose launch was read ({})".format(
            version, ", ".join("%d.%d" % v for v in PACKED_VERSIONS))
    try:
        params = tuple(inspect.signature(launch_kernel).parameters)
    except (TypeError, ValueError):
        return "numba-cuda's launch_kernel has no readable signature"
    if params != LAUNCH_KERNEL_PARAMS:
        return "numba-cuda's launch_kernel takes {}".format(params)
    return None


def _resolve_packing():
    """The _PackingDriver of this numba-cuda, or None (the reason in PACKING_STATS)."""
    from numba import config as numba_config
    if numba_config.ENABLE_CUDASIM:
        PACKING_STATS["reason"] = "the CUDA simulator has no driver"
        return None
    try:
        version = metadata.version("numba-cuda")
    except Exception:
        version = None
    try:
        from numba.cuda.cudadrv import driver as cuda_driver
    except Exception as e:
        PACKING_STATS["reason"] = "numba-cuda's driver module differs ({})".format(e)
        return None
    # the pointer numba's _prepare_args reads; the array interface's where a numba-cuda lacks
    # it (the first packing of each overload compares the parameters with numba's anyway)
    device_pointer = getattr(cuda_driver, "device_pointer", _interface_pointer)
    core = _core_launch(version)
    if core is not None:
        PACKING_STATS["reason"] = None
        return _PackingDriver(None, device_pointer, *core)
    launch_kernel = getattr(cuda_driver, "launch_kernel", None)
    if launch_kernel is None:
        PACKING_STATS["reason"] = ("numba-cuda {}: neither driver.launch_kernel nor cuda.core's "
                                   "launch in its dispatcher".format(version))
        return None
    reason = packing_unavailable_reason(version, launch_kernel)
    PACKING_STATS["reason"] = reason
    return None if reason is not None else _PackingDriver(launch_kernel, device_pointer)


def _core_launch(version):
    """(cuda.core's ``launch``, ``LaunchConfig``, whether cuda.core >= 1.0) as numba-cuda
    ``version``'s dispatcher imports them, when it is a release that launches through them
    (PACKED_VERSIONS); else None."""
    try:
        major_minor = tuple(int(p) for p in version.split(".")[:2])
    except (AttributeError, ValueError):
        return None
    if major_minor not in PACKED_VERSIONS:
        return None
    try:
        from numba.cuda import dispatcher as cuda_dispatcher
        core_launch, launch_config = cuda_dispatcher.launch, cuda_dispatcher.LaunchConfig
    except Exception:
        return None
    return core_launch, launch_config, bool(getattr(cuda_dispatcher, "CUDA_CORE_GE_1_0", False))


def _interface_pointer(array):
    """A device array's data pointer from its ``__cuda_array_interface__``."""
    return array.__cuda_array_interface__["data"][0]


def packing_driver():
    """The _PackingDriver in use (resolved on first call), or None."""
    if _PACKING[0] is _UNRESOLVED:
        _PACKING[0] = _resolve_packing() if PACKED_LAUNCH else None
    return _PACKING[0]


def device_pointer(array, driver):
    """``array``'s data pointer as an int (``driver.device_pointer``), kept on the array: a
    device array object never changes its memory."""
    held = getattr(array, "__dict__", None)
    if held is None:
        return int(driver.device_pointer(array))
    ptr = held.get(POINTER_ATTR)
    if ptr is None:
        ptr = held[POINTER_ATTR] = int(driver.device_pointer(array))
    return ptr


def _value_key(value, array_type, driver):
    """What decides the packed parameters of the argument ``value``, or None when unknown."""
    kind = type(value)
    if kind is array_type:
        return _array_value_key(value, driver)
    if kind is int:
        return (int, value) if -INT_BOUND < value < INT_BOUND else None
    if kind is tuple:
        keys = tuple(_value_key(v, array_type, driver) for v in value)
        return None if None in keys else (tuple, keys)
    if isinstance(value, _SCALAR_TYPES):
        # 0.0 and -0.0 are equal keys, yet other parameters: zeros are keyed by their text
        return (kind, value) if value else (kind, value, repr(value))
    return None


VALUE_KEY_ATTR = "_nnabla_jit_value_key"   # a device array's value key, kept on it


_ARRAY_KEYS = {}          # (dtype, shape, strides, pointer) -> its number
_ARRAY_KEY_COUNT = [0]    # numbers handed out: never reused, so a number kept on an array
ARRAY_KEYS_MAX = 1 << 16  # always means its contents (the table starts again when full)


def _array_value_key(array, driver):
    """A number standing for a device array's (dtype, shape, strides, pointer), kept on it
    (none of them changes): a launch's key hashes ints instead of dtypes and tuples. None
    when the array has no device pointer the driver can read (an object that only looks like
    a device array: numba's own path converts it, or says what is wrong with it)."""
    try:
        pointer = device_pointer(array, driver)
    except Exception:   # numba-cuda raises a bare Exception ("Not a CUDA memory object")
        return None
    contents = (array.dtype, array.shape, array.strides, pointer)
    key = _ARRAY_KEYS.get(contents)
    if key is None:
        if len(_ARRAY_KEYS) >= ARRAY_KEYS_MAX:
            _ARRAY_KEYS.clear()
        _ARRAY_KEY_COUNT[0] += 1
        key = _ARRAY_KEYS[contents] = _ARRAY_KEY_COUNT[0]
    held = getattr(array, "__dict__", None)
    if held is not None:
        held[VALUE_KEY_ATTR] = key
    return key


def _value_keys(args, array_type, driver):
    """The value key of a launch's arguments (``_value_key`` of each, the common kinds
    inlined: this runs for every launch), or None when one is unknown."""
    keys = []
    for value in args:
        kind = type(value)
        if kind is array_type:
            try:
                keys.append(value.__dict__[VALUE_KEY_ATTR])
            except (KeyError, AttributeError):
                key = _array_value_key(value, driver)
                if key is None:
                    return None
                keys.append(key)
        elif kind is int and -INT_BOUND < value < INT_BOUND and value:
            keys.append((int, value))
        elif (kind is float or kind is bool) and value:
            keys.append((kind, value))
        else:
            key = _value_key(value, array_type, driver)
            if key is None:
                return None
            keys.append(key)
    return tuple(keys)


class _Unpackable(Exception):
    """An argument type this packer does not convert as numba does (numba's path)."""


def pack_arguments(argument_types, args, pointer):
    """The kernel parameters numba-cuda's ``_Kernel._prepare_args`` builds for ``args`` of
    ``argument_types`` (numba types), as ctypes objects; ``pointer(array)`` gives a device
    array's data pointer. _Unpackable for a type it does not cover."""
    params = []
    for ty, value in zip(argument_types, args):
        _pack(ty, value, pointer, params)
    return params


def _pack(ty, value, pointer, params):
    types = numba_types
    if isinstance(ty, types.Array):
        c_intp = ctypes.c_ssize_t
        params.extend((ctypes.c_void_p(0), ctypes.c_void_p(0), c_intp(value.size),
                       c_intp(value.dtype.itemsize), ctypes.c_void_p(pointer(value))))
        params.extend(c_intp(n) for n in value.shape)
        params.extend(c_intp(n) for n in value.strides)
    elif isinstance(ty, types.Integer):
        params.append(getattr(ctypes, "c_%s" % ty)(value))
    elif ty == types.float16:
        params.append(ctypes.c_uint16(np.float16(value).view(np.uint16)))
    elif ty == types.float64:
        params.append(ctypes.c_double(value))
    elif ty == types.float32:
        params.append(ctypes.c_float(value))
    elif ty == types.boolean:
        params.append(ctypes.c_uint8(int(value)))
    elif ty == types.complex64:
        params.extend((ctypes.c_float(value.real), ctypes.c_float(value.imag)))
    elif ty == types.complex128:
        params.extend((ctypes.c_double(value.real), ctypes.c_double(value.imag)))
    elif isinstance(ty, types.BaseTuple) and len(ty) == len(value):
        for t, v in zip(ty, value):
            _pack(t, v, pointer, params)
    else:
        raise _Unpackable(ty)


def same_parameters(mine, numbas):
    """Whether two lists of ctypes parameters are the same types holding the same values."""
    return len(mine) == len(numbas) and all(
        type(a) is type(b) and a.value == b.value for a, b in zip(mine, numbas))


class _Packer:
    """What a packed launch of one overload reads once: the function handle, the argument
    types, the launch configuration; ``checked`` once compared with numba's conversion."""

    __slots__ = ("prefix", "argument_types", "cooperative", "checked")

    def __init__(self, kernel, config, driver):
        if kernel.debug or kernel.extensions:
            raise _Unpackable("a debug kernel or one with argument extensions")
        self.argument_types = tuple(kernel.argument_types)
        self.cooperative = bool(kernel.cooperative)
        self.checked = False
        if driver.core_launch is not None:   # numba-cuda 0.30: as its _Kernel.launch calls
            if driver.core_ge_1_0:
                launch_config = driver.launch_config(
                    grid=config.griddim, block=config.blockdim, shmem_size=config.sharedmem,
                    is_cooperative=self.cooperative)
            else:
                launch_config = driver.launch_config(
                    grid=config.griddim, block=config.blockdim, shmem_size=config.sharedmem,
                    cooperative_launch=self.cooperative)
            self.prefix = (config.stream, launch_config, kernel._codelibrary.get_cufunc().kernel)
            return
        griddim, blockdim = tuple(config.griddim), tuple(config.blockdim)
        if len(griddim) != 3 or len(blockdim) != 3:
            raise _Unpackable("launch dimensions {} {}".format(griddim, blockdim))
        stream = config.stream
        stream_handle = stream and stream.handle.value or 0
        handle = kernel._codelibrary.get_cufunc().handle
        self.prefix = (handle,) + griddim + blockdim + (config.sharedmem, stream_handle)


def _launch_packed(resolved, kernel, key, vkey, args):
    """Pack the launch of ``kernel`` (the overload ``resolved`` keeps for argument key ``key``)
    for value key ``vkey`` and launch it; False, launching nothing, when it cannot be packed
    (the caller launches through numba)."""
    driver = packing_driver()
    if driver is None:
        return False
    packer = resolved.packers.get(key)
    if packer is _PLAIN:
        return False
    pointer = functools.partial(device_pointer, driver=driver)
    try:
        if packer is None:
            packer = resolved.packers[key] = _Packer(kernel, resolved.config, driver)
        if driver.core_launch is not None:
            # numba's own parameters for these values (ints and ctypes objects, as its launch
            # passes them to cuda.core), kept for the value key
            params, retr = [], []
            for ty, value in zip(kernel.argument_types, args):
                kernel._prepare_args(ty, value, resolved.config.stream, retr, params)
            if retr:
                raise _Unpackable("arguments numba copies to the device")
            packer.checked = True
        else:
            params = pack_arguments(packer.argument_types, args, pointer)
        if not packer.checked:
            numbas, retr = [], []
            for ty, value in zip(kernel.argument_types, args):
                kernel._prepare_args(ty, value, resolved.config.stream, retr, numbas)
            PACKING_STATS["checked"] += 1
            if retr or not same_parameters(params, numbas):
                raise _Unpackable("parameters differ from numba's: {} vs {}".format(
                    params, numbas))
            packer.checked = True
    except Exception as e:   # _Unpackable, or a numba-cuda without these parts
        resolved.packers[key] = _PLAIN
        PACKING_STATS["refused"] += 1
        PACKING_STATS["reason"] = "{}: {}".format(getattr(kernel, "entry_name", kernel), e)[:500]
        return False
    if len(resolved.packed) >= PACKED_MAX:
        resolved.packed.clear()
    if driver.core_launch is not None:
        entry = resolved.packed[vkey] = ((*packer.prefix, *params), None)
    else:
        entry = resolved.packed[vkey] = ((*packer.prefix, params), packer.cooperative)
    PACKING_STATS["packed"] += 1
    try:
        if driver.core_launch is None:
            driver.launch_kernel(*entry[0], cooperative=entry[1])
        else:
            driver.core_launch(*entry[0])
    except TypeError as e:   # refused before launching: numba's path for this launch and on
        _stop_packing(e)
        return False
    return True


def _stop_packing(error):
    """numba-cuda's launch_kernel refused a packed launch's arguments (TypeError, raised before
    anything is launched): no more packed launches in this process."""
    _PACKING[0] = None
    PACKING_STATS["reason"] = "launch_kernel refused packed arguments: {}".format(error)[:500]


def launch(kern, n, *args):
    """Run a one-thread-per-element kernel over ``n`` elements."""
    if n == 0:
        return
    threads = THREADS if n >= THREADS else (n + 31) // 32 * 32
    configured(kern, (n + threads - 1) // threads, threads)(*args)


def flat(array):
    """``array`` as a 1-d device array: itself when it is one (numba's reshape builds a new
    array object even to the same shape), else a reshaped view."""
    if LAUNCH_CACHE and array.ndim == 1:
        return array
    return reshaped(array, array.size)


# numba builds a new device array object for every reshape and index (``a.reshape(n)``,
# ``a[0]``: a shape check, a dummy array, a memory view), and the launchers take the same views
# of the same buffers every step. They are kept on the array they are views of, per shape or
# index (a view holds the memory, not the array it came from, so the pool's count of who holds
# an array is unchanged). A kept view must never be handed out as a buffer of its own (the
# pool's arrays are reshaped with numba's reshape). NNABLA_JIT_CUDA_VIEW_CACHE=0: new views
# on every launch.
VIEW_CACHE = switch("VIEW_CACHE")
VIEWS_ATTR = "_nnabla_jit_views"
VIEWS_MAX = 32     # views kept per array; its table starts again when full


def _kept_view(array, key, make):
    held = getattr(array, "__dict__", None) if VIEW_CACHE else None
    if held is None:     # views not kept, or an array that cannot keep them (NumPy's)
        return make()
    views = held.get(VIEWS_ATTR)
    if views is None:
        views = held[VIEWS_ATTR] = {}
    view = views.get(key)
    if view is None:
        if len(views) >= VIEWS_MAX:
            views.clear()
        view = views[key] = make()
    return view


def reshaped(array, *shape):
    """``array.reshape(*shape)`` of a device array, the view kept on it (see above)."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])   # one sequence of sizes (a tuple, a list, an array)
    key = tuple(int(n) for n in shape)
    return _kept_view(array, key, lambda: array.reshape(key))


def row(array, i):
    """``array[i]`` of a device array, the view kept on it (see above)."""
    return _kept_view(array, ("row", i), lambda: array[i])


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
# Which element a one-thread-per-element kernel handles: (outer, row, col) of its flat index
# over (outer, rows, inner), and how it writes a result it may accumulate: ops/common.py's
# rules, for every kernel of this package.
unravel3 = device_function(common.unravel3.py_func)
store = device_function(common.store.py_func)   # a result written, or added with accum


@device_function
def flat_offset(i, shape, strides):
    """The element offset of the C-order position ``i`` over ``shape`` in an array with
    ``strides`` (tuples of one length, at least 1)."""
    offset = 0
    for ax in range(len(shape) - 1, -1, -1):
        offset += (i % shape[ax]) * strides[ax]
        i //= shape[ax]
    return offset


@device_function
def block_sum(values, t, n):
    """values[0] = the sum of values[0:n] over a block of n threads (a power of two), thread t
    having stored its part at values[t]: pairwise adds in rounds, the block synchronised
    before each."""
    cuda.syncthreads()
    step = n // 2
    while step > 0:
        if t < step:
            values[t] += values[t + step]
        cuda.syncthreads()
        step //= 2


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
