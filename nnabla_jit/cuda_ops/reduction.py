"""CUDA kernels of the reductions: Sum, Mean, Max, Min, Prod, Norm, ReduceSum, ReduceMean.

The input is seen as the CPU reduction sees it, (kept, reduced, kept) when the reduced axes are
adjacent; other axis sets are read in place through their strides (no transposed copy). One
block reduces one output element: its threads stride over the reduced elements, then combine in
shared memory. Max / Min keep the first position of the extreme value, flat over the reduced
axes in C order, as the CPU kernel does. Prod multiplies, Norm sums |x|^p and takes the p-th
root. Their gradients run one thread per output element over its reduced elements: Prod's
the CPU's exclusive prefix x suffix products (exact where x has zeros), Norm's the CPU's
formula.
"""
import functools
import math

import numpy as np
from numba import float64, int64

from ..ops.reduction import ABS_POW, MAX, MIN, PROD, SUM, ReductionLayout
from . import device
from .device import block_sum, contiguous_strides, flat_offset, store
from .registry import backward, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

BLOCK = 256   # most threads per block (a power of two: the combine halves it)
# A sum with few outputs over many elements (the loss's Sum over a whole batch, a bias's
# gradient) would keep one block per output, a few SMs of a hundred, looping for milliseconds:
# it is split, each output's elements over several blocks writing float64 partial sums, which
# a second launch adds up (NNABLA_JIT_CUDA_SPLIT_REDUCE=0: one block per output).
SPLIT = device.switch("SPLIT_REDUCE")
SPLIT_MIN_REDUCED = 8192      # reduced elements per output from which a sum is split
SPLIT_MAX_OUTPUTS = 128       # outputs up to which it is (more already fill the GPU)
SPLIT_PER_BLOCK = 2048        # fewest reduced elements one partial block sums
SPLIT_MAX_BLOCKS = 1024       # most partial blocks in all


@kernel
def reduce_kernel(x, y, index, kept_shape, kept_strides, red_shape, red_strides, red_size,
                  kind, scale, accum, p):
    """y[j] (+)= scale * (sum | max | min | product | (sum |x|^p)^(1/p)) of x over output j's
    reduced elements; index[j] gets the position of the max / min."""
    values = cuda.shared.array(BLOCK, float64)
    positions = cuda.shared.array(BLOCK, int64)
    j = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    base = flat_offset(j, kept_shape, kept_strides)
    acc = 1.0 if kind == PROD else 0.0
    best = -1
    q = t
    while q < red_size:
        v = x[base + flat_offset(q, red_shape, red_strides)]
        if kind == SUM:
            acc += v
        elif kind == PROD:
            acc *= v
        elif kind == ABS_POW:
            acc += abs(v) ** p
        elif best < 0 or (v > acc if kind == MAX else v < acc):
            acc = v
            best = q
        q += n
    values[t] = acc
    positions[t] = best
    cuda.syncthreads()
    step = n // 2
    while step > 0:
        if t < step:
            o = t + step
            if kind == SUM or kind == ABS_POW:
                values[t] += values[o]
            elif kind == PROD:
                values[t] *= values[o]
            elif positions[o] >= 0 and (
                    positions[t] < 0
                    or (values[o] > values[t] if kind == MAX else values[o] < values[t])
                    or (values[o] == values[t] and positions[o] < positions[t])):
                values[t] = values[o]
                positions[t] = positions[o]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        r = values[0] * scale
        if kind == ABS_POW:
            r = r ** (1.0 / p)
        store(y, j, r, accum)
        if kind == MAX or kind == MIN:
            index[j] = positions[0]


@kernel
def partial_sum_kernel(x, partial, parts, kept_shape, kept_strides, red_shape, red_strides,
                       red_size):
    """partial[j * parts + k] = the sum (in float64) of output j's reduced elements k * BLOCK
    + t + m * parts * BLOCK (t < BLOCK, m = 0, 1, ...): block j * parts + k's share, read in
    runs of BLOCK consecutive positions."""
    values = cuda.shared.array(BLOCK, float64)
    b = cuda.blockIdx.x
    j = b // parts
    k = b - j * parts
    t = cuda.threadIdx.x
    base = flat_offset(j, kept_shape, kept_strides)
    acc = 0.0
    q = k * BLOCK + t
    stride = parts * BLOCK
    while q < red_size:
        if len(red_shape) == 1:
            acc += x[base + q * red_strides[0]]
        else:
            acc += x[base + flat_offset(q, red_shape, red_strides)]
        q += stride
    values[t] = acc
    block_sum(values, t, BLOCK)
    if t == 0:
        partial[b] = values[0]


@kernel
def broadcast_kernel(src, dst, shape, strides, scale, accum):
    """dst[i] (+)= scale * src read through ``strides`` (0 along broadcast axes) at i."""
    i = cuda.grid(1)
    if i < dst.size:
        v = scale * src[flat_offset(i, shape, strides)]
        store(dst, i, v, accum)


@kernel
def arg_backward_kernel(dy, index, dx, kept_shape, kept_strides, red_shape, red_strides):
    """dx at output j's max / min position += dy[j]."""
    j = cuda.grid(1)
    if j < dy.size:
        dx[flat_offset(j, kept_shape, kept_strides)
           + flat_offset(index[j], red_shape, red_strides)] += dy[j]


@functools.lru_cache(maxsize=1024)
def reduction_layout(shape, axes):
    """(kept shape, kept strides, reduced shape, reduced strides) of ``shape`` reduced over
    ``axes``: the CPU's (A, B, C) when the axes are adjacent, else the axes themselves."""
    lay = ReductionLayout(shape, axes)
    if lay.perm is None:
        a, b, c = lay.shape3
        return (a, c), (b * c, 1), (b,), (c,)
    strides = contiguous_strides(shape)
    kept = [ax for ax in range(len(shape)) if ax not in axes]
    return (tuple(shape[ax] for ax in kept) or (1,), tuple(strides[ax] for ax in kept) or (0,),
            tuple(shape[ax] for ax in axes), tuple(strides[ax] for ax in axes))


def reduce(x, y, axes, kind=SUM, scale=1.0, accum=False, index=None, p=1.0):
    """y (+)= scale * reduction of device array x over ``axes`` (y flat over the kept axes;
    ``p``: Norm's power)."""
    kept_shape, kept_strides, red_shape, red_strides = reduction_layout(x.shape, axes)
    red_size = math.prod(red_shape)
    if y.size == 0:
        return
    if index is None:
        index = _no_index()
    parts = _split_parts(kind, y.size, red_size)
    if parts > 1:
        partial = device.workspace("reduction's partial sums", y.size * parts, np.float64)
        device.configured(partial_sum_kernel, y.size * parts, BLOCK)(
            device.flat(x), partial, parts, kept_shape, kept_strides, red_shape, red_strides,
            red_size)
        x, kept_shape, kept_strides = partial, (y.size,), (parts,)
        red_shape, red_strides, red_size = (parts,), (1,), parts
    threads = min(BLOCK, 1 << max(red_size - 1, 0).bit_length())
    device.configured(reduce_kernel, y.size, threads)(
        device.flat(x), device.flat(y), index, kept_shape, kept_strides, red_shape, red_strides,
        red_size, kind, scale, accum, float(p))


def _split_parts(kind, outputs, red_size):
    """Into how many blocks each output's sum is split (1: not split)."""
    if not SPLIT or kind != SUM or outputs > SPLIT_MAX_OUTPUTS or red_size < SPLIT_MIN_REDUCED:
        return 1
    return max(1, min(red_size // SPLIT_PER_BLOCK, SPLIT_MAX_BLOCKS // outputs))


@functools.cache
def _no_index():
    return device.empty((1,), np.int64)


def sum_to_shape(full, dst, accum):
    """dst (+)= full summed over the axes along which dst's shape broadcasts to full's."""
    pad = full.ndim - dst.ndim
    padded = (1,) * pad + tuple(dst.shape)
    axes = tuple(ax for ax in range(full.ndim) if padded[ax] == 1 and full.shape[ax] != 1)
    reduce(full, dst, axes, accum=accum)


@functools.lru_cache(maxsize=1024)
def _broadcast_back_strides(shape, axes):
    """Strides reading the reduced output (flat over the kept axes) at each input position."""
    kept = tuple(s for ax, s in enumerate(shape) if ax not in axes)
    kept_strides = iter(contiguous_strides(kept))
    return tuple(0 if ax in axes else next(kept_strides) for ax in range(len(shape)))


def _sum_scale(op):
    return 1.0 / max(op.layout.size_reduced, 1) if op.mean else 1.0


def broadcast_into(src, dst, strides, scale=1.0, accum=False):
    """dst (+)= scale * src, src read through ``strides`` over dst's shape (0 where it is
    broadcast)."""
    shape = tuple(dst.shape) or (1,)
    device.launch(broadcast_kernel, dst.size, device.flat(src), device.flat(dst), shape,
                  strides or (0,), scale, accum)


@forward("Sum", "Mean", "ReduceSum", "ReduceMean")
def sum_forward(op, inputs, outputs):
    reduce(inputs[0], outputs[0], op.axes, SUM, _sum_scale(op))


@backward("Sum", "Mean", "ReduceSum", "ReduceMean")
def sum_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dx = input_grads[0]
    broadcast_into(output_grads[0], dx, _broadcast_back_strides(tuple(dx.shape), op.axes),
                   _sum_scale(op), accum[0])


@forward("Max", "Min")
def arg_reduction_forward(op, inputs, outputs):
    x = inputs[0]
    n_out = outputs[0].size
    values = device.empty((n_out,), x.dtype) if op.only_index else outputs[0]
    index = getattr(op, "saved_device_index", None)
    if index is None or index.size != n_out:
        index = device.empty((n_out,), np.int64)
    reduce(x, values, op.axes, op.kind, index=index)
    op.saved_device_index = index   # backward routes dy through it
    if op.only_index:
        device.copy(index, outputs[0])
    elif op.with_index:
        device.copy(index, outputs[1])


@backward("Max", "Min")
def arg_reduction_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    if op.only_index:
        raise NotImplementedError("{}: only_index=True has no gradient".format(op.name))
    dx, dy = input_grads[0], output_grads[0]
    if not accum[0]:
        device.fill(dx, 0)
    layout = reduction_layout(dx.shape, op.axes)
    device.launch(arg_backward_kernel, dy.size, device.flat(dy), op.saved_device_index,
                  device.flat(dx), *layout)


# ------------------------------------------------------------------------------ Prod, Norm
@kernel
def product_norm_backward_kernel(x, y, dy, dx, prefix, kept_shape, kept_strides, red_shape,
                                 red_strides, red_size, kind, p, accum):
    """dx (+)= the gradient of output j's reduced elements: Prod's dy times the product of the
    others (``prefix`` holds the products before each), Norm's dy sign(x) |x|^(p-1) / y^(p-1)
    (y taken as 1 where it is 0)."""
    j = cuda.grid(1)
    if j < dy.size:
        base = flat_offset(j, kept_shape, kept_strides)
        g = dy[j]
        if kind == PROD:
            left = 1.0
            for q in range(red_size):
                at = base + flat_offset(q, red_shape, red_strides)
                prefix[at] = left
                left *= x[at]
        norm = y[j] if y[j] > 0 else 1.0
        right = 1.0
        for q in range(red_size - 1, -1, -1):
            at = base + flat_offset(q, red_shape, red_strides)
            v = x[at]
            if kind == PROD:
                d = g * prefix[at] * right
                right *= v
            else:
                sign = 1.0 if v > 0 else (-1.0 if v < 0 else 0.0)
                d = g * sign * abs(v) ** (p - 1.0) * norm ** (1.0 - p)
            store(dx, at, d, accum)


@forward("Prod", "Norm")
def product_norm_forward(op, inputs, outputs):
    reduce(inputs[0], outputs[0], op.axes, op.kind, p=getattr(op, "p", 1.0))


@backward("Prod", "Norm")
def product_norm_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    x, dy, dx = inputs[0], output_grads[0], input_grads[0]
    layout = reduction_layout(tuple(x.shape), op.axes)
    prefix = device.empty((x.size,), x.dtype) if op.kind == PROD else device.flat(dx)
    y = outputs[0] if op.kind == ABS_POW else dy
    device.launch(product_norm_backward_kernel, dy.size, device.flat(x), device.flat(y),
                  device.flat(dy), device.flat(dx), prefix, *layout,
                  int(np.prod(layout[2])), op.kind, float(getattr(op, "p", 1.0)), accum[0])
    if op.kind == PROD:
        device.release(prefix)
