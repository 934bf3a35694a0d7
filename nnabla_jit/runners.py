"""Which callable runs a node: the host runners, and the table that devices register into.

A *runner* is a no-argument callable that runs one node's forward (or one backward step) on this
step's arrays; the executor (``graph.py``) asks for one per node when it makes a plan and calls
it every step. This module picks it:

- a ``PythonFunction`` node runs its own ``forward_impl``/``backward_impl``;
- a node built under a device context (``'cuda'``, ``'cudnn'``) asks the device registered for
  it (:func:`register_device`); the device answers None for what it does not run (an op
  without device kernels, float16 storage, shapes that follow the data), which runs here;
- on the host: a data-dependent op names its output shapes from the input values first, an
  in-place view (``Reshape(inplace=True)``) shares its input's buffer, ``type_config='half'``
  stores float16 results after computing in float32, and every other op runs its kernels on
  the arrays of the buffer resolver (``buffers.py``).

Devices sit above this module and import it; it never imports them, so adding a device is one
package that calls :func:`register_device`, with no edit to the executor.
"""
import functools

import numpy as np

from . import buffers

__all__ = ["Device", "register_device", "device_of", "memory_of", "forward_runner",
           "backward_runner", "data_dependent_shapes"]

HOST_DEVICE = "cpu"


class Device:
    """What a device package registers (see :func:`register_device`)."""

    __slots__ = ("name", "forward_runner", "backward_runner", "memory", "fusion")

    def __init__(self, name, forward_runner, backward_runner, memory, fusion=None):
        self.name = name
        self.forward_runner = forward_runner
        self.backward_runner = backward_runner
        self.memory = memory
        self.fusion = fusion


DEVICES = {}   # Context.device ('cuda') -> Device


def register_device(name, forward_runner, backward_runner, memory, fusion=None):
    """Run the nodes whose context names device ``name`` through this device.

    ``forward_runner(node)`` and ``backward_runner(step, root, seed)`` return a runner on the
    device, or None to have the host run that node. ``memory`` is the device's side of the
    buffer resolver (``buffers.HostMemory``'s methods, on device arrays). ``fusion``, if given,
    builds the device's kernels of fused elementwise regions (``fusion.py``'s ``HostFusion``
    is the host's): ``takes(node)``, ``kernel(body_lines, params, arrays, size, dtype)`` and
    ``scalars(values, dtype)``.
    """
    if name == HOST_DEVICE:
        raise ValueError("register_device: {!r} is the host's; a device needs a name of its own"
                         .format(name))
    DEVICES[name] = Device(name, forward_runner, backward_runner, memory, fusion)


def device_of(node):
    """The registered device that ``node``'s context names, or None for the host."""
    name = node.ctx.device
    if name == HOST_DEVICE:
        return None
    device = DEVICES.get(name)
    if device is None:
        raise RuntimeError("{}: no device registered for context device {!r} (registered: {})"
                           .format(node.op.name, name, sorted(DEVICES) or "none"))
    return device


def memory_of(node):
    """Where the arrays of ``node``'s context live (``buffers.HOST`` for the host, or for no
    node)."""
    device = None if node is None else device_of(node)
    return buffers.HOST if device is None else device.memory


# ---------------------------------------------------------------------------- forward
def forward_runner(node):
    """A no-argument callable running ``node``'s forward; its buffers are resolved once
    (``buffers.py``), so a call fetches this step's arrays and calls the op's kernels."""
    op = node.op
    if op.python_level:
        return lambda: op.forward(node.inputs, node.outputs)
    device = device_of(node)
    if device is not None:
        run = device.forward_runner(node)
        if run is not None:
            return run
    if op.data_dependent:
        return functools.partial(_run_data_dependent, node)
    if op.inplace_data(0) == 1 and node.storage_dtype == node.compute_dtype:
        return functools.partial(_run_as_view, node)
    if node.storage_dtype != node.compute_dtype:
        return buffers.forward_runner(node, buffers.HOST, op.forward,
                                      functools.partial(_store_half, node))
    return buffers.forward_runner(node, buffers.HOST, op.forward)


def _run_as_view(node):
    """An op whose output shares its input's buffer (``Reshape(inplace=True)``, nnabla's
    INPLACE_NOT_MODIFY): the output holds a view of the input's values, so a later write to
    either is seen by the other, as in nnabla."""
    out = node._outputs[0]()
    if out is not None:
        out._body.data.hold_view(node.inputs[0]._body.data.host_as(None))


def _run_data_dependent(node):
    """Forward of an op whose output shapes or dtypes follow the input values: the op names
    them from the inputs; an output whose shape changes is reset (invalidating the plans,
    which hold buffers and seeds of the old shape)."""
    dt = node.compute_dtype
    keep = node.op.keep_input_dtypes
    ins = [v._body.data.host_as(None if i in keep else dt) for i, v in enumerate(node.inputs)]
    specs = node.op.output_specs(ins)
    outs = []
    for k, (shape, dtype) in enumerate(specs):
        node.output_shapes[k] = tuple(shape)
        v = node._outputs[k]()
        if v is None:
            outs.append(np.empty(shape, dtype))
            continue
        if v._body.shape != tuple(shape):
            v.reset_shape(shape, force=True)
        outs.append(v._body.data.output_buffer(np.dtype(dtype)))
    node.op.forward(ins, outs)
    if node.storage_dtype != dt:
        _store_half(node)


def data_dependent_shapes(op, variables, compute_dtype):
    """Output shapes of a data-dependent op from the inputs that already hold data (graph-build
    time, as nnabla's setup reads them), or None when the op needs inputs not computed yet."""
    ins = [v._body.data.host_if_held(None if i in op.keep_input_dtypes else compute_dtype)
           for i, v in enumerate(variables)]
    specs = op.output_specs(ins)
    return None if specs is None else [tuple(shape) for shape, _ in specs]


def _store_half(node):
    """Under type_config='half' results are kept in float16 (computed in float32)."""
    for r in node._outputs:
        v = r()
        if v is not None and v._body.data.dtype == node.compute_dtype:
            v._body.data.store_as(node.storage_dtype)


# ---------------------------------------------------------------------------- backward
def backward_runner(step, root=None, seed=None):
    """A no-argument callable running one backward step with its buffers resolved once
    (``seed`` stands for the gradient of ``root``)."""
    node = step.node
    op = node.op
    if op.python_level:
        return functools.partial(_run_python_backward, step)
    device = device_of(node)
    if device is not None:
        run = device.backward_runner(step, root, seed)
        if run is not None:
            return run
    finish = None
    if node.storage_dtype != node.compute_dtype:
        finish = functools.partial(_store_half_grads, node, step.propagate_down)
    return buffers.backward_runner(step, buffers.HOST, op.backward, seed, root, finish)


def _run_python_backward(step):
    """Backward of a PythonFunction node (its backward_impl works on the Variables)."""
    node = step.node
    pd = step.propagate_down
    for i, v in enumerate(node.inputs):
        if pd[i]:
            v._body.grad.grad_buffer(node.compute_dtype)
    for o, v in enumerate(node.outputs):
        if v is not None and step.zero_outputs[o]:
            v._body.grad.zero()
    node.op.backward(node.inputs, node.outputs, pd, step.accum)
    _store_half_grads(node, pd)


def _store_half_grads(node, propagate_down):
    """Under type_config='half' input gradients are kept in float16, as nnabla keeps them (so
    a loss scale too large for float16 overflows to inf, which dynamic loss scaling detects);
    accumulation reads them back into float32."""
    if node.storage_dtype == node.compute_dtype:
        return
    for v, want in zip(node.inputs, propagate_down):
        if want and v._body.grad.dtype == node.compute_dtype:
            v._body.grad.store_as(node.storage_dtype)
