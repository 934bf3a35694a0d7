"""The executor's one buffer resolver: which arrays a node's kernels get.

A runner (the plain and fused runners of ``graph.py`` / ``fusion.py``, the CUDA runner of
``cuda_ops``) gets its arrays through *fetches*: ``(getter, dtype)`` pairs prepared once per
plan, whose call ``getter(dtype)`` returns this step's array (buffers may have been freed,
retyped or moved between host and device since the plan was made). What each slot of a node
is — an input read as the compute type, an output overwritten, a gradient accumulated,
overwritten or zeroed, a scratch buffer for an output nobody holds, a temporary for an input
that appears twice — is decided here, once. Where the arrays live is a *memory*: :data:`HOST`
(NumPy arrays, through NdArray's methods) or the device (``cuda_ops.device.MEMORY``), which
gives each kind of slot its getter, and fills an array in place (the gradient seed of
``backward``). ``runners.py`` picks the memory of a node's context.
"""
import functools

import numpy as np

from .ndarray import NdArray, NotComputed
from .ops import common

__all__ = ["HostMemory", "HOST", "forward_runner", "backward_runner", "fetch_all",
           "InputNotComputed"]


class InputNotComputed(NotComputed):
    """A backward kernel needs values that no forward computed (or that clearing freed)."""


def fetch_all(fetches):
    """This step's arrays of ``fetches``."""
    arrays = []
    for get, dtype in fetches:
        arrays.append(get(dtype))
    return arrays


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
    def read_needed(nd):
        """Values a kernel needs; when none are held, :class:`NotComputed`, or zeros (with the
        warning of the 'warn' policy), as ``ops.common.uncomputed_reads()`` says."""
        mode = common.uncomputed_reads()
        if mode == "error":
            return nd.host_needed
        if mode == "zeros":
            return nd.host_as

        def get(dtype):
            if not nd.holds_values:
                common.warn_uncomputed_read("Values a backward kernel needs (NdArray{})".format(nd.shape))
            return nd.host_as(dtype)
        return get

    @staticmethod
    def read_or_absent(nd):
        """An input whose values backward does not read, though its kernel may take its shape
        (Embed's weight, freed by ``clear_no_need_grad``): the held values, else an
        uninitialised array of the right shape and type, whose pages are never touched."""
        def get(dtype):
            a = nd.host_if_held(dtype)
            return np.empty(nd.shape, dtype or nd.dtype) if a is None else a
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
        return nd.overwritten_grad_buffer

    @staticmethod
    def zeroed(nd):
        """A buffer of zeros (a gradient nothing flowed into in this pass)."""
        return nd.zeroed_buffer

    @staticmethod
    def temporary(shape, slot=0):
        """A new buffer of zeros on every call (``slot``: the input it is for)."""
        return functools.partial(np.zeros, tuple(shape))

    @staticmethod
    def add_into(nd, array, dtype):
        """nd's buffer (as ``dtype``) += array."""
        buf = nd.grad_buffer(dtype)
        buf += array

    @staticmethod
    def fill(nd, value):
        """Set every element of ``nd`` to the scalar ``value`` (0: zeroing), here."""
        nd.fill(value)


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
    keeps in their own type) and its outputs."""
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

    # Plain loops, not comprehensions: this runs for every node of every step.
    def run():
        ins = []
        for get, d in ins_f:
            ins.append(get(d))
        outs = []
        for get, d in outs_f:
            outs.append(get(d))
        kernel(ins, outs)
        if finish is not None:
            finish()
    return run


def _missing_values(node, needed):
    """The error for a backward step of ``node`` one of whose ``needed`` values (what, index,
    NdArray) is not held."""
    what, index, nd = next(n for n in needed if not n[2].holds_values)
    return InputNotComputed(
        "backward: {} needs the data of its {} {} (shape {}), which no forward() has computed "
        "or which forward(clear_buffer=True) or clear_no_need_grad freed; call forward() on "
        "this graph (without clearing what backward needs) before backward()".format(
            node.op.name, what, index, nd.shape))


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
    ins_f, needed = [], []   # a getter of None: the slot is None
    for i, v in enumerate(node.inputs):
        if step.needs_input[i]:
            get = memory.read_needed(v._body.data)
            needed.append(("input", i, v._body.data))
        else:
            get = memory.read_or_absent(v._body.data)
        ins_f.append((get, None if i in keep else dt))
    out_dts = op.output_dtypes(dt, len(node._outputs)) if not op.data_dependent else None
    outs_f, douts_f = [], []
    for o, r in enumerate(node._outputs):
        v = r()
        if v is None:   # nobody holds this output: its gradient is zero
            outs_f.append((None, None))
            douts_f.append((memory.zeroed(NdArray(node.output_shapes[o], dt)), dt))
            continue
        if any(pd[i] and op.grad_depends_output_data(i, o) for i in range(len(pd))):
            get = memory.read_needed(v._body.data)
            needed.append(("output", o, v._body.data))
        else:
            get = memory.read_if_held(v._body.data)
        outs_f.append((get, None if out_dts is None else out_dts[o]))
        g = seed if (v is root and seed is not None) else v._body.grad
        douts_f.append(((memory.zeroed if step.zero_outputs[o] else memory.accumulate)(g), dt))
    dins_f, aliased = [], []
    for i, v in enumerate(node.inputs):
        if not pd[i]:
            dins_f.append((None, None))
        elif step.alias[i]:
            dins_f.append((memory.temporary(v.shape, i), dt))
            aliased.append((v._body.grad, i))
        elif step.accum[i]:
            dins_f.append((memory.accumulate(v._body.grad), dt))
        else:
            dins_f.append((memory.overwrite_grad(v._body.grad), dt))
    accum = [a or al for a, al in zip(step.accum, step.alias)]
    add_into = memory.add_into

    # Plain loops, not comprehensions: this runs for every node of every step.
    def run():
        ins, outs, douts, dins = [], [], [], []
        try:
            for get, d in ins_f:
                ins.append(None if get is None else get(d))
            for get, d in outs_f:
                outs.append(None if get is None else get(d))
        except NotComputed:
            raise _missing_values(node, needed) from None
        for get, d in douts_f:
            douts.append(get(d))
        for get, d in dins_f:
            dins.append(None if get is None else get(d))
        kernel(ins, outs, douts, dins, pd, accum)
        for nd, i in aliased:
            add_into(nd, dins[i], dt)
        if finish is not None:
            finish()
    return run
