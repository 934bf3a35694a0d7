"""The CUDA path: numba.cuda kernels for the nodes built under a 'cuda' or 'cudnn' context.

The executor hands such nodes to :func:`run_node_forward_cuda` / :func:`run_node_backward_cuda`.
An op with CUDA launchers (``registry.FORWARD`` / ``registry.BACKWARD``, one family module per
family of ``ops/``) runs on device arrays: its inputs are copied up when the host holds the newer
values, its outputs stay on the device until ``.data`` is read (see ``device.py``). Every other
op runs its CPU kernels on host copies, so any graph runs under a CUDA context; so does every op
under ``type_config='half'``, whose float16 storage the CPU path implements.

Solvers update parameters on the host: ``update()`` reads ``param.data`` and ``param.grad``,
which copies the gradients down, and the next forward copies the updated parameters up.

Importing this package does not import numba.cuda; the first node run does (``device.load``),
and raises ImportError when numba.cuda sees no GPU and the simulator is off.
"""
from .. import graph
from . import device, registry
from . import elementwise, reduction, affine, math, activation, loss  # noqa: F401  (register)

__all__ = ["CUDA_OPS", "run_node_forward_cuda", "run_node_backward_cuda"]

CUDA_OPS = frozenset(registry.FORWARD)   # ops with CUDA kernels (the "cuda" column)


def _on_device(node, launchers):
    """The op's launcher when this node runs on the device, else None (CPU kernels)."""
    device.load()
    if node.storage_dtype != node.compute_dtype or node.op.data_dependent:
        return None
    return launchers.get(node.op.name)


def _output_buffer(node, k, dtype):
    """The device array output ``k`` is written into (scratch when nobody holds the output)."""
    v = node._outputs[k]()
    if v is None:
        if node._scratch is None:
            node._scratch = {}
        key = ("cuda", k)
        if key not in node._scratch:
            node._scratch[key] = device.empty(node.output_shapes[k], dtype)
        return node._scratch[key]
    return device.write(v._body.data, dtype)


def run_node_forward_cuda(node):
    """Run one node built under a CUDA context."""
    launch = _on_device(node, registry.FORWARD)
    if launch is None:
        graph.run_node_forward(node, on_host=True)
        return
    op = node.op
    dt = node.compute_dtype
    keep = op.keep_input_dtypes
    ins = [device.read(v._body.data, None if i in keep else dt) for i, v in enumerate(node.inputs)]
    out_dts = op.output_dtypes(dt, len(node._outputs))
    outs = [_output_buffer(node, k, out_dts[k]) for k in range(len(node._outputs))]
    launch(op, ins, outs)


def _fresh_on_device(nd):
    return nd._device is not None and not nd._device.device_stale


def run_node_backward_cuda(step):
    """Run one backward step of a node built under a CUDA context."""
    node = step.node
    launch = _on_device(node, registry.BACKWARD)
    if launch is None:
        graph.run_node_backward(step, on_host=True)
        return
    op = node.op
    dt = node.compute_dtype
    keep = op.keep_input_dtypes
    pd = step.propagate_down
    # Data the backward does not read is passed only when it is on the device already.
    ins = [device.read(v._body.data, None if i in keep else dt)
           if step.needs_input[i] or _fresh_on_device(v._body.data) else None
           for i, v in enumerate(node.inputs)]
    outs, douts = [], []
    for o, r in enumerate(node._outputs):
        v = r()
        if v is None:   # nobody holds this output: its gradient is zero
            outs.append(None)
            douts.append(device.zeros(node.output_shapes[o], dt))
            continue
        needed = any(pd[i] and op.grad_depends_output_data(i, o) for i in range(len(pd)))
        outs.append(device.read(v._body.data, dt)
                    if needed or _fresh_on_device(v._body.data) else None)
        if step.zero_outputs[o]:
            g = device.write(v._body.grad, dt)
            device.fill(g, 0)
        else:
            g = device.read(v._body.grad, dt)
        douts.append(g)
    dins, aliased = [], []
    for i, v in enumerate(node.inputs):
        if not pd[i]:
            dins.append(None)
        elif step.alias[i]:   # the same buffer as an earlier input: a temporary, added after
            tmp = device.zeros(v._body.shape, dt)
            dins.append(tmp)
            aliased.append((v._body.grad, tmp))
        elif step.accum[i]:
            dins.append(device.accumulator(v._body.grad, dt))
        else:
            dins.append(device.write(v._body.grad, dt))
    accum = [a or al for a, al in zip(step.accum, step.alias)]
    launch(op, ins, outs, douts, dins, pd, accum)
    for nd, tmp in aliased:
        device.add_into(nd._device.array, tmp)
