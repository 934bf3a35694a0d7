"""The executor's behaviour on changing shapes, on backward without the forward values it needs,
and on shapes and values a buffer cannot hold (issue 8 item 5, issue 9 item 1)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.buffers import InputNotComputed


# ---------------------------------------------------------------------------- re-setup
def test_reset_shape_sets_up_the_graph_downstream_again():
    a = nn.Variable((2, 3))
    b = F.sum(a * 2, axis=1)
    a.d = 1
    b.forward()
    assert b.shape == (2,)
    a.reset_shape((5, 3), force=True)
    a.d = 1
    b.forward()
    assert b.shape == (5,)
    np.testing.assert_array_equal(b.d, np.full(5, 6, np.float32))


def test_re_setup_reaches_every_op_and_backward_takes_the_new_shapes():
    x = nn.Variable((2, 4), need_grad=True)
    w = nn.Variable.from_numpy_array(np.arange(4, dtype=np.float32).reshape(1, 4))
    h = F.tanh(x * w + 1)          # broadcasting, then a fusible elementwise run
    loss = F.sum(F.mean(h, axis=1) ** 2)
    rng = np.random.RandomState(0)
    for rows in (2, 7, 3):
        if x.shape[0] != rows:
            x.reset_shape((rows, 4), force=True)
        x.d = rng.randn(rows, 4)
        x.g = 0
        loss.forward(clear_no_need_grad=True)
        loss.backward(clear_buffer=True)
        hv = np.tanh(x.d * w.d + 1)
        m = hv.mean(axis=1)
        assert h.shape == (rows, 4)
        np.testing.assert_allclose(loss.d, (m ** 2).sum(), rtol=1e-5)
        want_g = (2 * m[:, None] / 4) * (1 - hv ** 2) * w.d
        np.testing.assert_allclose(x.g, want_g, rtol=1e-4, atol=1e-6)


def test_a_new_shape_an_op_cannot_take_is_an_error_at_forward():
    a = nn.Variable((2, 3))
    b = nn.Variable((2, 3))
    c = a + b
    a.d, b.d = 1, 2
    c.forward()
    a.reset_shape((4, 5), force=True)
    with pytest.raises(ValueError, match="Add2"):
        c.forward()


def test_a_data_dependent_shape_change_flows_downstream_in_the_same_pass():
    x = nn.Variable.from_numpy_array(np.arange(6, dtype=np.float32).reshape(3, 2))
    mask = nn.Variable.from_numpy_array(np.array([1, 0, 1], np.float32))
    y = F.bool_gather(x, mask) * 2 + 1
    y.forward()
    np.testing.assert_array_equal(y.d, [[1, 3], [9, 11]])
    mask.d = [1, 1, 1]
    y.forward()
    assert y.shape == (3, 2)
    np.testing.assert_array_equal(y.d, [[1, 3], [5, 7], [9, 11]])
    mask.d = [0, 1, 0]
    y.forward(clear_buffer=True)
    np.testing.assert_array_equal(y.d, [[5, 7]])


# ---------------------------------------------------------------------------- backward needs forward
@pytest.fixture
def zero_reads(monkeypatch):
    from nnabla_jit.ops import common
    monkeypatch.setattr(common, "UNCOMPUTED_READS", "zeros")   # NNABLA_JIT_UNCOMPUTED_READS=zeros


def test_backward_before_forward_reads_zeros_when_asked(zero_reads):
    z = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32), need_grad=True)
    F.sum(F.tanh(z)).backward()   # tanh's output never computed: 1 - 0**2
    np.testing.assert_array_equal(z.g, 1)


def test_backward_over_data_a_clearing_backward_freed_reads_zeros_when_asked(zero_reads):
    x = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32), need_grad=True)
    w = nn.Variable.from_numpy_array(np.full((3, 1), 2, np.float32), need_grad=True)
    h = F.tanh(x)
    y1, y2 = F.affine(h, w), F.affine(h, w)
    nn.forward_all([y1, y2])
    y1.backward(clear_buffer=True)   # frees h, which y2's backward reads (for w's and x's)
    x.grad.zero()
    w.grad.zero()
    y2.backward(clear_buffer=True)
    # h reads as zeros (nnabla reads whatever its memory pool left there: no error either)
    np.testing.assert_array_equal(w.g, 0)
    np.testing.assert_array_equal(x.g, 2)


def test_backward_before_forward_is_an_error_naming_the_op():
    z = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32), need_grad=True)
    loss = F.sum(F.tanh(z))
    with pytest.raises(InputNotComputed, match=r"Tanh needs the data of its output 0.*forward\(\)"):
        loss.backward()
    loss.forward()
    loss.backward()
    np.testing.assert_allclose(z.g, 1 - np.tanh(1.0) ** 2, rtol=1e-6)


def test_backward_after_forward_cleared_what_it_needs_is_an_error():
    z = nn.Variable.from_numpy_array(np.full((2, 3), 0.5, np.float32), need_grad=True)
    loss = F.sum(F.exp(z) * F.sigmoid(z))
    loss.forward(clear_buffer=True)
    with pytest.raises(InputNotComputed, match="forward"):
        loss.backward()
    with pytest.raises(InputNotComputed, match="forward"):   # the fused backward too
        loss.backward(clear_buffer=True)
    loss.forward(clear_no_need_grad=True)   # keeps what backward needs
    z.g = 0
    loss.backward(clear_buffer=True)
    s = 1 / (1 + np.exp(-0.5))
    np.testing.assert_allclose(z.g, np.exp(0.5) * s + np.exp(0.5) * s * (1 - s), rtol=1e-5)


@pytest.fixture
def as_nnabla(monkeypatch):
    """nnabla_jit running as nnabla (what install_as_nnabla does to sys.modules), the policy
    left to its default, and the once-per-process warning not yet given."""
    from nnabla_jit.ops import common
    monkeypatch.setitem(sys.modules, "nnabla", nn)
    monkeypatch.setattr(common, "UNCOMPUTED_READS", None)
    monkeypatch.setattr(common, "_warned", [])
    return common


def _uncomputed_warnings(caught):
    from nnabla_jit.ops.common import UncomputedReadWarning
    return [w for w in caught if issubclass(w.category, UncomputedReadWarning)]


def test_as_nnabla_a_backward_before_forward_reads_zeros_and_warns_once(as_nnabla):
    import warnings
    z = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32), need_grad=True)
    loss = F.sum(F.tanh(z))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss.backward()        # tanh's output never computed: nnabla's fresh buffer, zeros
        z.grad.zero()
        loss.backward()
        F.sum(F.exp(z) * F.sigmoid(z)).backward(clear_buffer=True)   # the fused backward too
    # 1 from tanh over zeros, then nothing from exp * sigmoid over zeros (accumulated into z)
    np.testing.assert_array_equal(z.g, 1)
    found = _uncomputed_warnings(caught)
    assert len(found) == 1 and "read as zeros" in str(found[0].message)
    assert "NNABLA_JIT_UNCOMPUTED_READS" in str(found[0].message)


def test_as_nnabla_softmax_cross_entropy_before_forward_warns(as_nnabla):
    import warnings
    x = nn.Variable((2, 3), need_grad=True)
    t = nn.Variable.from_numpy_array(np.array([[1], [2]]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F.mean(F.softmax_cross_entropy(x, t)).backward()
    np.testing.assert_allclose(x.g, [[0, -0.5, 0], [0, 0, -0.5]])
    assert len(_uncomputed_warnings(caught)) == 1


def test_as_nnabla_an_explicit_error_policy_still_raises(as_nnabla, monkeypatch):
    monkeypatch.setattr(as_nnabla, "UNCOMPUTED_READS", "error")
    z = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32), need_grad=True)
    with pytest.raises(InputNotComputed, match="Tanh"):
        F.sum(F.tanh(z)).backward()


def test_an_unknown_uncomputed_reads_policy_is_named(monkeypatch):
    from nnabla_jit.ops import common
    monkeypatch.setattr(common, "UNCOMPUTED_READS", "garbage")
    z = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32), need_grad=True)
    with pytest.raises(ValueError, match="NNABLA_JIT_UNCOMPUTED_READS='garbage'.*error, warn, zeros"):
        F.sum(F.sin(z) * 2).backward()


def test_backward_of_ops_that_need_no_data_runs_without_forward():
    z = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32), need_grad=True)
    loss = F.sum(z * 3 + 1)
    loss.backward()
    np.testing.assert_array_equal(z.g, np.full((2, 3), 3, np.float32))


# ---------------------------------------------------------------------------- bad shapes and values
@pytest.mark.parametrize("shape, error, message", [
    ((2, -3), ValueError, r"Variable: shape \(2, -3\) has a negative dimension"),
    ((2.5, 3), TypeError, r"Variable: shape \(2.5, 3\) has a dimension 2.5 that is not an integer"),
    ((2.0, 3), TypeError, "not an integer"),
    ("ab", TypeError, "not an integer"),
])
def test_variable_shapes_must_be_non_negative_integers(shape, error, message):
    with pytest.raises(error, match=message):
        nn.Variable(shape)


def test_integer_like_dimensions_are_accepted():
    assert nn.Variable((np.int64(2), np.array(3))).shape == (2, 3)
    assert nn.NdArray(4).shape == (4,)


def test_reset_shape_to_a_negative_dimension_is_an_error():
    v = nn.Variable((2, 3))
    with pytest.raises(ValueError, match="reset_shape: shape .* negative"):
        v.reset_shape((-6,), force=True)


@pytest.mark.parametrize("reduce", [F.sum, F.mean, F.max])
def test_duplicate_reduction_axes_are_an_error(reduce):
    x = nn.Variable((2, 3))
    with pytest.raises(ValueError, match=r"axes \(0, 0\) name axis 0 more than once"):
        reduce(x, axis=(0, 0))
    with pytest.raises(ValueError, match="name axis 1 more than once"):
        reduce(x, axis=(1, -1))


def test_complex_values_are_an_error_not_a_silent_cast():
    c = np.ones((2, 2), np.complex64)
    with pytest.raises(TypeError, match="from_numpy_array: complex values"):
        nn.Variable.from_numpy_array(c)
    v = nn.Variable((2, 2))
    with pytest.raises(TypeError, match="Variable.d: complex values"):
        v.d = c
    with pytest.raises(TypeError, match="complex values"):
        v.d = 1 + 2j
    with pytest.raises(TypeError, match="NdArray.cast: complex values"):
        v.data.cast(np.complex128)
    with pytest.raises(TypeError, match="NdArray: complex values"):
        nn.NdArray((2,), np.complex64)


# ---------------------------------------------------------------------------- bounds checking
BOUNDS_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    import nnabla_jit as nn, nnabla_jit.functions as F

    @njit
    def _poke(a, i):
        return a[i]
    try:          # the flag is on: an index past the end raises instead of reading memory
        _poke(np.zeros(3), 3)
        raise SystemExit("bounds checking is off")
    except IndexError:
        pass

    a = nn.Variable((2, 3), need_grad=True)
    b = F.sum(F.tanh(a * 2 + 1), axis=1)
    a.d = 1
    b.forward(clear_no_need_grad=True)
    b.backward(clear_buffer=True)
    a.reset_shape((5, 3), force=True)
    a.d = np.arange(15).reshape(5, 3) / 15.0
    b.forward(clear_no_need_grad=True)
    b.backward(clear_buffer=True)
    assert b.shape == (5,) and a.g.shape == (5, 3)
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(2, 3, 6, 6).astype(np.float32))
    y = F.max_pooling(F.relu(x), (2, 2))
    y.forward()
    x.reset_shape((1, 3, 8, 4), force=True)
    x.d = 1
    y.forward()
    assert y.shape == (1, 3, 4, 2)
    s = F.searchsorted(nn.Variable.from_numpy_array(np.array([[1., 2., 3.]], np.float32)),
                       nn.Variable.from_numpy_array(np.array([[0.5, 2.5]], np.float32)))
    s.forward()
    print("ok", b.d.round(4).tolist(), s.d.tolist())
""")


def test_ops_and_shape_changes_under_numba_bounds_checking(tmp_path):
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1",
               # fresh caches: kernels compiled without the checks must not be reused
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), NNABLA_JIT_CACHE_DIR=str(tmp_path / "jit"))
    out = subprocess.run([sys.executable, "-c", BOUNDS_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok"), out.stdout
