"""A small ctypes binding of NVIDIA's NVML (nnabla's ``nnabla.utils.nvml``): GPU count, names,
utilization and memory, as nnabla's CLI reports them.

    nvmlInit(); h = nvmlDeviceGetHandleByIndex(0)
    nvmlDeviceGetName(h), nvmlDeviceGetMemoryInfo(h).used, nvmlDeviceGetUtilizationRates(h).gpu
    nvmlShutdown()

Without the NVIDIA driver's ``libnvidia-ml.so.1``, ``nvmlInit()`` raises
``NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)``.
"""
import ctypes
import os
import sys
import threading

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_UNKNOWN = 999

NVML_DEVICE_NAME_BUFFER_SIZE = 64

c_nvmlDevice_t = ctypes.POINTER(type("struct_c_nvmlDevice_t", (ctypes.Structure,), {}))


class c_nvmlUtilization_t(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class c_nvmlMemory_t(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


_MESSAGES = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized", NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported", NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized", NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
    NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded", NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_IRQ_ISSUE: "Interrupt Request Issue",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM", NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
    NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_MEMORY: "Insufficient Memory", NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    """An NVML call failed; ``value`` is NVML's return code."""

    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        if self.value in _MESSAGES:
            return _MESSAGES[self.value]
        try:
            return str(nvmlErrorString(self.value))
        except NVMLError:
            return "NVML Error code {}".format(self.value)


_library = [None]
_functions = {}
_lock = threading.Lock()


def _check_return(ret):
    if ret != NVML_SUCCESS:
        raise NVMLError(ret)
    return ret


def _function(name):
    with _lock:
        if name not in _functions:
            if _library[0] is None:
                raise NVMLError(NVML_ERROR_UNINITIALIZED)
            try:
                _functions[name] = getattr(_library[0], name)
            except AttributeError:
                raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND) from None
        return _functions[name]


def _load_library():
    with _lock:
        if _library[0] is not None:
            return
        if sys.platform.startswith("win"):
            candidates = [os.path.join(os.getenv("WINDIR", "C:/Windows"), "System32/nvml.dll"),
                          os.path.join(os.getenv("ProgramFiles", "C:/Program Files"),
                                       "NVIDIA Corporation/NVSMI/nvml.dll")]
        else:
            candidates = ["libnvidia-ml.so.1"]
        for path in candidates:
            try:
                _library[0] = ctypes.CDLL(path)
                return
            except OSError:
                continue
    raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)


def nvmlErrorString(result):
    fn = _function("nvmlErrorString")
    fn.restype = ctypes.c_char_p
    return fn(result)


def nvmlInit(flags=0):
    """Load the library and initialise NVML."""
    _load_library()
    _check_return(_function("nvmlInitWithFlags")(flags))
    return True


def nvmlShutdown():
    _check_return(_function("nvmlShutdown")())


def nvmlDeviceGetCount():
    count = ctypes.c_uint()
    _check_return(_function("nvmlDeviceGetCount_v2")(ctypes.byref(count)))
    return count.value


def nvmlDeviceGetHandleByIndex(index):
    device = c_nvmlDevice_t()
    _check_return(_function("nvmlDeviceGetHandleByIndex_v2")(ctypes.c_uint(index), ctypes.byref(device)))
    return device


def nvmlDeviceGetName(handle):
    name = ctypes.create_string_buffer(NVML_DEVICE_NAME_BUFFER_SIZE)
    _check_return(_function("nvmlDeviceGetName")(handle, name, ctypes.c_uint(NVML_DEVICE_NAME_BUFFER_SIZE)))
    return name.value


def nvmlDeviceGetUtilizationRates(handle):
    util = c_nvmlUtilization_t()
    _check_return(_function("nvmlDeviceGetUtilizationRates")(handle, ctypes.byref(util)))
    return util


def nvmlDeviceGetMemoryInfo(handle):
    memory = c_nvmlMemory_t()
    _check_return(_function("nvmlDeviceGetMemoryInfo")(handle, ctypes.byref(memory)))
    return memory
