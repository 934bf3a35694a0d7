"""CUDA kernels of the elementwise ops, generated from their table lines (``ops/elementwise.py``).

Each line's forward expression and derivatives are rendered into one-thread-per-element
numba.cuda kernels: a flat one for same-shaped operands and a strided one for NumPy
broadcasting (each input read through its broadcast strides, on the axes merged as the CPU
kernels merge them). The scalar functions come from ``ops/scalar_math.py``'s table, compiled as
device functions.
A broadcast input's gradient is computed over the output's shape and summed to the input's
shape by the reduction kernel.
"""
import functools
import sys
import types

from ..ops import scalar_math
from ..ops.elementwise import LINES, ElementwiseOp, collapse, names_in
from ..ops.registry import REGISTRY
from . import device, reduction
from .registry import backward, forward

_FORWARD = '''

@cuda.jit
def {name}_forward({ins}, y_{args}):
    i = cuda.grid(1)
    if i < y_.size:
{load}        y_[i] = {expr}


@cuda.jit
def {name}_forward_nd({ins}, y_, shape, {strides}{args}):
    i = cuda.grid(1)
    if i < y_.size:
{load_nd}        y_[i] = {expr}
'''

_BACKWARD = '''

@cuda.jit
def {name}_backward_{k}({ins}, y_, dy_, dx_, accum{args}):
    i = cuda.grid(1)
    if i < dy_.size:
{load}        if accum:
            dx_[i] += {expr}
        else:
            dx_[i] = {expr}


@cuda.jit
def {name}_backward_{k}_nd({ins}, y_, dy_, dx_, accum, shape, {strides}{args}):
    # dx_ is shaped like the output
    i = cuda.grid(1)
    if i < dy_.size:
{load_nd}        if accum:
            dx_[i] += {expr}
        else:
            dx_[i] = {expr}
'''


def _loads(line, expr, with_grad, strided):
    """Statements loading the scalars ``expr`` reads at position i."""
    used = names_in(expr)
    out = []
    for n in line.input_names:
        if n in used:
            index = "flat_offset(i, shape, {}_strides)".format(n) if strided else "i"
            out.append("        {0} = {0}_[{1}]\n".format(n, index))
    for n in (("y", "dy") if with_grad else ()):
        if n in used:
            out.append("        {0} = {0}_[i]\n".format(n))
    return "".join(out)


def _source(line):
    fmt = dict(name=line.ident, ins=", ".join(n + "_" for n in line.input_names),
               args="".join(", " + a for a in line.arg_names),
               strides=", ".join(n + "_strides" for n in line.input_names))
    parts = [_FORWARD.format(expr=line.forward, load=_loads(line, line.forward, False, False),
                             load_nd=_loads(line, line.forward, False, True), **fmt)]
    for k, d in enumerate(line.derivatives):
        if d is not None:
            parts.append(_BACKWARD.format(k=k, expr=d, load=_loads(line, d, True, False),
                                          load_nd=_loads(line, d, True, True), **fmt))
    return "".join(parts)


@functools.cache
def _kernels():
    """The module of every line's kernels (rendered on the first elementwise launch)."""
    module = types.ModuleType("nnabla_jit_cuda_elementwise", "Generated from the table lines.")
    module.flat_offset = device.flat_offset
    sys.modules[module.__name__] = module
    exec(compile(scalar_math.device_prelude() + "".join(_source(line) for line in LINES), module.__name__, "exec"),
         module.__dict__)
    return module


@functools.lru_cache(maxsize=1024)
def _broadcast_layout(out_shape, in_shapes):
    """(shape, per-input strides) of a broadcasting op: the axes merged as the CPU kernels
    merge them, or the full shapes when too many alternating axes remain."""
    collapsed = collapse(out_shape, in_shapes)
    if collapsed is None:
        return out_shape, tuple(device.broadcast_strides(s, out_shape) for s in in_shapes)
    shape, strides = collapsed
    return tuple(int(s) for s in shape), tuple(tuple(int(t) for t in st) for st in strides)


_flat = device.flat


def _scalars(op):
    return tuple(op.args[a] for a in op.line.arg_names)


def elementwise_forward(op, inputs, outputs):
    y = outputs[0]
    kernels = _kernels()
    flat = [_flat(x) for x in inputs]
    if op.same_shape:
        device.launch(getattr(kernels, op.line.ident + "_forward"), y.size, *flat, _flat(y),
                      *_scalars(op))
        return
    shape, strides = _broadcast_layout(tuple(y.shape), tuple(tuple(x.shape) for x in inputs))
    device.launch(getattr(kernels, op.line.ident + "_forward_nd"), y.size, *flat, _flat(y),
                  shape, *strides, *_scalars(op))


def elementwise_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = output_grads[0]
    kernels = _kernels()
    # Inputs the derivatives do not read may be absent; dy stands in (never loaded, and laid
    # out as the output).
    ins = [x if x is not None else dy for x in inputs]
    y = outputs[0] if outputs[0] is not None else dy
    flat = [_flat(x) for x in ins] + [_flat(y), _flat(dy)]
    if not op.same_shape:
        shape, strides = _broadcast_layout(tuple(dy.shape), tuple(tuple(x.shape) for x in ins))
    for k, dx in enumerate(input_grads):
        if not propagate_down[k] or op.line.derivatives[k] is None:
            continue
        name = "{}_backward_{}".format(op.line.ident, k)
        if op.same_shape:
            device.launch(getattr(kernels, name), dy.size, *flat, _flat(dx), accum[k],
                          *_scalars(op))
            continue
        full = dx if dx.shape == dy.shape else device.empty(dy.shape, dx.dtype)
        device.launch(getattr(kernels, name + "_nd"), dy.size, *flat, _flat(full),
                      accum[k] and full is dx, shape, *strides, *_scalars(op))
        if full is not dx:
            reduction.sum_to_shape(full, dx, accum[k])
            device.release(full)


def _table_ops():
    """The registered ops whose kernels are their table line's."""
    return [name for name, cls in REGISTRY.items()
            if issubclass(cls, ElementwiseOp) and cls.forward is ElementwiseOp.forward]


forward(*_table_ops())(elementwise_forward)
backward(*[name for name in _table_ops() if REGISTRY[name].has_backward()])(elementwise_backward)
