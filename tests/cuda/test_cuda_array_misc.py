"""Meshgrid, Assign, Shape and OneHot on the device against the CPU kernels (tiny shapes)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import assert_same_on_cuda, cuda_context, written_on_device

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("ij", [False, True], ids=["xy", "ij"])
def test_meshgrid(ij):
    def build(a, b, c):
        grids = F.meshgrid(a, b, c, ij_indexing=ij)
        return sum(g * (k + 1.0) for k, g in enumerate(grids))
    assert_same_on_cuda(build, signed(2), signed(3), signed(2), no_grad=(1,))


def test_meshgrid_of_one_input():
    assert_same_on_cuda(lambda a: F.meshgrid(a)[0] * 2.0, signed(3))


def test_assign_writes_dst_on_the_device():
    dst, src = signed(2, 3), signed(2, 3)
    y = assert_same_on_cuda(lambda d, s: F.assign(d, s) * 3.0, dst, src, no_grad=(1,))
    assigned = y.parent.inputs[0].parent.inputs[0]
    assert written_on_device(assigned.data)
    np.testing.assert_array_equal(assigned.d, src)


def test_shape_and_its_zero_gradient():
    assert_same_on_cuda(lambda x: F.shape(x, 1) + F.sum(x, axis=(0, 1, 2), keepdims=False), signed(2, 3, 4))


def test_one_hot():
    index = np.array([[0, 2], [1, 0], [1, 2]], np.int32)
    assert_same_on_cuda(lambda x: F.one_hot(x, (2, 3)), index, backward=False, atol=0)


def test_one_hot_index_out_of_range_raises():
    with nn.context_scope(cuda_context()):
        y = F.one_hot(nn.Variable.from_numpy_array(np.array([[0], [4]], np.int32)), (3,))
    with pytest.raises(ValueError, match="index out of range"):
        y.forward()
