"""Variable: every example of seed 003 and the attributes the core issue lists."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF


def test_data_grad_accessors():
    x = nn.Variable([2, 3, 4], need_grad=True)
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.size == 24
    assert isinstance(x.data, nn.NdArray) and isinstance(x.grad, nn.NdArray)
    x.d = 1.2345
    assert np.all(x.d == x.data.data)
    x.g = 1.2345
    assert np.all(x.g == x.grad.data)
    x.grad.zero()
    assert np.all(x.g == 0)


def test_d_setter_wrong_shape_is_clear():
    x = nn.Variable((2, 3))
    with pytest.raises(ValueError, match=r"Variable.d.*\(4,\).*\(2, 3\)"):
        x.d = np.zeros(4)


def test_from_numpy_array_data_grad_need_grad():
    x2 = nn.Variable.from_numpy_array(np.ones((3,)), need_grad=True)
    assert x2.need_grad and np.all(x2.d == 1)
    x3 = nn.Variable.from_numpy_array(np.ones((3,)), np.zeros((3,)), need_grad=True)
    assert np.all(x3.g == 0)
    assert x2.parent is None
    assert not nn.Variable.from_numpy_array(np.ones(2)).need_grad


def test_parent_and_function_references():
    x = nn.Variable((2, 3), need_grad=True)
    y = F.sigmoid(x)
    s = F.reduce_sum(y)
    assert y.parent.name == "Sigmoid"
    assert s.parent.name == "ReduceSum"
    assert s.parent.inputs[0] is y
    assert [f.name for f in x.function_references] == ["Sigmoid"]
    assert y.parent.info.type_name == "Sigmoid"
    assert y.rank == 1 and s.rank == 2


def test_sigmoid_sum_forward_backward_matches_reference():
    x = nn.Variable([2, 3, 4], need_grad=True)
    x.d = np.random.randn(*x.shape)
    s = F.reduce_sum(F.sigmoid(x))
    s.forward()
    np.testing.assert_allclose(s.d, np.sum(1 / (1 + np.exp(-x.d))), rtol=1e-5)
    x.grad.zero()
    s.backward()
    sig = 1 / (1 + np.exp(-x.d))
    np.testing.assert_allclose(x.g, sig * (1 - sig), rtol=1e-5)


def test_affine_example_need_grad_false_input_keeps_grad():
    x = nn.Variable([5, 2])
    w = nn.Variable([2, 3], need_grad=True)
    b = nn.Variable([3], need_grad=True)
    y = F.affine(x, w, b)
    x.d, w.d, b.d = np.random.randn(5, 2), np.random.randn(2, 3), np.random.randn(3)
    for v in (x, w, b):
        v.grad.zero()
    y.forward()
    y.backward()
    np.testing.assert_allclose(y.d, x.d @ w.d + b.d, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.g, np.tile(x.d.sum(0)[:, None], (1, 3)), rtol=1e-5)
    np.testing.assert_allclose(b.g, [5, 5, 5])
    assert np.all(x.g == 0)


def test_backward_accumulates_into_leaves_and_overwrites_intermediates():
    x = nn.Variable.from_numpy_array(np.ones(2, np.float32), need_grad=True)
    x.g = 0
    y = x * 2
    y.g = 5
    s = F.sum(y)
    s.g = 7
    s.forward()
    s.backward()
    np.testing.assert_array_equal(x.g, [2, 2])
    np.testing.assert_array_equal(y.g, [1, 1])   # overwritten, not accumulated
    assert s.g == 7                               # the seed does not touch the stored grad
    s.backward()
    np.testing.assert_array_equal(x.g, [4, 4])
    s.backward(grad=None)                         # uses the held gradient, 7
    np.testing.assert_array_equal(x.g, [18, 18])


def test_backward_with_array_and_ndarray_grad():
    x = nn.Variable.from_numpy_array(np.ones(3, np.float32), need_grad=True)
    x.g = 0
    y = x * 3
    y.forward()
    y.backward(grad=np.array([1, 2, 3]))
    np.testing.assert_array_equal(x.g, [3, 6, 9])
    x.g = 0
    y.backward(grad=nn.NdArray.from_numpy_array(np.ones(3)))
    np.testing.assert_array_equal(x.g, [3, 3, 3])


def test_unlinked_variable_shares_buffers_and_equality():
    x = nn.Variable.from_numpy_array(np.array([[1, 2], [3, 4]], np.float32))
    y = F.tanh(x)
    z = y.get_unlinked_variable(need_grad=False)
    assert y.parent is not None and z.parent is None
    assert z == y and hash(z) == hash(y)
    assert not z.need_grad
    y.forward()
    np.testing.assert_array_equal(z.d, y.d)
    assert len({y, z}) == 1


def test_unlinked_backward_takes_over_grad():
    """Seed 003: backward over two graphs separated by an unlinked variable."""
    rng = np.random.RandomState(0)
    x = nn.Variable.from_numpy_array(rng.randn(4, 3).astype(np.float32))
    w1 = nn.Variable.from_numpy_array(rng.randn(3, 5).astype(np.float32), need_grad=True)
    w2 = nn.Variable.from_numpy_array(rng.randn(5, 1).astype(np.float32), need_grad=True)
    h = F.tanh(F.affine(x, w1))
    loss_full = F.mean(F.abs(F.affine(h, w2) - 1.0))
    loss_full.forward()
    w1.g, w2.g = 0, 0
    loss_full.backward()
    expected = w1.g.copy()

    h_unlinked = h.get_unlinked_variable(need_grad=True)
    loss = F.mean(F.abs(F.affine(h_unlinked, w2) - 1.0))
    h.forward()
    loss.forward()
    w1.g, w2.g = 0, 0
    h_unlinked.g = 0
    loss.backward()
    assert np.all(w1.g == 0)                    # stops at the unlinked variable
    h.backward(grad=None)                       # takes over the gradient held by h_unlinked
    np.testing.assert_allclose(w1.g, expected, rtol=1e-5, atol=1e-6)


def test_persistent_recompute_apply():
    x = nn.Variable((2,))
    assert x.apply(persistent=True, need_grad=True) is x
    assert x.persistent and x.need_grad
    x.recompute = True
    assert x.recompute


def test_reshape_and_reset_shape():
    x = nn.Variable.from_numpy_array(np.arange(6, dtype=np.float32))
    y = x.reshape((2, 3))
    assert y.parent.name == "Reshape"
    y.forward()
    np.testing.assert_array_equal(y.d, np.arange(6).reshape(2, 3))
    u = x.reshape((3, 2), unlink=True)
    assert u.parent is None
    u.d[0, 0] = 100
    assert x.d[0] == 100
    x.reset_shape((3, 2), force=False)
    assert x.shape == (3, 2)
    with pytest.raises(ValueError, match="has a different size than"):
        x.reset_shape((7,))
    x.reset_shape((7,), force=True)
    assert x.shape == (7,)


def test_size_from_axis():
    a = nn.Variable([10, 9])
    assert a.size_from_axis() == 90
    assert a.size_from_axis(0) == 90
    assert a.size_from_axis(1) == 9
    assert a.size_from_axis(2) == 1


def test_visit_and_visit_check():
    x = nn.Variable((2, 3))
    y = F.relu(F.affine(x, nn.Variable((3, 4))))
    names = []
    y.visit(lambda f: names.append(f.info.type_name))
    assert names == ["Affine", "ReLU"]
    assert y.visit_check(lambda f: f.info.type_name == "Affine")
    assert not y.visit_check(lambda f: f.info.type_name == "AveragePooling")


def test_rewire_on():
    xa = nn.Variable((2, 8), need_grad=True)
    wa = nn.Variable.from_numpy_array(np.random.randn(8, 3).astype(np.float32), need_grad=True)
    ya = F.tanh(F.affine(xa, wa))
    xb = nn.Variable((2, 4), need_grad=True)
    wb = nn.Variable.from_numpy_array(np.random.randn(4, 8).astype(np.float32), need_grad=True)
    yb = F.tanh(F.affine(xb, wb))
    xa.rewire_on(yb)
    assert xa.parent is not None and yb.parent is None
    xb.d = 1
    ya.forward()
    expected = np.tanh(np.tanh(np.ones((2, 4)) @ wb.d) @ wa.d)
    np.testing.assert_allclose(ya.d, expected, rtol=1e-5)
    wb.g = 0
    ya.backward()
    assert np.any(wb.g != 0)


def test_clear_all_graph_links():
    x = nn.Variable((2,), need_grad=True)
    y = F.tanh(F.tanh(x))
    y.clear_all_graph_links()
    assert y.parent is None


def test_no_grad_method_copies_the_network_as_nnabla():
    # nnabla 1.39 (recorded): a copy of the graph on new leaves sharing the data; the flags stay
    x = nn.Variable.from_numpy_array(np.arange(4.0).reshape(2, 2), need_grad=True)
    w = nn.Variable.from_numpy_array(np.ones((2, 2)), need_grad=True)
    y = F.sin(x) * w
    z = y.no_grad()
    assert z is not y and z.parent is not y.parent and z.parent.name == "Mul2"
    assert z.need_grad and y.need_grad and x.need_grad and w.need_grad
    sin_input = z.parent.inputs[0].parent.inputs[0]
    assert sin_input is not x and sin_input.need_grad
    x.d = np.arange(4.0).reshape(2, 2) + 1   # the copy reads the shared data
    z.forward()
    np.testing.assert_allclose(z.d, np.sin(np.arange(4.0).reshape(2, 2) + 1), rtol=1e-6)
    leaf = x.no_grad()
    assert leaf is not x and leaf.parent is None and leaf.need_grad
    np.testing.assert_array_equal(leaf.d, x.d)


def test_no_grad_copies_of_registered_parameters_need_no_grad_as_nnabla():
    # nnabla 1.39 (recorded with the oracle): in the copy, registered parameters have need_grad
    # False (and the outputs that depend only on them), other leaves keep their flags
    nn.clear_parameters()
    x = nn.Variable.from_numpy_array(np.ones((2, 3)), need_grad=False)
    y = F.tanh(PF.affine(x, 4))
    flags = []
    y.no_grad().visit(lambda f: flags.append(
        (f.info.type_name, [i.need_grad for i in f.inputs], [o.need_grad for o in f.outputs])))
    assert flags == [("Affine", [False, False, False], [False]), ("Tanh", [False], [False])]
    assert y.parent.inputs[0].parent.inputs[1].need_grad   # the parameters keep theirs
    p = nn.parameter.get_parameter_or_create("p", (2, 3), need_grad=True)
    v = nn.Variable((2, 3), need_grad=True)
    flags = []
    F.add2(F.tanh(p * 2), v).no_grad().visit(lambda f: flags.append(
        (f.info.type_name, [i.need_grad for i in f.inputs], [o.need_grad for o in f.outputs])))
    assert flags == [("MulScalar", [False], [False]), ("Tanh", [False], [False]),
                     ("Add2", [False, True], [True])]
    nn.clear_parameters()


def test_setitem_builds_a_scatter_that_the_next_forward_runs_as_nnabla():
    # nnabla 1.39 (recorded): the old values until a forward, then the assigned ones
    x = np.arange(6.0).reshape(2, 3)
    for key, value, expected in ((0, 7.0, [7, 7, 7, 3, 4, 5]), ((slice(None), 1), np.array([8.0, 9.0]), [0, 8, 2, 3, 9, 5]),
                                 ((0, 1), 5.0, [0, 5, 2, 3, 4, 5]), (np.array([True, False]), 4.0, [4, 4, 4, 3, 4, 5])):
        v = nn.Variable.from_numpy_array(x, need_grad=True)
        v[key] = value
        assert v.parent.name == "ScatterNd"
        np.testing.assert_array_equal(v.d.ravel(), x.ravel())
        v.forward()
        np.testing.assert_array_equal(v.d.ravel(), expected)
    v = nn.Variable.from_numpy_array(x)
    v[1] = nn.Variable.from_numpy_array(np.array([1.0, 2.0, 3.0]))
    v.forward()
    np.testing.assert_array_equal(v.d.ravel(), [0, 1, 2, 1, 2, 3])
    leaf = nn.Variable.from_numpy_array(x)
    y = F.identity(leaf)   # a computed variable: its function's output moves to the scatter's input
    y[0] = 1.0
    assert y.parent.name == "ScatterNd" and y.parent.inputs[2].parent.name == "Identity"
    y.forward()
    np.testing.assert_array_equal(y.d.ravel(), [1, 1, 1, 3, 4, 5])
    np.testing.assert_array_equal(leaf.d, x)


def test_forward_of_a_leaf_raises_as_nnabla():
    x = nn.Variable.from_numpy_array(np.ones((2, 2)))
    with pytest.raises(RuntimeError, match="has no parent"):
        x.forward()


def test_bool_fill_():
    x = nn.Variable.from_numpy_array(np.arange(4, dtype=np.float32))
    mask = nn.NdArray.from_numpy_array(np.array([1, 0, 1, 0]))
    y = x.bool_fill_(mask, -1.0)
    y.forward()
    np.testing.assert_array_equal(y.d, [-1, 1, -1, 3])


def test_operators_build_nnabla_ops():
    v = nn.Variable((2, 3))
    w = nn.Variable((2, 3))
    assert (v + 1).parent.name == "AddScalar"
    assert (v + w).parent.name == "Add2"
    assert (v - 1).parent.name == "AddScalar"
    assert (1 - v).parent.name == "RSubScalar"
    assert (v * 2).parent.name == "MulScalar"
    assert (v / 2).parent.name == "MulScalar"
    assert (2 / v).parent.name == "RDivScalar"
    assert (v ** 2).parent.name == "PowScalar"
    assert (2 ** v).parent.name == "RPowScalar"
    assert (-v).parent.name == "MulScalar"
    assert (v / w).parent.name == "Div2"
    assert (v < 1).parent.name == "LessScalar"
    assert (v >= w).parent.name == "GreaterEqual"
    assert (v @ nn.Variable((3, 2))).shape == (2, 2)


def test_getitem():
    x = nn.Variable.from_numpy_array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for key in [0, (1, slice(None), 2), (Ellipsis, 1), (slice(None, None, -1),), (None, 0),
                (slice(0, 2), slice(1, 3), slice(None, None, 2)), (-1, -1)]:
        y = x[key]
        y.forward()
        np.testing.assert_array_equal(y.d, x.d[key])
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        x[5]


def test_repr_and_no_len():
    v = nn.Variable((2, 3), need_grad=True)
    assert repr(v).startswith("<Variable((2, 3), need_grad=True)")
    # nnabla's Variable has no len(): numpy must not take it for a sequence, so that
    # ``np.float64(2) ** v`` reaches Variable.__rpow__ and gives a Variable
    with pytest.raises(TypeError, match="len"):
        len(v)
    with nn.auto_forward():
        z = np.float64(2.0) ** nn.Variable.from_numpy_array(np.array([1.0, 3.0], np.float32))
    assert isinstance(z, nn.Variable)
    np.testing.assert_allclose(z.d, [2.0, 8.0])
    assert nn.Variable(()) and nn.Variable((0, 3))   # true whatever the shape, as nnabla's
