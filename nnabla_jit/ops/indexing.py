"""Indexing: gathers and scatters through index arrays or masks, sorting and selection.

Every op here moves contiguous *blocks* of elements between flat arrays: Gather moves the
``x.shape[axis + 1:]`` block behind each index, GatherNd the ``x.shape[M:]`` block behind each
index tuple, BoolGather the block behind each non-zero of the mask, ScatterAdd single elements.
So one pair of kernels does all the data movement, forward and backward:

* :func:`copy_blocks`: ``dst[dst_start + j] = src[src_start + j]`` for each row of start offsets
  (a gather, or a scatter whose destinations do not repeat);
* :func:`add_blocks`: the same with ``+=`` (scatter-add: the backward of every gather).

Ops turn their indices into start offsets with a few vectorised NumPy operations (and check
their range, raising nnabla's out-of-range error) and call one of the two. Sorting (Sort, TopK)
has its own per-line kernels.

Ops whose output shape depends on the data (BoolGather, NonZero, Unique) are ``data_dependent``:
they compute their shapes from the input values in ``output_specs``, which the executor calls
when the graph is built (if those inputs hold data, as nnabla's setup reads them) and again
before every forward. As in nnabla, ops built on such an output in a static graph keep the
shapes seen at build time, so those graphs are rebuilt when the number of elements changes.
"""
import numpy as np
from numba import njit, prange

from .common import integer_indices, normalize_axis
from .elementwise import ElementwiseOp, elementwise
from .kernels import parallel_kernel
from .registry import Op, accumulate, register


# ------------------------------------------------------------------ backward kernels
def _rows(n, block):
    return np.arange(n, dtype=np.int64) * block


def _scatter_into(dx, dy, dx_starts, dy_starts, block, accum):
    """dx (+)= dy moved from ``dy_starts`` to ``dx_starts``; dx is zeroed first unless
    accumulating (destinations may repeat)."""
    if not accum:
        dx.fill(0)
    add_blocks(dy, dy_starts, dx, dx_starts, block)


# ------------------------------------------------------------------------------ kernels
def gather_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        _scatter_into(input_grads[0].reshape(-1), output_grads[0].reshape(-1),
                      op.src_starts(inputs[1]), op.dst_starts, op.dims[3], accum[0])


def gather_nd_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        _scatter_into(input_grads[0].reshape(-1), output_grads[0].reshape(-1),
                      op.src_starts(inputs[1]), op.dst_starts, op.block, accum[0])


def bool_gather_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        rows = nonzero_rows(inputs[1])
        _scatter_into(input_grads[0].reshape(-1), output_grads[0].reshape(-1), rows * op.block,
                      _rows(rows.size, op.block), op.block, accum[0])


def _gather_from(dx, dy, dy_starts, dx_starts, block, accum):
    """dx (+)= blocks of dy at ``dy_starts``, each destination written once."""
    if accum:
        add_blocks(dy, dy_starts, dx, dx_starts, block)
    else:
        copy_blocks.serial(dy, dy_starts, dx, dx_starts, block)


def scatter_nd_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """d data = the gradient at the scattered places (also for repeated indices, as nnabla)."""
    if propagate_down[0]:
        _gather_from(input_grads[0].reshape(-1), output_grads[0].reshape(-1),
                     op.dst_starts(inputs[1]), op.src_starts, op.block, accum[0])


def scatter_add_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = output_grads[0]
    if propagate_down[0]:
        accumulate(input_grads[0], dy, accum[0])
    if propagate_down[2]:
        dx1 = input_grads[2].reshape(-1)
        if not accum[2]:
            dx1.fill(0)   # places of x1 outside the indices get nothing
        add_blocks(dy.reshape(-1), op.dst(inputs[1]), dx1, op.src, 1)


def bool_scatter_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = output_grads[0].reshape(-1)
    rows = nonzero_rows(inputs[1])
    if propagate_down[0]:
        _gather_from(input_grads[0].reshape(-1), dy, rows * op.block, _rows(rows.size, op.block),
                     op.block, accum[0])
    if len(propagate_down) == 3 and propagate_down[2]:   # the kept values of ``output``
        g = dy.reshape(-1, op.block).copy()
        g[rows] = 0
        accumulate(input_grads[2], g.reshape(input_grads[2].shape), accum[2])


def sort_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    # only_index=True: the index output's gradient is unsorted as the values' would be (nnabla)
    if propagate_down[0]:
        scatter_lines(output_grads[0].reshape(op.shape3), op.order(inputs[0]),
                      input_grads[0].reshape(op.shape3), accum[0])


def top_k_data_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dx, dy = input_grads[0].reshape(-1), output_grads[0].reshape(-1)
    if not op.reduce:   # nnabla passes the whole gradient through when not reducing
        accumulate(dx, dy, accum[0])
        return
    positions = op.flat_positions(inputs[0])
    _scatter_into(dx, dy, positions, _rows(positions.size, 1), 1, accum[0])


def top_k_grad_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        dy = output_grads[0].reshape(-1)
        positions = op.flat_positions(dy)
        _scatter_into(input_grads[0].reshape(-1), dy, positions, positions, 1, accum[0])


INDEX_DTYPE = np.dtype(np.uint64)   # nnabla's index outputs (Sort, TopKData, NonZero) are size_t


def prod(shape):
    return int(np.prod(shape, dtype=np.int64))


@parallel_kernel
def copy_blocks(src, src_starts, dst, dst_starts, block):
    """dst[dst_starts[r] + j] = src[src_starts[r] + j] for j < block, every row r (flat arrays).

    Rows run in order in the serial variant (a repeated destination keeps the last row);
    the parallel variant needs distinct destinations.
    """
    for r in prange(src_starts.size):
        s = src_starts[r]
        d = dst_starts[r]
        for j in range(block):
            dst[d + j] = src[s + j]


@njit(cache=True)
def add_blocks(src, src_starts, dst, dst_starts, block):
    """dst[dst_starts[r] + j] += src[src_starts[r] + j]: serial, destinations may repeat."""
    for r in range(src_starts.size):
        s = src_starts[r]
        d = dst_starts[r]
        for j in range(block):
            dst[d + j] += src[s + j]


def as_index(op, a, low, high):
    """Index values as int64 (floats truncate toward zero, as in nnabla), checked against
    [low, high)."""
    idx = integer_indices(op, a).reshape(-1)
    if idx.size and (idx.min() < low or idx.max() >= high):
        op.fail("index out of range [{}, {}): got values from {} to {}", low, high, idx.min(), idx.max())
    return idx


def nonzero_rows(mask):
    """Flat positions of the non-zero elements of ``mask`` (NaN counts as non-zero)."""
    return np.flatnonzero(mask.reshape(-1) != 0)


# ------------------------------------------------------------------------------ gathers
@register
class Gather(Op):
    """y[d_<axis, i..., d_>axis] = x[d_<axis, idx[d_<batch_dims, i...], d_>axis]."""
    keep_input_dtypes = (1,)
    no_grad_inputs = (1,)

    def setup(self, x, idx):
        b = self.batch_dims
        if not 0 <= b <= len(idx):
            self.fail("batch_dims {} must be in [0, {}] for indices of shape {}", b, len(idx), idx)
        self.axis = normalize_axis(self, self.axis, len(x))
        if self.axis < b:
            self.fail("axis {} must not be less than batch_dims {}", self.axis, b)
        if tuple(x[:b]) != tuple(idx[:b]):
            self.fail("x of shape {} and indices of shape {} differ in the first batch_dims={} "
                      "dimensions", x, idx, b)
        a = self.axis
        self.dims = (prod(x[:b]), prod(x[b:a]), x[a], prod(x[a + 1:]), prod(idx[b:]))
        nb, pre, _, post, k = self.dims
        self.dst_starts = np.arange(nb * pre * k, dtype=np.int64) * post
        self.copy = copy_blocks.for_size(nb * pre * k * post)
        return [tuple(x[:a]) + tuple(idx[b:]) + tuple(x[a + 1:])]

    def src_starts(self, index):
        nb, pre, n, post, k = self.dims
        idx = as_index(self, index, 0, n).reshape(nb, 1, k)
        rows = (np.arange(nb)[:, None, None] * pre + np.arange(pre)[None, :, None]) * n + idx
        return rows.reshape(-1) * post

    def forward(self, inputs, outputs):
        self.copy(inputs[0].reshape(-1), self.src_starts(inputs[1]), outputs[0].reshape(-1),
                  self.dst_starts, self.dims[3])

    backward = gather_backward

    def grad_depends_input_data(self, i, j):
        return j == 1


@register
class GatherNd(Op):
    """y[i...] = x[indices[0, i...], ..., indices[M-1, i...]] (a block when M < x.ndim);
    negative indices count from the end."""
    keep_input_dtypes = (1,)
    no_grad_inputs = (1,)

    def setup(self, x, indices):
        if len(indices) < 2:
            self.fail("indices must have at least 2 dimensions (M, ...), got shape {}", indices)
        m = indices[0]
        if m > len(x):
            self.fail("indices of shape {} index {} dimensions of x of shape {}", indices, m, x)
        if m == 0:
            self.fail("indices of shape {} hold no index rows (M = 0)", indices)
        self.index_shape = tuple(x[:m])
        self.block = prod(x[m:])
        rows = prod(indices[1:])
        self.dst_starts = np.arange(rows, dtype=np.int64) * self.block
        self.copy = copy_blocks.for_size(rows * self.block)
        return [tuple(indices[1:]) + tuple(x[m:])]

    def src_starts(self, indices):
        return nd_starts(self, indices, self.index_shape, self.block)

    def forward(self, inputs, outputs):
        self.copy(inputs[0].reshape(-1), self.src_starts(inputs[1]), outputs[0].reshape(-1),
                  self.dst_starts, self.block)

    backward = gather_nd_backward

    def grad_depends_input_data(self, i, j):
        return j == 1


def nd_starts(op, indices, index_shape, block):
    """Flat start offsets of the blocks addressed by (M, ...) index tuples into an array whose
    first M dimensions are ``index_shape`` (negative indices wrap once)."""
    m = len(index_shape)
    idx = integer_indices(op, indices.reshape(m, -1))
    flat = np.zeros(idx.shape[1], np.int64)
    for d, size in enumerate(index_shape):
        row = idx[d]
        if row.size and (row.min() < -size or row.max() >= size):
            op.fail("index out of range for axis {} of size {}: got values from {} to {}", d,
                    size, row.min(), row.max())
        flat = flat * size + np.where(row < 0, row + size, row)
    return flat * block


@register
class BoolGather(Op):
    """The blocks input[b] for every non-zero mask[b] (mask = the leading dims), stacked."""
    keep_input_dtypes = (1,)
    no_grad_inputs = (1,)
    data_dependent = True

    def setup(self, x, mask):
        if tuple(x[:len(mask)]) != tuple(mask):
            self.fail("mask of shape {} must equal the leading dimensions of input of shape {}",
                      mask, x)
        self.block_shape = tuple(x[len(mask):])
        self.block = prod(self.block_shape)
        return [(0,) + self.block_shape]   # until the mask's values are known

    def output_specs(self, inputs):
        x, mask = inputs
        if mask is None:
            return None
        nnz = int(np.count_nonzero(mask))
        return [((nnz,) + self.block_shape, None if x is None else x.dtype)]

    def forward(self, inputs, outputs):
        rows = nonzero_rows(inputs[1])
        copy_blocks.for_size(rows.size * self.block)(
            inputs[0].reshape(-1), rows * self.block, outputs[0].reshape(-1),
            np.arange(rows.size, dtype=np.int64) * self.block, self.block)

    backward = bool_gather_backward

    def grad_depends_input_data(self, i, j):
        return j == 1


# ------------------------------------------------------------------------------ scatters
@register
class ScatterNd(Op):
    """Blocks of ``data`` written (or added) at the index tuples of ``indices`` into zeros of
    ``shape`` or into ``out``, which is updated in place as in nnabla (and gets no gradient)."""
    keep_input_dtypes = (1, 2)   # out: its own buffer, updated in place
    no_grad_inputs = (1, 2)

    def setup(self, data, indices, out=None):
        shape = tuple(out) if out is not None else self.shape
        if shape is None:
            self.fail("needs either the shape argument or the out input")
        if self.shape is not None and out is not None and tuple(self.shape) != tuple(out):
            self.fail("shape {} does not match out of shape {}", tuple(self.shape), out)
        if len(indices) < 2 or indices[0] > len(shape):
            self.fail("indices of shape {} must be (M, ...) with M <= {} (output shape {})",
                      indices, len(shape), shape)
        m = indices[0]
        expected = tuple(indices[1:]) + tuple(shape[m:])
        if tuple(data) != expected:
            self.fail("data of shape {} must have shape {} (indices {}, output {})", data,
                      expected, indices, shape)
        self.index_shape = tuple(shape[:m])
        self.block = prod(shape[m:])
        self.src_starts = np.arange(prod(indices[1:]), dtype=np.int64) * self.block
        return [tuple(shape)]

    def dst_starts(self, indices):
        return nd_starts(self, indices, self.index_shape, self.block)

    def forward(self, inputs, outputs):
        y = outputs[0].reshape(-1)
        if len(inputs) == 3:
            y[:] = inputs[2].reshape(-1)
        else:
            y.fill(0)
        move = add_blocks if self.add else copy_blocks.serial   # in order: the last write wins
        move(inputs[0].reshape(-1), self.src_starts, y, self.dst_starts(inputs[1]), self.block)
        if len(inputs) == 3:
            inputs[2][...] = outputs[0]

    backward = scatter_nd_backward

    def grad_depends_input_data(self, i, j):
        return j == 1


@register
class ScatterAdd(Op):
    """y = x0, then y[..., indices[p], ...] += x1[p] (axis replaced) for each position p of
    ``indices``, which may be smaller than x0 and x1 in every dimension."""
    keep_input_dtypes = (1,)
    no_grad_inputs = (1,)

    def setup(self, x0, indices, x1):
        if not len(x0) == len(indices) == len(x1):
            self.fail("x0 {}, indices {} and x1 {} must have the same number of dimensions",
                      x0, indices, x1)
        self.axis = normalize_axis(self, self.axis, len(x0))
        for d, (a, i, b) in enumerate(zip(x0, indices, x1)):
            if i > b or (d != self.axis and i > a):
                self.fail("indices of shape {} must not exceed x1 {} in any dimension, nor x0 {} "
                          "outside axis {}", indices, x1, x0, self.axis)
        positions = np.indices(indices, dtype=np.int64).reshape(len(indices), -1)
        self.src = np.ravel_multi_index(positions, x1).astype(np.int64)
        positions[self.axis] = 0
        self.dst_base = np.ravel_multi_index(positions, x0).astype(np.int64)
        self.axis_size = x0[self.axis]
        self.axis_stride = prod(x0[self.axis + 1:])
        return [tuple(x0)]

    def dst(self, indices):
        """Flat positions in x0 that the elements of x1 at ``self.src`` are added to."""
        return self.dst_base + as_index(self, indices, 0, self.axis_size) * self.axis_stride

    def forward(self, inputs, outputs):
        x0, indices, x1 = inputs
        y = outputs[0].reshape(-1)
        y[:] = x0.reshape(-1)
        add_blocks(x1.reshape(-1), self.src, y, self.dst(indices), 1)

    backward = scatter_add_backward

    def grad_depends_input_data(self, i, j):
        return i == 2 and j == 1


@register
class BoolScatter(Op):
    """Rows of ``input`` placed at the non-zeros of ``mask``: zeros elsewhere, or the values of
    ``output``, which is then updated in place as in nnabla."""
    keep_input_dtypes = (1, 2)   # output: its own buffer, updated in place
    no_grad_inputs = (1,)

    def setup(self, x, mask, out=None):
        self.block_shape = tuple(x[1:])
        self.block = prod(self.block_shape)
        shape = tuple(mask) + self.block_shape
        if out is not None and tuple(out) != shape:
            self.fail("output of shape {} must have shape {} (mask {}, input {})", out, shape,
                      mask, x)
        return [shape]

    def rows(self, x, mask):
        rows = nonzero_rows(mask)
        if rows.size != x.shape[0]:
            self.fail("the mask has {} non-zeros but the input has {} rows", rows.size, x.shape[0])
        return rows

    def forward(self, inputs, outputs):
        x, mask = inputs[:2]
        rows = self.rows(x, mask)
        y = outputs[0].reshape(-1)
        if len(inputs) == 3:
            y[:] = inputs[2].reshape(-1)
        else:
            y.fill(0)
        copy_blocks.for_size(x.size)(x.reshape(-1), np.arange(rows.size, dtype=np.int64) * self.block,
                                     y, rows * self.block, self.block)
        if len(inputs) == 3:
            inputs[2][...] = outputs[0]

    backward = bool_scatter_backward

    def grad_depends_input_data(self, i, j):
        return j == 1


_BoolFillLine = elementwise("BoolFill", "where(x1 != 0, value, x0)", dx0="where(ne(x1, 0), 0.0, dy)")


@register(name="BoolFill")
class BoolFill(_BoolFillLine):
    """data with ``value`` where the mask (broadcast to data's shape) is non-zero."""

    def setup(self, data, mask):
        if len(mask) > len(data) or any(m not in (1, d) for m, d in zip(mask[::-1], data[::-1])):
            self.fail("mask of shape {} does not broadcast to data of shape {}", mask, data)
        return ElementwiseOp.setup(self, data, mask)


# ------------------------------------------------------------------------------ searching
@register
class NonZero(Op):
    """The indices of the non-zero elements: (x.ndim, number of non-zeros), uint64."""
    data_dependent = True

    def setup(self, x):
        return [(len(x), 0)]   # until the values are known

    def output_specs(self, inputs):
        x = inputs[0]
        return None if x is None else [((x.ndim, int(np.count_nonzero(x))), INDEX_DTYPE)]

    def forward(self, inputs, outputs):
        outputs[0][...] = np.argwhere(inputs[0] != 0).T


@njit(cache=True)
def insertion_index(seq, r, v, right):
    """Where v goes into the sorted row seq[r] (binary search): before the elements equal to
    it, or after them with ``right``. Also the CUDA kernel's device function."""
    lo, hi = 0, seq.shape[1]
    while lo < hi:
        mid = (lo + hi) // 2
        if seq[r, mid] < v or (right and seq[r, mid] == v):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def searchsorted_kernel(seq, values, right, y):
    """y[r, j] = insertion index of values[r, j] into the sorted row seq[r]."""
    for r in range(seq.shape[0]):
        for j in range(values.shape[1]):
            y[r, j] = insertion_index(seq, r, values[r, j], right)


@register
class SearchSorted(Op):
    """Where each value of the innermost dimension would be inserted into the sorted rows of
    sorted_sequence (left: first such place; right: after equal elements). Float output."""

    def setup(self, seq, values):
        if len(seq) != len(values) or len(seq) < 1 or tuple(seq[:-1]) != tuple(values[:-1]):
            self.fail("sorted_sequence {} and values {} must have the same number of dimensions "
                      "and equal shapes except the innermost", seq, values)
        return [tuple(values)]

    def forward(self, inputs, outputs):
        seq, values = inputs
        searchsorted_kernel(seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1]),
                            self.right, outputs[0].reshape(-1, values.shape[-1]))


@register
class Unique(Op):
    """The unique values (flatten) or slices along ``axis``; with_index/with_inverse/with_counts
    add int32 outputs (first occurrence, inverse map, counts). ``sorted=False`` keeps the
    order of first occurrence."""
    data_dependent = True

    def setup(self, x):
        if not self.flatten and self.axis is None:
            self.fail("axis is required when flatten is False")
        if self.axis is not None:   # nnabla checks the axis with flatten=True too
            self.axis = normalize_axis(self, self.axis, len(x))
        self.n_inverse = prod(x) if self.flatten else x[self.axis]
        self.input_shape = tuple(x)
        return [shape for shape, _ in self.specs_for(0, None)]   # until the values are known

    def specs_for(self, n_unique, dtype):
        if self.flatten:
            y = (n_unique,)
        else:
            y = tuple(n_unique if d == self.axis else s for d, s in enumerate(self.input_shape))
        index = np.dtype(np.int32)
        flags = (self.with_index, self.with_inverse, self.with_counts)
        extra = [shape for shape, on in zip([(n_unique,), (self.n_inverse,), (n_unique,)], flags) if on]
        return [(y, dtype)] + [(shape, index) for shape in extra]

    def unique(self, x):
        axis = None if self.flatten else self.axis
        y, first, inverse, counts = np.unique(x.reshape(-1) if self.flatten else x, axis=axis,
                                              return_index=True, return_inverse=True,
                                              return_counts=True)
        inverse = inverse.reshape(-1)
        if not self.sorted:
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            y = np.take(y, order, axis=0 if axis is None else axis)
            first, counts, inverse = first[order], counts[order], rank[inverse]
        flags = (self.with_index, self.with_inverse, self.with_counts)
        return [y] + [a for a, on in zip([first, inverse, counts], flags) if on]

    def output_specs(self, inputs):
        x = inputs[0]
        if x is None:
            return None
        n = self.unique(x)[0].shape[0 if self.flatten else self.axis]
        return self.specs_for(n, x.dtype)

    def forward(self, inputs, outputs):
        for out, value in zip(outputs, self.unique(inputs[0])):
            out[...] = value


# ------------------------------------------------------------------------------ sorting
@parallel_kernel
def sort_lines(x3, y3, index3, descending, write_values):
    """Stable sort of every line x3[a, :, c]: index3 gets the order, y3 (if write_values) the
    sorted values. Descending keeps equal elements in their original order too."""
    outer, n, inner = x3.shape
    for line in prange(outer * inner):
        a = line // inner
        c = line % inner
        keys = np.empty(n, x3.dtype)
        for t in range(n):
            keys[t] = -x3[a, t, c] if descending else x3[a, t, c]
        order = np.argsort(keys, kind="mergesort")
        for t in range(n):
            index3[a, t, c] = order[t]
            if write_values:
                y3[a, t, c] = x3[a, order[t], c]


@njit(cache=True)
def scatter_lines(dy3, index3, dx3, accum):
    """dx3[a, index3[a, t, c], c] (+)= dy3[a, t, c], dx3 zeroed first unless ``accum``: the
    adjoint of gathering along the middle axis (sorting the lines; an arg max/min reduction,
    one gathered element a line)."""
    outer, n, inner = dy3.shape
    if not accum:
        dx3[:] = 0.0
    for a in range(outer):
        for t in range(n):
            for c in range(inner):
                dx3[a, index3[a, t, c], c] += dy3[a, t, c]


def line_shape(shape, axis):
    return prod(shape[:axis]), shape[axis], prod(shape[axis + 1:])


@register
class Sort(Op):
    """Stable sort along ``axis`` (descending if ``reverse``); outputs the sorted values and/or
    the uint64 sort indices (with_index, only_index)."""

    def setup(self, x):
        self.axis = normalize_axis(self, self.axis, len(x))
        self.shape3 = line_shape(x, self.axis)
        self.sort = sort_lines.for_size(prod(x))
        return [tuple(x)] * (2 if self.with_index and not self.only_index else 1)

    def output_dtypes(self, compute_dtype, n_outputs):
        return [INDEX_DTYPE] if self.only_index else [compute_dtype, INDEX_DTYPE][:n_outputs]

    def order(self, x):
        index = np.empty(self.shape3, np.int64)
        self.sort(x.reshape(self.shape3), x.reshape(self.shape3), index, self.reverse, False)
        return index

    def forward(self, inputs, outputs):
        x3 = inputs[0].reshape(self.shape3)
        index = outputs[-1] if self.with_index or self.only_index else np.empty(self.shape3, np.int64)
        values = x3 if self.only_index else outputs[0].reshape(self.shape3)
        self.sort(x3, values, index.reshape(self.shape3), self.reverse, not self.only_index)

    backward = sort_backward

    def grad_depends_input_data(self, i, j):
        return True


# nnabla selects the top k with a binary heap (libstdc++'s make_heap / pop_heap / push_heap /
# sort_heap over (key, position) pairs, the smallest key on top); which of equal values it keeps,
# and their order, follow from that heap, so these loops take the same steps.
@njit(cache=True)
def _heap_sift_up(keys, pos, hole, top, key, p):
    """Move the hole up towards ``top`` while its parent's key is larger, then put (key, p) there."""
    parent = (hole - 1) // 2
    while hole > top and keys[parent] > key:
        keys[hole], pos[hole] = keys[parent], pos[parent]
        hole = parent
        parent = (hole - 1) // 2
    keys[hole], pos[hole] = key, p


@njit(cache=True)
def _heap_adjust(keys, pos, hole, length, key, p):
    """Move the hole down to a leaf along the smaller child, then sift (key, p) up from there."""
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if keys[child] > keys[child - 1]:
            child -= 1
        keys[hole], pos[hole] = keys[child], pos[child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        keys[hole], pos[hole] = keys[child - 1], pos[child - 1]
        hole = child - 1
    _heap_sift_up(keys, pos, hole, top, key, p)


@njit(cache=True)
def _heap_pop_to(keys, pos, length, result):
    """The top entry goes to ``result``; the entry that was there is re-inserted in [0, length)."""
    key, p = keys[result], pos[result]
    keys[result], pos[result] = keys[0], pos[0]
    _heap_adjust(keys, pos, 0, length, key, p)


@njit(cache=True)
def top_k_rows(x2, k, by_abs, largest, index):
    """index[n] = the k positions of row x2[n] with the largest (or smallest) values or
    magnitudes, best first, chosen and ordered among equal values as nnabla's heap does."""
    keys = np.empty(k, x2.dtype)
    pos = np.empty(k, np.int64)
    for n in range(x2.shape[0]):
        for s in range(k):
            v = abs(x2[n, s]) if by_abs else x2[n, s]
            keys[s], pos[s] = (v if largest else -v), s
        if k > 1:
            parent = (k - 2) // 2
            while True:
                _heap_adjust(keys, pos, parent, k, keys[parent], pos[parent])
                if parent == 0:
                    break
                parent -= 1
        for s in range(k, x2.shape[1]):
            v = abs(x2[n, s]) if by_abs else x2[n, s]
            v = v if largest else -v
            if v > keys[0]:
                if k > 1:
                    _heap_pop_to(keys, pos, k - 1, k - 1)
                keys[k - 1], pos[k - 1] = v, s
                _heap_sift_up(keys, pos, k - 1, 0, v, s)
        for last in range(k - 1, 0, -1):
            _heap_pop_to(keys, pos, last, last)
        for j in range(k):
            index[n, j] = pos[j]


class _TopK(Op):
    """Selection of k elements per sample: dimensions from base_axis form one sample."""
    largest = True

    def setup(self, x):
        self.base_axis = normalize_axis(self, self.base_axis, len(x), "base_axis")
        self.rows = (prod(x[:self.base_axis]), prod(x[self.base_axis:]))
        if not 1 <= self.k <= self.rows[1]:
            self.fail("k {} must be in [1, {}] (the sample size of input {} from base_axis {})",
                      self.k, self.rows[1], x, self.base_axis)
        self.row_base = np.arange(self.rows[0], dtype=np.int64)[:, None] * self.rows[1]
        return [tuple(x)]

    def top_k(self, a):
        """(N, k) positions of the selected elements of each sample of ``a``."""
        index = np.empty((self.rows[0], self.k), np.int64)
        top_k_rows(a.reshape(self.rows), self.k, self.abs, self.largest, index)
        return index

    def flat_positions(self, a):
        return (self.row_base + self.top_k(a)).reshape(-1)


@register
class TopKData(_TopK):
    """The k largest (or smallest, or by magnitude) values of each sample: as (..., k), best
    first, with their uint64 positions (with_index); or (reduce=False) in place, zeros
    elsewhere. As in nnabla, reduce=False passes the whole gradient through."""

    def setup(self, x):
        super().setup(x)
        if self.with_index and not self.reduce:
            self.fail("with_index=True needs reduce=True")
        if not self.reduce:
            return [tuple(x)]
        y = tuple(x[:self.base_axis]) + (self.k,)
        return [y, y] if self.with_index else [y]

    def output_dtypes(self, compute_dtype, n_outputs):
        return [compute_dtype, INDEX_DTYPE][:n_outputs]

    def forward(self, inputs, outputs):
        x = inputs[0].reshape(-1)
        index = self.top_k(x)
        src = (self.row_base + index).reshape(-1)
        y = outputs[0].reshape(-1)
        if self.reduce:
            copy_blocks.serial(x, src, y, np.arange(src.size, dtype=np.int64), 1)
            if self.with_index:
                outputs[1][...] = index.reshape(outputs[1].shape)
        else:
            y.fill(0)
            copy_blocks.serial(x, src, y, src, 1)

    backward = top_k_data_backward

    def grad_depends_input_data(self, i, j):
        return self.reduce


@register
class TopKGrad(_TopK):
    """Identity forward; backward passes only the k largest gradients (or magnitudes) of each
    sample. The backward is a selection of the gradient, not the derivative of the forward."""

    backward = top_k_grad_backward

    def forward(self, inputs, outputs):
        outputs[0][...] = inputs[0]

    def grad_depends_input_data(self, i, j):
        return False
