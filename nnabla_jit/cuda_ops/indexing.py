"""CUDA kernels of the gathers and scatters through index arrays: Gather, GatherNd, ScatterNd,
ScatterAdd, and Embed (a gather of weight rows; its CPU kernel is in ``ops/affine.py``); of
BoolScatter; and of sorting and searching (Sort, TopKData, TopKGrad, SearchSorted), described
in their sections below. NonZero, Unique and BoolGather stay on the host: their output shapes
depend on the values (``data_dependent``).

As on the CPU (``ops/indexing.py``), every one moves contiguous blocks of ``block`` elements,
and one kernel, :func:`block_move_kernel`, moves them all, forward and backward: the block row
of output row r is

    row(r) = (b pre + p) n + flat(indices[:, b k + j]),   r = (b, p, j) over (batches, pre, k),

``flat`` being the C-order position of an index tuple of M values within the M indexed axes
(``index_shape``). Gather is M = 1 with its batch and pre axes; GatherNd (and ScatterNd's
destinations) is one batch, pre = 1, k = rows; Embed is Gather along axis 0. Gathers read
through ``row`` (the scatter-add of their backward adds into it atomically: indices may
repeat), scatters write through it.

Index values are read on the device (floats truncate toward zero, as on the CPU). One out of
range is skipped and counted in host memory mapped into the device; a non-zero count copies the
indices down once and the CPU's own check raises its error.

ScatterNd without ``add`` and with repeated indices keeps one of the repeated writes, not
necessarily the last one as the CPU does (the threads of one launch run in no order).
"""
import numpy as np

from ..ops.common import integer_indices
from ..ops.indexing import insertion_index as cpu_insertion_index
from ..ops.registry import NoGradient
from . import device
from .device import store
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

GATHER, GATHER_ADD, SCATTER, SCATTER_ADD = 0, 1, 2, 3


@kernel
def block_move_kernel(src, dst, indices, index_shape, wrap, pre, k, n, block, n_rows, mode,
                      bad):
    """Over the n_rows x block elements (r, e): with GATHER(_ADD) dst[r, e] (+)= src[row(r), e],
    with SCATTER(_ADD) dst[row(r), e] (=, atomic +=) src[r, e]; ``indices`` is (M, columns)
    flat. Index values outside their axis (after one wrap of negatives with ``wrap``) skip the
    element and count in bad[0]."""
    i = cuda.grid(1)
    if i < n_rows * block:
        r = i // block
        e = i - r * block
        b = r // (pre * k)
        p = (r // k) % pre
        column = b * k + r % k
        columns = indices.size // len(index_shape)
        flat = 0
        valid = True
        for d in range(len(index_shape)):
            size = index_shape[d]
            f = indices[d * columns + column]
            # the range is checked before the cast: the GPU casts NaN to 0 (the simulator raises)
            v = int(f) if f > -size - 1 and f < size else -2 * size
            if wrap and v < 0:
                v += size
            if v < 0 or v >= size:
                valid = False
            flat = flat * size + v
        if not valid:
            if e == 0:
                cuda.atomic.add(bad, 0, 1)
            return
        far = ((b * pre + p) * n + flat) * block + e
        if mode == GATHER:
            dst[i] = src[far]
        elif mode == GATHER_ADD:
            dst[i] += src[far]
        elif mode == SCATTER:
            dst[far] = src[i]
        else:
            cuda.atomic.add(dst, far, src[i])


@kernel
def scatter_add_kernel(x1, indices, src, dst_base, axis_size, axis_stride, y, to_x1, bad):
    """ScatterAdd over the positions q of ``indices``: y[dst(q)] += x1[src[q]] (atomic), or,
    with ``to_x1``, x1[src[q]] += y[dst(q)] (the gradient of x1: each src once), where
    dst(q) = dst_base[q] + indices[q] axis_stride."""
    q = cuda.grid(1)
    if q < src.size:
        f = indices[q]
        v = int(f) if f > -1 and f < axis_size else -1   # checked before the cast: NaN is invalid
        if v < 0 or v >= axis_size:
            cuda.atomic.add(bad, 0, 1)
            return
        d = dst_base[q] + v * axis_stride
        if to_x1:
            x1[src[q]] += y[d]
        else:
            cuda.atomic.add(y, d, x1[src[q]])


def _flat(a):
    return a.reshape(a.size)


def _checked(op, index, launch_kernel, host_check):
    """Run ``launch_kernel(bad)`` with a mapped counter of out-of-range indices; when any is,
    ``host_check(indices on the host)`` raises the CPU's error."""
    bad = device.kept_counter(op, "bad indices")
    launch_kernel(bad)
    if device.read_counter(bad):
        host_check(device.copy_down(index))
        op.fail("index out of range")   # host_check found what the device did


def _geometry(op, x_shape):
    """(index_shape, wrap, pre, k, n, block, rows) of the op's block rows (see the module
    docstring), for the array the indices address (shaped ``x_shape``)."""
    if op.name == "Gather":
        nb, pre, n, block, k = op.dims
        return (n,), False, pre, k, n, block, nb * pre * k
    if op.name == "Embed":
        n = x_shape[0]
        block = int(np.prod(x_shape[1:], dtype=np.int64))
        return (n,), False, 1, op.rows, n, block, op.rows
    rows = op.rows   # GatherNd, ScatterNd
    return (tuple(op.index_shape), True, 1, rows, int(np.prod(op.index_shape, dtype=np.int64)),
            op.block, rows)


def _move(op, src, dst, index, far_shape, mode, host_check):
    shape, wrap, pre, k, n, block, rows = _geometry(op, far_shape)
    if rows * block == 0:
        return
    _checked(op, index, lambda bad: device.launch(
        block_move_kernel, rows * block, _flat(src), _flat(dst), _flat(index), shape or (1,),
        wrap, pre, k, n, block, rows, mode, bad), host_check)


def _rows(op, index):
    """Set on first use: the number of block rows (index tuples) of GatherNd / ScatterNd / Embed."""
    op.rows = index.size // max(len(getattr(op, "index_shape", (1,))), 1)


def _host_check(op):
    """The CPU's index check of the op (raises its error)."""
    if op.name in ("Gather", "GatherNd"):
        return op.src_starts
    if op.name == "ScatterNd":
        return op.dst_starts
    def embed_check(index):
        index = integer_indices(op, index)
        op.fail("index out of range [0, {}): min {} max {}", op.rows_of_w, index.min(), index.max())
    return embed_check


# ------------------------------------------------------------------------------ gathers
@forward("Gather", "GatherNd", "Embed")
def gather_forward(op, inputs, outputs):
    x, index = (inputs[1], inputs[0]) if op.name == "Embed" else (inputs[0], inputs[1])
    _rows(op, index)
    op.rows_of_w = x.shape[0] if x.ndim else 0
    _move(op, x, outputs[0], index, x.shape, GATHER, _host_check(op))


@backward("Gather", "GatherNd", "Embed")
def gather_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    k, j = (1, 0) if op.name == "Embed" else (0, 1)   # (data, indices)
    if not propagate_down[k]:
        return
    dx = input_grads[k]
    if not accum[k]:
        device.fill(dx, 0)
    _move(op, output_grads[0], dx, inputs[j], dx.shape, SCATTER_ADD, _host_check(op))


# ------------------------------------------------------------------------------ scatters
def _scatter_nd_out(op):
    """ScatterNd's ``out`` input, which its forward updates in place (when given)."""
    return (2,) if len(op.input_names) == 3 else ()


@forward("ScatterNd", updates=_scatter_nd_out)
def scatter_nd_forward(op, inputs, outputs):
    data, index, y = inputs[0], inputs[1], outputs[0]
    _rows(op, index)
    if len(inputs) == 3:
        device.copy(inputs[2], y)
    else:
        device.fill(y, 0)
    _move(op, data, y, index, y.shape, SCATTER_ADD if op.add else SCATTER, _host_check(op))
    if len(inputs) == 3:
        device.copy(y, inputs[2])


@backward("ScatterNd")
def scatter_nd_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """d data (+)= the gradient at the scattered places (also for repeated indices)."""
    if propagate_down[0]:
        dy = output_grads[0]
        _move(op, dy, input_grads[0], inputs[1], dy.shape, GATHER_ADD if accum[0] else GATHER,
              _host_check(op))


def _scatter_add_tables(op):
    """ScatterAdd's set-up tables (source positions in x1, destination bases in x0) on the
    device, uploaded once."""
    tables = getattr(op, "saved_device_tables", None)
    if tables is None:
        tables = op.saved_device_tables = (device.upload(op.src), device.upload(op.dst_base))
    return tables


def _scatter_add(op, x1, index, y, to_x1):
    src, dst_base = _scatter_add_tables(op)
    _checked(op, index, lambda bad: device.launch(
        scatter_add_kernel, src.size, _flat(x1), _flat(index), src, dst_base, op.axis_size,
        op.axis_stride, _flat(y), to_x1, bad), op.dst)


@forward("ScatterAdd")
def scatter_add_forward(op, inputs, outputs):
    x0, index, x1 = inputs
    device.copy(x0, outputs[0])
    _scatter_add(op, x1, index, outputs[0], False)


@backward("ScatterAdd")
def scatter_add_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = output_grads[0]
    if propagate_down[0]:
        if accum[0]:
            device.add_into(input_grads[0], dy)
        else:
            device.copy(dy, input_grads[0])
    if propagate_down[2]:
        dx1 = input_grads[2]
        if not accum[2]:
            device.fill(dx1, 0)   # places of x1 outside the indices get nothing
        _scatter_add(op, dx1, inputs[1], dy, True)


# ------------------------------------------------------------------------------ BoolScatter
# Row r of the input goes to the r-th non-zero of the mask (NaN counts as non-zero): a serial
# scan gives every mask element its rank among the non-zeros, the moves are then one thread
# per element. The scan is one thread: masks address rows, so they are short next to the data.
SCATTER_ROWS, GATHER_ROWS, KEPT_GRAD = 0, 1, 2


@kernel
def mask_rank_kernel(mask, rank, count):
    """rank[m] = the number of non-zeros of mask before m; count[0] = all of them."""
    if cuda.grid(1) == 0:
        n = 0
        for m in range(mask.size):
            rank[m] = n
            if mask[m] != 0:
                n += 1
        count[0] = n


@kernel
def mask_move_kernel(mask, rank, src, dst, block, mode, add):
    """Over the mask.size x block elements (m, e), r = rank[m]: SCATTER_ROWS: dst[m, e] =
    src[r, e] where the mask is non-zero; GATHER_ROWS: dst[r, e] (+)= src[m, e] there;
    KEPT_GRAD: dst[m, e] (+)= src[m, e] where the mask is zero, else 0."""
    i = cuda.grid(1)
    if i < mask.size * block:
        m = i // block
        e = i - m * block
        far = rank[m] * block + e
        if mode == KEPT_GRAD:
            v = src[i] if mask[m] == 0 else 0.0
            store(dst, i, v, add)
        elif mask[m] != 0:
            if mode == SCATTER_ROWS:
                dst[i] = src[far]
            elif add:
                dst[far] += src[i]
            else:
                dst[far] = src[i]


def _mask_ranks(op, x, mask):
    """The ranks of the mask's elements among its non-zeros (a workspace); raises the CPU's
    error when their number is not the input's rows."""
    count = device.kept_counter(op, "non-zeros")
    rank = device.workspace("mask ranks", mask.size, np.int64)
    device.launch(mask_rank_kernel, 1, _flat(mask), rank, count)
    if device.read_counter(count) != x.shape[0]:
        op.rows(np.zeros(x.shape[:1] + (0,)), device.copy_down(mask))   # raises
    return rank


def _bool_scatter_out(op):
    """BoolScatter's ``output`` input, which its forward updates in place (when given)."""
    return (2,) if len(op.input_names) == 3 else ()


@forward("BoolScatter", updates=_bool_scatter_out)
def bool_scatter_forward(op, inputs, outputs):
    x, mask, y = inputs[0], inputs[1], outputs[0]
    rank = _mask_ranks(op, x, mask)
    if len(inputs) == 3:
        device.copy(inputs[2], y)
    else:
        device.fill(y, 0)
    device.launch(mask_move_kernel, mask.size * op.block, _flat(mask), rank, _flat(x), _flat(y),
                  op.block, SCATTER_ROWS, False)
    if len(inputs) == 3:
        device.copy(y, inputs[2])


@backward("BoolScatter")
def bool_scatter_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    x, mask, dy = inputs[0], inputs[1], _flat(output_grads[0])
    rank = _mask_ranks(op, x, mask)
    n = mask.size * op.block
    if propagate_down[0]:   # every row of x is one non-zero's: each written once
        device.launch(mask_move_kernel, n, _flat(mask), rank, dy, _flat(input_grads[0]), op.block,
                      GATHER_ROWS, accum[0])
    if len(propagate_down) == 3 and propagate_down[2]:   # the kept values of ``output``
        device.launch(mask_move_kernel, n, _flat(mask), rank, dy, _flat(input_grads[2]), op.block,
                      KEPT_GRAD, accum[2])


# ------------------------------------------------------------------------------ sorting
# A stable sort of every line (Sort: the lines along the axis; TopK: the samples) as the CPU's
# ``np.argsort(kind="mergesort")`` of the keys x, -x, |x| or -|x|. The line lengths go from a
# few to whole samples, so one thread per line (insertion sort) would serialise long lines and
# a per-element rank count is quadratic in them; instead each element has its thread in a
# bottom-up merge sort: ceil(log2 n) passes, each moving every element of a run to its place in
# the merge of its run and the neighbour run, found by binary search in the neighbour (equal
# keys of the left run go first: stable). Work n log^2 n, any length, no shared memory. NaN
# keys sort last, as NumPy's.
@device_function
def key_before(a, b):
    """Whether key a sorts strictly before key b (NaN after everything)."""
    return a < b or (b != b and a == a)


@kernel
def sort_keys_kernel(x, keys, order, outer, n, inner, by_abs, descending):
    """keys[l, t] = the key of element t of line l = (a, c) of x viewed (outer, n, inner);
    order[l, t] = t."""
    i = cuda.grid(1)
    if i < outer * n * inner:
        line = i // n
        t = i - line * n
        v = x[((line // inner) * n + t) * inner + line % inner]
        if by_abs:
            v = abs(v)
        keys[i] = -v if descending else v
        order[i] = t


@kernel
def merge_pass_kernel(keys, order, keys_out, order_out, total, n, width):
    """One merge pass over lines of n keys: runs of ``width`` sorted keys merge pairwise."""
    i = cuda.grid(1)
    if i < total:
        base = (i // n) * n
        p = i - base
        run = p // width
        key = keys[i]
        if run % 2 == 0:   # left run: after the right run's keys strictly before this one
            left, lo, hi = run * width, (run + 1) * width, min((run + 2) * width, n)
            if lo >= n:
                keys_out[i] = key
                order_out[i] = order[i]
                return
            start = lo
            while lo < hi:
                mid = (lo + hi) // 2
                if key_before(keys[base + mid], key):
                    lo = mid + 1
                else:
                    hi = mid
            q = p + (lo - start)
        else:              # right run: after the left run's keys not after this one
            left = (run - 1) * width
            lo, hi = left, run * width
            while lo < hi:
                mid = (lo + hi) // 2
                if key_before(key, keys[base + mid]):
                    hi = mid
                else:
                    lo = mid + 1
            q = left + (p - run * width) + (lo - left)
        keys_out[base + q] = key
        order_out[base + q] = order[i]


@kernel
def pick_kernel(src, dst, order, outer, n, inner, k, src_len, src_picked, dst_len, dst_picked,
                add, write_index):
    """For the first k places j of every line l = (a, c), p = order[l, j] (the sorted line's
    j-th element): dst at (a, dst_len, c) position (p if dst_picked else j) (+)= src at
    (a, src_len, c) position (p if src_picked else j), or p itself with ``write_index``."""
    i = cuda.grid(1)
    if i < outer * inner * k:
        line = i // k
        j = i - line * k
        a = line // inner
        c = line - a * inner
        p = order[line * n + j]
        d = (a * dst_len + (p if dst_picked else j)) * inner + c
        if write_index:
            v = p
        else:
            v = src[(a * src_len + (p if src_picked else j)) * inner + c]
        store(dst, d, v, add)


def _sorted_order(x, shape3, by_abs, descending):
    """The stable sort order of every line of x viewed as ``shape3`` = (outer, n, inner): a
    flat (outer inner) x n workspace, line l = a inner + c."""
    outer, n, inner = shape3
    total = outer * n * inner
    keys = device.workspace("sort keys", 2 * total, x.dtype)
    order = device.workspace("sort order", 2 * total, np.int64)
    device.launch(sort_keys_kernel, total, _flat(x), keys[:total], order[:total], outer, n, inner,
                  by_abs, descending)
    now, width = 0, 1
    while width < n:
        nxt = total - now
        device.launch(merge_pass_kernel, total, keys[now:now + total], order[now:now + total],
                      keys[nxt:nxt + total], order[nxt:nxt + total], total, n, width)
        now, width = nxt, width * 2
    return order[now:now + total]


def _pick(src, dst, order, shape3, k, src_len, src_picked, dst_len, dst_picked, add=False,
          write_index=False):
    outer, n, inner = shape3
    device.launch(pick_kernel, outer * inner * k, _flat(src), _flat(dst), order, outer, n, inner, k,
                  src_len, src_picked, dst_len, dst_picked, add, write_index)


@forward("Sort")
def sort_forward(op, inputs, outputs):
    x, n = inputs[0], op.shape3[1]
    order = _sorted_order(x, op.shape3, False, op.reverse)
    if not op.only_index:
        _pick(x, outputs[0], order, op.shape3, n, n, True, n, False)
    if op.with_index or op.only_index:
        _pick(order, outputs[-1], order, op.shape3, n, n, False, n, False, write_index=True)


@backward("Sort")
def sort_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dx at the sorted places (+)= dy: a permutation, every dx element written once."""
    if op.only_index:
        raise NoGradient("Sort: only_index=True outputs indices, which have no gradient")
    if propagate_down[0]:
        n = op.shape3[1]
        order = _sorted_order(inputs[0], op.shape3, False, op.reverse)
        _pick(output_grads[0], input_grads[0], order, op.shape3, n, n, False, n, True, accum[0])


def _top_k(op, a):
    """(order, shape3) of TopK's selection on ``a``: its samples as lines of one sort."""
    shape3 = (op.rows[0], op.rows[1], 1)
    return _sorted_order(a, shape3, op.abs, op.largest), shape3


@forward("TopKData")
def top_k_data_forward(op, inputs, outputs):
    x, y, n, k = inputs[0], outputs[0], op.rows[1], op.k
    order, shape3 = _top_k(op, x)
    if op.reduce:
        _pick(x, y, order, shape3, k, n, True, k, False)
        if op.with_index:
            _pick(order, outputs[1], order, shape3, k, n, False, k, False, write_index=True)
    else:
        device.fill(y, 0)
        _pick(x, y, order, shape3, k, n, True, n, True)


@backward("TopKData")
def top_k_data_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    dx, dy, n, k = input_grads[0], output_grads[0], op.rows[1], op.k
    if not op.reduce:   # nnabla passes the whole gradient through when not reducing
        device.add_into(dx, dy) if accum[0] else device.copy(dy, dx)
        return
    if not accum[0]:
        device.fill(dx, 0)
    order, shape3 = _top_k(op, inputs[0])
    _pick(dy, dx, order, shape3, k, k, False, n, True, add=True)


@forward("TopKGrad")
def top_k_grad_forward(op, inputs, outputs):
    device.copy(inputs[0], outputs[0])


@backward("TopKGrad")
def top_k_grad_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dx (+)= dy at the k largest gradients (or magnitudes) of each sample, 0 elsewhere."""
    if not propagate_down[0]:
        return
    dx, dy, n = input_grads[0], output_grads[0], op.rows[1]
    if not accum[0]:
        device.fill(dx, 0)
    order, shape3 = _top_k(op, dy)
    _pick(dy, dx, order, shape3, op.k, n, True, n, True, add=True)


# ------------------------------------------------------------------------------ searching
insertion_index = device_function(cpu_insertion_index.py_func)


@kernel
def search_sorted_kernel(seq, values, right, y):
    """y[r, j] = where values[r, j] goes into the sorted row seq[r] (the CPU's search)."""
    i = cuda.grid(1)
    m = values.shape[1]
    if i < values.shape[0] * m:
        r = i // m
        j = i - r * m
        y[r, j] = insertion_index(seq, r, values[r, j], right)


@forward("SearchSorted")
def search_sorted_forward(op, inputs, outputs):
    seq, values = inputs
    lead = values.ndim - 1   # (the simulator's shapes take no negative index)
    n, m = seq.shape[lead], values.shape[lead]
    rows = int(np.prod(values.shape[:lead], dtype=np.int64))
    device.launch(search_sorted_kernel, values.size, seq.reshape(rows, n),
                  values.reshape(rows, m), op.right, outputs[0].reshape(rows, m))
