"""Hypothesis strategies for shapes, arrays and op arguments.

    from hypothesis import given
    from nnabla_jit.testing import strategies as nst

    @given(nst.arrays(nst.shapes(min_dims=1, max_dims=3)))
    def test_tanh(x):
        check_function(F.tanh, [x], np.tanh)

Sizes are kept small by default: a numerical gradient check evaluates the graph twice per
input element.
"""
import numpy as np
from hypothesis import strategies as st

__all__ = ["shapes", "arrays", "axis", "axes", "broadcastable_shapes", "away_from",
           "positive_arrays", "labels", "settings_for_ci"]


def shapes(min_dims=1, max_dims=3, min_side=1, max_side=4):
    """Tuples of ints: array shapes."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


@st.composite
def arrays(draw, shape_strategy=None, low=-2.0, high=2.0, dtype=np.float64):
    """Float arrays with values drawn uniformly in [low, high) from a drawn seed."""
    shape = draw(shape_strategy if shape_strategy is not None else shapes())
    if isinstance(shape, int):
        shape = (shape,)
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return np.random.RandomState(seed).uniform(low, high, shape).astype(dtype)


def positive_arrays(shape_strategy=None, low=0.2, high=2.0):
    """Arrays bounded away from zero (for log, division, roots)."""
    return arrays(shape_strategy, low, high)


@st.composite
def away_from(draw, array_strategy, points=(0.0,), margin=0.05):
    """Arrays whose elements are at least ``margin`` away from ``points`` (kinks of relu,
    abs, ...), so central differences do not straddle a kink."""
    a = draw(array_strategy)
    for p in points:
        close = np.abs(a - p) < margin
        a = np.where(close, p + np.where(a >= p, margin, -margin) * 2, a)
    return a


def axis(ndim):
    """A valid axis of an ndim-dimensional array, possibly negative."""
    return st.integers(-ndim, ndim - 1)


def axes(ndim, min_size=1):
    """A non-empty set of distinct axes, as a sorted tuple."""
    return st.lists(st.integers(0, ndim - 1), min_size=min_size, max_size=ndim,
                    unique=True).map(lambda a: tuple(sorted(a)))


@st.composite
def broadcastable_shapes(draw, min_dims=1, max_dims=3, max_side=4):
    """Two shapes that broadcast together NumPy-style."""
    base = draw(shapes(min_dims, max_dims, 1, max_side))
    other = tuple(draw(st.sampled_from([s, 1])) for s in base)
    drop = draw(st.integers(0, len(other) - 1)) if len(other) > 1 else 0
    return base, other[drop:]


@st.composite
def labels(draw, batch_shape, n_classes):
    """Integer class labels of shape batch_shape + (1,)."""
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return np.random.RandomState(seed).randint(0, n_classes, tuple(batch_shape) + (1,))


def settings_for_ci(max_examples=8):
    """hypothesis settings sized for CI: few examples, no deadline (the first call compiles)."""
    from hypothesis import HealthCheck, settings
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
