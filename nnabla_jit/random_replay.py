"""Reproducing the random draws of a forward, for recomputation (nnabla's ``setup_recompute``
and ``recompute``): a variable with ``recompute=True`` is freed after forward and computed again
in backward, and an op that draws random numbers (Dropout, Rand, RandomCrop, ...) must draw the
same numbers the second time, or its backward would not match its forward; an op updating state
(BatchNormalization's running statistics, INQ's schedule) must not update it twice
(``Op.recomputing``).
"""
from contextlib import contextmanager

import numpy as np

from . import random as nn_random

__all__ = ["save_random_state", "replayed_random_state"]


def _own_generators(op):
    return {k: v for k, v in vars(op).items() if isinstance(v, np.random.RandomState)}


def save_random_state(op):
    """Remember the state of every generator ``op`` may draw from (the global one and its own)
    so that :func:`replayed_random_state` can reproduce its next forward."""
    if not op.need_setup_recompute(0):   # the answer is the same for every output
        return
    seed = op.args.get("seed", -1)
    fresh = np.random.RandomState(seed).get_state() if seed is not None and seed >= 0 else None
    op._saved_random_state = (nn_random.prng.get_state(),
                              {k: g.get_state() for k, g in _own_generators(op).items()}, fresh)


@contextmanager
def replayed_random_state(op):
    """Run the body (a forward run again) with ``op`` marked as recomputing (state updates are
    skipped) and its generators back in the states :func:`save_random_state` saved; their
    current states are restored afterwards."""
    saved = op.__dict__.get("_saved_random_state")
    op.recomputing = True
    if saved is None:
        try:
            yield
        finally:
            del op.recomputing
        return
    global_state, own_states, fresh = saved
    # a generator the op created after the save (seeded lazily) started from its seed's state
    own = _own_generators(op)
    now = [(nn_random.prng, nn_random.prng.get_state())] + [(g, g.get_state()) for g in own.values()]
    nn_random.prng.set_state(global_state)
    for k, g in own.items():
        generator_state = own_states.get(k, fresh)
        if generator_state is not None:
            g.set_state(generator_state)
    try:
        yield
    finally:
        for g, generator_state in now:
            g.set_state(generator_state)
        del op.recomputing
