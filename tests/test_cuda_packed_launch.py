"""Packed launches (``cuda_ops/device.py``, NNABLA_JIT_CUDA_PACKED_LAUNCH): the kernel
parameters built without numba's per-launch conversion must be exactly those numba-cuda's
``_Kernel._prepare_args`` builds. No GPU here: numba's own ``_prepare_args`` (the CUDA target
numba still ships, the code numba-cuda's was taken from) is run on stand-in device arrays, with
``wrap_arg`` and ``driver.device_pointer`` replaced by what they do for a device array."""
import ctypes

import numpy as np
import pytest

from nnabla_jit.cuda_ops import device

numba_dispatcher = pytest.importorskip("numba.cuda.dispatcher")
from numba.core import types  # noqa: E402  (numba is a dependency; after the skip above)


class DeviceNDArray:
    """A device array as the packer reads it: dtype, shape, strides, size, a data pointer."""

    def __init__(self, shape, dtype=np.float32, pointer=0x7f0000001000, strides=None):
        host = np.empty(shape, dtype)
        self.dtype, self.shape, self.size = host.dtype, tuple(shape), host.size
        self.strides = tuple(strides) if strides is not None else host.strides
        self.ndim = len(shape)
        self.pointer = pointer


class Passed:
    """What ``wrap_arg(device_array)`` is: ``to_device`` hands the array back unconverted."""

    def __init__(self, value):
        self.value = value

    def to_device(self, retr, stream=0):
        return self.value


class NumbaKernel:
    """An overload as numba-cuda's ``_Kernel``: its ``_prepare_args`` is numba's own."""
    extensions = ()
    debug = False
    cooperative = False
    _prepare_args = numba_dispatcher._Kernel._prepare_args

    def __init__(self, argument_types):
        self.argument_types = tuple(argument_types)
        self.launched = []
        handle = object()
        self._codelibrary = type("Library", (), {"get_cufunc": lambda _self: type(
            "Function", (), {"handle": handle})()})()
        self.handle = handle

    def launch(self, args, griddim, blockdim, stream, sharedmem):
        self.launched.append(args)


@pytest.fixture
def numba_conversion(monkeypatch):
    monkeypatch.setattr(numba_dispatcher, "wrap_arg", Passed)
    monkeypatch.setattr(numba_dispatcher.driver, "device_pointer", lambda a: a.pointer)


def numbas_parameters(argument_types, args):
    kernel, params, retr = NumbaKernel(argument_types), [], []
    for ty, value in zip(argument_types, args):
        kernel._prepare_args(ty, value, 0, retr, params)
    assert not retr
    return params


def _values(params):
    return [(type(p), p.value) for p in params]


@pytest.mark.parametrize("ty, value", [
    (types.Array(types.float32, 1, "C"), DeviceNDArray((6,))),
    (types.Array(types.float64, 2, "C"), DeviceNDArray((2, 3), np.float64, 0x10000)),
    (types.Array(types.float32, 2, "A"), DeviceNDArray((2, 3), strides=(4, 8))),
    (types.Array(types.int64, 3, "C"), DeviceNDArray((1, 2, 2), np.int64)),
    (types.int64, 7), (types.int64, -3), (types.int32, 5), (types.uint8, 200),
    (types.float64, 0.25), (types.float64, -0.0), (types.float32, 1.5),
    (types.float32, np.float32(2.5)), (types.boolean, True), (types.boolean, np.bool_(False)),
    (types.float16, 0.5), (types.complex128, 1 + 2j),
    (types.UniTuple(types.int64, 3), (1, 2, 3)),
    (types.Tuple((types.int64, types.float64, types.boolean)), (4, 0.5, False)),
    (types.Tuple((types.UniTuple(types.int64, 2), types.Array(types.float32, 1, "C"))),
     ((2, 3), DeviceNDArray((4,), pointer=0x2000))),
], ids=repr)
def test_packed_parameters_are_numbas(numba_conversion, ty, value):
    mine = device.pack_arguments((ty,), (value,), lambda a: a.pointer)
    numbas = numbas_parameters((ty,), (value,))
    assert _values(mine) == _values(numbas)
    assert device.same_parameters(mine, numbas)


def test_packing_of_an_unknown_type_is_refused():
    with pytest.raises(device._Unpackable):
        device.pack_arguments((types.CPointer(types.float32),), (0,), None)
    a, b = [ctypes.c_double(1.0)], [ctypes.c_float(1.0)]
    assert not device.same_parameters(a, b)
    assert not device.same_parameters(a, a + a)


def test_packing_needs_a_read_numba_cuda_version():
    def launch_kernel(cufunc_handle, gx, gy, gz, bx, by, bz, sharedmem, hstream, args,
                      cooperative=False):
        pass

    def other_launch_kernel(cufunc_handle, griddim, blockdim, sharedmem, hstream, args):
        pass

    assert device.packing_unavailable_reason("0.30.4", launch_kernel) is None
    assert "not installed" in device.packing_unavailable_reason(None, launch_kernel)
    assert "0.31.0" in device.packing_unavailable_reason("0.31.0", launch_kernel)
    assert "takes" in device.packing_unavailable_reason("0.30.1", other_launch_kernel)


class FakeDriver:
    core_launch = None

    def __init__(self):
        self.calls = []

    def launch_kernel(self, *args, cooperative=False):
        self.calls.append((args, cooperative))

    @staticmethod
    def device_pointer(array):
        return array.pointer


class FakeDispatcher:
    """numba-cuda's dispatcher: ``[grid, block]`` configures; a call resolves and launches."""

    def __init__(self, argument_types):
        self.kernel = NumbaKernel(argument_types)
        self.types = tuple(argument_types)
        self.overloads = {self.types: self.kernel}
        self.resolved = 0

    def typeof_pyval(self, value):
        return self.types[0] if isinstance(value, DeviceNDArray) else self.types[1]

    def __getitem__(self, config):
        dispatcher = self

        class Config:
            griddim, blockdim, stream, sharedmem = (config[0], 1, 1), (config[1], 1, 1), 0, 0

            def __call__(self, *args):
                dispatcher.resolved += 1
                dispatcher.kernel.launch(args, self.griddim, self.blockdim, 0, 0)
        return Config()


@pytest.fixture
def packing(monkeypatch, numba_conversion):
    monkeypatch.setattr(device, "LAUNCH_CACHE", True)
    monkeypatch.setattr(device, "RESOLVED_LAUNCH", True)
    monkeypatch.setattr(device, "PACKED_LAUNCH", True)
    monkeypatch.setattr(device, "_RESOLVED_OK", [True])
    monkeypatch.setattr(device, "_CONFIGURED", {})
    monkeypatch.setattr(device, "ARRAY_CLASS", "DeviceNDArray")
    driver = FakeDriver()
    monkeypatch.setattr(device, "_PACKING", [driver])
    return driver


def test_repeated_launches_are_one_driver_call_each(packing):
    kern = FakeDispatcher((types.Array(types.float32, 1, "C"), types.float64))
    launch = device.configured(kern, 4, 128)
    a = DeviceNDArray((6,), pointer=0x1000)
    for _ in range(5):
        launch(a, 0.5)
    # numba: the first launch (resolving) and the second (teaching the array class)
    assert kern.resolved == 2 and not kern.kernel.launched[2:]
    assert len(packing.calls) == 3
    (args, cooperative), = set((c[0][:9], c[1]) for c in packing.calls)
    assert args == (kern.kernel.handle, 4, 1, 1, 128, 1, 1, 0, 0) and not cooperative
    params = packing.calls[-1][0][9]
    assert _values(params) == _values(numbas_parameters(kern.types, (a, 0.5)))
    assert len(launch.packed) == 1
    # another pointer or scalar value: packed again, with its own parameters
    b = DeviceNDArray((6,), pointer=0x9000)
    launch(b, 0.5)
    launch(a, -0.0)
    launch(a, 0.0)
    assert len(launch.packed) == 4 and kern.resolved == 2
    assert packing.calls[-3][0][9][4].value == 0x9000
    assert packing.calls[-2][0][9][-1].value == -0.0
    assert str(packing.calls[-2][0][9][-1].value) == "-0.0"
    assert str(packing.calls[-1][0][9][-1].value) == "0.0"


def test_parameters_unlike_numbas_take_numbas_path(packing, monkeypatch):
    kern = FakeDispatcher((types.Array(types.float32, 1, "C"), types.float64))
    launch = device.configured(kern, 4, 128)
    monkeypatch.setattr(device, "pack_arguments", lambda *a: [ctypes.c_int(1)])
    a = DeviceNDArray((6,))
    for _ in range(4):
        launch(a, 0.5)
    assert not packing.calls and len(kern.kernel.launched) == 4
    assert "differ" in device.PACKING_STATS["reason"]


def test_a_driver_refusing_packed_arguments_stops_packing(packing, monkeypatch):
    kern = FakeDispatcher((types.Array(types.float32, 1, "C"), types.float64))
    launch = device.configured(kern, 4, 128)
    a = DeviceNDArray((6,))
    for _ in range(3):
        launch(a, 0.5)
    assert len(packing.calls) == 1 and len(kern.kernel.launched) == 2

    def refuse(*args, cooperative=False):
        raise TypeError("takes other arguments")
    monkeypatch.setattr(packing, "launch_kernel", refuse)
    for _ in range(3):
        launch(a, 0.5)
    assert len(kern.kernel.launched) == 5 and device._PACKING[0] is None
    assert "refused" in device.PACKING_STATS["reason"]


def test_array_key_numbers_stand_for_their_contents(monkeypatch):
    monkeypatch.setattr(device, "_ARRAY_KEYS", {})
    monkeypatch.setattr(device, "ARRAY_KEYS_MAX", 3)
    driver = FakeDriver()
    a, same_as_a = DeviceNDArray((6,), pointer=0x1000), DeviceNDArray((6,), pointer=0x1000)
    other = DeviceNDArray((6,), pointer=0x2000)
    strided = DeviceNDArray((2, 3), pointer=0x1000, strides=(4, 8))
    keys = [device._value_keys((x,), DeviceNDArray, driver)[0]
            for x in (a, same_as_a, other, strided)]
    assert keys[0] == keys[1] and len(set(keys)) == 3
    assert device._value_keys((a,), DeviceNDArray, driver)[0] == keys[0]   # kept on the array
    later = device._value_keys((DeviceNDArray((7,), pointer=0x1000),), DeviceNDArray, driver)
    assert later[0] not in keys   # the table started again: a new number, never an old one
    assert device._value_keys((a, 2, 0.5, True, 0, -0.0, (1, 2)), DeviceNDArray, driver) == (
        keys[0], (int, 2), (float, 0.5), (bool, True), (int, 0), (float, -0.0, "-0.0"),
        (tuple, ((int, 1), (int, 2))))
    assert device._value_keys((a, object()), DeviceNDArray, driver) is None


def test_packing_resolves_numba_cudas_driver_functions(monkeypatch):
    """With a numba-cuda version that was read, the driver's launch_kernel and device_pointer
    (the array interface's pointer where the driver has none); otherwise none, with why."""
    from numba import config
    from numba.cuda.cudadrv import driver as cuda_driver
    monkeypatch.setattr(config, "ENABLE_CUDASIM", False)
    monkeypatch.setattr(device.metadata, "version", lambda name: "0.30.4")
    resolved = device._resolve_packing()
    assert resolved.launch_kernel is cuda_driver.launch_kernel
    assert resolved.device_pointer is cuda_driver.device_pointer
    monkeypatch.delattr(cuda_driver, "device_pointer")
    resolved = device._resolve_packing()
    array = type("Array", (), {"__cuda_array_interface__": {"data": (0x5000, False)}})()
    assert resolved.device_pointer(array) == 0x5000
    monkeypatch.setattr(device.metadata, "version", lambda name: "0.31.0")
    assert device._resolve_packing() is None and "0.31.0" in device.PACKING_STATS["reason"]
    monkeypatch.setattr(config, "ENABLE_CUDASIM", True)
    assert device._resolve_packing() is None
    assert "simulator" in device.PACKING_STATS["reason"]


class FakeCoreDriver:
    """numba-cuda 0.30's way to the GPU: cuda.core's ``launch(stream, config, kernel, *params)``
    with a ``LaunchConfig`` built as its ``_Kernel.launch`` builds it."""
    launch_kernel = None
    core_ge_1_0 = True

    def __init__(self):
        self.calls = []

    def core_launch(self, stream, config, kernel, *params):
        self.calls.append((stream, config, kernel, params))

    @staticmethod
    def launch_config(**fields):
        return tuple(sorted(fields.items()))

    @staticmethod
    def device_pointer(array):
        return array.pointer


def test_numba_cuda_030_launches_through_cuda_core_with_numbas_parameters(packing, monkeypatch):
    """numba-cuda 0.30 launches through cuda.core: a packed launch calls it with the kernel
    object of the overload's function, a LaunchConfig as numba builds it and numba's own
    parameters for the values, converted once per value key."""
    core = FakeCoreDriver()
    monkeypatch.setattr(device, "_PACKING", [core])
    kern = FakeDispatcher((types.Array(types.float32, 1, "C"), types.float64))
    kernel_object = object()
    kern.kernel._codelibrary = type("Library", (), {"get_cufunc": lambda _self: type(
        "Function", (), {"kernel": kernel_object})()})()
    converted = []
    numbas_prepare = NumbaKernel._prepare_args

    def counting_prepare(self, ty, value, stream, retr, params):
        converted.append(value)
        return numbas_prepare(self, ty, value, stream, retr, params)
    monkeypatch.setattr(NumbaKernel, "_prepare_args", counting_prepare)
    launch = device.configured(kern, 4, 128)
    a = DeviceNDArray((6,), pointer=0x1000)
    for _ in range(5):
        launch(a, 0.5)
    assert kern.resolved == 2 and len(core.calls) == 3
    assert len(converted) == 2   # numba converted the two arguments once, for the value key
    stream, config, kernel, params = core.calls[-1]
    assert kernel is kernel_object and stream == 0
    assert dict(config) == {"grid": (4, 1, 1), "block": (128, 1, 1), "shmem_size": 0,
                            "is_cooperative": False}
    assert _values(params) == _values(numbas_parameters(kern.types, (a, 0.5)))
    launch(DeviceNDArray((6,), pointer=0x9000), 0.5)
    assert core.calls[-1][3][4].value == 0x9000 and len(launch.packed) == 2


def test_packing_prefers_cuda_core_on_numba_cuda_030(monkeypatch):
    """numba-cuda 0.30.x: cuda.core's launch as its dispatcher imports it; other versions
    (or a dispatcher without it): driver.launch_kernel or nothing."""
    from numba import config
    monkeypatch.setattr(config, "ENABLE_CUDASIM", False)
    monkeypatch.setattr(device.metadata, "version", lambda name: "0.30.4")

    def core_launch(stream, config, kernel, *params):
        pass
    monkeypatch.setattr(numba_dispatcher, "launch", core_launch, raising=False)
    monkeypatch.setattr(numba_dispatcher, "LaunchConfig", dict, raising=False)
    monkeypatch.setattr(numba_dispatcher, "CUDA_CORE_GE_1_0", True, raising=False)
    resolved = device._resolve_packing()
    assert resolved.core_launch is core_launch and resolved.launch_config is dict
    assert resolved.core_ge_1_0 and device.PACKING_STATS["reason"] is None
    monkeypatch.setattr(device.metadata, "version", lambda name: "0.29.0")
    resolved = device._resolve_packing()
    assert resolved is None or resolved.core_launch is None


def test_an_array_without_a_device_pointer_takes_numbas_path(packing, monkeypatch):
    """An object that only looks like a device array (numba-cuda's device_pointer raises a
    bare Exception for it): no packing, numba's own path launches (and judges) it. Found on
    the GPU: the fast-path tests' stand-in arrays raised out of the key instead."""
    def no_pointer(array):
        raise Exception("Not a CUDA memory object.")
    monkeypatch.setattr(packing, "device_pointer", no_pointer)
    kern = FakeDispatcher((types.Array(types.float32, 1, "C"), types.float64))
    launch = device.configured(kern, 4, 128)
    a = DeviceNDArray((6,))
    for _ in range(4):
        launch(a, 0.5)
    assert not packing.calls and len(kern.kernel.launched) == 4 and not launch.packed
