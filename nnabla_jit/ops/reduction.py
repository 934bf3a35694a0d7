"""Reductions over a set of axes: Sum, Mean, Max, Min, Prod, Norm, ReduceSum, ReduceMean.

Every reduction sees its input as a 3-d array (kept, reduced, kept) when the reduced axes are
adjacent (the usual case: one axis, all axes, or leading/trailing ones) and reduces the middle
axis with one parametrised kernel. Other axis sets are first transposed to (kept, reduced).
"""
import numba
import numpy as np
from numba import njit, prange

from ..deferred_compile import defer
from .indexing import scatter_lines
from .kernels import parallel_kernel, uses_parallel
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
BROADCAST_TASKS = 64   # broadcast_back's work items at least: a few per thread
@parallel_kernel
def broadcast_back(dy, dx, scale, accum):
    """dx[a, b, c] (+)= scale * dy[a, c]: the gradient of a sum over b. The b axis is cut into
    blocks too, so that a few a (a whole-array sum has one) still make work for every thread."""
    A, B, C = dx.shape
    per_a = max(1, min(B, BROADCAST_TASKS // max(A, 1)))
    for task in prange(A * per_a):
        a = task // per_a
        blk = task - a * per_a
        for b in range(blk * B // per_a, (blk + 1) * B // per_a):
            for c in range(C):
                g = scale * dy[a, c]
                if accum:
                    dx[a, b, c] += g
                else:
                    dx[a, b, c] = g


def _write(op, dx, g3, accum):
    """Store a gradient computed in the reduction's 3-d layout into dx."""
    g = op.layout.scatter_back(g3)
    if accum:
        dx += g
    else:
        dx[...] = g


def sum_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    lay = op.layout
    scale = 1.0 / max(lay.size_reduced, 1) if op.mean else 1.0
    dy = output_grads[0].reshape(lay.shape3[0], lay.shape3[2])
    dx = input_grads[0]
    kernel = broadcast_back.for_size(dx.size)
    if lay.perm is None:
        kernel(dy, dx.reshape(lay.shape3), scale, accum[0])
    else:
        g3 = np.empty(lay.shape3, dx.dtype)
        kernel(dy, g3, scale, False)
        _write(op, dx, g3, accum[0])


def arg_reduction_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    # only_index=True: the index output's gradient goes where the values' would, as nnabla's
    # backward reads the first output's gradient whatever that output is
    lay = op.layout
    index = getattr(op, "saved_index", None)
    if index is None:
        _, index = op._reduce(inputs[0])
    # each dy[a, c] goes to the reduced position index[a, c] that won the max/min
    lines = (lay.shape3[0], 1, lay.shape3[2])
    dy, index = output_grads[0].reshape(lines), index.reshape(lines)
    dx = input_grads[0]
    if lay.perm is None:
        scatter_lines(dy, index, dx.reshape(lay.shape3), accum[0])
    else:
        g3 = np.zeros(lay.shape3, dx.dtype)
        scatter_lines(dy, index, g3, True)
        _write(op, dx, g3, accum[0])


@njit(cache=True)
def prod_backward_kernel(x3, dy, g3):
    """g = dy * product of the other elements (exclusive prefix x suffix products: exact
    also where x has zeros)."""
    A, B, C = x3.shape
    for a in range(A):
        for c in range(C):
            left = 1.0
            for b in range(B):
                g3[a, b, c] = left
                left *= x3[a, b, c]
            right = 1.0
            for b in range(B - 1, -1, -1):
                g3[a, b, c] *= right * dy[a, c]
                right *= x3[a, b, c]


def prod_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    lay = op.layout
    x3 = lay.view(inputs[0])
    g3 = np.empty(lay.shape3, x3.dtype)
    prod_backward_kernel(x3, output_grads[0].reshape(lay.shape3[0], lay.shape3[2]), g3)
    _write(op, input_grads[0], g3, accum[0])


def norm_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    lay = op.layout
    x3 = lay.view(inputs[0])
    y = outputs[0].reshape(lay.shape3[0], 1, lay.shape3[2])
    dy = output_grads[0].reshape(lay.shape3[0], 1, lay.shape3[2])
    p = op.p
    with np.errstate(divide="ignore", invalid="ignore"):
        g3 = dy * np.sign(x3) * np.abs(x3) ** (p - 1) * np.where(y > 0, y, 1) ** (1 - p)
    _write(op, input_grads[0], g3.astype(x3.dtype), accum[0])


def axes_of(input_shape, axes):
    nd = len(input_shape)
    return sorted({a % nd for a in axes}) if axes is not None else list(range(nd))


SUM, MAX, MIN, PROD, ABS_POW = 0, 1, 2, 3, 4


@parallel_kernel
def reduce_middle(x, y, index, op, p):
    """y[a, c] = reduce over b of x[a, b, c]; ``index`` gets the arg of max/min."""
    A, B, C = x.shape
    for a in prange(A):
        for c in range(C):
            acc = x[a, 0, c]
            if op == ABS_POW:
                acc = abs(acc) ** p
            best = 0
            for b in range(1, B):
                v = x[a, b, c]
                if op == SUM:
                    acc += v
                elif op == PROD:
                    acc *= v
                elif op == ABS_POW:
                    acc += abs(v) ** p
                elif op == MAX:
                    if v > acc:
                        acc = v
                        best = b
                elif op == MIN:
                    if v < acc:
                        acc = v
                        best = b
            y[a, c] = acc
            index[a, c] = best


@njit(cache=True, parallel=True, error_model="numpy")
def sum_all(x, n_blocks):
    """The sum of a flat array: blocks summed in parallel, eight running sums per block (an
    explicit reassociation LLVM may vectorise; a single running sum cannot be)."""
    n = x.size
    partial = np.zeros(n_blocks, np.float64)
    for blk in prange(n_blocks):
        lo = blk * n // n_blocks
        hi = (blk + 1) * n // n_blocks
        acc = np.zeros(8, np.float64)   # float64 running sums: float32 drifts over millions
        i = lo
        while i + 8 <= hi:
            for j in range(8):
                acc[j] += x[i + j]
            i += 8
        total = 0.0
        for j in range(8):
            total += acc[j]
        while i < hi:
            total += x[i]
            i += 1
        partial[blk] = total
    return partial.sum()


def _sum_in_one_block(x, n_blocks):
    """What sum_all computes, summed by NumPy: runs until sum_all's parallel compilation is in
    the cache (deferred_compile.py)."""
    return float(x.sum(dtype=np.float64))


defer(sum_all, _sum_in_one_block)


def sum_of_everything(x):
    """Sum of all elements of a contiguous array (the whole-array reduction fast path)."""
    flat = x.reshape(-1)
    if not uses_parallel(flat.size):
        return flat.sum(dtype=np.float64) if flat.dtype == np.float64 else float(
            reduce_whole_serial(flat))
    return sum_all(flat, 4 * numba.get_num_threads())


@njit(cache=True, error_model="numpy")
def reduce_whole_serial(x):
    total = 0.0
    for i in range(x.size):
        total += x[i]
    return total


def normalize_axes(op, axes, ndim):
    """Sorted, non-negative axes; an axis outside [-ndim, ndim), or named twice, is an error."""
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            op.fail("axis {} is out of range for an input of {} dimensions", a, ndim)
        if a % ndim in out:
            op.fail("axes {} name axis {} more than once", tuple(axes), a % ndim)
        out.append(a % ndim)
    return tuple(sorted(out))


class ReductionLayout:
    """How an input of ``shape`` reduced over ``axes`` maps to (A, B, C) -> (A, C)."""

    def __init__(self, shape, axes):
        self.shape = tuple(shape)
        self.axes = axes
        kept = [a for a in range(len(shape)) if a not in axes]
        self.size_reduced = int(np.prod([shape[a] for a in axes], dtype=np.int64))
        adjacent = not axes or axes[-1] - axes[0] + 1 == len(axes)
        if adjacent:
            lo = axes[0] if axes else len(shape)
            hi = axes[-1] + 1 if axes else len(shape)
            self.perm = None
            self.shape3 = (int(np.prod(shape[:lo], dtype=np.int64)), self.size_reduced,
                           int(np.prod(shape[hi:], dtype=np.int64)))
        else:
            self.perm = tuple(kept) + tuple(axes)
            self.shape3 = (int(np.prod([shape[a] for a in kept], dtype=np.int64)), self.size_reduced, 1)

    def view(self, x):
        """The input as the 3-d array the kernels reduce (a transposed copy if needed)."""
        if self.perm is not None:
            x = np.ascontiguousarray(x.transpose(self.perm))
        return x.reshape(self.shape3)

    def scatter_back(self, g3):
        """Inverse of ``view`` for a gradient of the 3-d shape."""
        if self.perm is None:
            return g3.reshape(self.shape)
        permuted_shape = tuple(self.shape[a] for a in self.perm)
        return g3.reshape(permuted_shape).transpose(np.argsort(self.perm))


class _Reduction(Op):
    kind = SUM

    def setup(self, x):
        self.axes = normalize_axes(self, self.axes, len(x))
        self.layout = ReductionLayout(x, self.axes)
        self.reduce_kernel = reduce_middle.for_size(int(np.prod(x, dtype=np.int64)))
        if self.keep_dims:
            out = tuple(1 if a in self.axes else s for a, s in enumerate(x))
        else:
            out = tuple(s for a, s in enumerate(x) if a not in self.axes)
        if self.layout.size_reduced == 0 and self.kind in (MAX, MIN):
            self.fail("cannot reduce an empty axis of input shape {}", x)
        return [out] * self.n_outputs_()

    def n_outputs_(self):
        return 1

    def _reduce(self, x, p=1.0):
        lay = self.layout
        y = np.empty((lay.shape3[0], lay.shape3[2]), x.dtype)
        index = np.empty(y.shape, np.int64)
        if lay.size_reduced == 0:
            y.fill(1.0 if self.kind == PROD else 0.0)
            index.fill(0)
        else:
            self.reduce_kernel(lay.view(x), y, index, self.kind, p)
        return y, index

    def forward(self, inputs, outputs):
        if self.kind == SUM and self.layout.shape3[0] == 1 and self.layout.shape3[2] == 1:
            total = sum_of_everything(inputs[0])
            outputs[0][...] = total / max(self.layout.size_reduced, 1) if self.mean else total
            return
        y, _ = self._reduce(inputs[0])
        if self.kind == SUM and self.mean:
            y *= 1.0 / max(self.layout.size_reduced, 1)
        outputs[0][...] = y.reshape(outputs[0].shape)


@register
class Sum(_Reduction):
    mean = False
    backward = sum_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Mean(Sum):
    mean = True


@register
class Prod(_Reduction):
    kind = PROD
    backward = prod_backward

    def grad_depends_output_data(self, i, o):
        return True


@register
class Norm(_Reduction):
    kind = ABS_POW

    def setup(self, x):
        if self.p <= 0:
            self.fail("p must be positive, got {}", self.p)
        return super().setup(x)

    def forward(self, inputs, outputs):
        y, _ = self._reduce(inputs[0], self.p)
        outputs[0][...] = (y ** (1.0 / self.p)).reshape(outputs[0].shape)

    backward = norm_backward

    def grad_depends_output_data(self, i, o):
        return True


class _ArgReduction(_Reduction):
    """Max / Min, optionally with the index (flat over the reduced axes) as a uint64 output."""

    def n_outputs_(self):
        return 2 if self.with_index and not self.only_index else 1

    def forward(self, inputs, outputs):
        y, index = self._reduce(inputs[0])
        self.saved_index = index
        if self.only_index:
            outputs[0][...] = index.reshape(outputs[0].shape)
            return
        outputs[0][...] = y.reshape(outputs[0].shape)
        if self.with_index:
            outputs[1][...] = index.reshape(outputs[1].shape)

    def output_dtypes(self, compute_dtype, n_outputs):
        index = np.dtype(np.uint64)
        return [index] if self.only_index else [compute_dtype, index][:n_outputs]

    backward = arg_reduction_backward

    def grad_depends_input_data(self, i, j):
        return True


@register
class Max(_ArgReduction):
    kind = MAX


@register
class Min(_ArgReduction):
    kind = MIN


class _ReduceAll(Op):
    """ReduceSum / ReduceMean: every element to a scalar (nnabla's older API)."""
    mean = False

    def setup(self, x):
        self.axes = tuple(range(len(x)))
        self.layout = ReductionLayout(x, self.axes)
        self.keep_dims = False
        self.reduce_kernel = reduce_middle.for_size(int(np.prod(x, dtype=np.int64)))
        return [()]

    def forward(self, inputs, outputs):
        x = inputs[0]
        total = sum_of_everything(x)
        # the mean of no elements is NaN, as nnabla's (and NumPy's)
        outputs[0][...] = (total / x.size if x.size else np.nan) if self.mean else total

    backward = sum_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class ReduceSum(_ReduceAll):
    pass


@register
class ReduceMean(_ReduceAll):
    mean = True
