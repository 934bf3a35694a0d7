"""The geometry of the window poolings (MaxPooling, AveragePooling, SumPooling and the internal
ops of MaxPooling's double backward), shared by their CPU kernels (``ops/pooling.py``) and their
CUDA kernels (``cuda_ops/pooling.py``); neither backend owns it.

The pooled axes are the last ``len(kernel)`` (1 to 3) axes, or the ones before the last with
``channel_last``; everything before them is batch. Kernels see a sample as ``(D, H, W, C)``
flattened -- pooled dims padded with 1 in front, C = 1 unless channel-last -- so one loop nest
serves every layout.

Windows follow nnabla: output o covers [o * stride - pad, o * stride - pad + kernel) clipped to
the input; ``ignore_border=False`` adds the partial windows at the end (ceil((n + pad) / stride)
outputs). AveragePooling with ``including_pad`` divides by the window clipped to the padded input,
otherwise by the clipped window's size (0 / 0 for a window wholly in the padding, as nnabla). A
max window wholly in the padding takes the input element nearest to its start, as nnabla's does.

The rules along one pooled dim are the ``@njit(inline="always")`` helpers below: the CPU kernels
call them, and the CUDA kernels compile their ``py_func`` as device functions.
"""
import numpy as np
from numba import njit, uint64

MAX, AVERAGE, SUM = 0, 1, 2   # the pooling modes, as the kernels take them
LO, HI, EXTENT, NEAR = 0, 1, 2, 3   # the rows of ``PoolGeometry.window_tables``: window_bounds


@njit(cache=True, inline="always")
def window_bounds(o, n, k, s, p, including_pad):
    """(lo, hi, extent, near) of window o along a pooled dim of n elements: the window clipped to
    the input, [lo, hi); its extent, what AveragePooling divides by along this dim (the window
    clipped to the padded input with ``including_pad``, else hi - lo); the input element nearest
    its start, which a max window wholly in the padding takes."""
    start = o * s - p
    end = min(start + k, n + p)
    lo = max(start, 0)
    hi = min(end, n)
    extent = end - start if including_pad else hi - lo
    return lo, hi, extent, min(lo, n - 1)


@njit(cache=True, inline="always")
def covering_windows(pos, n_out, k, s, p):
    """[first, last] of the windows along a pooled dim whose span covers input position ``pos``
    (the windows ``window_bounds`` clips to a range holding it)."""
    first = max((pos + p - k + s) // s, 0)   # ceil((pos + p - k + 1) / s), pos + p - k + 1 >= 1 - k
    last = min((pos + p) // s, n_out - 1)
    return first, last


# The window loops. Element (d, h, w) of a window lies at base + ((d * H + h) * W + w) * C: the
# CPU passes a sample and its channel as base, a CUDA thread the flat position of both. uint64
# indices: numba skips its negative-index wraparound for unsigned ints (tight CPU loops).
@njit(cache=True, inline="always")
def window_max(x, base, C, H, W, d_lo, d_hi, h_lo, h_hi, w_lo, w_hi, start):
    """(max, its flat (d, h, w) position; ties: the first) over the window's elements, starting
    from position ``start`` (the element nearest the window's start, so a window wholly in the
    padding takes it)."""
    best_pos = start
    best = x[uint64(base + best_pos * C)]
    for d in range(d_lo, d_hi):
        for h in range(h_lo, h_hi):
            row = (d * H + h) * W
            for w in range(w_lo, w_hi):
                v = x[uint64(base + (row + w) * C)]
                if v > best:
                    best = v
                    best_pos = row + w
    return best, best_pos


@njit(cache=True, inline="always")
def window_sum(x, base, C, H, W, d_lo, d_hi, h_lo, h_hi, w_lo, w_hi):
    """The sum of the window's elements (in float64)."""
    acc = 0.0
    for d in range(d_lo, d_hi):
        for h in range(h_lo, h_hi):
            row = (d * H + h) * W
            for w in range(w_lo, w_hi):
                acc += x[uint64(base + (row + w) * C)]
    return acc


@njit(cache=True, inline="always")
def sample_element(i, sizes, C):
    """(n, d, h, w, c) of flat element i of samples laid out (N, D, H, W, C), ``sizes`` = (D, H,
    W): which element a one-thread-per-element kernel of an input or an output handles."""
    D, H, W = sizes
    c = i % C
    r = i // C
    w = r % W
    r //= W
    h = r % H
    r //= H
    return r // D, r % D, h, w, c


def window_extents(n, k, s, p, n_out, including_pad):
    """The extents (``window_bounds``) of the n_out windows along one pooled dim, as an array (the
    ONNX exporter's divisors)."""
    return np.array([window_bounds.py_func(o, n, k, s, p, including_pad)[2] for o in range(n_out)],
                    np.int64)


class PoolGeometry:
    """One pooling node's geometry, computed in ``setup``: where the pooled axes are, the output
    shape, and what the kernels of both backends take.

    ``N``, ``C``: the batch (everything before the pooled axes) and the channels (1 unless
    channel-last); ``sizes``, ``out_sizes``, ``kernel``, ``stride``, ``pad``: 3-tuples over the
    pooled dims padded in front (sizes 1, kernel 1, stride 1, pad 0); ``x2``, ``y2``: the input
    and output as (N, elements per sample); ``out_shape``: the output shape."""

    def __init__(self, op, x, kernel, stride, pad, ignore_border, channel_last):
        x, kernel, stride, pad = tuple(x), tuple(kernel), tuple(stride), tuple(pad)
        nk = len(kernel)
        if not 1 <= nk <= 3:
            op.fail("kernel {} must have 1, 2 or 3 dimensions", kernel)
        if len(x) < nk + (1 if channel_last else 0):
            op.fail("kernel {} has more dimensions than input of shape {} can pool{}", kernel, x,
                    " (channel_last)" if channel_last else "")
        if len(stride) != nk or len(pad) != nk:
            op.fail("stride {} and pad {} must have one entry per kernel dimension of {}", stride,
                    pad, kernel)
        if min(kernel) < 1 or min(stride) < 1 or min(pad) < 0:
            op.fail("kernel {} and stride {} must be positive and pad {} non-negative", kernel,
                    stride, pad)
        end = len(x) - 1 if channel_last else len(x)
        pooled = x[end - nk:end]
        if min(pooled) < 1:
            op.fail("pooled dims {} of input shape {} must not be empty", pooled, x)
        out = []
        for n, k, s, p in zip(pooled, kernel, stride, pad):
            if ignore_border:
                # nnabla divides with C++'s truncation toward zero, so a kernel larger than the
                # padded input still gives one (clipped) window when the stride is not smaller
                # than the overhang.
                o = int((n + 2 * p - k) / s) + 1
                if o < 1:
                    op.fail("kernel {} with stride {} is larger than the padded input: pooled dims "
                            "{} of input shape {} with pad {} leave no window", kernel, stride,
                            pooled, x, pad)
                out.append(o)
            else:
                out.append((n + p + s - 1) // s)
        out = tuple(out)
        fill = (1,) * (3 - nk)
        as_ints = (lambda v: tuple(int(e) for e in v))
        self.sizes = as_ints(fill + pooled)
        self.out_sizes = as_ints(fill + out)
        self.kernel = as_ints(fill + kernel)
        self.stride = as_ints(fill + stride)
        self.pad = as_ints((0,) * (3 - nk) + pad)
        self.C = int(x[-1]) if channel_last else 1
        self.N = int(np.prod(x[:end - nk], dtype=np.int64))
        self.x2 = (self.N, int(np.prod(pooled, dtype=np.int64)) * self.C)
        self.y2 = (self.N, int(np.prod(out, dtype=np.int64)) * self.C)
        self.out_shape = x[:end - nk] + out + x[end:]

    def window_tables(self, including_pad):
        """(wd, wh, ww): ``window_bounds`` tabulated along each of the three pooled dims, a (4,
        outputs) int64 array per dim with rows LO, HI, EXTENT, NEAR. The CPU kernels read these
        (in their inner loops a read costs less than the rule: 20% of a 2x2 max pooling); a CUDA
        thread applies the rule itself. Computed once per geometry and flag."""
        tables = self.__dict__.setdefault("_tables", {})
        key = bool(including_pad)
        if key not in tables:
            rule = window_bounds.py_func
            tables[key] = tuple(
                np.array([rule(o, n, k, s, p, key) for o in range(n_out)], np.int64).reshape(n_out, 4).T.copy()
                for n, k, s, p, n_out in zip(self.sizes, self.kernel, self.stride, self.pad, self.out_sizes))
        return tables[key]

    def full_windows(self):
        """[first, end) of the outputs along the last pooled dim whose windows lie wholly inside
        the input (unclipped); (n_out, n_out) when none does."""
        n, k, s, p, n_out = self.sizes[2], self.kernel[2], self.stride[2], self.pad[2], self.out_sizes[2]
        full = [o for o in range(n_out) if o * s - p >= 0 and o * s - p + k <= n]
        return (full[0], full[-1] + 1) if full else (n_out, n_out)

    def window_args(self):
        """(sizes, out_sizes, kernel, stride, pad, C): the geometry as every window kernel takes
        it."""
        return self.sizes, self.out_sizes, self.kernel, self.stride, self.pad, self.C
