"""The CUDA path: numba.cuda kernels for the nodes built under a 'cuda' or 'cudnn' context.

The package registers the device ``'cuda'`` in the runner table (``nnabla_jit/runners.py``), and
the executor asks it, through that table, for the runners of such nodes
(:func:`forward_runner_cuda` / :func:`backward_runner_cuda`). An op with CUDA launchers
(``registry.FORWARD`` / ``registry.BACKWARD``, one family module per family of ``ops/``) runs on
device arrays: its inputs are copied up when the host holds the newer values, its outputs stay
on the device until ``.data`` is read (see ``device.py``). For every other op the device answers
None and the host runners of ``runners.py`` run its CPU kernels on host copies, so any graph
runs under a CUDA context; so does every op under ``type_config='half'``, whose float16 storage
the CPU path implements.

Solvers update a parameter on the device when a CUDA backward wrote its gradient there
(``solver_steps.py``): parameters, gradients and solver states then stay on the device.
``device.stats()`` counts the copies between host and device.

Importing this package does not import numba.cuda; the first node run does (``device.load``),
and raises ImportError when numba.cuda sees no GPU and the simulator is off.
"""
from .. import buffers, runners
from ..ops.common import KeepsInputType
from . import device, registry
from . import elementwise, reduction, affine, math, activation, loss  # noqa: F401  (register)
from . import convolution, pooling, normalization, array  # noqa: F401  (register)
from . import cumulative, indexing  # noqa: F401  (register)
from . import convolution_variants  # noqa: F401  (register)
from . import adjoint  # noqa: F401  (register)
from . import recurrent, quantization, linalg, geometric, signal, stochastic  # noqa: F401  (register)
from . import arithmetic, special, validation  # noqa: F401  (register)
from . import solver_steps  # noqa: F401  (its kernels are bound with the others)
from .fused import DEVICE_FUSION

__all__ = ["CUDA_OPS", "forward_runner_cuda", "backward_runner_cuda"]

CUDA_OPS = frozenset(registry.FORWARD)   # ops with CUDA kernels (the "cuda" column)


def _on_device(node, launchers):
    """The op's launcher when this node runs on the device, else None (CPU kernels)."""
    device.load()
    # Identity and Unlink are data-dependent only for their output's dtype (the input's, on the
    # host); on the device they give the compute type (docs/cuda.md)
    if node.storage_dtype != node.compute_dtype or (node.op.data_dependent
                                                     and not isinstance(node.op, KeepsInputType)):
        return None
    if not registry.handles(node.op):
        return None
    return launchers.get(node.op.name)


def forward_runner_cuda(node):
    """A no-argument callable running the forward of a node built under a CUDA context: its
    launcher on device arrays (resolved as every runner's, ``buffers.py``); None when the op
    has none (the host runs it, on host copies)."""
    launch = _on_device(node, registry.FORWARD)
    if launch is None:
        return None
    op = node.op
    updates = registry.UPDATES.get(op.name)
    finish = None
    if updates is not None:
        def finish():
            for k in updates(op):
                device.written_on_device(node.inputs[k]._body.data)
    return buffers.forward_runner(node, device.MEMORY, lambda ins, outs: launch(op, ins, outs),
                                  finish)


def backward_runner_cuda(step, root=None, seed=None):
    """As :func:`forward_runner_cuda`, for one backward step."""
    launch = _on_device(step.node, registry.BACKWARD)
    if launch is None:
        return None
    op = step.node.op
    return buffers.backward_runner(
        step, device.MEMORY,
        lambda ins, outs, douts, dins, pd, accum: launch(op, ins, outs, douts, dins, pd, accum),
        seed, root)


runners.register_device("cuda", forward_runner_cuda, backward_runner_cuda, device.MEMORY,
                        DEVICE_FUSION)
