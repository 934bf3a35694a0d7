"""Dropout, the random generators and RandomChoice."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import strategies as nst


def var(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a), need_grad=need_grad)


# ------------------------------------------------------------------------ dropout
@given(nst.away_from(nst.arrays(nst.shapes(1, 3, 1, 5))), st.sampled_from([0.0, 0.3, 0.5, 0.9]))
def test_dropout_forward_backward_and_grad_rule(x, p):
    xv = var(x, True)
    y = F.dropout(xv, p)
    y.forward()
    kept = y.d != 0
    np.testing.assert_allclose(y.d[kept], (x / (1 - p))[kept], rtol=1e-6)
    if p == 0:
        assert kept.all()
    dy = np.random.RandomState(0).randn(*x.shape)
    xv.g = 0
    y.backward(dy)
    np.testing.assert_allclose(xv.g, np.where(kept, dy / (1 - p), 0), rtol=1e-6)
    # the rule reads the mask of the latest forward (running the grad graph draws a new one)
    g = nn.grad([y], [xv], grad_outputs=[dy])[0]
    g.forward()
    np.testing.assert_allclose(g.d, np.where(y.d != 0, dy / (1 - p), 0), rtol=1e-6)


def test_dropout_drops_about_p_and_redraws_each_forward():
    x = var(np.ones((100, 100), np.float32))
    y = F.dropout(x, 0.3)
    y.forward()
    first = y.d.copy()
    assert abs((first == 0).mean() - 0.3) < 0.02
    np.testing.assert_allclose(first[first != 0], 1 / 0.7, rtol=1e-6)
    y.forward()
    assert (y.d != first).any()


def test_dropout_second_order():
    # d/d(dy) of sum(w * dx) with dx = dy * mask is w * mask, again through the mask
    x = var(np.ones((3, 4)), True)
    dy = var(np.random.RandomState(1).randn(3, 4), True)
    w = np.random.RandomState(2).randn(3, 4)
    y = F.dropout(x, 0.5, seed=5)
    g = nn.grad([y], [x], grad_outputs=[dy])[0]
    h = nn.grad([F.sum(g * var(w))], [dy])[0]
    h.forward()
    np.testing.assert_allclose(h.d, w * y.d)   # y = x * mask with x = 1


def test_dropout_seed_makes_masks_reproducible():
    x = var(np.ones((8, 8)))
    a, b = F.dropout(x, 0.5, seed=42), F.dropout(x, 0.5, seed=42)
    a.forward()
    b.forward()
    np.testing.assert_array_equal(a.d, b.d)
    a.forward()   # its own generator moves on
    assert (a.d != b.d).any()
    nn.random.seed(7)
    c = F.dropout(x, 0.5)
    c.forward()
    nn.random.seed(7)
    c2 = F.dropout(x, 0.5)
    c2.forward()
    np.testing.assert_array_equal(c.d, c2.d)


@pytest.mark.parametrize("p", [1.0, -0.1, 1.5])
def test_dropout_rejects_bad_p(p):
    with pytest.raises(ValueError, match=r"Dropout: p must be in \[0, 1\)"):
        F.dropout(var(np.ones(3)), p)


# ------------------------------------------------------------------------ generators
GENERATORS = [
    ("rand", dict(low=-1.0, high=3.0), lambda r, s: r.uniform(-1.0, 3.0, s)),
    ("randint", dict(low=2, high=9), lambda r, s: r.randint(2, 9, s)),
    ("randn", dict(mu=1.0, sigma=2.0), lambda r, s: r.normal(1.0, 2.0, s)),
    ("rand_binomial", dict(n=5, p=0.3), lambda r, s: r.binomial(5, 0.3, s)),
    ("rand_beta", dict(alpha=2.0, beta=3.0), lambda r, s: r.beta(2.0, 3.0, s)),
    ("rand_gamma", dict(k=2.0, theta=0.5), lambda r, s: r.gamma(2.0, 0.5, s)),
]


@pytest.mark.parametrize("name, kwargs, numpy_draw", GENERATORS)
def test_generators_draw_from_the_global_state(name, kwargs, numpy_draw):
    nn.random.seed(123)
    y = getattr(F, name)(shape=(3, 500), **kwargs)
    assert y.shape == (3, 500) and not y.need_grad
    y.forward()
    want = numpy_draw(np.random.RandomState(123), (3, 500))
    np.testing.assert_allclose(y.d, want, rtol=1e-6)
    assert y.d.dtype == (np.int32 if name == "randint" else np.float32)
    y.forward()
    assert not np.array_equal(y.d, want.astype(y.d.dtype))


@pytest.mark.parametrize("name, kwargs, numpy_draw", GENERATORS)
def test_generators_with_a_seed(name, kwargs, numpy_draw):
    y = getattr(F, name)(shape=(4,), seed=9, **kwargs)
    rng = np.random.RandomState(9)
    for _ in range(2):   # the op keeps its own generator across forwards
        y.forward()
        np.testing.assert_allclose(y.d, numpy_draw(rng, (4,)), rtol=1e-6)


@pytest.mark.parametrize("name, kwargs, message", [
    ("rand", dict(low=1.0, high=1.0), "high .* must be larger than low"),
    ("randint", dict(low=3, high=2), "high .* must be larger than low"),
    ("randn", dict(sigma=0.0), "sigma must not be zero"),
    ("rand_binomial", dict(n=0), "n .* must be a positive integer"),
    ("rand_binomial", dict(p=1.0), r"p .* must be in \(0, 1\)"),
    ("rand_beta", dict(alpha=0.0), "alpha .* must be positive"),
    ("rand_beta", dict(beta=-1.0), "beta .* must be positive"),
    ("rand_gamma", dict(k=0.0), "k .* must be positive"),
    ("rand_gamma", dict(theta=0.0), "theta .* must be positive"),
])
def test_generator_arguments_are_checked(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        getattr(F, name)(shape=(2,), **kwargs)


def test_generators_have_no_gradient():
    y = F.rand(shape=(2, 2))
    y.forward()
    y.backward()   # nothing to differentiate: nothing happens, as in nnabla
    x = var(np.ones((2, 2)), True)
    z = x * y
    z.forward()
    x.g = 0
    z.backward()
    np.testing.assert_allclose(x.g, y.d)


# ------------------------------------------------------------------------ random choice
def test_random_choice_draws_members_by_weight():
    x = var([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]])
    w = var([[0.0, 1.0, 3.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    y = F.random_choice(x, w, shape=(2, 1000), seed=3)
    y.forward()
    assert y.shape == (2, 2, 1000)
    assert set(np.unique(y.d[0])) == {2.0, 3.0}
    assert abs((y.d[0] == 3).mean() - 0.75) < 0.05
    assert set(np.unique(y.d[1])) == {10.0, 20.0, 30.0, 40.0}


def test_random_choice_without_replacement_draws_distinct_members():
    x = var(np.arange(6, dtype=np.float32))
    y = F.random_choice(x, var(np.ones(6)), shape=(6,), replace=False)
    for _ in range(3):
        y.forward()
        assert sorted(y.d) == list(range(6))


def test_random_choice_backward_routes_gradients_to_the_drawn_members():
    x = var([1.0, 2.0, 3.0], True)
    w = var([0.2, 0.3, 0.5], True)
    y = F.random_choice(x, w, shape=(50,), seed=1)
    y.forward()
    dy = np.random.RandomState(0).randn(50)
    x.g = 0
    w.g = 0
    y.backward(dy)
    want = np.array([dy[y.d == v].sum() for v in (1.0, 2.0, 3.0)])
    np.testing.assert_allclose(x.g, want, rtol=1e-5)
    np.testing.assert_allclose(w.g, want, rtol=1e-5)   # nnabla routes the same gradient to w
    gx, gw = nn.grad([y], [x, w])   # as in nnabla, nn.grad gives RandomChoice no gradient
    gx.forward()
    gw.forward()
    assert np.all(gx.d == 0) and np.all(gw.d == 0)


@pytest.mark.parametrize("w, replace, message", [
    ([1.0, -1.0, 1.0], True, "weights must be non-negative"),
    ([0.0, 0.0, 0.0], True, "positive sum"),
    ([1.0, 0.0, 0.0], False, "at least 2 of them positive"),
])
def test_random_choice_rejects_bad_weights(w, replace, message):
    y = F.random_choice(var([1.0, 2.0, 3.0]), var(w), shape=(2,), replace=replace)
    with pytest.raises(ValueError, match="RandomChoice: .*" + message):
        y.forward()


def test_random_choice_shapes_must_match():
    with pytest.raises(ValueError, match="RandomChoice: x of shape"):
        F.random_choice(var([1.0, 2.0, 3.0]), var([1.0, 2.0]))

