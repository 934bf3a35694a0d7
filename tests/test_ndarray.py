"""NdArray: buffers, setters, casting, operators (seed 004, "NdArray")."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F


def test_default_type_and_shape():
    a = nn.NdArray((2, 3, 4))
    assert a.shape == (2, 3, 4)
    assert a.ndim == 3 and a.size == 24
    assert a.data.dtype == np.float32
    assert a.strides == [12, 4, 1]
    assert a.size_from_axis(1) == 12
    assert a.size_from_axis() == 24


def test_data_is_a_reference():
    a = nn.NdArray((2, 3))
    a.data = np.arange(6).reshape(2, 3)
    view = a.data
    view[0, 0] = 42
    assert a.data[0, 0] == 42


def test_setter_broadcasts_scalars_and_fill_zero():
    a = nn.NdArray((2, 2))
    a.data = 3.5
    np.testing.assert_array_equal(a.data, np.full((2, 2), 3.5))
    a.fill(1)
    np.testing.assert_array_equal(a.data, np.ones((2, 2)))
    a.zero()
    np.testing.assert_array_equal(a.data, np.zeros((2, 2)))


def test_setter_wrong_shape_names_both_shapes():
    a = nn.NdArray((2, 3))
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        a.data = np.zeros((3, 2))


def test_from_numpy_array_copies_and_keeps_dtype():
    src = np.arange(4, dtype=np.int64)
    a = nn.NdArray.from_numpy_array(src)
    src[0] = 9
    assert a.data[0] == 0
    assert a.dtype == np.int64


def test_copy_from_cast_clear():
    a = nn.NdArray.from_numpy_array(np.ones((2, 2), np.float32))
    b = nn.NdArray((2, 2))
    b.copy_from(a)
    np.testing.assert_array_equal(b.data, a.data)
    out = b.cast(np.float64)
    assert out.dtype == np.float64 and b.dtype == np.float64
    b.clear()
    assert b.clear_called
    with pytest.raises(ValueError, match=r"NdArray.copy_from: shape \(3,\) does not match \(2, 2\)"):
        b.copy_from(nn.NdArray((3,)))


def test_imperative_arithmetic_returns_ndarray():
    xi = nn.NdArray.from_numpy_array(np.arange(4).reshape(2, 2).astype(np.float32))
    yi = F.relu(xi - 1)
    assert isinstance(yi, nn.NdArray)
    np.testing.assert_array_equal(yi.data, [[0, 0], [1, 2]])
    np.testing.assert_allclose((xi * 2 + 1).data, np.arange(4).reshape(2, 2) * 2 + 1)
    np.testing.assert_allclose((1 - xi).data, 1 - np.arange(4).reshape(2, 2))
    np.testing.assert_allclose((xi / 2).data, np.arange(4).reshape(2, 2) / 2)


def test_inplace_operators():
    xi = nn.NdArray.from_numpy_array(np.arange(4).reshape(2, 2).astype(np.float32))
    ref = xi
    xi.copy_from(xi + 1)
    xi += 1
    assert xi is ref
    np.testing.assert_array_equal(xi.data, np.arange(4).reshape(2, 2) + 2)
    xi -= 2
    xi *= 3
    xi /= 3
    np.testing.assert_allclose(xi.data, np.arange(4).reshape(2, 2))


def test_identity_equality():
    a, b = nn.NdArray((1,)), nn.NdArray((1,))
    assert a == a and a != b
    assert len({a, b, a}) == 2


# ---------------------------------------------------------------------------- executor access
def test_host_as_converts_a_copy_and_keeps_the_stored_type():
    a = nn.NdArray.from_numpy_array(np.arange(3, dtype=np.int32))
    f = a.host_as(np.dtype(np.float32))
    assert f.dtype == np.float32 and a.dtype == np.int32
    f[0] = 7
    assert a.data[0] == 0
    assert a.host_as() is a.host_as(np.dtype(np.int32))   # as stored: the buffer itself


def test_host_if_held_and_host_needed_tell_a_cleared_buffer():
    from nnabla_jit.ndarray import NotComputed
    a = nn.NdArray((2,))
    assert a.host_if_held() is None
    with pytest.raises(NotComputed, match=r"NdArray\(2,\): no values held"):
        a.host_needed()
    a.fill(3)
    np.testing.assert_array_equal(a.host_needed(), [3, 3])
    a.clear()
    assert a.host_if_held() is None and not a.holds_values


def test_output_buffer_reuses_a_fitting_buffer_and_retypes_otherwise():
    a = nn.NdArray.from_numpy_array(np.ones(4, np.float32))
    buf = a.output_buffer(np.dtype(np.float32))
    assert buf is a.data
    b64 = a.output_buffer(np.dtype(np.float64))
    assert b64.dtype == np.float64 and a.dtype == np.float64 and b64.shape == (4,)


def test_grad_buffer_keeps_values_and_zeroes_new_ones():
    a = nn.NdArray.from_numpy_array(np.full(3, 2, np.float16))
    g = a.grad_buffer(np.dtype(np.float32))
    assert g.dtype == np.float32 and a.dtype == np.float32
    np.testing.assert_array_equal(g, [2, 2, 2])
    fresh = nn.NdArray((3,))
    np.testing.assert_array_equal(fresh.grad_buffer(np.dtype(np.float32)), [0, 0, 0])
    np.testing.assert_array_equal(a.zeroed_buffer(np.dtype(np.float32)), [0, 0, 0])
    a.store_as(np.float16)
    assert a.dtype == np.float16


def test_store_as_overflows_to_inf_as_float16_storage_does():
    a = nn.NdArray.from_numpy_array(np.array([1e6, 1.0], np.float32))
    a.store_as(np.float16)
    assert np.isinf(a.data[0]) and a.data[1] == 1


def test_in_place_product_and_quotient_with_an_ndarray_make_a_new_one_as_nnabla():
    # nnabla 1.39 (recorded): *= and /= with an NdArray operand return a new NdArray; with a
    # scalar, and += / -= always, they write in place
    for op, expected in (("*=", [0.0, 2.0, 4.0]), ("/=", [0.0, 0.5, 1.0])):
        a = nn.NdArray.from_numpy_array(np.arange(3, dtype=np.float32))
        original = a
        b = nn.NdArray.from_numpy_array(np.full(3, 2.0, np.float32))
        namespace = {"a": a, "b": b}
        exec("a {} b".format(op), namespace)
        assert namespace["a"] is not original
        np.testing.assert_array_equal(namespace["a"].data, expected)
        np.testing.assert_array_equal(original.data, [0.0, 1.0, 2.0])
        exec("a {} 2.0".format(op), {"a": original})
        np.testing.assert_array_equal(original.data, expected)
    a = nn.NdArray.from_numpy_array(np.arange(3, dtype=np.float32))
    original = a
    a += nn.NdArray.from_numpy_array(np.ones(3, np.float32))
    assert a is original

