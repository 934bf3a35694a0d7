"""Array manipulation: data movement, built on two kernels.

* :func:`copy_view` copies (or adds) between same-shaped arrays of any strides, so an op that
  is a view in NumPy terms (transpose, a slice, a broadcast, a part of a concatenation) is a
  view plus one copy.
* :func:`gather_axis` / :func:`scatter_axis` move elements along one axis through an index
  array; Pad (reflect/repeat), Tile and Flip are a gather per axis forward and a scatter-add
  per axis backward.
"""
import numpy as np
from numba import njit

from .common import integer_indices, normalize_axis
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
def _store(dst, g, accum):
    copy_view(g, dst, accum)


def gather_op_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """Adjoint of a per-axis gather: scatter-add dy back through each gathered axis."""
    k = op.gathered_input
    if not propagate_down[k]:
        return
    dx = input_grads[k]
    in_shape = getattr(op, "aligned", None) or getattr(op, "in_shape", None) or dx.shape
    g = scatter_axes(output_grads[0], op.indices, in_shape)
    _store(dx, g.reshape(dx.shape), accum[k])


def reshape_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        _store(input_grads[0].reshape(-1), output_grads[0].reshape(-1), accum[0])


def transpose_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        _store(input_grads[0], output_grads[0].transpose(np.argsort(op.axes)), accum[0])


def slice_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dx = input_grads[0]
        if not accum[0]:
            dx.fill(0)
        _store(dx[op.slices], output_grads[0], True)


def concatenate_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    for k, dx in enumerate(input_grads):
        if propagate_down[k]:
            _store(dx, op.part(output_grads[0], k), accum[k])


def stack_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = np.moveaxis(output_grads[0], op.axis, 0)
    for k, dx in enumerate(input_grads):
        if propagate_down[k]:
            _store(dx, dy[k, ...], accum[k])


def split_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dx = np.moveaxis(input_grads[0], op.axis, 0)
        for k, dy in enumerate(output_grads):
            _store(dx[k, ...], dy, accum[0])


# ------------------------------------------------------------------------------- Shift, Meshgrid,
# Shape, Assign (appended with the indexing/linalg family)
def zero_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """For outputs that do not depend on the input values (Shape, EyeLike): a zero gradient."""
    for dx, pd, acc in zip(input_grads, propagate_down, accum):
        if pd and not acc:
            dx.fill(0)


def meshgrid_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """Each input gets its output's gradient summed over the other axes of the grid."""
    for i, (dx, axis) in enumerate(zip(input_grads, op.axes)):
        if propagate_down[i]:
            shape = op.grid_shape
            dy3 = output_grads[i].reshape(int(np.prod(shape[:axis])), shape[axis],
                                          int(np.prod(shape[axis + 1:])))
            sum_outer_inner(dy3, dx, accum[i])


def assign_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """As in nnabla the gradient flows to ``dst`` (src gets none)."""
    if propagate_down[0]:
        _store(input_grads[0], output_grads[0], accum[0])


@njit(cache=True)
def copy_view(src, dst, accumulate):
    """dst (+)= src for same-shaped arrays of any strides."""
    for idx in np.ndindex(dst.shape):
        if accumulate:
            dst[idx] += src[idx]
        else:
            dst[idx] = src[idx]


@njit(cache=True)
def gather_axis(x, index, fill, y):
    """y[a, d, c] = x[a, index[d], c], or ``fill`` where index[d] < 0."""
    A, D, C = y.shape
    for a in range(A):
        for d in range(D):
            k = index[d]
            for c in range(C):
                y[a, d, c] = x[a, k, c] if k >= 0 else fill


@njit(cache=True)
def scatter_axis(dy, index, dx):
    """dx[a, index[d], c] += dy[a, d, c] (entries with index < 0 are dropped)."""
    A, D, C = dy.shape
    for a in range(A):
        for d in range(D):
            k = index[d]
            if k >= 0:
                for c in range(C):
                    dx[a, k, c] += dy[a, d, c]


def as3d(shape, axis):
    """The (outer, axis, inner) view shape of ``shape`` around ``axis``."""
    return (int(np.prod(shape[:axis], dtype=np.int64)), shape[axis],
            int(np.prod(shape[axis + 1:], dtype=np.int64)))


def gather_axes(x, indices, fill=0.0):
    """Apply a gather along every axis that has an index array (None: keep the axis)."""
    for axis, index in enumerate(indices):
        if index is None:
            continue
        shape = list(x.shape)
        shape[axis] = len(index)
        y = np.empty(shape, x.dtype)
        gather_axis(x.reshape(as3d(x.shape, axis)), index, fill, y.reshape(as3d(shape, axis)))
        x = y
    return x


def scatter_axes(dy, indices, in_shape):
    """The adjoint of :func:`gather_axes`: scatter-add back through each axis, last first."""
    shapes = [tuple(in_shape)]
    for axis, index in enumerate(indices):
        if index is not None:
            s = list(shapes[-1])
            s[axis] = len(index)
            shapes.append(tuple(s))
    g = dy
    k = len(shapes) - 1
    for axis in reversed(range(len(indices))):
        index = indices[axis]
        if index is None:
            continue
        k -= 1
        dx = np.zeros(shapes[k], dy.dtype)
        scatter_axis(g.reshape(as3d(g.shape, axis)), index, dx.reshape(as3d(shapes[k], axis)))
        g = dx
    return g


class _GatherOp(Op):
    """An op whose forward is a gather along some axes of input ``gathered_input``: subclasses
    set ``self.indices``."""
    fill = 0.0
    gathered_input = 0

    def forward(self, inputs, outputs):
        y = gather_axes(inputs[self.gathered_input], self.indices, self.fill)
        copy_view(y, outputs[0], False)

    backward = gather_op_backward

    def grad_depends_input_data(self, i, j):
        return False


# ------------------------------------------------------------------------------ reshape
@register
class Reshape(Op):
    """Same elements, new shape (one -1 is inferred)."""

    def setup(self, x):
        shape = list(self.shape)
        size = int(np.prod(x, dtype=np.int64))
        if shape.count(-1) > 1:
            self.fail("shape {} has more than one -1", tuple(shape))
        if -1 in shape:
            rest = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
            if rest == 0 or size % rest:
                self.fail("cannot reshape input of shape {} into {}", x, tuple(self.shape))
            shape[shape.index(-1)] = size // rest
        if int(np.prod(shape, dtype=np.int64)) != size:
            self.fail("cannot reshape input of shape {} (size {}) into {} (size {})", x, size,
                      tuple(shape), int(np.prod(shape, dtype=np.int64)))
        return [tuple(shape)]

    def forward(self, inputs, outputs):
        copy_view(inputs[0].reshape(-1), outputs[0].reshape(-1), False)

    backward = reshape_backward

    def grad_depends_input_data(self, i, j):
        return False

    def inplace_data(self, i):
        return 1 if self.inplace else 0   # nnabla's INPLACE_NOT_MODIFY (the kernel copies here)


# ------------------------------------------------------------------------------ broadcast
@register
class Broadcast(_GatherOp):
    """Repeat size-1 axes to reach ``shape`` (same number of dimensions)."""

    def setup(self, x):
        shape = tuple(self.shape)
        if len(shape) != len(x) or any(a != 1 and a != b for a, b in zip(x, shape)):
            self.fail("cannot broadcast input of shape {} to {} (axes must be equal or 1)", x, shape)
        self.indices = [np.zeros(b, np.int64) if a == 1 and b != 1 else None for a, b in zip(x, shape)]
        return [shape]


@register
class BroadcastTo(_GatherOp):
    """As nnabla's: y broadcast to the shape of x (x gives only the shape), y's axes aligned with
    x's from ``axis`` on; a negative axis aligns them with x's last axes."""
    gathered_input = 1
    no_grad_inputs = (0,)

    def setup(self, x, y):
        axis = self.axis if self.axis >= 0 else len(x) - len(y)
        if axis < 0 or axis + len(y) > len(x) or tuple(x[axis:axis + len(y)]) != tuple(y):
            self.fail("y of shape {} does not match x of shape {} at axis {}", y, x, self.axis)
        self.aligned = (1,) * axis + tuple(y) + (1,) * (len(x) - axis - len(y))
        self.indices = [np.zeros(b, np.int64) if a == 1 and b != 1 else None
                        for a, b in zip(self.aligned, x)]
        return [tuple(x)]

    def forward(self, inputs, outputs):
        z = gather_axes(inputs[1].reshape(self.aligned), self.indices)
        copy_view(z, outputs[0], False)


@register
class Tile(_GatherOp):
    """Repeat the whole array ``reps`` times along each axis."""

    def setup(self, x):
        reps = tuple(self.reps)
        if any(r < 1 for r in reps):
            self.fail("reps {} must be positive", reps)
        nd = max(len(x), len(reps))
        self.in_shape = (1,) * (nd - len(x)) + tuple(x)
        reps = (1,) * (nd - len(reps)) + reps
        self.indices = [np.arange(s * r, dtype=np.int64) % s if r != 1 else None
                        for s, r in zip(self.in_shape, reps)]
        return [tuple(s * r for s, r in zip(self.in_shape, reps))]

    def forward(self, inputs, outputs):
        copy_view(gather_axes(inputs[0].reshape(self.in_shape), self.indices), outputs[0], False)


@register
class Flip(_GatherOp):
    """Reverse the order of elements along ``axes``."""

    def setup(self, x):
        axes = {normalize_axis(self, a, len(x), "axes") for a in self.axes}
        self.indices = [np.arange(s - 1, -1, -1, dtype=np.int64) if a in axes else None
                        for a, s in enumerate(x)]
        return [tuple(x)]


@register
class Pad(_GatherOp):
    """Pad the last len(pad_width)/2 axes: constant, reflect or repeat (edge) mode. Reflect
    padding wider than the axis reflects again at each end (NumPy's and nnabla's rule)."""

    def setup(self, x):
        pw = tuple(self.pad_width)
        if len(pw) % 2 or len(pw) // 2 > len(x):
            self.fail("pad_width {} must hold (before, after) pairs for at most {} axes", pw, len(x))
        if any(p < 0 for p in pw):
            self.fail("pad_width {} must not be negative", pw)
        pairs = [(0, 0)] * (len(x) - len(pw) // 2) + [pw[i:i + 2] for i in range(0, len(pw), 2)]
        mode = {"constant": "constant", "reflect": "reflect", "repeat": "edge"}[self.mode]
        self.indices = []
        for n, (b, a) in zip(x, pairs):
            if b == 0 and a == 0:
                self.indices.append(None)
                continue
            if mode == "constant":
                idx = np.pad(np.arange(n, dtype=np.int64), (b, a), mode="constant", constant_values=-1)
            else:
                idx = np.pad(np.arange(n, dtype=np.int64), (b, a), mode=mode)
            self.indices.append(idx)
        self.fill = self.constant_value
        return [tuple(n + b + a for n, (b, a) in zip(x, pairs))]


# ------------------------------------------------------------------------------ views
@register
class Transpose(Op):
    """Permute the axes."""

    def setup(self, x):
        axes = tuple(self.axes)
        if sorted(a % max(len(x), 1) for a in axes) != list(range(len(x))):
            self.fail("axes {} is not a permutation of the {} axes of input shape {}", axes, len(x), x)
        self.axes = tuple(a % len(x) for a in axes)
        return [tuple(x[a] for a in self.axes)]

    def forward(self, inputs, outputs):
        copy_view(inputs[0].transpose(self.axes), outputs[0], False)

    backward = transpose_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Slice(Op):
    """x[start:stop:step] along each axis (Python slice semantics, negatives wrap); with fewer
    entries than axes they slice the last axes, as in nnabla (the leading ones are kept whole)."""

    def setup(self, x):
        n = len(x)
        start, stop, step = list(self.start), list(self.stop), list(self.step)
        if not (len(start) == len(stop) == len(step)) or len(start) > n:
            self.fail("start {}, stop {} and step {} must have one entry per axis (input shape {})",
                      tuple(start), tuple(stop), tuple(step), x)
        lead = n - len(start)
        start = [0] * lead + start
        stop = list(x[:lead]) + stop
        step = [1] * lead + step
        if any(s == 0 for s in step):
            self.fail("step {} must not contain 0", tuple(step))
        self.slices = []
        for b, e, s, size in zip(start, stop, step, x):
            b, e, s = slice(b, e, s).indices(size)
            self.slices.append(slice(b, e if e >= 0 else None, s))  # e < 0: "before index 0"
        self.slices = tuple(self.slices)
        return [tuple(len(range(*sl.indices(size))) for sl, size in zip(self.slices, x))]

    def forward(self, inputs, outputs):
        copy_view(inputs[0][self.slices], outputs[0], False)

    backward = slice_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Concatenate(Op):
    """Join the inputs along ``axis``."""

    def setup(self, *xs):
        if not xs:
            self.fail("needs at least one input")
        self.axis = normalize_axis(self, self.axis, len(xs[0]))
        for s in xs[1:]:
            if len(s) != len(xs[0]) or any(a != b for k, (a, b) in enumerate(zip(s, xs[0])) if k != self.axis):
                self.fail("inputs of shapes {} differ outside axis {}", ", ".join(map(str, xs)), self.axis)
        self.offsets = np.cumsum([0] + [s[self.axis] for s in xs]).tolist()
        out = list(xs[0])
        out[self.axis] = self.offsets[-1]
        return [tuple(out)]

    def part(self, y, k):
        index = [slice(None)] * y.ndim
        index[self.axis] = slice(self.offsets[k], self.offsets[k + 1])
        return y[tuple(index)]

    def forward(self, inputs, outputs):
        for k, x in enumerate(inputs):
            copy_view(x, self.part(outputs[0], k), False)

    backward = concatenate_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Stack(Op):
    """Stack same-shaped inputs along a new ``axis``."""

    def setup(self, *xs):
        if not xs:
            self.fail("needs at least one input")
        if any(s != xs[0] for s in xs):
            self.fail("inputs must have the same shape; got {}", ", ".join(map(str, xs)))
        self.axis = normalize_axis(self, self.axis, len(xs[0]) + 1)
        out = list(xs[0])
        out.insert(self.axis, len(xs))
        return [tuple(out)]

    def forward(self, inputs, outputs):
        y = np.moveaxis(outputs[0], self.axis, 0)
        for k, x in enumerate(inputs):
            copy_view(x, y[k, ...], False)

    backward = stack_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Split(Op):
    """Split along ``axis`` into that many outputs, the axis removed."""

    def setup(self, x):
        self.axis = normalize_axis(self, self.axis, len(x))
        if x[self.axis] == 0:
            self.fail("cannot split axis {} of size 0 of input {} (it would give no output)", self.axis, x)
        out = tuple(s for a, s in enumerate(x) if a != self.axis)
        return [out] * x[self.axis]

    def forward(self, inputs, outputs):
        x = np.moveaxis(inputs[0], self.axis, 0)
        for k, y in enumerate(outputs):
            copy_view(x[k, ...], y, False)   # [k, ...]: a view even for 0-d parts

    backward = split_backward

    def grad_depends_input_data(self, i, j):
        return False


@njit(cache=True)
def one_hot_kernel(index, strides, y):
    """y[n, flat(index[n])] = 1 for integer index rows (y zeroed by the caller)."""
    for n in range(index.shape[0]):
        flat = 0
        for k in range(index.shape[1]):
            flat += index[n, k] * strides[k]
        y[n, flat] = 1.0


@register
class OneHot(Op):
    """Indices (..., len(shape)) -> one-hot vectors (..., *shape); a negative index counts from
    the end, as in nnabla (-1 is the last class)."""
    keep_input_dtypes = (0,)
    no_grad_inputs = (0,)

    def setup(self, x):
        shape = tuple(self.shape)
        if not x or x[-1] != len(shape):
            self.fail("the last axis of the index input {} must equal len(shape) = {}", x, len(shape))
        self.strides = np.array([int(np.prod(shape[k + 1:])) for k in range(len(shape))], np.int64)
        return [tuple(x[:-1]) + shape]

    def forward(self, inputs, outputs):
        index = integer_indices(self, inputs[0].reshape(-1, len(self.shape)))
        size = np.array(self.shape, np.int64)
        index = np.where(index < 0, index + size, index)
        bad = (index < 0) | (index >= size)
        if bad.any():
            self.fail("index {} out of range for shape {}", tuple(int(i) for i in index[bad.any(axis=1)][0]),
                      tuple(self.shape))
        y = outputs[0].reshape(index.shape[0], int(np.prod(self.shape, dtype=np.int64)))
        y.fill(0)
        one_hot_kernel(index, self.strides, y)


# ------------------------------------------------------------------------------ Shift, Meshgrid,
# Shape, Assign (appended with the indexing/linalg family)
def shift_index(n, shift, reflect):
    """The source position of each output position along an axis of size n shifted by
    ``shift``: clamped (nearest), or mirrored with the edge repeated (reflect). nnabla 1.39
    mirrors positions more than 2n before the start one place further; kept for equal results."""
    j = np.arange(n, dtype=np.int64) - shift
    if not reflect:
        return np.clip(j, 0, n - 1)
    j = np.where(j < -2 * n, j - 1, j)
    m = np.mod(j, 2 * n)
    return np.where(m < n, m, 2 * n - 1 - m)


@register
class Shift(_GatherOp):
    """Shift along the trailing axes (``shifts`` aligned to the last axes), filling from the
    border (nearest) or its mirror image (reflect)."""

    def setup(self, x):
        shifts = tuple(self.shifts)[max(len(self.shifts) - len(x), 0):] if x else ()
        shifts = (0,) * (len(x) - len(shifts)) + shifts
        reflect = self.border_mode == "reflect"
        self.indices = [shift_index(n, s, reflect) if s else None for n, s in zip(x, shifts)]
        return [tuple(x)]


@njit(cache=True)
def sum_outer_inner(y3, out, accum):
    """out[k] (+)= the sum over a and c of y3[a, k, c]."""
    if not accum:
        out[:] = 0.0
    for a in range(y3.shape[0]):
        for k in range(y3.shape[1]):
            for c in range(y3.shape[2]):
                out[k] += y3[a, k, c]


@register
class Meshgrid(Op):
    """Coordinate grids of 1-D inputs: output i repeats input i along its grid axis ('xy'
    indexing swaps the first two axes unless ``ij_indexing``)."""

    def setup(self, *xs):
        if not xs or any(len(s) != 1 for s in xs):
            self.fail("needs one or more 1-D inputs, got shapes {}", ", ".join(map(str, xs)))
        self.axes = list(range(len(xs)))
        if not self.ij_indexing and len(xs) >= 2:
            self.axes[0], self.axes[1] = 1, 0
        shape = [0] * len(xs)
        for s, a in zip(xs, self.axes):
            shape[a] = s[0]
        self.grid_shape = tuple(shape)
        return [self.grid_shape] * len(xs)

    def forward(self, inputs, outputs):
        for x, y, a in zip(inputs, outputs, self.axes):
            aligned = [1] * len(self.grid_shape)
            aligned[a] = x.size
            copy_view(np.broadcast_to(x.reshape(aligned), self.grid_shape), y, False)

    backward = meshgrid_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Shape(Op):
    """The dimensions x.shape[start:end] (end 0: to the last) as a 1-D array."""

    def setup(self, x):
        nd = len(x)
        start = self.start + nd if self.start < 0 else self.start
        end = self.end + nd if self.end <= 0 else self.end
        self.dims = np.array(x[max(start, 0):max(end, 0)], np.int64)
        return [(self.dims.size,)]

    def forward(self, inputs, outputs):
        outputs[0][...] = self.dims

    backward = zero_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Assign(Op):
    """Copy src into dst (dst is updated in place, as in nnabla) and output it. The gradient
    goes to dst only."""
    keep_input_dtypes = (0,)   # dst's own buffer, whatever its type
    no_grad_inputs = (1,)

    def setup(self, dst, src):
        if tuple(dst) != tuple(src):
            self.fail("dst of shape {} and src of shape {} must have the same shape", dst, src)
        return [tuple(dst)]

    def forward(self, inputs, outputs):
        dst, src = inputs
        dst[...] = src
        outputs[0][...] = src

    backward = assign_backward

    def grad_depends_input_data(self, i, j):
        return False
