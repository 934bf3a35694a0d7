"""The CUDA kernels compile the CPU kernels' scalar rules (their py_func) instead of coding them
again: one window rule, one col layout, one thread-index rule, one per-element body per loss.
(The device's im2col and col2im read tables built on the host with the CPU's col rules,
``col_entry`` and ``col_row``: tests/cuda/test_cuda_col.py checks them against the CPU's im2col.)"""
import itertools

import numpy as np
import pytest

from nnabla_jit.cuda_ops import (convolution as cuda_convolution, convolution_variants as cuda_variants,
                                 device as cuda_device,
                                 linalg as cuda_linalg, loss as cuda_loss, pooling as cuda_pooling,
                                 validation as cuda_validation)
from nnabla_jit.ops import (common, convolution_kernels, convolution_variants, linalg, loss, pooling, pooling_geometry,
                            validation)

SHARED = [
    (cuda_device, "unravel3", common.unravel3),
    (cuda_device, "store", common.store),
    (cuda_pooling, "window_bounds", pooling_geometry.window_bounds),
    (cuda_pooling, "covering_windows", pooling_geometry.covering_windows),
    (cuda_pooling, "sample_element", pooling_geometry.sample_element),
    (cuda_pooling, "window_max", pooling_geometry.window_max),
    (cuda_pooling, "window_sum", pooling_geometry.window_sum),
    (cuda_pooling, "roi_grid", pooling.roi_grid),
    (cuda_pooling, "roi_sample", pooling.roi_sample),
    (cuda_pooling, "bilinear_at", pooling.bilinear_at),
    (cuda_convolution, "image_plane", convolution_kernels.image_plane),
    (cuda_variants, "corners", convolution_variants.bilinear_corners),
    (cuda_variants, "corner_sums", convolution_variants.corner_sums),
    (cuda_variants, "corner_weight", convolution_variants.corner_weight),
    (cuda_loss, "softmax_at", loss.softmax_at),
    (cuda_loss, "softmax_cross_entropy_grad", loss.softmax_cross_entropy_grad),
    (cuda_loss, "categorical_cross_entropy_grad", loss.categorical_cross_entropy_grad),
    (cuda_loss, "kl_divergence_at", loss.kl_divergence_at),
    (cuda_loss, "kl_backward_at", loss.kl_backward_at),
    (cuda_linalg, "triangle_at", linalg.triangle_at),
    (cuda_validation, "top_n_error_at", validation.top_n_error_at),
]


@pytest.mark.parametrize("module, name, cpu_rule", SHARED, ids=[n for _, n, _ in SHARED])
def test_cuda_compiles_the_cpu_rule(module, name, cpu_rule):
    """Before numba.cuda binds them, a module holds the function it will compile (``fn``);
    after, the dispatcher's ``py_func``: either way, the CPU helper's own Python function."""
    device_fn = getattr(module, name)
    compiled_from = getattr(device_fn, "fn", None) or device_fn.py_func
    assert compiled_from is cpu_rule.py_func


@pytest.mark.parametrize("channel_last", [False, True])
def test_col_entry_inverts_col_row(channel_last):
    for K, C, group in [(1, 1, 1), (4, 6, 1), (3, 6, 2), (2, 6, 3), (9, 4, 4)]:
        Cg = C // group
        rows = {convolution_kernels.col_row.py_func(c, k, K, Cg, channel_last): (c, k)
                for c, k in itertools.product(range(C), range(K))}
        assert sorted(rows) == list(range(C * K))   # a permutation of the col rows
        for row, (c, k) in rows.items():
            assert convolution_kernels.col_entry.py_func(row, K, Cg, channel_last) == (c, k)


def test_store_writes_or_adds():
    out = np.ones((2, 3))
    common.store(out, (1, 2), 5.0, False)
    common.store(out, (0, 0), 5.0, True)
    np.testing.assert_array_equal(out, [[6, 1, 1], [1, 1, 5]])
