"""Normalization ops: forward against NumPy, gradients (kernel, rule, second order), running
statistics, and the errors for inputs that do not fit."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import check_backward, check_forward, check_function, check_grad_rule
from nnabla_jit.testing import strategies as nst

EPS = 1e-5


def standardize(x, red, eps=EPS):
    mean = x.mean(axis=red, keepdims=True)
    var = x.var(axis=red, keepdims=True)
    return (x - mean) / np.sqrt(var + eps), mean, var


def other_axes(ndim, keep):
    return tuple(a for a in range(ndim) if a not in keep)


def param(rng, shape):
    return rng.uniform(0.5, 1.5, shape)


def small_shapes(min_dims, max_dims, max_size=18):
    """Shapes of 2 to 3 per side and at most ``max_size`` elements: each element of a numerical
    gradient costs two evaluations of the graph (four for second order)."""
    return nst.shapes(min_dims, max_dims, 2, 3).filter(lambda s: int(np.prod(s)) <= max_size)


# ------------------------------------------------------------------------ batch normalization
@st.composite
def bn_case(draw):
    """An input of at most 24 elements, the statistics axes, and which of beta/gamma exist."""
    shape = draw(small_shapes(2, 3))
    axes = draw(st.sampled_from([[1], [0], [len(shape) - 1], [0, len(shape) - 1]]))
    x = draw(nst.arrays(st.just(shape)))
    seed = draw(st.integers(0, 2 ** 16))
    return x, sorted(set(a % len(shape) for a in axes)), draw(st.booleans()), draw(st.booleans()), seed


@given(bn_case())
def test_batch_normalization_batch_stat(case):
    x, axes, with_beta, with_gamma, seed = case
    rng = np.random.RandomState(seed)
    pshape = tuple(s if a in axes else 1 for a, s in enumerate(x.shape))
    beta, gamma = rng.randn(*pshape), param(rng, pshape)
    red = other_axes(x.ndim, axes)

    def fn(x, b, g):
        return F.batch_normalization(x, b if with_beta else None, g if with_gamma else None, None, None,
                                     axes=axes, batch_stat=True)

    def ref(x, b, g):
        xhat = standardize(x, red)[0]
        return xhat * (g if with_gamma else 1) + (b if with_beta else 0)

    grad_inputs = [0] + ([1] if with_beta else []) + ([2] if with_gamma else [])
    check_function(fn, [x, beta, gamma], ref, wrt=grad_inputs)


@given(nst.arrays(small_shapes(3, 3)), st.sampled_from([[1], [0, 2]]))
def test_batch_normalization_output_stat(x, axes):
    red = other_axes(x.ndim, axes)
    rng = np.random.RandomState(1)
    pshape = tuple(s if a in axes else 1 for a, s in enumerate(x.shape))
    beta, gamma = rng.randn(*pshape), param(rng, pshape)

    def fn(x, b, g):
        return F.batch_normalization(x, b, g, None, None, axes=axes, output_stat=True)

    def ref(x, b, g):
        xhat, mean, var = standardize(x, red)
        return xhat * g + b, mean, var

    check_function(fn, [x, beta, gamma], ref, wrt=[0, 1, 2])


@given(nst.arrays(small_shapes(2, 3)))
def test_batch_normalization_running_stats_mode(x):
    rng = np.random.RandomState(2)
    pshape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    beta, gamma = rng.randn(*pshape), param(rng, pshape)
    mean, var = rng.randn(*pshape), param(rng, pshape)

    def fn(x, b, g, m, v):
        return F.batch_normalization(x, b, g, m, v, batch_stat=False)

    def ref(x, b, g, m, v):
        return (x - m) / np.sqrt(v + EPS) * g + b

    check_function(fn, [x, beta, gamma, mean, var], ref, wrt=[0, 1, 2])


def test_batch_normalization_updates_running_stats_in_place():
    rng = np.random.RandomState(3)
    shape = (5, 3, 4)
    mean = nn.Variable.from_numpy_array(rng.randn(1, 3, 1).astype(np.float32))
    var = nn.Variable.from_numpy_array(rng.uniform(0.5, 2, (1, 3, 1)).astype(np.float32))
    stored_mean, stored_var = mean.d, var.d          # the arrays themselves are updated
    want_mean, want_var = mean.d.astype(np.float64), var.d.astype(np.float64)
    x = nn.Variable(shape)
    y = F.batch_normalization(x, None, None, mean, var, decay_rate=0.8)
    n = 5 * 4
    for _ in range(2):
        data = rng.randn(*shape) * 3 + 1
        x.d = data
        y.forward()
        batch_mean = data.mean((0, 2), keepdims=True)
        batch_var = data.var((0, 2), keepdims=True)
        want_mean = 0.8 * want_mean + 0.2 * batch_mean
        want_var = 0.8 * want_var + 0.2 * batch_var * n / (n - 1)   # unbiased, as nnabla
        np.testing.assert_allclose(mean.d, want_mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(var.d, want_var, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y.d, (data - batch_mean) / np.sqrt(batch_var + EPS), rtol=1e-4, atol=1e-4)
    assert mean.d is stored_mean and var.d is stored_var
    assert mean.d.dtype == np.float32


def test_batch_normalization_inference_leaves_running_stats():
    mean = nn.Variable.from_numpy_array(np.full((1, 2), 0.5, np.float32))
    var = nn.Variable.from_numpy_array(np.full((1, 2), 4.0, np.float32))
    x = nn.Variable.from_numpy_array(np.arange(6, dtype=np.float32).reshape(3, 2))
    y = F.batch_normalization(x, None, None, mean, var, batch_stat=False)
    y.forward()
    np.testing.assert_allclose(y.d, (x.d - 0.5) / np.sqrt(4 + EPS), rtol=1e-6)
    assert np.all(mean.d == 0.5) and np.all(var.d == 4.0)


def test_sync_batch_normalization_is_batch_normalization_in_one_process():
    rng = np.random.RandomState(4)
    x = rng.randn(4, 3)
    beta, gamma = rng.randn(1, 3), param(rng, (1, 3))

    def fn(x, b, g):
        return F.sync_batch_normalization(x, b, g, None, None, comm=None)

    check_function(fn, [x, beta, gamma], lambda x, b, g: standardize(x, (0,))[0] * g + b)


@given(nst.arrays(small_shapes(3, 3)), st.booleans())
def test_fused_batch_normalization(x, with_z):
    rng = np.random.RandomState(5)
    pshape = (1, x.shape[1], 1)
    beta, gamma, z = rng.randn(*pshape), param(rng, pshape), rng.randn(*x.shape)

    def fn(x, b, g, z):
        return F.fused_batch_normalization(x, b, g, None, None, z if with_z else None)

    def ref(x, b, g, z):
        return np.maximum(standardize(x, (0, 2))[0] * g + b + (z if with_z else 0), 0)

    check_function(fn, [x, beta, gamma, z], ref, wrt=[0, 1, 2] + ([3] if with_z else []))


# ------------------------------------------------------------------------ per-sample normalizations
@given(nst.arrays(small_shapes(2, 3)), st.sampled_from([0, [0, 1], -1]), st.booleans(), st.booleans())
def test_layer_normalization(x, batch_axis, affine, output_stat):
    rng = np.random.RandomState(6)
    batch = [a % x.ndim for a in np.atleast_1d(batch_axis)]
    pshape = tuple(1 if a in batch else s for a, s in enumerate(x.shape))
    beta, gamma = rng.randn(*pshape), param(rng, pshape)

    def fn(x, b, g):
        return F.layer_normalization(x, b if affine else None, g if affine else None, batch_axis=batch_axis,
                                     output_stat=output_stat)

    def ref(x, b, g):
        xhat, mean, var = standardize(x, other_axes(x.ndim, batch))
        y = xhat * g + b if affine else xhat
        return (y, mean, var) if output_stat else y

    check_function(fn, [x, beta, gamma], ref, wrt=[0, 1, 2] if affine else [0])


@given(nst.arrays(small_shapes(3, 3)), st.sampled_from([1, -1]), st.booleans())
def test_instance_normalization(x, channel_axis, per_sample_params):
    rng = np.random.RandomState(7)
    ca = channel_axis % x.ndim
    pshape = tuple(s if a == ca or (a == 0 and per_sample_params) else 1 for a, s in enumerate(x.shape))
    beta, gamma = rng.randn(*pshape), param(rng, pshape)

    def fn(x, b, g):
        return F.instance_normalization(x, b, g, channel_axis=channel_axis, output_stat=True)

    def ref(x, b, g):
        xhat, mean, var = standardize(x, other_axes(x.ndim, [0, ca]))
        return xhat * g + b, mean, var

    check_function(fn, [x, beta, gamma], ref, wrt=[0, 1, 2])


@given(nst.arrays(nst.shapes(3, 3, 1, 2).map(lambda s: (s[0], 4, s[2]))), st.sampled_from([1, 2, 4]),
       st.booleans())
def test_group_normalization(x, groups, channel_last):
    rng = np.random.RandomState(8)
    if channel_last:
        x = np.ascontiguousarray(np.moveaxis(x, 1, 2))
    ca = 2 if channel_last else 1
    pshape = tuple(s if a == ca else 1 for a, s in enumerate(x.shape))
    beta, gamma = rng.randn(*pshape), param(rng, pshape)

    def fn(x, b, g):
        return F.group_normalization(x, b, g, groups, channel_axis=ca, output_stat=True)

    def ref(x, b, g):
        split = x.shape[:ca] + (groups, 4 // groups) + x.shape[ca + 1:]
        xhat, mean, var = standardize(x.reshape(split), other_axes(len(split), [0, ca]))
        return xhat.reshape(x.shape) * g + b, mean, var

    check_function(fn, [x, beta, gamma], ref, wrt=[0, 1, 2])


@given(nst.arrays(small_shapes(2, 3)), st.sampled_from([[1], [0]]), st.booleans())
def test_tensor_normalization(x, axes, output_stat):
    red = other_axes(x.ndim, axes)

    def ref(x):
        xhat, mean, var = standardize(x, red)
        return (xhat, mean, var) if output_stat else xhat

    check_function(lambda x: F.tensor_normalization(x, axes, output_stat=output_stat), [x], ref)


@given(nst.arrays(small_shapes(2, 3)), st.sampled_from([0, 1]))
def test_weight_standardization(w, channel_axis):
    def ref(w):
        return standardize(w, other_axes(w.ndim, [channel_axis]))

    check_function(lambda w: F.weight_standardization(w, channel_axis, output_stat=True), [w], ref)


# ------------------------------------------------------------------------ norms
@given(nst.away_from(nst.arrays(small_shapes(2, 3))), st.sampled_from([0, 1, -1]))
def test_weight_normalization(w, dim):
    d = dim % w.ndim
    g = np.random.RandomState(9).randn(w.shape[d])

    def ref(w, g):
        axes = other_axes(w.ndim, [d])
        shape = [s if a == d else 1 for a, s in enumerate(w.shape)]
        return g.reshape(shape) * w / np.sqrt((w ** 2).sum(axis=axes, keepdims=True) + 1e-12)

    check_function(lambda w, g: F.weight_normalization(w, g, dim=dim), [w, g], ref)


@given(nst.away_from(nst.arrays(small_shapes(2, 3)), margin=0.2), st.sampled_from([2.0, 3.0, 1.5]),
       st.sampled_from([None, [1], [0, 1]]))
def test_norm_normalization(x, p, axes):
    red = tuple(range(x.ndim)) if axes is None else tuple(axes)

    def ref(x):
        return x / ((np.abs(x) ** p).sum(axis=red, keepdims=True) + 1e-12) ** (1 / p)

    check_function(lambda x: F.norm_normalization(x, p, axes), [x], ref)


def spectral_reference(w, u, itr, eps=1e-12):
    for _ in range(itr):
        v = w.T @ u
        v = v / np.sqrt(v @ v + eps)
        u = w @ v
        u = u / np.sqrt(u @ u + eps)
    return w / (u @ w @ v), u


@given(nst.arrays(small_shapes(2, 3)), st.sampled_from([0, 1]), st.integers(1, 2))
def test_spectral_norm_forward_updates_u(w, dim, itr):
    u0 = np.random.RandomState(10).randn(w.shape[dim])
    wm = np.moveaxis(w, dim, 0).reshape(w.shape[dim], -1)
    want, u1 = spectral_reference(wm, u0, itr)
    want = np.moveaxis(want.reshape(np.moveaxis(w, dim, 0).shape), 0, dim)
    with nn.context_scope(nn.Context(["cpu:double"])):
        u = nn.Variable.from_numpy_array(u0)
        y, u_before = F.spectral_norm(nn.Variable.from_numpy_array(w), u, dim=dim, itr=itr, output_u=True)
        y.forward()
    np.testing.assert_allclose(y.d, want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(u.d, u1, rtol=1e-6, atol=1e-8)   # updated in place
    np.testing.assert_allclose(u_before.d, u0)


@given(nst.arrays(nst.shapes(2, 2, 2, 4)), st.sampled_from([0, 1]))
def test_spectral_norm_gradients(w, dim):
    # Starting from the top singular vector, the power iteration is at its fixed point, where
    # treating u and v as constants (nnabla's gradient) is the exact derivative.
    wm = np.moveaxis(w, dim, 0).reshape(w.shape[dim], -1)
    u = np.linalg.svd(wm)[0][:, 0]

    def fn(w, u):
        return F.spectral_norm(w, u, dim=dim, itr=1, test=True)

    def ref(w, u):
        out = spectral_reference(np.moveaxis(w, dim, 0).reshape(w.shape[dim], -1), u, 1)[0]
        return np.moveaxis(out.reshape(np.moveaxis(w, dim, 0).shape), 0, dim)

    check_function(fn, [w, u], ref, wrt=[0], double_backward=False)


def test_spectral_norm_grad_rule_needs_the_starting_u():
    w = nn.Variable.from_numpy_array(np.eye(2), need_grad=True)
    y = F.spectral_norm(w, nn.Variable.from_numpy_array(np.ones(2)))
    with pytest.raises(ValueError, match="output_u"):
        nn.grad([y], [w])


# ------------------------------------------------------------------------ mean subtraction
def test_mean_subtraction_running_mean_and_gradient():
    rng = np.random.RandomState(11)
    x = nn.Variable((4, 3), need_grad=True)
    rmean = nn.Variable.from_numpy_array(np.zeros(3, np.float32))
    t = nn.Variable.from_numpy_array(np.zeros(1, np.float32))
    y = F.mean_subtraction(x, rmean, t)
    batches = [rng.randn(4, 3), rng.randn(4, 3) + 2]
    for step, data in enumerate(batches, 1):
        x.d = data
        y.forward()
        want = np.mean([b.mean(0) for b in batches[:step]], axis=0)
        np.testing.assert_allclose(rmean.d, want, rtol=1e-5, atol=1e-6)
        assert t.d[0] == step
        np.testing.assert_allclose(y.d, data - want, rtol=1e-5, atol=1e-5)
    dy = rng.randn(4, 3)
    x.g = 0
    y.backward(dy)
    np.testing.assert_allclose(x.g, dy * (1 - 1 / (4 * 2)), rtol=1e-5)   # nnabla's approximation
    g = nn.grad([y], [x], grad_outputs=[dy])[0]
    g.forward()   # runs the mean subtraction once more: a third batch
    assert t.d[0] == 3
    np.testing.assert_allclose(g.d, dy * (1 - 1 / (4 * 3)), rtol=1e-5)


def test_mean_subtraction_without_update():
    rmean = nn.Variable.from_numpy_array(np.array([1.0, -1.0], np.float32))
    t = nn.Variable.from_numpy_array(np.array([3.0], np.float32))
    x = nn.Variable.from_numpy_array(np.ones((2, 2), np.float32), need_grad=True)
    y = F.mean_subtraction(x, rmean, t, update_running_mean=False)
    y.forward()
    np.testing.assert_allclose(y.d, [[0, 2], [0, 2]])
    assert t.d[0] == 3 and list(rmean.d) == [1, -1]
    x.g = 0
    y.backward(np.full((2, 2), 2.0))
    assert np.all(x.g == 2)


# ------------------------------------------------------------------------ gradient clipping
@given(nst.arrays(nst.shapes(1, 3, 1, 3)))
def test_clip_grad_by_value(x):
    rng = np.random.RandomState(12)
    lo, hi = -np.abs(rng.randn(*x.shape)) * 0.3, np.abs(rng.randn(*x.shape)) * 0.3
    dy = rng.randn(*x.shape)
    check_forward(lambda x, a, b: F.clip_grad_by_value(x, a, b), [x, lo, hi], lambda x, a, b: x)
    with nn.context_scope(nn.Context(["cpu:double"])):
        xv = nn.Variable.from_numpy_array(x, need_grad=True)
        y = F.clip_grad_by_value(xv, nn.Variable.from_numpy_array(lo), nn.Variable.from_numpy_array(hi))
        y.forward()
        xv.g = 0
        y.backward(dy)
        np.testing.assert_allclose(xv.g, np.clip(dy, lo, hi))
        g = nn.grad([y], [xv], grad_outputs=[dy])[0]
        g.forward()
        np.testing.assert_allclose(g.d, xv.g)


@given(nst.arrays(nst.shapes(2, 2, 2, 3)), st.sampled_from([None, [1]]), st.sampled_from([0.5, 10.0]))
def test_clip_grad_by_norm(x, axes, clip_norm):
    dy = np.random.RandomState(13).randn(*x.shape)
    red = None if axes is None else tuple(axes)
    with nn.context_scope(nn.Context(["cpu:double"])):
        xv = nn.Variable.from_numpy_array(x, need_grad=True)
        y = F.clip_grad_by_norm(xv, clip_norm, axes)
        y.forward()
        np.testing.assert_allclose(y.d, x)
        xv.g = 0
        y.backward(dy)
        # nnabla rescales to clip_norm whatever the norm (also up)
        np.testing.assert_allclose(xv.g, clip_norm * dy / np.sqrt((dy ** 2).sum(axis=red, keepdims=True)))
        g = nn.grad([y], [xv], grad_outputs=[dy])[0]
        g.forward()
        np.testing.assert_allclose(g.d, xv.g)


# ------------------------------------------------------------------------ errors
def _var(shape):
    return nn.Variable(shape)


@pytest.mark.parametrize("build, message", [
    (lambda: F.batch_normalization(_var((2, 3)), _var((3,)), None, None, None), r"BatchNormalization: beta"),
    (lambda: F.batch_normalization(_var((2, 3)), None, None, None, None, axes=[2]), r"axes 2 is out of range"),
    (lambda: F.batch_normalization(_var((2, 3)), None, None, _var((1, 3)), _var((1, 2))),
     r"variance of shape \(1, 2\)"),
    (lambda: F.batch_normalization(_var((2, 3)), None, None, None, None, batch_stat=False),
     r"batch_stat=False"),
    (lambda: F.batch_normalization(_var((2, 3)), None, None, _var((1, 3)), _var((1, 3)), batch_stat=False,
                                   output_stat=True), r"output_stat"),
    (lambda: F.layer_normalization(_var((2, 3, 4)), None, _var((1, 3, 1))), r"LayerNormalization: gamma"),
    (lambda: F.instance_normalization(_var((2, 3, 4)), _var((1, 4, 1)), None), r"InstanceNormalization: beta"),
    (lambda: F.group_normalization(_var((2, 6, 4)), None, None, 4), r"not a multiple of num_groups=4"),
    (lambda: F.fused_batch_normalization(_var((2, 3)), None, None, None, None, _var((2, 2))),
     r"z of shape \(2, 2\)"),
    (lambda: F.weight_normalization(_var((3, 4)), _var((4,))), r"g of shape \(4,\)"),
    (lambda: F.spectral_norm(_var((3, 4)), _var((4,))), r"u of shape \(4,\)"),
    (lambda: F.mean_subtraction(_var((2, 3)), _var((2,)), _var((1,))), r"running mean of shape \(2,\)"),
    (lambda: F.norm_normalization(_var((2, 3)), p=0), r"p must be positive"),
])
def test_bad_inputs_raise(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_running_stats_must_not_have_a_parent():
    x = _var((2, 3))
    mean = F.identity(_var((1, 3)))
    with pytest.raises(ValueError, match="must not be outputs"):
        F.batch_normalization(x, None, None, mean, _var((1, 3)))


def test_batch_normalization_gradient_is_not_computed_for_running_stats():
    x = nn.Variable.from_numpy_array(np.random.RandomState(14).randn(4, 2), need_grad=True)
    mean = nn.Variable.from_numpy_array(np.zeros((1, 2)), need_grad=True)
    var = nn.Variable.from_numpy_array(np.ones((1, 2)), need_grad=True)
    y = F.batch_normalization(x, None, None, mean, var, batch_stat=False)
    y.forward()
    mean.g = 0
    var.g = 0
    y.backward()
    assert np.all(mean.g == 0) and np.all(var.g == 0)
    check_backward(lambda x: F.batch_normalization(x, None, None, mean, var, batch_stat=False), [x.d])
    check_grad_rule(lambda x: F.batch_normalization(x, None, None, mean, var, batch_stat=False), [x.d])


@pytest.mark.parametrize("batch_stat", [True, False])
@pytest.mark.parametrize("trained", [("beta",), ("beta", "gamma"), ("x", "beta", "gamma")])
def test_gradients_do_not_need_freed_buffers(batch_stat, trained):
    # clear_no_need_grad / clear_buffer free every input a backward does not declare it reads
    rng = np.random.RandomState(15)
    data = {"x": rng.randn(4, 3, 2), "beta": rng.randn(1, 3, 1), "gamma": param(rng, (1, 3, 1))}

    def grads(**flags):
        vs = {k: nn.Variable.from_numpy_array(v, need_grad=k in trained) for k, v in data.items()}
        h = F.tanh(vs["x"] * 1.0)   # x is an intermediate, so it can be freed
        mean = nn.Variable.from_numpy_array(np.zeros((1, 3, 1)))
        var = nn.Variable.from_numpy_array(np.ones((1, 3, 1)))
        y = F.batch_normalization(h, vs["beta"], vs["gamma"], mean, var, batch_stat=batch_stat)
        loss = F.sum(F.sin(y))
        loss.forward(clear_no_need_grad=flags.get("clear", False))
        loss.backward(clear_buffer=flags.get("clear", False))
        return {k: v.g.copy() for k, v in vs.items() if v.need_grad}

    want, got = grads(), grads(clear=True)
    for k in trained:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)
