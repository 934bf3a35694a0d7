"""Fused elementwise regions on the device: the executor's fusion (``fusion.py``) writes the
loop body of a run of table-line ops once; here it becomes one numba.cuda kernel, one thread per
element, on the regions' device arrays (registered as the ``'cuda'`` device's ``fusion``).

The plain CUDA path stores every op's result in an array of the compute type; a fused kernel
keeps them in registers, each rounded to the compute type (``float32(...)``) as that store
would round it, so fused and unfused results agree to the last bits the arithmetic allows.
``NNABLA_JIT_CUDA_FUSION=0`` (or ``NNABLA_JIT_CUDA_FAST=0``) leaves CUDA nodes unfused.
"""
import functools
import hashlib
import re
import sys
import types

import numpy as np

from ..ops import scalar_math
from . import device, elementwise, registry

__all__ = ["FUSION", "DeviceFusion", "DEVICE_FUSION"]

FUSION = device.switch("FUSION")
_ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*) = (.*)$")
_CASTS = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}


def _rounded(line, cast):
    """``name = expr`` as ``name = cast(expr)``; stores (``out[i] = v``) unchanged."""
    match = _ASSIGNMENT.match(line)
    if match is None:
        return line
    return "{} = {}({})".format(match.group(1), cast, match.group(2))


def kernel_source(body_lines, params, arrays, dtype):
    """The module text of a fused kernel ``fused(*params)`` running ``body_lines`` at each
    position ``i`` of the (flat) ``arrays``."""
    cast = _CASTS[np.dtype(dtype)]
    body = "".join("        {}\n".format(_rounded(line, cast)) for line in body_lines)
    return (scalar_math.device_prelude() + "from numba import float32, float64\n\n\n"
            "@cuda.jit\ndef fused({}):\n    i = cuda.grid(1)\n    if i < {}.size:\n{}".format(
                ", ".join(params), arrays[0], body))


@functools.lru_cache(maxsize=256)
def _compiled(text):
    """The kernel of a module text (compiled on its first launch), one per text."""
    name = "nnabla_jit_cuda_fused_" + hashlib.sha1(text.encode()).hexdigest()[:16]
    module = types.ModuleType(name, "A fused elementwise region (cuda_ops/fused.py).")
    sys.modules[name] = module
    exec(compile(text, name, "exec"), module.__dict__)
    return module.fused


class DeviceFusion:
    """The ``'cuda'`` device's fused kernels (see ``runners.register_device``)."""

    @staticmethod
    def takes(node):
        """Table-line ops whose forward and backward run the generated elementwise kernels,
        in float32 or float64."""
        op = node.op
        return (FUSION and np.dtype(node.compute_dtype) in _CASTS and not op.data_dependent
                and registry.FORWARD.get(op.name) is elementwise.elementwise_forward
                and (registry.BACKWARD.get(op.name) is elementwise.elementwise_backward
                     or not op.has_backward())
                and registry.handles(op))

    @staticmethod
    def kernel(body_lines, params, arrays, size, dtype):
        """A callable taking the region's arrays then its scalars, launching the kernel."""
        device.load()
        kern = _compiled(kernel_source(body_lines, params, arrays, dtype))
        count = len(arrays)

        def run(*args):
            flat = [device.flat(a) for a in args[:count]]
            device.launch(kern, size, *flat, *args[count:])
        return run

    @staticmethod
    def scalars(values, dtype):
        """As the plain CUDA kernels take them (Python numbers)."""
        return tuple(values)


DEVICE_FUSION = DeviceFusion()
