"""``getargspec`` (nnabla's ``nnabla.utils.py23_compatible``, kept for old code)."""
import inspect

__all__ = ["getargspec"]


def getargspec(func):
    """``inspect.getfullargspec(func)`` (``inspect.getargspec`` is gone from Python 3.11)."""
    return inspect.getfullargspec(func)
