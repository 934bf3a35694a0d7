"""Profiling Python functions with a Python profiler (nnabla's
``nnabla.utils.function_profile``; "function" means a Python function here).

    @function_profile.profile
    def step(...): ...
    step.profiler.print_stats()        # also printed when the process exits

``profile(condition=..., print_freq=N, sort_keys=..., print_restrictions=...)(fn)`` profiles
only calls for which ``condition(*args)`` holds and prints every N profiled calls.
"""
import atexit
import cProfile
import functools
import pstats

__all__ = ["profile", "FunctionProfile"]


class FunctionProfile:
    """Profiles the calls of ``fn`` and accumulates their statistics (the ``profiler``
    attribute of a decorated function)."""

    profiling = False     # a profiled call is running: nested ones run unprofiled

    def __init__(self, fn, condition=None, profile_class=cProfile.Profile, print_freq=0,
                 sort_keys=None, print_restrictions=None):
        self.fn = fn
        self.condition = condition if condition is not None else (lambda *a, **k: True)
        self.profile_class = profile_class
        self.print_freq = print_freq
        self.sort_keys = tuple(sort_keys) if sort_keys is not None else ("cumulative", "time", "calls")
        self.print_restrictions = tuple(print_restrictions) if print_restrictions is not None else (40,)
        self.reset_stats()
        atexit.register(self._atexit)

    def __call__(self, *args, **kw):
        if not self.condition(*args, **kw) or FunctionProfile.profiling:
            return self.fn(*args, **kw)
        self.ncalls += 1
        profiler = self.profile_class()
        FunctionProfile.profiling = True
        try:
            return profiler.runcall(self.fn, *args, **kw)
        finally:
            FunctionProfile.profiling = False
            if self.stats is None:
                self.stats = pstats.Stats(profiler)
            else:
                self.stats.add(profiler)
            if self.print_freq and self.ncalls % self.print_freq == 0:
                self.print_stats()

    def reset_stats(self):
        """Forget the statistics collected so far."""
        self.stats = None
        self.ncalls = 0

    def print_stats(self, reset=True):
        """Print the statistics (then forget them, with ``reset``)."""
        if not self.ncalls:
            return
        code = self.fn.__code__
        print("--- Function Profiling ---")
        print('File "{}", line {}, function {}'.format(code.co_filename, code.co_firstlineno,
                                                        self.fn.__name__))
        self.stats.sort_stats(*self.sort_keys)
        self.stats.print_stats(*self.print_restrictions)
        print("--------------------------")
        if reset:
            self.reset_stats()

    def _atexit(self):
        try:
            self.print_stats()
        except ValueError:    # stdout already closed (e.g. captured by pytest)
            pass


def profile(fn=None, condition=None, profile_class=cProfile.Profile, print_freq=0, sort_keys=None,
            print_restrictions=None):
    """Decorate ``fn`` so that its calls are profiled (or return such a decorator if ``fn`` is
    None); the :class:`FunctionProfile` is the wrapper's ``profiler`` attribute."""
    if fn is None:
        return functools.partial(profile, condition=condition, profile_class=profile_class,
                                 print_freq=print_freq, sort_keys=sort_keys,
                                 print_restrictions=print_restrictions)
    profiler = FunctionProfile(fn, condition, profile_class, print_freq, sort_keys, print_restrictions)

    @functools.wraps(fn)
    def profiled(*args, **kw):
        return profiler(*args, **kw)
    profiled.profiler = profiler
    return profiled
