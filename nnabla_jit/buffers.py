"""The executor's one buffer resolver: which arrays a node's kernels get.

A runner (the plain and fused runners of ``graph.py`` / ``fusion.py``, the CUDA runner of
``cuda_ops``) gets its arrays through *fetches*: ``(getter, dtype)`` pairs prepared once per
plan, whose call ``getter(dtype)`` returns this step's array (buffers may have been freed,
retyped or moved between host and device since the plan was made). What each slot of a node
is — an input read as the compute type, an output overwritten, a gradient accumulated,
overwritten or zeroed, a scratch buffer for an output nobody holds, a temporary for an input
that appears twice — is decided here, once. Where the arrays live is a *memory*: :data:`HOST`
(NumPy arrays, through NdArray's methods) or the device (``cuda_ops.device.MEMORY``), which
gives each kind of slot its getter.
"""
import functools

import numpy as np

from .ndarray import NdArray

__all__ = ["HostMemory", "HOST", "forward_runner", "backward_runner", "fetch_all",
           "InputNotComputed"]


class InputNotComputed(RuntimeError):
    """A backward kernel needs values that no forward computed (or that clearing freed)."""


def _nothing(dtype):
    return None


def fetch_all(fetches):
    """This step's arrays of ``fetches``."""
    return [get(dtype) for get, dtype in fetches]


class HostMemory:
    """Arrays on the host: NumPy buffers of NdArrays (synced down from the device if newer)."""

    @staticmethod
    def read(nd):
        """Values to read, converted to the asked type (a copy then); zeros if none held."""
        return nd.host_as

    @staticmethod
    def read_if_held(nd):
        """Values a kernel may use if at hand, or None when none are held."""
        return nd.host_if_held

    @staticmethod
    def read_needed(nd, missing):
        """Values a kernel needs; ``raise missing()`` when none are held."""
        host_if_held = nd.host_if_held

        def get(dtype):
            a = host_if_held(dtype)
            if a is None:
                raise missing()
            return a
        return get

    @staticmethod
    def write(nd):
        """A buffer a kernel overwrites."""
        return nd.output_buffer

    @staticmethod
    def accumulate(nd):
        """A buffer a kernel adds into, holding the current values (zeros if none)."""
        return nd.grad_buffer

    @staticmethod
    def overwrite_grad(nd):
        """A gradient buffer a kernel overwrites (``accum`` False)."""
        return functools.partial(nd.grad_buffer, zero=False)

    @staticmethod
    def zeroed(nd):
        """A buffer of zeros (a gradient nothing flowed into in this pass)."""
        def get(dtype):
            a = nd.grad_buffer(dtype, False)
            a.fill(0)
            return a
        return get

    @staticmethod
    def temporary(shape):
        """A new buffer of zeros on every call."""
        return functools.partial(np.zeros, tuple(shape))

    @staticmethod
    def add_into(nd, array, dtype):
        """nd's buffer (as ``dtype``) += array."""
        buf = nd.grad_buffer(dtype)
        buf += array


HOST = HostMemory()


def _output_nds(node, dtypes):
    """The NdArrays a node's outputs are written into: an output nobody holds any more gets a
    scratch NdArray of its own (its buffer is kept for the next step)."""
    nds = []
    for k, r in enumerate(node._outputs):
        v = r()
        nds.append(v._body.data if v is not None else NdArray(node.output_shapes[k], dtypes[k]))
    return nds


def forward_fetches(node, memory):
    """Fetches of a node's forward: its inputs (as the compute type, except the inputs the op
    keeps in their own type) and its outputs; and the NdArrays of the held outputs."""
    op = node.op
    dt = node.compute_dtype
    keep = op.keep_input_dtypes
    ins = [(memory.read(v._body.data), None if i in keep else dt)
           for i, v in enumerate(node.inputs)]
    out_dts = op.output_dtypes(dt, len(node._outputs))
    outs = [(memory.write(nd), d) for nd, d in zip(_output_nds(node, out_dts), out_dts)]
    return ins, outs


def forward_runner(node, memory, kernel, finish=None):
    """A no-argument callable running ``kernel(ins, outs)`` on this step's arrays of ``node``
    in ``memory``, then ``finish()`` if given."""
    ins_f, outs_f = forward_fetches(node, memory)
    if finish is None:
        def run():
            kernel([get(d) for get, d in ins_f], [get(d) for get, d in outs_f])
    else:
        def run():
            kernel([get(d) for get, d in ins_f], [get(d) for get, d in outs_f])
            finish()
    return run


def _missing_values(node, what, index):
    v = node.inputs[index] if what == "input" else node._outputs[index]()
    return InputNotComputed(
        "backward: {} needs the data of its {} {} (shape {}), which no forward() has computed "
        "or which forward(clear_buffer=True) or clear_no_need_grad freed; call forward() on "
        "this graph (without clearing what backward needs) before backward()".format(
            node.op.name, what, index, None if v is None else v.shape))


def backward_runner(step, memory, kernel, seed=None, root=None, finish=None):
    """A no-argument callable running one backward step: ``kernel(ins, outs, douts, dins,
    propagate_down, accum)`` on this step's arrays in ``memory``, then ``finish()``.

    ``seed`` stands for the gradient of ``root`` (the plan's). Data the kernel needs must be
    held: a step whose needed input or output was never computed, or was freed, raises
    :class:`InputNotComputed` rather than reading zeros. An input whose gradient buffer is the
    same as an earlier input's gets a temporary, added in afterwards.
    """
    node = step.node
    op = node.op
    dt = node.compute_dtype
    pd = step.propagate_down
    keep = op.keep_input_dtypes
    ins_f = []
    for i, v in enumerate(node.inputs):
        if step.needs_input[i]:
            get = memory.read_needed(v._body.data, functools.partial(_missing_values, node, "input", i))
        else:
            get = memory.read_if_held(v._body.data)
        ins_f.append((get, None if i in keep else dt))
    out_dts = op.output_dtypes(dt, len(node._outputs)) if not op.data_dependent else None
    outs_f, douts_f = [], []
    for o, r in enumerate(node._outputs):
        v = r()
        if v is None:   # nobody holds this output: its gradient is zero
            outs_f.append((_nothing, None))
            douts_f.append((memory.zeroed(NdArray(node.output_shapes[o], dt)), dt))
            continue
        if any(pd[i] and op.grad_depends_output_data(i, o) for i in range(len(pd))):
            get = memory.read_needed(v._body.data, functools.partial(_missing_values, node, "output", o))
        else:
            get = memory.read_if_held(v._body.data)
        outs_f.append((get, None if out_dts is None else out_dts[o]))
        g = seed if (v is root and seed is not None) else v._body.grad
        douts_f.append(((memory.zeroed if step.zero_outputs[o] else memory.accumulate)(g), dt))
    dins_f, aliased = [], []
    for i, v in enumerate(node.inputs):
        if not pd[i]:
            dins_f.append((_nothing, None))
        elif step.alias[i]:
            dins_f.append((memory.temporary(v.shape), dt))
            aliased.append((v._body.grad, i))
        elif step.accum[i]:
            dins_f.append((memory.accumulate(v._body.grad), dt))
        else:
            dins_f.append((memory.overwrite_grad(v._body.grad), dt))
    accum = [a or al for a, al in zip(step.accum, step.alias)]
    add_into = memory.add_into

    def run():
        ins = [get(d) for get, d in ins_f]
        outs = [get(d) for get, d in outs_f]
        douts = [get(d) for get, d in douts_f]
        dins = [get(d) for get, d in dins_f]
        kernel(ins, outs, douts, dins, pd, accum)
        for nd, i in aliased:
            add_into(nd, dins[i], dt)
        if finish is not None:
            finish()
    return run
