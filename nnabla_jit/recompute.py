"""``nn.recompute``: recomputation flags for the variables a block or function creates.

A Variable with ``recompute=True`` has its data freed after its last use in forward and computed
again when backward needs it (random functions draw the same numbers again), trading compute for
memory. These set the flag new Variables get, as nnabla's ``nnabla.recompute`` does::

    with nn.recompute():
        h = network(x)          # every variable created here is recomputed

    @nn.recompute_fn()
    def block(x): ...
"""
import functools
from contextlib import contextmanager

from . import variable

__all__ = ["recompute", "recompute_fn", "set_global_recompute", "get_global_recompute"]


def set_global_recompute(recompute_):
    """The recompute flag of Variables created from now on (outside ``nn.recompute`` blocks)."""
    variable._recompute_default[0] = bool(recompute_)


def get_global_recompute():
    return variable._recompute_default[0]


@contextmanager
def recompute(recompute_=True):
    """Variables created inside the block get ``recompute=recompute_`` (blocks nest)."""
    previous = variable._recompute_default[0]
    variable._recompute_default[0] = bool(recompute_)
    try:
        yield
    finally:
        variable._recompute_default[0] = previous


def recompute_fn(recompute_=True):
    """Decorator: Variables created by the function get ``recompute=recompute_``."""
    def decorator(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with recompute(recompute_):
                return fn(*args, **kwargs)
        return wrapped
    return decorator
