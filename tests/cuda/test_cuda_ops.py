"""CUDA kernels against the CPU kernels of the same graphs (tiny shapes: the simulator runs
every CUDA thread as a Python thread)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.cuda_ops import CUDA_OPS

from .compare import assert_same_on_cuda, cuda_context, run

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-2, 2, shape).astype(np.float32)


def positive(*shape):
    return rng.uniform(0.5, 2, shape).astype(np.float32)


# ------------------------------------------------------------------------------ elementwise
ELEMENTWISE = [
    ("tanh", F.tanh, [signed(2, 3)]),
    ("relu", F.relu, [signed(2, 3)]),
    ("elu alpha", lambda x: F.elu(x, alpha=0.7), [signed(2, 3)]),
    ("gelu", F.gelu, [signed(2, 3)]),
    ("mul_scalar", lambda x: F.mul_scalar(x, 2.5), [signed(5)]),
    ("pow_scalar", lambda x: F.pow_scalar(x, 1.7), [positive(2, 2)]),
    ("r_div_scalar", lambda x: F.r_div_scalar(x, 3.0), [positive(2, 2)]),
    ("div2", F.div2, [signed(2, 3), positive(2, 3)]),
    ("maximum2", F.maximum2, [signed(2, 3), signed(2, 3)]),
    ("squared_error", F.squared_error, [signed(3), signed(3)]),
    ("mul2 broadcast one", F.mul2, [signed(2, 3, 2), signed(1, 3, 1)]),
    ("sub2 broadcast both", F.sub2, [signed(3, 1), signed(4)]),
    ("pow2 broadcast both", F.pow2, [positive(2, 1, 3), signed(2, 2, 1)]),
]


@pytest.mark.parametrize("name, build, arrays", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_lines(name, build, arrays):
    assert_same_on_cuda(build, *arrays)


def test_broadcast_over_more_axes_than_the_merged_layout_holds():
    # Five alternating broadcast axes. Checked against NumPy: the CPU kernels' backward loses
    # these gradients (it accumulates into a materialised copy of the broadcast view).
    a, b = signed(2, 1, 2, 1, 2), signed(1, 2, 1, 2, 1)
    y, (xa, xb) = run(cuda_context(), F.mul2, [a, b])
    seed = np.linspace(-1, 1, y.size).reshape(y.shape)
    np.testing.assert_allclose(y.d, a * b, rtol=1e-6)
    np.testing.assert_allclose(xa.g, (seed * b).sum(axis=(1, 3), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(xb.g, (seed * a).sum(axis=(0, 2, 4), keepdims=True), rtol=1e-5)


def test_elementwise_without_gradient_and_with_a_condition():
    x, y = signed(2, 3), signed(2, 3)
    y[0, 0] = x[0, 0]
    assert_same_on_cuda(F.greater_equal, x, y, backward=False)
    cond = (signed(2, 1) > 0).astype(np.float32)
    assert_same_on_cuda(F.where, cond, x, signed(1, 3), no_grad=(0,))


def test_every_table_line_has_cuda_kernels():
    from nnabla_jit.ops.elementwise import LINES
    assert {line.name for line in LINES} <= CUDA_OPS


# ------------------------------------------------------------------------------ reductions
REDUCTIONS = [
    ("sum axis 1", lambda x: F.sum(x, axis=1), (2, 3, 4)),
    ("sum axes 0 2 keepdims", lambda x: F.sum(x, axis=(0, 2), keepdims=True), (2, 3, 4)),
    ("mean all", F.mean, (3, 4)),
    ("mean axes 1 2", lambda x: F.mean(x, axis=(1, 2)), (2, 3, 2)),
    ("max axis 0", lambda x: F.max(x, axis=0), (3, 4)),
    ("min axes 0 2", lambda x: F.min(x, axis=(0, 2)), (2, 3, 2)),
    ("max values with a dropped index", lambda x: F.max(x, axis=1, with_index=True)[0], (3, 4)),
    ("reduce_sum", F.reduce_sum, (2, 3)),
]


@pytest.mark.parametrize("name, build, shape", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
def test_reductions(name, build, shape):
    assert_same_on_cuda(build, signed(*shape))


def test_max_min_index_outputs_and_ties():
    x = np.array([[1, 3, 3, 0], [2, 2, -1, 2], [5, 5, 5, 5]], np.float32)
    y = assert_same_on_cuda(lambda v: F.max(v, axis=1, only_index=True), x, backward=False)
    np.testing.assert_array_equal(y.d, [1, 0, 0])   # the first of equal maxima
    y = assert_same_on_cuda(lambda v: F.min(v, axis=0, with_index=True)[1], x, backward=False)
    assert y.d.dtype == np.uint64


# ------------------------------------------------------------------------------ matmul
def test_affine():
    assert_same_on_cuda(F.affine, signed(3, 5), signed(5, 4), signed(4))
    assert_same_on_cuda(lambda x, w: F.affine(x, w, base_axis=2), signed(2, 3, 4),
                        signed(4, 2, 3))


def test_affine_larger_than_a_tile():
    assert_same_on_cuda(F.affine, signed(3, 20), signed(20, 17), signed(17), rtol=1e-4)


@pytest.mark.parametrize("a, b, ta, tb", [
    ((2, 1, 3, 4), (1, 3, 4, 2), False, False),
    ((2, 4, 3), (2, 5, 4), True, True),
    ((4, 3), (2, 4, 5), True, False),
])
def test_batch_matmul(a, b, ta, tb):
    assert_same_on_cuda(lambda u, v: F.batch_matmul(u, v, ta, tb), signed(*a), signed(*b))


# ------------------------------------------------------------------------------ softmax, loss
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax(fn):
    assert_same_on_cuda(lambda x: fn(x, axis=1), signed(2, 4, 3))


def test_softmax_cross_entropy():
    labels = np.array([[0], [3], [-1], [2]], np.int32)   # -1: ignored
    assert_same_on_cuda(F.softmax_cross_entropy, signed(4, 5), labels, no_grad=(1,))
    labels = np.array([[[1, 0]], [[2, 2]]], np.float32)  # class axis 1, labels stored as floats
    assert_same_on_cuda(lambda x, t: F.mean(F.softmax_cross_entropy(x, t, axis=1)),
                        signed(2, 3, 2), labels, no_grad=(1,))


def test_softmax_cross_entropy_rejects_bad_labels_as_on_the_cpu():
    labels = np.array([[0], [7]], np.int32)
    with pytest.raises(ValueError, match="label") as cpu:
        run(nn.Context(), F.softmax_cross_entropy, [signed(2, 4), labels], no_grad=(1,))
    with pytest.raises(ValueError, match="label") as gpu:
        run(cuda_context(), F.softmax_cross_entropy, [signed(2, 4), labels], no_grad=(1,))
    assert str(gpu.value) == str(cpu.value)


def test_categorical_cross_entropy_and_kl_multinomial():
    probs = rng.uniform(0.1, 1, (3, 4)).astype(np.float32)
    labels = np.array([[1], [-1], [3]], np.int32)   # -1: ignored
    assert_same_on_cuda(F.categorical_cross_entropy, probs, labels, no_grad=(1,))
    q = rng.uniform(0.1, 1, (3, 4)).astype(np.float32)
    assert_same_on_cuda(F.kl_multinomial, probs / probs.sum(1, keepdims=True),
                        q / q.sum(1, keepdims=True), rtol=1e-4)
    with pytest.raises(ValueError, match="label"):
        run(cuda_context(), F.categorical_cross_entropy, [probs, labels + 4], no_grad=(1,))
