"""``nn.random``: the global random state of nnabla_jit.

``nn.random.prng`` is a ``numpy.random.RandomState``; initializers, PF layers, dropout and the
random functions draw from it unless given their own ``rng`` or ``seed``. ``nn.random.seed(s)``
resets it (nnabla's API).
"""
import numpy as np

prng = np.random.RandomState(313)
pseed = 313    # the seed prng was last made from (nnabla's name)


def seed(seed=None, set_function_seed=True, set_parameter_seed=True):
    """Reseed the global random state. nnabla keeps separate states for parameter
    initialisation and for random functions; nnabla_jit draws both from ``prng``, so either
    flag reseeds it."""
    if set_function_seed or set_parameter_seed:
        _reseed(seed)


def _reseed(value):
    global prng, pseed
    prng = np.random.RandomState(value)
    pseed = value


def set_parameter_seed(seed_value):
    """Reseed the state parameter initialisers draw from (``prng`` here)."""
    _reseed(seed_value)


def set_function_seed(seed_value):
    """Reseed the state random functions draw from (``prng`` here, shared with initialisers)."""
    _reseed(seed_value)


def get_rng(seed_value=-1):
    """The RandomState an op with nnabla's ``seed`` argument draws from (-1: the global one)."""
    if seed_value is None or seed_value < 0:
        return prng
    return np.random.RandomState(seed_value)
