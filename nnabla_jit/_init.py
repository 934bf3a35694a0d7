"""CPU array preferences and the list of available contexts (what nnabla's ``nnabla._init``
gives at the top level: ``nn.prefer_cached_array``, ``nn.array_classes``, ...).

nnabla chooses among array classes for its memory; here every CPU array is a NumPy buffer and
cleared buffers are always pooled for reuse (``ndarray.pooled_empty``), so the preference only
orders the class names reported, exactly as nnabla reorders them.
"""
from .ndarray import _CLASS_POOL, _POOL
from .ndarray import clear_memory_cache as _clear_pool

__all__ = ["prefer_cached_array", "reset_array_preference", "array_classes",
           "add_available_context", "available_contexts", "clear_memory_cache",
           "print_memory_cache_map", "get_device_count", "get_devices", "device_synchronize"]

_DEFAULT_CLASSES = ["CpuArray", "CpuCachedArray", "CpuDlpackArray"]
_classes = list(_DEFAULT_CLASSES)

# nnabla's list of extension names usable in contexts ('cpu' always, extensions add theirs).
available_contexts = ["cpu"]


def _prefer(name, prefer):
    _classes.remove(name)
    if prefer:
        _classes.insert(0, name)
    else:
        _classes.append(name)


def prefer_cached_array(prefer):
    """Put ``CpuCachedArray`` first (True) or last (False) among the CPU array classes."""
    _prefer("CpuCachedArray", bool(prefer))


def reset_array_preference():
    """Back to nnabla's registration order of the CPU array classes."""
    _classes[:] = _DEFAULT_CLASSES


def array_classes():
    """The CPU array class names, preferred first."""
    return list(_classes)


def add_available_context(ctx):
    """Record an extension name (e.g. 'cudnn') as usable in contexts."""
    if ctx not in available_contexts:
        available_contexts.append(ctx)


def clear_memory_cache():
    """Release the CPU buffers kept for reuse."""
    _clear_pool()


def print_memory_cache_map():
    """Print the pooled CPU buffers (shape, type: count; large ones by size: count)."""
    for (shape, dtype), bucket in sorted(_POOL.items(), key=str):
        print("{} {}: {}".format(shape, dtype, len(bucket)))
    for nbytes, bucket in sorted(_CLASS_POOL.items()):   # large buffers: by size, any shape
        print("{} bytes: {}".format(nbytes, len(bucket)))


def get_device_count():
    """The CPU counts as one device, as in nnabla."""
    return 1


def get_devices():
    return ["0"]


def device_synchronize(device=""):
    """CPU kernels run synchronously: nothing to wait for."""


prefer_cached_array(True)   # nnabla's import does the same
