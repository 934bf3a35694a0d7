"""Recomputation flags (nnabla's ``nnabla.recompute``): variables built inside
``with nn.recompute():`` (or by a function decorated with ``@nn.recompute_fn()``), or anywhere
after ``nn.set_global_recompute(True)``, get ``recompute=True``: their data may be dropped
after forward and computed again when backward needs it.
"""
import functools
from contextlib import contextmanager

__all__ = ["recompute", "recompute_fn", "set_global_recompute", "get_global_recompute",
           "current_recompute"]

_global = [False]
_scopes = []


def set_global_recompute(recompute):
    """Give every variable built from now on (outside a ``recompute`` scope) this flag."""
    _global[0] = bool(recompute)


def get_global_recompute():
    return _global[0]


def current_recompute():
    """The flag a variable built now gets: the innermost scope's, else the global one."""
    return _scopes[-1] if _scopes else _global[0]


@contextmanager
def recompute(recompute_=True):
    """``with nn.recompute():`` marks the variables built in the block for recomputation;
    ``nn.recompute(False)`` inside it turns the marking off for a part."""
    _scopes.append(bool(recompute_))
    try:
        yield
    finally:
        _scopes.pop()


def recompute_fn(recompute_=True):
    """Decorator form of :func:`recompute`: the variables the function builds get the flag."""
    def decorator(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with recompute(recompute_):
                return fn(*args, **kwargs)
        return wrapped
    return decorator
