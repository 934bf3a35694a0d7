"""Extension contexts: ``get_extension_context('cpu' | 'cuda' | 'cudnn', device_id, type_config)``.

nnabla ships its backends as ``nnabla_ext.<name>`` modules; here they are built in. ``cpu`` runs
the Numba CPU kernels; ``cuda`` and ``cudnn`` both run the numba.cuda kernels (``cudnn`` only
names the backend as nnabla does, so scripts written for it work unchanged) and need a GPU that
numba.cuda can see, or ``NUMBA_ENABLE_CUDASIM=1``. The contexts equal nnabla's, backend list,
array class and device id included. ``type_config='double'`` is an nnabla_jit addition: the
kernels then compute and store float64.
"""
import types

from .context import Context
from .cuda_ops import device as cuda_device
from .logger import logger

__all__ = ["get_extension_context", "import_extension_module", "list_extensions", "describe_device"]

# For each extension: its array classes (the first is the context's) and the backend list per
# type configuration, as nnabla's extension modules give them.
_ARRAY_CLASSES = {
    "cpu": ["CpuCachedArray", "CpuArray", "CpuDlpackArray"],
    "cuda": ["CudaCachedArray", "CudaCachedUnifiedArray", "CudaCachedHostArray", "CudaArray",
             "CudaDlpackArray"],
}
_ARRAY_CLASSES["cudnn"] = _ARRAY_CLASSES["cuda"]

_BACKENDS = {
    "cpu": {"float": ["cpu:float"], "half": ["cpu:half", "cpu:float"],
            "double": ["cpu:double"]},
    "cuda": {"float": ["cuda:float", "cpu:float"],
             "half": ["cuda:half", "cuda:float", "cpu:float"],
             "mixed_half": ["cuda:mixed_half", "cuda:float", "cpu:float"],
             "double": ["cuda:double", "cpu:double"]},
    "cudnn": {"float": ["cudnn:float", "cuda:float", "cpu:float"],
              "half": ["cudnn:half", "cudnn:float", "cuda:float", "cpu:float"],
              "mixed_half": ["cudnn:mixed_half", "cudnn:float", "cuda:float", "cpu:float"],
              "double": ["cudnn:double", "cuda:double", "cpu:double"]},
}


def _cuda_unavailable_reason():
    """Why the CUDA extensions cannot run here (and how to get a GPU or the simulator), or
    None when numba.cuda sees a GPU or runs its simulator."""
    return cuda_device.unavailable_reason()


def _cuda_available():
    """Whether numba.cuda is installed and sees a GPU (or runs its simulator)."""
    return _cuda_unavailable_reason() is None


def _make_cpu_module():
    mod = types.ModuleType("nnabla_ext.cpu", "The CPU extension (Numba kernels).")

    def context(type_config="float", **kw):
        """The CPU context; ``device_id`` is ignored (nnabla's CPU context has device_id '')."""
        return Context(_backends("cpu", type_config), _ARRAY_CLASSES["cpu"][0], "")

    def device_synchronize(device=""):
        """CPU kernels run synchronously: nothing to wait for."""

    def synchronize(**kw):
        """CPU kernels run synchronously: nothing to wait for."""

    def clear_memory_cache():
        """Release the buffers the CPU backend keeps for reuse."""
        from .ndarray import clear_memory_cache as clear_pool
        clear_pool()

    mod.context = context
    mod.device_synchronize = device_synchronize
    mod.synchronize = synchronize
    mod.clear_memory_cache = clear_memory_cache
    mod.array_classes = lambda: list(_ARRAY_CLASSES["cpu"])
    mod.get_device_count = lambda: 1
    mod.get_devices = lambda: ["0"]
    return mod


def _make_cuda_module(ext_name):
    from numba import cuda

    mod = types.ModuleType("nnabla_ext." + ext_name,
                           "The {} extension (numba.cuda kernels).".format(ext_name))

    def get_device_count():
        return len(cuda.gpus)

    def check_gpu(device_id):
        count = get_device_count()
        if not str(device_id).isdigit() or int(device_id) >= count:
            raise ValueError("{}: device_id={!r} is not one of the {} GPU(s) numba.cuda sees"
                             .format(ext_name, device_id, count))

    def context(device_id="0", type_config="float", **kw):
        """The context on GPU ``device_id``."""
        check_gpu(device_id)
        return Context(_backends(ext_name, type_config), _ARRAY_CLASSES[ext_name][0], str(device_id))

    def device_synchronize(device="0"):
        """Wait until every kernel queued on GPU ``device`` is done."""
        with cuda.gpus[int(device or 0)]:
            cuda.synchronize()

    def synchronize(device_id="0", **kw):
        """Wait until every kernel queued on GPU ``device_id`` is done."""
        device_synchronize(device_id)

    def clear_memory_cache():
        """Release the device memory numba.cuda holds back for reuse."""
        pending = getattr(cuda.current_context(), "deallocations", None)   # None in the simulator
        if pending is not None:
            pending.clear()

    def get_device_properties(device_id="0"):
        """GPU ``device_id``: name, compute capability, total and free memory in bytes."""
        check_gpu(device_id)
        return cuda_device.properties(int(device_id))

    mod.context = context
    mod.get_device_properties = get_device_properties
    mod.check_gpu = check_gpu
    mod.device_synchronize = device_synchronize
    mod.synchronize = synchronize
    mod.clear_memory_cache = clear_memory_cache
    mod.array_classes = lambda: list(_ARRAY_CLASSES[ext_name])
    mod.get_device_count = get_device_count
    mod.get_devices = lambda: [str(i) for i in range(get_device_count())]
    return mod


def _backends(ext_name, type_config):
    try:
        return list(_BACKENDS[ext_name][type_config])
    except KeyError:
        raise ValueError("Unknown data type config is given {} (extension '{}' takes {})".format(
            type_config, ext_name, ", ".join(_BACKENDS[ext_name]))) from None


def import_extension_module(ext_name):
    """The extension module ``ext_name`` ('cpu', 'cuda' or 'cudnn'): ``context(**kw)``,
    ``synchronize``, ``device_synchronize``, ``clear_memory_cache``, ``get_device_count``,
    ``get_devices`` and ``array_classes``, as nnabla's ``nnabla_ext.<name>`` modules have."""
    if ext_name == "cpu":
        return _make_cpu_module()
    if ext_name in ("cuda", "cudnn"):
        reason = _cuda_unavailable_reason()
        if reason is not None:
            logger.error("Extension `{}` does not exist.".format(ext_name))
            raise ImportError("Extension '{}' is not available: {}".format(ext_name, reason))
        return _make_cuda_module(ext_name)
    logger.error("Extension `{}` does not exist.".format(ext_name))
    raise ImportError("Extension '{}' does not exist; nnabla_jit has 'cpu', 'cuda' and 'cudnn'"
                      .format(ext_name))


def list_extensions():
    """Names of the extensions usable here: 'cpu', plus 'cuda' and 'cudnn' with a GPU."""
    return ["cpu", "cuda", "cudnn"] if _cuda_available() else ["cpu"]


def get_extension_context(ext_name, **kw):
    """The context of extension ``ext_name``; ``kw`` goes to its ``context`` function
    (``device_id``, ``type_config`` 'float' | 'half' | 'double', and 'mixed_half' on GPUs).

        ctx = get_extension_context('cudnn', device_id='0', type_config='half')
        nn.set_default_context(ctx)
    """
    if ext_name == "cuda.cudnn":
        logger.warning('Deprecated extension name "cuda.cudnn" passed. Use "cudnn" instead.')
        ext_name = "cudnn"
    return import_extension_module(ext_name).context(**kw)


def describe_device(ext_name="cudnn", device_id="0"):
    """One line naming the device an extension runs on, with its memory for a GPU::

        cudnn device 0: NVIDIA H100 80GB HBM3 (compute 9.0), 79.1 GiB memory, 78.6 GiB free
    """
    if ext_name == "cpu":
        return "cpu: the host's CPU cores (Numba kernels)"
    props = import_extension_module(ext_name).get_device_properties(str(device_id))
    line = "{} device {}: {} (compute {}.{})".format(ext_name, device_id, props["name"],
                                                      *props["compute_capability"])
    if props["total_memory"] is not None:
        line += ", {:.1f} GiB memory, {:.1f} GiB free".format(props["total_memory"] / 2 ** 30,
                                                              props["free_memory"] / 2 ** 30)
    return line
