"""nnabla_jit.initializer: nnabla's draws, dtypes, formulas and statistics."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.initializer as I
from nnabla_jit.testing import strategies as nst

seeds = st.integers(0, 2 ** 31 - 1)


@given(nst.shapes(1, 4), seeds, st.floats(0.01, 10.0))
def test_normal_draws_like_nnabla(shape, seed, sigma):
    # nnabla: float32(rng.randn(*shape) * sigma)
    got = I.NormalInitializer(sigma, rng=np.random.RandomState(seed))(shape)
    expected = np.float32(np.random.RandomState(seed).randn(*shape) * sigma)
    assert got.dtype == np.float32 and got.shape == shape
    np.testing.assert_array_equal(got, expected)


@given(nst.shapes(1, 4), seeds, st.floats(-5, 5), st.floats(0.1, 5))
def test_uniform_draws_like_nnabla(shape, seed, low, width):
    lim = (low, low + width)
    got = I.UniformInitializer(lim, rng=np.random.RandomState(seed))(shape)
    expected = np.float32(np.random.RandomState(seed).uniform(lim[0], lim[1], size=shape))
    assert got.dtype == np.float32 and got.shape == shape
    np.testing.assert_array_equal(got, expected)
    assert np.all(got >= np.float32(lim[0])) and np.all(got <= np.float32(lim[1]))


@given(nst.shapes(1, 3), seeds)
def test_uniform_int_draws_like_nnabla(shape, seed):
    got = I.UniformIntInitializer((-3, 4), rng=np.random.RandomState(seed))(shape)
    np.testing.assert_array_equal(got, np.random.RandomState(seed).randint(-3, 4, size=shape))
    assert np.issubdtype(got.dtype, np.integer)
    assert got.min() >= -3 and got.max() < 4


def test_default_rng_is_the_global_one_at_construction():
    nn.random.seed(123)
    init = I.NormalInitializer(2.0)
    nn.random.seed(999)   # reseeding later does not change the rng the initializer holds
    np.testing.assert_array_equal(init((3, 4)), np.float32(np.random.RandomState(123).randn(3, 4) * 2.0))
    nn.random.seed(7)
    first = I.UniformInitializer()((5,))
    second = I.UniformInitializer()((5,))
    rng = np.random.RandomState(7)
    np.testing.assert_array_equal(first, np.float32(rng.uniform(-1, 1, size=(5,))))
    np.testing.assert_array_equal(second, np.float32(rng.uniform(-1, 1, size=(5,))))


def test_statistics():
    rng = np.random.RandomState(0)
    normal = I.NormalInitializer(0.5, rng=rng)((200, 200))
    assert abs(normal.mean()) < 0.01 and abs(normal.std() - 0.5) < 0.01
    uniform = I.UniformInitializer((-2, 4), rng=rng)((200, 200))
    assert uniform.min() >= -2 and uniform.max() <= 4
    assert abs(uniform.mean() - 1.0) < 0.03 and abs(uniform.var() - 3.0) < 0.05
    ints = I.UniformIntInitializer(rng=rng)((20000,))
    assert set(np.unique(ints)) == set(range(10))


def test_constant_and_range():
    c = I.ConstantInitializer(1.5)((2, 3))
    assert c.dtype == np.float32 and c.shape == (2, 3) and np.all(c == 1.5)
    assert I.ConstantInitializer()((4,)).sum() == 0
    scalar = I.ConstantInitializer(2)(())
    assert np.asarray(scalar).shape == () and float(scalar) == 2.0
    r = I.RangeInitializer(2, 3)((2, 4))
    np.testing.assert_array_equal(r, [[2, 5, 8, 11], [2, 5, 8, 11]])
    np.testing.assert_allclose(I.RangeInitializer(0.5, 0.25)((3,)), [0.5, 0.75, 1.0])


@given(st.sampled_from([(3, 2, 2), (5, 2), (4, 4), (2, 3, 1, 2)]), seeds, st.floats(0.5, 3))
def test_orthogonal(shape, seed, gain):
    w = I.OrthogonalInitializer(gain, rng=np.random.RandomState(seed))(shape)
    assert w.dtype == np.float32 and w.shape == shape
    m = w.reshape(shape[0], -1).astype(np.float64)
    # rows orthonormal when there are fewer rows than columns, else columns
    gram = m.dot(m.T) if m.shape[0] <= m.shape[1] else m.T.dot(m)
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(len(gram)), atol=1e-5 * gain ** 2)
    # the same normal draws and SVD as nnabla
    g = np.random.RandomState(seed).normal(0.0, 1.0, m.shape)
    u, _, v = np.linalg.svd(g, full_matrices=False)
    q = u if u.shape == m.shape else v
    np.testing.assert_array_equal(w, np.float32(q.reshape(shape) * gain))


def test_weight_normalization_scale():
    w = nn.Variable.from_numpy_array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for dim in range(3):
        g = I.WeightNormalizationScaleInitializer(w, dim=dim, eps=1e-3)((w.shape[dim],))
        axes = tuple(a for a in range(3) if a != dim)
        expected = np.sqrt((w.d.astype(np.float64) ** 2).sum(axis=axes) + 1e-3)
        assert g.dtype == np.float32 and g.shape == (w.shape[dim],)
        np.testing.assert_allclose(g, expected, rtol=1e-6)


@given(st.integers(1, 64), st.integers(1, 64), st.lists(st.integers(1, 5), min_size=0, max_size=3))
def test_scaling_formulas(inmaps, outmaps, kernel):
    k = float(np.prod(kernel)) if kernel else 1.0
    kernel = tuple(kernel)
    np.testing.assert_allclose(I.calc_normal_std_he_forward(inmaps, outmaps, kernel), np.sqrt(2 / (k * inmaps)))
    np.testing.assert_allclose(I.calc_normal_std_he_backward(inmaps, outmaps, kernel), np.sqrt(2 / (k * outmaps)))
    np.testing.assert_allclose(I.calc_normal_std_glorot(inmaps, outmaps, kernel),
                               np.sqrt(2 / (k * (inmaps + outmaps))))
    low, high = I.calc_uniform_lim_glorot(inmaps, outmaps, kernel)
    np.testing.assert_allclose(high, np.sqrt(6 / (k * (inmaps + outmaps))))
    assert low == -high


def test_default_kernel_is_1x1():
    assert I.calc_normal_std_he_forward(8, 2) == np.sqrt(2 / 8)
    assert I.calc_uniform_lim_glorot(3, 5) == I.calc_uniform_lim_glorot(3, 5, (1,))


def test_base_and_repr():
    with pytest.raises(NotImplementedError, match="BaseInitializer does not implement"):
        I.BaseInitializer()((2,))
    assert repr(I.NormalInitializer()) == "NormalInitializer(1.0)"
    assert repr(I.UniformInitializer()) == "UniformInitializer((-1, 1))"
    assert repr(I.UniformIntInitializer()) == "UniformIntInitializer((0, 10))"
    assert repr(I.OrthogonalInitializer(2.0)) == "OrthogonalInitializer(2.0)"
    assert I.random_float_type is np.float32


def test_initializers_create_parameters():
    # get_parameter_or_create calls initializers with the keyword ``shape``
    w = nn.parameter.get_parameter_or_create(
        "w", (3, 2), I.NormalInitializer(1.0, rng=np.random.RandomState(4)))
    np.testing.assert_array_equal(w.d, np.float32(np.random.RandomState(4).randn(3, 2)))
    assert w.d.dtype == np.float32
