"""nnabla's Function object API (setup/forward/backward on lists of Variables, recompute and the
introspection methods), recomputation of ``Variable.recompute=True`` data, ``Variable.info``
and the NdArray methods nnabla has (indexing, narrow, view, get_data, data_ptr, cast)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F


def var(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a, np.float32), need_grad=need_grad)


# ------------------------------------------------------------------------------ Function API
def test_forward_and_backward_on_lists_of_variables():
    x = var(np.linspace(-1, 1, 6).reshape(2, 3), need_grad=True)
    y = F.tanh(x)
    f = y.parent
    f.setup([x], [y])
    f.forward([x], [y])
    np.testing.assert_allclose(y.d, np.tanh(x.d), rtol=1e-6)
    dtanh = 1 - np.tanh(x.d) ** 2
    y.g = 2.0
    x.g = 1.0
    f.backward([x], [y])                      # accum defaults to True: adds
    np.testing.assert_allclose(x.g, 1 + 2 * dtanh, rtol=1e-5)
    f.backward([x], [y], [False])             # overwrites, even a NaN
    np.testing.assert_allclose(x.g, 2 * dtanh, rtol=1e-5)
    x.g = np.nan
    f.backward([x], [y], [False])
    assert not np.isnan(x.g).any()


def test_backward_skips_inputs_without_need_grad():
    a, b = var(np.ones((2, 2)) * 3, need_grad=True), var(np.ones((2, 2)) * 5, need_grad=True)
    y = F.mul2(a, b)
    f = y.parent
    f.forward([a, b], [y])
    y.g = 1
    a.g, b.g = 0, 0
    b.need_grad = False
    f.backward([a, b], [y], [False, False])
    np.testing.assert_allclose(a.g, 5)
    np.testing.assert_array_equal(b.g, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_writes_zero_into_inputs_without_a_gradient(dtype):
    """As nnabla: an input that needs a gradient the function does not give (a clip bound, a
    metric's input) gets zeros where backward overwrites, and keeps its gradient where it adds."""
    x = nn.Variable.from_numpy_array(np.array([-2.0, 0.0, 2.0], dtype), need_grad=True)
    lo, hi = var([-1.0] * 3, need_grad=True), var([1.0] * 3, need_grad=True)
    y = F.clip_grad_by_value(x, lo, hi)
    y.forward()
    y.g = 3
    lo.g, hi.g = 7, 7
    y.parent.backward([x, lo, hi], [y], [False, True, False])
    np.testing.assert_array_equal(lo.g, 7)
    np.testing.assert_array_equal(hi.g, 0)
    t = var([[1.0], [0.0]])
    e = F.top_n_error(var([[0.1, 0.9], [0.8, 0.2]], need_grad=True), t)
    e.forward()
    e.parent.inputs[0].g = 5
    e.parent.backward(e.parent.inputs, [e], [False, False])
    np.testing.assert_array_equal(e.parent.inputs[0].g, 0)


def test_backward_refuses_inputs_nnabla_refuses():
    """A function without backward, or an input nnabla cannot propagate to (a label), raises
    when it needs a gradient, in Function.backward as in nnabla."""
    a, b = var([1.0, 2.0], need_grad=True), var([1.0, 3.0])
    y = F.equal(a, b)
    y.forward()
    with pytest.raises(NotImplementedError, match=r"Equal.backward: no gradient for input 0 \(x0\)"):
        y.parent.backward([a, b], [y], [False, False])
    a.need_grad = False
    y.parent.backward([a, b], [y], [False, False])     # nothing needs a gradient: nothing to do
    x, t = var([0.5, -0.5], need_grad=True), var([1.0, 0.0], need_grad=True)
    y = F.sigmoid_cross_entropy(x, t)
    y.forward()
    with pytest.raises(NotImplementedError, match=r"SigmoidCrossEntropy.backward: no gradient for "
                                                  r"input 1 \(target\)"):
        y.parent.backward([x, t], [y], [False, False])


def test_backward_of_empty_outputs_does_nothing():
    """As nnabla: nothing flows back from an empty output, even through a function without
    gradient (which raises when the arrays are not empty)."""
    a = var(np.zeros((0, 3)), need_grad=True)
    y = F.equal_scalar(a, 1.0)
    y.forward()
    y.parent.backward([a], [y], [False])


def test_same_variable_twice_gets_both_gradients():
    x = var([1.0, 2.0], need_grad=True)
    y = F.mul2(x, x)
    f = y.parent
    f.forward([x, x], [y])
    y.g = 1
    x.g = 7
    f.backward([x, x], [y], [False, False])
    np.testing.assert_allclose(x.g, 2 * x.d)


def test_function_runs_on_other_variables_after_setup():
    x = var(np.zeros((2, 3)))
    y = F.sin(x)
    f = y.parent
    x2, y2 = var(np.full((4, 1), 0.5)), nn.Variable(())
    f.setup([x2], [y2])
    assert y2.shape == (4, 1)
    f.forward([x2], [y2])
    np.testing.assert_allclose(y2.d, np.sin(0.5), rtol=1e-6)
    np.testing.assert_array_equal(y.d, 0)   # the node's own output is untouched


def test_function_api_checks_its_arguments():
    x = var(np.ones(3))
    y = F.exp(x)
    f = y.parent
    with pytest.raises(TypeError, match="Exp.forward.*lists of Variables"):
        f.forward(x, [nn.Variable((3,))])
    with pytest.raises(ValueError, match="Exp.forward: 2 inputs given, the function takes 1"):
        f.forward([x, x], [nn.Variable((3,))])
    with pytest.raises(TypeError, match=r"Exp.backward: outputs\[0\] is a ndarray"):
        f.backward([x], [np.ones(3)])
    with pytest.raises(ValueError, match="accum has 2 entries for 1 inputs"):
        x.need_grad = True
        f.backward([x], [y], [True, True])


def test_introspection_answers_as_nnabla():
    x = var(np.ones((2, 3)), need_grad=True)
    f = F.tanh(x).parent
    assert (f.name, f.info.type_name, f.info.args, f.info.tags, f.tags) == ("Tanh", "Tanh", {}, {}, {})
    assert f.min_outputs() == 1 and f.inplace_data(0) == 0 and not f.need_setup_recompute(0)
    assert not f.grad_depends_input_data(0, 0) and f.grad_depends_output_data(0, 0)
    with pytest.raises(RuntimeError, match="Tanh: not_implemented error in inplace_data_with"):
        f.inplace_data_with(0)
    reshape = F.reshape(x, (3, 2)).parent
    assert reshape.inplace_data(0) == 1 and reshape.inplace_data_with(0) == 0
    assert F.reshape(x, (3, 2), inplace=False).parent.inplace_data(0) == 0
    assert F.add_scalar(x, 1.0).parent.inplace_data_with(0) == 0
    assert F.dropout(x, 0.5).parent.need_setup_recompute(0)
    assert F.rand(shape=(2,)).parent.need_setup_recompute(0)
    assert not F.batch_normalization(
        nn.Variable((2, 3, 1, 1)), nn.Variable((1, 3, 1, 1)), nn.Variable((1, 3, 1, 1)),
        nn.Variable((1, 3, 1, 1)), nn.Variable((1, 3, 1, 1))).parent.need_setup_recompute(0)
    assert F.split(x, axis=0)[0].parent.min_outputs() == 2
    assert F.max(x, axis=1, with_index=True)[0].parent.min_outputs() == 1
    assert F.affine(x, nn.Variable((3, 4))).parent.info.args == {"base_axis": 1}


def test_recompute_reproduces_random_draws():
    x = var(np.ones((5, 7)))
    y = F.dropout(x, 0.5)
    f = y.parent
    f.setup_recompute([x], [y])
    f.forward([x], [y])
    first = y.d.copy()
    y.data.clear()
    f.recompute([x], [y])
    np.testing.assert_array_equal(y.d, first)
    f.forward([x], [y])   # a plain forward draws anew
    assert not np.array_equal(y.d, first)


def test_recompute_of_a_seeded_generator():
    y = F.randn(shape=(3, 4), seed=5)
    f = y.parent
    f.setup_recompute([], [y])
    f.forward([], [y])
    first = y.d.copy()
    f.forward([], [y])
    f.recompute([], [y])
    np.testing.assert_array_equal(y.d, first)


def test_recompute_of_spectral_norm_starts_from_the_u_before_the_update():
    rng = np.random.RandomState(2)
    w, u = var(rng.randn(5, 3)), var(rng.randn(5))
    u_before = u.d.copy()
    y, u_out = F.spectral_norm(w, u, output_u=True)
    f = y.parent
    assert f.need_setup_recompute(0)   # as nnabla: the update of u is state
    f.setup_recompute([w, u], [y, u_out])
    f.forward([w, u], [y, u_out])
    first, u_after = y.d.copy(), u.d.copy()
    assert not np.allclose(u_after, u_before)
    y.data.clear()
    f.recompute([w, u], [y, u_out])
    np.testing.assert_array_equal(y.d, first)
    np.testing.assert_array_equal(u.d, u_after)   # not updated a second time
    np.testing.assert_array_equal(u_out.d, u_before)


# ------------------------------------------------------------------------------ Variable.recompute
def test_recompute_variables_are_dropped_in_forward_and_recomputed_in_backward():
    x = var(np.arange(6).reshape(2, 3) * 0.1, need_grad=True)
    y = F.tanh(x)
    y.recompute = True
    z = F.sin(y)
    w = F.exp(z)
    w.recompute = True
    loss = F.sum(w)
    loss.forward()
    assert y.data.clear_called and w.data.clear_called and not z.data.clear_called
    loss.backward()
    assert not y.data.clear_called and not w.data.clear_called   # recomputed, then kept
    t = np.tanh(x.d)
    expected = np.exp(np.sin(t)) * np.cos(t) * (1 - t ** 2)
    np.testing.assert_allclose(x.g, expected, rtol=1e-5)
    y.forward()
    assert not y.data.clear_called   # a root is never dropped


def test_recomputed_dropout_uses_the_forward_mask():
    x = var(np.ones((6, 5)), need_grad=True)
    d = F.dropout(x, 0.5)
    d.recompute = True
    loss = F.sum(F.sin(d))
    loss.forward()
    assert d.data.clear_called
    loss.backward()
    np.testing.assert_allclose(x.g, np.cos(d.d) * d.d, rtol=1e-5)   # mask 2 where kept, 0 else


def test_recompute_chain_of_dropped_variables():
    x = var(np.linspace(0, 0.5, 8), need_grad=True)
    a = F.exp(x)
    b = F.exp(a)
    c = F.exp(b)
    for v in (a, b, c):
        v.recompute = True
    loss = F.sum(F.sin(c))
    loss.forward(clear_no_need_grad=True)
    assert a.data.clear_called and b.data.clear_called and c.data.clear_called
    loss.backward(clear_buffer=True)
    ea = np.exp(x.d)
    eb = np.exp(ea)
    ec = np.exp(eb)
    np.testing.assert_allclose(x.g, np.cos(ec) * ec * eb * ea, rtol=1e-4)


# ------------------------------------------------------------------------------ Variable.info
def test_variable_info_holds_what_the_user_sets():
    x = nn.Variable((2,))
    assert x.info is None
    x.info = {"note": 1}
    assert x.info == {"note": 1}
    assert F.tanh(x).info is None


# ------------------------------------------------------------------------------ NdArray
def test_ndarray_indexing_returns_new_arrays_and_assigns_in_place():
    a = nn.NdArray.from_numpy_array(np.arange(12, dtype=np.float32).reshape(3, 4))
    row = a[1]
    assert isinstance(row, nn.NdArray) and row.shape == (4,)
    row.data[...] = -1
    np.testing.assert_array_equal(a.data[1], [4, 5, 6, 7])   # a copy, as in nnabla
    assert a[[0, 2]].shape == (2, 4)
    assert a[np.array([True, False, True])].shape == (2, 4)
    assert a[..., None].shape == (3, 4, 1)
    assert a[nn.NdArray.from_numpy_array(np.array([2, 0]))].shape == (2, 4)
    a[0] = 5
    a[:, 1] = np.array([7, 8, 9])
    a[np.array([False, False, True])] = nn.NdArray.from_numpy_array(np.zeros(4, np.float32))
    np.testing.assert_array_equal(a.data, [[5, 7, 5, 5], [4, 8, 6, 7], [0, 0, 0, 0]])


def test_ndarray_narrow_and_view_share_the_buffer():
    a = nn.NdArray.from_numpy_array(np.arange(6, dtype=np.float32))
    n = a.narrow(0, 2, 3)
    n.data[...] = -1
    np.testing.assert_array_equal(a.data, [0, 1, -1, -1, -1, 5])
    v = a.view((2, 3))
    v.data[1, 2] = 9
    assert a.data[5] == 9
    with pytest.raises(ValueError, match="dim must be 0"):
        nn.NdArray((2, 3)).narrow(1, 0, 1)
    with pytest.raises(ValueError, match=r"rows \[1, 4\) are out of range"):
        a.narrow(0, 1, 3).narrow(0, 1, 3)
    with pytest.raises(ValueError, match="cannot view shape"):
        a.view((4,))


def test_ndarray_get_data_modes_and_dtype():
    a = nn.NdArray.from_numpy_array(np.ones((2, 2), np.float32))
    r = a.get_data("r")
    assert not r.flags.writeable
    assert a.get_data("w").flags.writeable and a.get_data("rw").flags.writeable
    d = a.get_data("r", dtype=np.float64)
    assert d.dtype == np.float64 and a.dtype == np.float32   # a converted copy
    with pytest.raises(ValueError, match="invalid mode 'x'"):
        a.get_data("x")


def test_ndarray_cast_data_ptr_and_modification_count():
    a = nn.NdArray((3,))
    assert a.modification_count == 0
    out = a.cast(np.int32)
    assert isinstance(out, np.ndarray) and out.dtype == np.int32 and a.dtype == np.int32
    assert a.cast(np.float32, nn.get_current_context()) is None and a.dtype == np.float32
    assert a.modification_count == 1
    ptr = a.data_ptr(np.float32, nn.get_current_context())
    assert ptr == a.data.ctypes.data
    with pytest.raises(RuntimeError, match="ctx=None"):   # as nnabla 1.39 without a context
        a.data_ptr(np.float32)
    a.clear()
    assert a.modification_count == 0


def test_recompute_blocks_functions_and_global_default():
    x = nn.Variable((2, 3), need_grad=True)
    with nn.recompute():
        y = F.sin(x)
        fresh = nn.Variable((2,))
        unlinked = x.get_unlinked_variable()
        with nn.recompute(False):
            z = F.cos(y)
    assert y.recompute and fresh.recompute and unlinked.recompute and not z.recompute
    assert not x.recompute and not F.sin(x).recompute

    @nn.recompute_fn()
    def block(a):
        b = F.sin(a)
        return F.cos(b), b
    out, inner = block(x)
    assert out.recompute and inner.recompute
    nn.set_global_recompute(True)
    try:
        assert nn.get_global_recompute() and nn.Variable(()).recompute
    finally:
        nn.set_global_recompute(False)
    assert not nn.Variable(()).recompute


def test_backward_recomputes_outputs_of_the_functions_it_runs_only():
    a0 = nn.Variable((2, 3), need_grad=False)
    a1 = F.sin(a0).apply(recompute=True)   # off the gradient path: stays freed
    b0 = nn.Variable((2, 3), need_grad=True)
    b1 = F.sin(b0).apply(recompute=True)
    c = F.add2(a1, b1)
    c.forward(clear_no_need_grad=True)
    assert a1.data.clear_called and b1.data.clear_called
    c.backward()
    assert a1.data.clear_called and not b1.data.clear_called


def test_recomputed_data_is_there_for_the_pre_hook():
    x = var(np.linspace(-1, 1, 6).reshape(2, 3), need_grad=True)
    y = F.sin(x).apply(recompute=True)
    loss = F.sum(F.exp(y))
    loss.forward()
    seen = []   # as in nnabla: recomputed when the function producing it runs backward
    loss.backward(function_pre_hook=lambda f: seen.append(
        (f.info.type_name, y.data.clear_called, y.d.copy() if f.info.type_name == "Sin" else None)))
    assert [(name, cleared) for name, cleared, _ in seen] == [
        ("Sum", True), ("Exp", True), ("Sin", False)]
    np.testing.assert_allclose(seen[2][2], np.sin(x.d), rtol=1e-6)


def test_variable_item_assignment_stores_values_at_the_next_forward():
    # nnabla 1.39 (recorded): each assignment is a ScatterNd node; a forward computes them
    x = var(np.zeros((3, 2)))
    x[0:2, :] = var(np.ones((2, 2)))
    x[2] = nn.NdArray.from_numpy_array(np.full(2, 5.0, np.float32))
    x[nn.Variable.from_numpy_array(np.array([True, False, False]))] = 7
    np.testing.assert_array_equal(x.d, np.zeros((3, 2)))
    x.forward()
    np.testing.assert_array_equal(x.d, [[7, 7], [1, 1], [5, 5]])


def test_recompute_keeps_data_shared_in_place():
    x = var(np.linspace(-1, 1, 6).reshape(2, 3), need_grad=True)
    x1 = F.sin(x).apply(recompute=True)
    x2 = F.reshape(x1, (3, 2), inplace=True).apply(recompute=True)   # nnabla: x1's buffer
    x3 = F.sin(x2).apply(recompute=True)
    y = F.sin(x3)
    y.forward(clear_no_need_grad=True)
    assert not x1.data.clear_called and not x2.data.clear_called and x3.data.clear_called
    y.backward()
    s1 = np.sin(x.d).reshape(3, 2)
    expected = np.cos(np.sin(s1)) * np.cos(s1) * np.cos(x.d).reshape(3, 2)
    np.testing.assert_allclose(x.g, expected.reshape(2, 3), rtol=1e-5)


def test_no_recomputation_where_backward_reads_no_data():
    x1 = F.identity(nn.Variable((2, 3), need_grad=True)).apply(recompute=True)
    x2 = F.identity(nn.Variable((2, 3), need_grad=True)).apply(recompute=True)
    y = F.identity(F.add2(x1, x2).apply(recompute=True)).apply(recompute=True)
    y.forward(clear_no_need_grad=True)
    recomputed = []
    y.backward(function_pre_hook=lambda f: recomputed.extend(
        v for v in f.inputs if v.parent is not None and not v.data.clear_called))
    assert recomputed == []


def test_recomputation_does_not_update_running_statistics_twice():
    rng = np.random.RandomState(0)
    x = var(rng.randn(4, 3, 2, 2), need_grad=True)
    beta, gamma = var(np.zeros((1, 3, 1, 1)), True), var(np.ones((1, 3, 1, 1)), True)
    mean, variance = var(np.zeros((1, 3, 1, 1))), var(np.ones((1, 3, 1, 1)))
    h = F.batch_normalization(F.sin(x), beta, gamma, mean, variance, batch_stat=True)
    h.recompute = True
    loss = F.sum(F.sin(h))
    loss.forward()
    after_forward = mean.d.copy()
    assert h.data.clear_called
    loss.backward()
    np.testing.assert_array_equal(mean.d, after_forward)
    assert not h.data.clear_called


def test_recompute_of_a_stateful_op_starts_from_the_saved_state():
    rng = np.random.RandomState(1)
    x = var(rng.randn(2, 4))
    w = var(rng.randn(4, 3))
    fixed = nn.Variable.from_numpy_array(np.zeros((4, 3), np.int32))
    y = F.inq_affine(x, w, fixed, inq_iterations=(0, 2), selection_algorithm="random", seed=3)
    f = y.parent
    f.setup_recompute([x, w, fixed], [y])
    f.forward([x, w, fixed], [y])
    first = y.d.copy()
    y.data.clear()
    f.recompute([x, w, fixed], [y])
    np.testing.assert_array_equal(y.d, first)
    assert f.op.iteration == 1   # the schedule advanced once


# ------------------------------------------------- what the differential fixtures found (nnabla's)
def test_ndarray_copy_from_returns_itself_and_takes_nnablas_arguments():
    a, b = nn.NdArray.from_numpy_array(np.zeros((2, 2))), nn.NdArray.from_numpy_array(np.ones((2, 2)))
    assert a.copy_from(arr=b, use_current_context=True) is a
    np.testing.assert_array_equal(a.data, 1)


@pytest.mark.parametrize("method", ["bool_fill", "masked_fill"])
def test_ndarray_bool_fill_fills_in_place_and_returns_a_new_array(method):
    a = nn.NdArray.from_numpy_array(np.arange(4.0).reshape(2, 2))
    mask = nn.NdArray.from_numpy_array(np.array([[1.0, 0.0], [0.0, 1.0]]))
    r = getattr(a, method)(mask, 9.0)
    assert r is not a
    np.testing.assert_array_equal(a.data, [[9, 1], [2, 9]])
    np.testing.assert_array_equal(r.data, a.data)
    a.data[0, 1] = 5           # nnabla's result shares the buffer
    assert r.data[0, 1] == 5


def test_variable_graph_walks_answer_as_nnabla():
    x = var([1.0, 2.0], need_grad=True)
    first, second, third = F.sin(x), F.cos(x), F.exp(x)
    assert [f.name for f in x.function_references] == ["Exp", "Cos", "Sin"]   # the latest first
    assert F.sin(F.cos(x)).visit_check(lambda f: False) is None
    assert F.sin(F.cos(x)).visit_check(lambda f: f.name == "Cos") is True


def test_reshape_and_matmul_errors_are_nnablas_types():
    with pytest.raises(RuntimeError, match="Variable.reshape: cannot reshape"):
        var(np.zeros((2, 3))).reshape((4, 2))
    with pytest.raises(AssertionError, match="both operands must be Variables or NdArrays"):
        var(np.zeros((2, 3))) @ np.zeros((3, 2), np.float32)
