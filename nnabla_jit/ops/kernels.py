"""Kernel variants: one loop, compiled serial and ``parallel=True``.

A ``prange`` loop pays a thread start-up of a few microseconds, which dominates on small
arrays (a 600-op graph of 4-element tensors). ``@parallel_kernel`` compiles the same Python
function twice -- as written (``prange`` runs as ``range``) and with ``parallel=True`` -- and
``kernel.for_size(n)`` picks one; ops pick once, in ``setup``, from the sizes they will see.

Tests run both variants on small arrays: inside ``with parallel_threshold(0):`` every op set up
(and every fused region planned) takes the parallel variant; ``parallel_threshold(None)`` forces
the serial one. The override is process-wide and meant for tests only.
"""
import contextlib
import types

from numba import njit

from ..deferred_compile import defer

PARALLEL_THRESHOLD = 1 << 15   # elements of work below which the serial variant is faster
_threshold = [PARALLEL_THRESHOLD]   # what uses_parallel compares with (parallel_threshold sets it)


def uses_parallel(n):
    """Whether ``n`` elements of work take the parallel variant."""
    return _threshold[0] is not None and n >= _threshold[0]


@contextlib.contextmanager
def parallel_threshold(n):
    """Test-only: ops set up inside take the parallel variant from ``n`` elements of work
    (0: always, None: never), so small test inputs reach both variants."""
    old = _threshold[0]
    _threshold[0] = n
    try:
        yield
    finally:
        _threshold[0] = old


def _twin(func, suffix):
    """A copy of ``func`` under another qualified name, so numba's on-disk cache (keyed by
    qualified name, not by compile options) keeps the two variants apart."""
    twin = types.FunctionType(func.__code__, func.__globals__, func.__name__ + suffix,
                              func.__defaults__, func.__closure__)
    twin.__qualname__ = func.__qualname__ + suffix
    twin.__doc__ = func.__doc__
    return twin


class ParallelKernel:
    """The serial and parallel compilations of one kernel function."""

    def __init__(self, func, **options):
        # numpy's error model: x / 0 gives inf or nan as in NumPy and nnabla, not an exception
        options.setdefault("error_model", "numpy")
        self.py_func = func
        self.serial = njit(cache=True, **options)(func)
        # compiled on an empty cache by a background process, the serial one standing in
        # until then (deferred_compile.py)
        self.parallel = defer(njit(cache=True, parallel=True, **options)(_twin(func, "_parallel")),
                              self.serial)
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__

    def for_size(self, n):
        """The variant to call for ``n`` elements of work."""
        return self.parallel if uses_parallel(n) else self.serial

    def __call__(self, *args):
        """Call the serial variant (callers that know the size should use ``for_size``)."""
        return self.serial(*args)


def parallel_kernel(func=None, **options):
    """Decorator: compile ``func`` serial and parallel (see the module docstring).
    ``@parallel_kernel(error_model="numpy")`` passes numba options to both."""
    if func is None:
        return lambda f: ParallelKernel(f, **options)
    return ParallelKernel(func, **options)
