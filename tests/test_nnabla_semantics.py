"""Where nnabla's behaviour is what programs rely on: Variable.reshape with -1, indexing with
index arrays and masks, backward through data that a clear_no_need_grad forward freed, and
tile_images keeping the image type. (Backward with nothing to differentiate and metrics without
a gradient: tests/test_errors.py, tests/test_graph.py, tests/ops/test_validation.py.)"""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.monitor import tile_images


def var(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a), need_grad=need_grad)


def function_types(y):
    names = []
    y.visit(lambda f: names.append(f.info.type_name))
    return names


# ------------------------------------------------------------------------------ reshape
def test_reshape_infers_one_minus_one():
    x = var(np.arange(12.0).reshape(3, 4), need_grad=True)
    y = x.reshape((-1, 6))
    assert y.shape == (2, 6) and y.parent.info.args["shape"] == (-1, 6)   # kept as given
    y.forward()
    np.testing.assert_array_equal(y.d, np.arange(12.0).reshape(2, 6))
    z = x.reshape((2, -1), unlink=True)
    assert z.shape == (2, 6) and z.parent is None
    z.d[0, 0] = 7
    assert x.d[0, 0] == 7   # shares the buffer


@pytest.mark.parametrize("shape, message", [
    ((-1, -1), "at most one -1"),
    ((5, -1), r"cannot reshape \(3, 4\) \(size 12\) into \(5, -1\)"),
    ((5, 2), r"into \(5, 2\) \(size 10\)"),
    ((-2, 6), "no other negative size"),
])
def test_reshape_rejects_what_cannot_fit(shape, message):
    with pytest.raises(ValueError, match=message):
        nn.Variable((3, 4)).reshape(shape)


# ------------------------------------------------------------------------------ indexing
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("key", [
    [0, 1, 1],
    np.array([1, 0]),
    np.array([-1, 0]),
    [[0, 1], [1, 0]],
    ([0, 1], [1, 2]),
    (np.array([[0, 1], [1, 0]]), np.array([2, 0])),
    np.array([True, False]),
    X > 5,
    (X > 5)[:, :, 0],
], ids=lambda k: repr(k)[:30])
def test_index_arrays_and_masks_gather_like_numpy(key):
    x = var(X)
    y = x[key]
    assert function_types(y) == ["GatherNd"]
    y.forward()
    np.testing.assert_array_equal(y.d, X[key])


def test_index_variables_are_stacked_into_the_graph():
    x = var(X)
    i = var(np.array([1, 0]))
    j = var(np.array([2, 2]))
    y = x[i, j]
    assert function_types(y) == ["Stack", "GatherNd"]
    y.forward()
    np.testing.assert_array_equal(y.d, X[[1, 0], [2, 2]])
    i.d = [0, 1]   # computed by the graph: a new index takes effect at the next forward
    y.forward()
    np.testing.assert_array_equal(y.d, X[[0, 1], [2, 2]])
    mask = var(X > 20)   # a mask Variable is read when the graph is built, as in nnabla
    m = x[mask]
    m.forward()
    np.testing.assert_array_equal(m.d, X[X > 20])


def test_leading_none_adds_an_axis():
    y = var(X)[None, [1, 0]]
    y.forward()
    np.testing.assert_array_equal(y.d, X[None, [1, 0]])


def test_gather_by_index_is_differentiable():
    x = var(X, need_grad=True)
    loss = F.sum(x[[1, 0, 1]] ** 2)
    loss.forward()
    x.g = 0
    loss.backward()
    np.testing.assert_allclose(x.g, 2 * X * np.array([1, 2])[:, None, None])


@pytest.mark.parametrize("key, error, message", [
    ((slice(None), [0, 2]), NotImplementedError, "mixed advanced indexing"),
    ((Ellipsis, [1, 3]), NotImplementedError, "mixed advanced indexing"),
    ((0, [0, 2]), NotImplementedError, "mixed advanced indexing"),
    ([2, 0], IndexError, "index 2 is out of bounds for axis 0 of size 2"),
    (np.array([True, False, True]), IndexError, r"mask of shape \(3,\) does not match"),
    (np.array([0.5]), IndexError, "integers or booleans"),
])
def test_indexing_errors(key, error, message):
    with pytest.raises(error, match=message):
        var(X)[key]


# ------------------------------------------------------------------------------ freed inputs
def test_backward_needing_only_the_shape_of_a_freed_input():
    rng = np.random.RandomState(0)
    w = var(rng.randn(5, 3).astype(np.float32), need_grad=True)
    idx = var(np.array([[0, 2], [4, 1]]))
    loss = F.sum(F.embed(idx, w * 2) ** 2)   # w * 2 is freed: Embed's backward reads no W data
    loss.forward(clear_no_need_grad=True)
    loss.backward(clear_buffer=True)
    cleared = w.g.copy()
    w.g = 0
    loss.forward()
    loss.backward()
    np.testing.assert_allclose(cleared, w.g, rtol=1e-6)
    assert not np.isnan(cleared).any() and np.abs(cleared).sum() > 0


# ------------------------------------------------------------------------------ tile_images
def test_tile_images_keeps_uint8():
    images = (np.random.RandomState(0).rand(4, 3, 8, 8) * 255).astype(np.uint8)
    tiled = tile_images(images, padval=0)
    assert tiled.dtype == np.uint8 and tiled.shape == (18, 18, 3)
    np.testing.assert_array_equal(tiled[9:17, 0:8], images[2].transpose(1, 2, 0))
    assert tile_images(images[:, :1].astype(np.float32)).dtype == np.float32


# ------------------------------------------------------------------------------ F.slice
@pytest.mark.parametrize("start, stop, step", [
    ([-1, None, 0], [None, None, 2], [-1, -1, 1]),
    ([None, 1, None], [2, None, None], [None, 2, None]),
    (None, None, None),
])
def test_slice_takes_none_as_python_slices_do(start, stop, step):
    data = np.random.RandomState(0).rand(4, 4, 2)
    y = F.slice(var(data), start, stop, step)
    y.forward()
    n = [None] * 3
    keys = tuple(slice(a, b, c) for a, b, c in zip(start or n, stop or n, step or n))
    np.testing.assert_allclose(y.d, data[keys])
    assert all(isinstance(v, int) for k in ("start", "stop", "step") for v in y.parent.info.args[k])


# ------------------------------------------------ error types nnabla programs catch
@pytest.mark.parametrize("p", [-0.01, 1.0])
def test_op_setup_errors_are_runtime_errors_as_in_nnabla(p):
    """nnabla reports an op's bad arguments as RuntimeError; ours is also a ValueError."""
    with pytest.raises(RuntimeError, match=r"Dropout: p must be in \[0, 1\)") as info:
        F.dropout(nn.Variable((2, 3)), p)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("shape_a, shape_b", [((), ()), ((3,), ()), ((), (3,))])
def test_matmul_of_a_0d_operand_raises_assertion_error_as_in_nnabla(shape_a, shape_b):
    for a, b in [(nn.NdArray(shape_a), nn.NdArray(shape_b)), (nn.Variable(shape_a), nn.Variable(shape_b))]:
        with pytest.raises(AssertionError, match=r"matmul \(@\): the (1st|2nd) operand has 0 dimensions"):
            a @ b


# numpy's matmul rules for 1-d operands, with the functions nnabla builds them from
@pytest.mark.parametrize("shape_a, shape_b, types", [
    ((4,), (4,), ["Mul2", "Sum"]),
    ((4,), (4, 3), ["Reshape", "Affine", "Reshape"]),
    ((3, 4), (4,), ["Reshape", "Affine", "Reshape"]),
    ((2, 3, 4), (4,), ["Reshape", "BatchMatmul", "Reshape"]),
    ((4,), (2, 4, 3), ["Reshape", "BatchMatmul", "Reshape"]),
    ((2, 1, 3, 4), (5, 2, 1, 4, 3), ["Reshape", "BatchMatmul"]),
])
def test_matmul_follows_numpy_for_any_rank(shape_a, shape_b, types):
    rng = np.random.RandomState(0)
    a, b = rng.randn(*shape_a).astype(np.float32), rng.randn(*shape_b).astype(np.float32)
    want = a @ b
    y = var(a, need_grad=True) @ var(b, need_grad=True)
    assert y.shape == want.shape and function_types(y) == types
    y.forward()
    np.testing.assert_allclose(y.d, want, rtol=1e-5, atol=1e-5)
    y.backward()   # the reshapes and the sum take gradients back to the 1-d operands
    nd = nn.NdArray.from_numpy_array(a) @ nn.NdArray.from_numpy_array(b)
    assert isinstance(nd, nn.NdArray)
    np.testing.assert_allclose(nd.data, want, rtol=1e-5, atol=1e-5)


def test_an_ndarray_given_as_output_is_the_output_data():
    a, b = var(np.ones(4, np.float32)), var(np.ones(4, np.float32))
    c = F.add2(a, b, inplace=True, outputs=[a.data])   # writes into a's buffer, as nnabla
    assert isinstance(c, nn.Variable) and c.data is a.data
    for _ in range(3):
        c.forward()
    np.testing.assert_array_equal(a.d, [4, 4, 4, 4])


# ------------------------------------------------ NdArray.zeroing
def test_zeroing_is_true_after_zero_until_the_values_are_used():
    a = nn.NdArray((2, 3))
    assert not a.zeroing
    a.zero()
    assert a.zeroing and np.all(a.data == 0)
    assert not a.zeroing          # handing out the values ends it
    a.zero()
    a.fill(1)
    assert not a.zeroing


def test_solver_skips_a_gradient_still_zeroing():
    import nnabla_jit.solvers as S
    xs = [nn.Variable((2, 3), need_grad=True) for _ in range(2)]
    solver = S.Sgd(1)
    solver.set_parameters({str(i): x for i, x in enumerate(xs)})
    for x in xs:
        x.data.fill(1)
        x.grad.zero()
    solver.weight_decay(1.0)
    solver.update()
    for x in xs:
        assert x.grad.zeroing
        np.testing.assert_allclose(x.d, 1)
    xs[0].grad.fill(1)
    solver.weight_decay(0.5)
    solver.update()
    np.testing.assert_allclose(xs[0].d, 1 - 1.5)
    np.testing.assert_allclose(xs[1].d, 1)


# ------------------------------------------------ Function.set_active_input_mask
@pytest.mark.parametrize("fn, combine", [(F.add_n, np.add.reduce), (F.mul_n, np.multiply.reduce)])
def test_active_input_mask_uses_only_the_active_inputs(fn, combine):
    values = [np.full((2,), k + 2.0, np.float32) for k in range(3)]
    xs = [var(v, need_grad=True) for v in values]
    y = fn(*xs)
    y.parent.set_active_input_mask([True, False, True])
    y.forward()
    np.testing.assert_allclose(y.d, combine([values[0], values[2]]))
    for x in xs:
        x.g = 7
    y.backward()
    other = {0: values[2], 2: values[0]}
    for k in (0, 2):
        np.testing.assert_allclose(xs[k].g, 7 + (1 if fn is F.add_n else other[k]))
    np.testing.assert_allclose(xs[1].g, 7)     # an inactive input's gradient is untouched


def test_active_input_mask_is_checked():
    xs = [var(np.ones(2), need_grad=True) for _ in range(2)]
    with pytest.raises(RuntimeError, match=r"AddN.set_active_input_mask: the mask has 1 entries"):
        F.add_n(*xs).parent.set_active_input_mask([True])
    with pytest.raises(RuntimeError, match=r"Add2.set_active_input_mask: Add2 does not allow"):
        (xs[0] + xs[1]).parent.set_active_input_mask([True, False])


# ------------------------------------------------ persistent variables keep their gradient
@pytest.mark.parametrize("persistent_at", [1, 3, 6])
def test_persistent_intermediate_keeps_its_gradient_through_backward_clear_buffer(persistent_at):
    """Inside a run of elementwise ops (fused in backward) as at its end, as nnabla keeps it."""
    x = nn.Variable((2, 3), need_grad=True)
    hs = [x]
    for k in range(7):     # h[k+1] = 2 h[k] + 1 (k even) or h[k] + 1 (k odd)
        hs.append(hs[-1] * 2 + 1 if k % 2 == 0 else hs[-1] + 1)
    hs[persistent_at].persistent = True
    x.data.zero()
    hs[-1].forward(clear_no_need_grad=True)
    hs[-1].backward(clear_buffer=True)
    d_y_d_h = 2 ** sum(1 for k in range(persistent_at, 7) if k % 2 == 0)
    np.testing.assert_allclose(hs[persistent_at].g, d_y_d_h)
    np.testing.assert_allclose(x.g, 2 ** 4)


# ------------------------------------------------ Dropout's mask found from its input
def test_dropout_rule_without_outputs_uses_the_dropout_applied_to_the_input():
    from nnabla_jit._dropout_workaround import _get_dropout_mask
    from nnabla_jit.backward_functions import registry
    rng = np.random.RandomState(0)
    x = var(rng.randn(4, 5).astype(np.float32), need_grad=True)
    dy_values = rng.randn(4, 5).astype(np.float32)
    dy = var(dy_values, need_grad=True)
    with pytest.raises(RuntimeError, match="Dropout's grad rule: no Dropout was applied"):
        registry["Dropout"]([dy], [x], [None], [None], [None], 0.5, 3)
    y = F.dropout(x, 0.5, 3)
    dx = registry["Dropout"]([dy], [x], [None], [None], [None], 0.5, 3)
    y.forward()
    mask = _get_dropout_mask(x).d
    assert set(np.unique(mask)) <= {0.0, 1.0}
    np.testing.assert_array_equal(mask, y.d != 0)
    dx.forward()
    np.testing.assert_allclose(dx.d, dy_values * mask / 0.5, rtol=1e-6)


def test_get_dropout_mask_of_a_variable_without_dropout_raises():
    from nnabla_jit._dropout_workaround import _get_dropout_mask
    with pytest.raises(RuntimeError, match="_get_dropout_mask: no Dropout"):
        _get_dropout_mask(nn.Variable((2,)))
