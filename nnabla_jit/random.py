"""``nn.random``: the global random state of nnabla_jit.

``nn.random.prng`` is a ``numpy.random.RandomState``; initializers, PF layers, dropout and the
random functions draw from it unless given their own ``rng`` or ``seed``. ``nn.random.seed(s)``
resets it (nnabla's API).
"""
import numpy as np

prng = np.random.RandomState(313)


def seed(seed=None):
    """Reseed the global random state."""
    global prng
    prng = np.random.RandomState(seed)


def get_rng(seed_value=-1):
    """The RandomState an op with nnabla's ``seed`` argument draws from (-1: the global one)."""
    if seed_value is None or seed_value < 0:
        return prng
    return np.random.RandomState(seed_value)
