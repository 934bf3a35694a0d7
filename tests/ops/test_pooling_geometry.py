"""The pooling geometry shared by the CPU and CUDA kernels: one window rule, one thread-index rule."""
import itertools

import numpy as np
import pytest

from nnabla_jit.ops import common
from nnabla_jit.ops.pooling_geometry import PoolGeometry, covering_windows, sample_element, window_bounds, window_extents


class _Op:
    def fail(self, message, *args):
        raise ValueError(message.format(*args))


def _cases():
    for n, k, s, p in itertools.product(range(1, 6), range(1, 5), range(1, 4), range(0, 3)):
        n_out = (n + p + s - 1) // s   # ignore_border=False: every window that starts in the input
        yield n, k, s, p, n_out


def test_window_bounds_clip_each_window_to_the_input():
    rule = window_bounds.py_func
    for n, k, s, p, n_out in _cases():
        for o in range(n_out):
            start, end = o * s - p, min(o * s - p + k, n + p)
            inside = [e for e in range(start, end) if 0 <= e < n]
            lo, hi, extent, near = rule(o, n, k, s, p, True)
            if inside:
                assert (lo, hi) == (inside[0], inside[-1] + 1)
            assert extent == end - start
            assert rule(o, n, k, s, p, False)[2] == hi - lo
            assert near == min(max(start, 0), n - 1)


def test_covering_windows_are_the_windows_holding_a_position():
    for n, k, s, p, n_out in _cases():
        for pos in range(n):
            holding = [o for o in range(n_out)
                       if window_bounds.py_func(o, n, k, s, p, True)[0] <= pos
                       < window_bounds.py_func(o, n, k, s, p, True)[1]]
            first, last = covering_windows.py_func(pos, n_out, k, s, p)
            assert list(range(first, last + 1)) == holding, (n, k, s, p, pos)


@pytest.mark.parametrize("including_pad", [False, True])
def test_window_tables_are_the_rule_tabulated(including_pad):
    geo = PoolGeometry(_Op(), (2, 3, 7, 6), (3, 2), (2, 2), (1, 1), False, False)
    for table, n, k, s, p, n_out in zip(geo.window_tables(including_pad), geo.sizes, geo.kernel, geo.stride,
                                        geo.pad, geo.out_sizes):
        assert table.shape == (4, n_out)
        for o in range(n_out):
            assert tuple(table[:, o]) == window_bounds.py_func(o, n, k, s, p, including_pad)


def test_window_extents_are_the_rule_tabulated():
    # 5 elements, kernel 4, stride 2, pad 1: windows [-1, 3), [1, 5), [3, 6) (the last one cut at
    # the padded input's end)
    np.testing.assert_array_equal(window_extents(5, 4, 2, 1, 3, True), [4, 4, 3])
    np.testing.assert_array_equal(window_extents(5, 4, 2, 1, 3, False), [3, 4, 2])


@pytest.mark.parametrize("channel_last", [False, True])
def test_geometry_pads_the_pooled_dims_to_three(channel_last):
    shape = (2, 5, 7, 3) if channel_last else (2, 3, 5, 7)
    geo = PoolGeometry(_Op(), shape, (2, 3), (2, 2), (1, 0), True, channel_last)
    sizes, out_sizes, kernel, stride, pad, C = geo.window_args()
    assert (sizes, kernel, stride, pad) == ((1, 5, 7), (1, 2, 3), (1, 2, 2), (0, 1, 0))
    assert out_sizes == (1, 3, 3) and C == (3 if channel_last else 1)
    assert geo.out_shape == ((2, 3, 3, 3) if channel_last else (2, 3, 3, 3))
    assert geo.x2 == ((2, 35 * 3) if channel_last else (6, 35))


def test_sample_element_is_c_order():
    for i in range(2 * 3 * 4 * 5 * 2):
        assert sample_element.py_func(i, (3, 4, 5), 2) == np.unravel_index(i, (2, 3, 4, 5, 2))


def test_unravel3_is_c_order():
    for shape in [(2, 3, 4), (1, 5, 1), (3, 1, 2)]:
        for i in range(int(np.prod(shape))):
            assert common.unravel3.py_func(i, shape[1], shape[2]) == np.unravel_index(i, shape)
