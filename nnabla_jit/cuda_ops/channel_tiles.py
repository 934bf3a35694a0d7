"""The tiling of (O, C, I) data (O rows of C channels of I consecutive elements) that the
per-channel CUDA kernels share (the normalizations' sums, affine maps and gradients).

Block (g, s) of a grid (groups, slices) covers channel group g, ``per_group``
channels whose elements along a row o are ``per_group * I`` consecutive ones, and slice s of
the group's (row, position) pairs; the block's threads enumerate the pairs, positions
fastest, ``padded`` positions to a row, each thread stepping by the grid's threads along y.
With I > WARP / 2 a group is one channel and ``padded`` is I: consecutive threads read
consecutive elements of a row. With smaller I a group is several channels (all of a row's
channels when I is 1, as after an Affine or in a channel-last layout) padded to a power of
two of at most WARP positions, so that a warp reads whole rows of the group, and a thread's
step is a whole number of rows: it keeps its position, hence its channel. Either way a
thread's channel is fixed: it reads its channel's parameters once, and finds its elements
by additions (two integer divisions per thread, none per element).

Sums per channel are split over the slices: each block reduces its threads' sums in shared
memory (``tree_sums``), stores them per (channel, slice) and counts itself in; the last block
of a group to arrive (``group_partials_done``) adds the group's shares in a fixed order
(``channel_totals``), so that the result does not depend on which block came last.
"""
import numpy as np

from . import device
from .registry import device_function

cuda = None  # numba.cuda, bound by device.load()

WARP = 32
THREADS = 256               # threads of a block of the per-channel kernels (a power of two)
ELEMENTS_PER_THREAD = 16    # fewest elements per thread before a channel group takes more blocks
BLOCKS_WANTED = 2048        # blocks that fill a large GPU about twice (132 SMs, 8 blocks of 256)
MAX_SLICES = 4096
LAUNCH_THREADS = THREADS    # threads the launchers give a block (tests lower it; at most THREADS)


@device_function
def tile_start(C, I, tiling):
    """This thread's first element in the tiling ``(per_group, padded, row_step,
    position_step)``: (its channel c, whether it has one, row o, padded position p, flat
    index j)."""
    per_group, padded = tiling[0], tiling[1]
    q = cuda.blockIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    o = q // padded
    p = q - o * padded
    k = p // I if per_group > 1 else 0
    first = cuda.blockIdx.x * per_group
    return first + k, k < per_group and first + k < C, o, p, (o * C + first) * I + p


@device_function
def tile_next(o, p, j, C, I, tiling):
    """The thread's next (o, p, j): a step of the grid's threads along y, carried over rows."""
    padded, row_step, position_step = tiling[1], tiling[2], tiling[3]
    o += row_step
    p += position_step
    j += row_step * C * I + position_step
    if p >= padded:
        p -= padded
        o += 1
        j += C * I - padded
    return o, p, j


@device_function
def double_step(tiling):
    """``tiling`` with a thread's step doubled (two cursors a step apart, each taking every
    other element of the thread)."""
    per_group, padded, row_step, position_step = tiling
    rows = 2 * row_step
    positions = 2 * position_step
    if positions >= padded:
        positions -= padded
        rows += 1
    return (per_group, padded, rows, positions)


@device_function
def tree_sums(sd, se, lanes, acc_d, acc_e):
    """The block's ``sd`` and ``se`` added in shared memory down to the first ``lanes`` entries
    of ``acc_d`` and ``acc_e`` (a power of two; threads ``lanes`` apart are summed together)."""
    t = cuda.threadIdx.x
    acc_d[t] = sd
    acc_e[t] = se
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step >= lanes:
        if t < step:
            acc_d[t] += acc_d[t + step]
            acc_e[t] += acc_e[t + step]
        cuda.syncthreads()
        step //= 2


@device_function
def group_partials_done(sd, se, c, active, I, tiling, partial_d, partial_e, arrivals, acc_d,
                        acc_e, flag):
    """Store this block's sums per channel (partial_*[c * slices + s]) and count the block in;
    True, in every thread, in the block of its group that arrived last (all of the group's
    partial sums are then stored and visible to it)."""
    per_group, padded = tiling[0], tiling[1]
    t = cuda.threadIdx.x
    lanes = padded if per_group > 1 else 1   # positions apart in a row: their channels differ
    tree_sums(sd, se, lanes, acc_d, acc_e)
    first = cuda.blockIdx.x * per_group
    if active and t < lanes and t == (c - first) * I:   # the channel's first position
        width = I if per_group > 1 else 1
        total_d = 0.0
        total_e = 0.0
        for u in range(width):
            total_d += acc_d[t + u]
            total_e += acc_e[t + u]
        partial_d[c * cuda.gridDim.y + cuda.blockIdx.y] = total_d
        partial_e[c * cuda.gridDim.y + cuda.blockIdx.y] = total_e
    cuda.syncthreads()
    if t == 0:
        # the CUDA guide's last-block pattern: a fence orders the block's stores (made before
        # the barrier) before its arrival, and the last arrival's fence orders its reads after
        # them (PTX memory model: fence-SC, then the barrier to the block's other threads)
        cuda.threadfence()
        flag[0] = cuda.atomic.add(arrivals, cuda.blockIdx.x, 1) == cuda.gridDim.y - 1
        cuda.threadfence()
    cuda.syncthreads()
    return flag[0] != 0


@device_function
def channel_totals(c, partial_d, partial_e, acc_d, acc_e):
    """acc_d[0], acc_e[0] = channel c's partial sums added over the slices (every thread of the
    block calls it; a fixed order: the results do not depend on which block came last)."""
    slices = cuda.gridDim.y
    sd = 0.0
    se = 0.0
    s = cuda.threadIdx.x
    while s < slices:
        sd += partial_d[c * slices + s]
        se += partial_e[c * slices + s]
        s += cuda.blockDim.x
    tree_sums(sd, se, 1, acc_d, acc_e)


@device_function
def is_channel_head(c, I, tiling):
    """Whether this thread handles channel c's first element (o = 0, i = 0)."""
    return (cuda.blockIdx.y == 0
            and cuda.threadIdx.x == (c - cuda.blockIdx.x * tiling[0]) * I)


def tiling(O, C, I):
    """(grid, threads, tiling) of the per-channel kernels over (O, C, I) data (see above):
    grid (channel groups, slices of a group), and tiling = (channels per group, padded
    positions per row, and a thread's step in whole rows and positions)."""
    per_group = min(WARP // I, C) if 0 < I <= WARP // 2 else 1
    if per_group > 1:
        padded = 1 << (per_group * I - 1).bit_length()
    else:
        per_group, padded = 1, max(I, 1)
    groups = -(-C // per_group)
    work = O * padded if I else 0
    threads = min(LAUNCH_THREADS, 1 << max(work - 1, 0).bit_length())
    threads = max(threads, padded if per_group > 1 else 1)   # a step of whole rows
    slices = max(1, min(-(-work // (threads * ELEMENTS_PER_THREAD)),
                        -(-BLOCKS_WANTED // max(groups, 1)), MAX_SLICES))
    row_step, position_step = divmod(slices * threads, padded)
    return (groups, slices), threads, (per_group, padded, row_step, position_step)


ARRIVALS = [None]


def arrivals(groups):
    """Per channel group, how many blocks have stored their partial sums: int32 zeros between
    launches (the group's last block sets its count back), kept for the process."""
    held = ARRIVALS[0]
    if held is None or held.size < groups:
        held = ARRIVALS[0] = device.zeros((max(groups, 1024),), np.int32)
    return held


def launch(kern, shape3, *args, sums=False):
    """Launch a per-channel kernel over (O, C, I) = ``shape3`` with ``args``, then (``sums``)
    the partial sums' workspaces and the arrival counts, then O, C, I and the tiling."""
    O, C, I = shape3
    grid, threads, tiles = tiling(O, C, I)
    if not grid[0]:
        return
    if sums:
        slots = C * grid[1]
        partials = device.reshaped(
            device.workspace("channel partial sums", 2 * slots, np.float64), 2, slots)
        args += (device.row(partials, 0), device.row(partials, 1), arrivals(grid[0]))
    device.configured(kern, grid, threads)(*args, O if I else 0, C, I, tiles)
